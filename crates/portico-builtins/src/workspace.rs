//! Confining paths to the workspace directory.
//!
//! A path a model gives is untrusted: `../../etc/passwd`, `/etc/passwd`, or a symlink planted inside
//! the workspace that points outside must all be refused. The checks work on resolved paths, not on
//! spelling: the workspace root is canonicalized once, reads canonicalize their target and require it
//! to lie under the root, and writes canonicalize the deepest ancestor that exists. Opening then uses
//! `O_NOFOLLOW`, so a final component swapped for a symlink after the check fails instead of being
//! followed, and on Linux the opened descriptor's real path is checked once more, which also catches
//! an intermediate directory swapped for a symlink in between.
//!
//! Writes go further, since a write creates: after the checks, the file (and any missing parent
//! directory) is created from a handle on the workspace root opened at start, one component at a
//! time with `openat`/`mkdirat` and `O_NOFOLLOW`, along the already resolved path. A directory
//! swapped for a symlink after the checks is then never followed, so nothing, not even an empty file,
//! is ever created outside the workspace.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::BuiltinError;

/// A path a file tool refused or could not use.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error(
        "`{path}` is outside the workspace {root}; file tools only reach files under it, so give a \
         path relative to the workspace root"
    )]
    Outside { path: String, root: PathBuf },
    #[error(
        "`{path}` resolves through a symlink to a location outside the workspace {root}; file tools \
         never follow links out of it"
    )]
    SymlinkOutside { path: String, root: PathBuf },
    #[error(
        "`{path}` goes through a symlink whose target does not exist; file tools do not create files \
         or directories through links, so write to the link's target path instead"
    )]
    DanglingSymlink { path: String },
    #[error("`{path}` does not exist in the workspace {root}; use file_list to see what is there")]
    NotFound { path: String, root: PathBuf },
    #[error("`{path}` is a directory, not a file; use file_list to see its contents")]
    IsADirectory { path: String },
    #[error("`{path}` is not a directory; use file_read to read it")]
    NotADirectory { path: String },
    #[error(
        "`{path}` is not a regular file (a device, socket or pipe); file tools only read and write regular files"
    )]
    NotARegularFile { path: String },
    #[error("`{path}` names the workspace root itself; give a file name")]
    NoFileName { path: String },
    #[error("the path is empty; give a path relative to the workspace root")]
    Empty,
    #[error(
        "`{path}` is one of Portico's own files (its config, agents or data directory), which file \
         tools never read or write; point [builtins] workspace at a directory that does not hold them"
    )]
    Protected { path: String },
    #[error(
        "`{path}` changed while it was being opened (a directory on the way was replaced by a \
         symlink); nothing was written; try again"
    )]
    Changed { path: String },
    #[error("could not {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

/// The canonical workspace root.
#[derive(Debug)]
pub(crate) struct Workspace {
    root: PathBuf,
    /// The root as configured, so absolute paths spelled through a symlinked parent (`/tmp` on some
    /// systems) are recognised too.
    configured: PathBuf,
    /// The root, opened once: writes resolve from it and never by path (see the module docs).
    handle: OwnedFd,
    /// Portico's own files, resolved: refused even when they lie inside the root.
    protected: Vec<PathBuf>,
}

impl Workspace {
    /// Creates the directory if needed and resolves it once.
    pub(crate) fn open(path: &Path, protected: &[PathBuf]) -> Result<Workspace, BuiltinError> {
        // Owner-only, parents included: by default it is in Portico's data dir, which may not
        // exist yet, and the files agents write there are theirs alone.
        let created = if path.is_dir() {
            Ok(())
        } else {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
        };
        created.map_err(|source| BuiltinError::CreateWorkspace {
            path: path.to_path_buf(),
            source,
        })?;
        let root = path
            .canonicalize()
            .map_err(|source| BuiltinError::ResolveWorkspace {
                path: path.to_path_buf(),
                source,
            })?;
        if !root.is_dir() {
            return Err(BuiltinError::WorkspaceNotADirectory {
                path: path.to_path_buf(),
            });
        }
        let handle = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| BuiltinError::ResolveWorkspace {
            path: path.to_path_buf(),
            source: errno.into(),
        })?;
        let protected = protected
            .iter()
            .map(|p| resolved_as_far_as_it_exists(p))
            .collect();
        Ok(Workspace {
            root,
            configured: path.to_path_buf(),
            handle,
            protected,
        })
    }

    /// Refuses a resolved path under one of Portico's own: the workspace's own tree stays usable
    /// when the workspace lies inside one of them (the default, `workspace/` in the data dir).
    fn check_unprotected(&self, resolved: &Path, path: &str) -> Result<(), PathError> {
        let refused = self.protected.iter().any(|own| {
            resolved.starts_with(own)
                && !(self.root.starts_with(own) && resolved.starts_with(&self.root))
        });
        if refused {
            return Err(PathError::Protected {
                path: path.to_string(),
            });
        }
        Ok(())
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn outside(&self, path: &str) -> PathError {
        PathError::Outside {
            path: path.to_string(),
            root: self.root.clone(),
        }
    }

    fn symlink_outside(&self, path: &str) -> PathError {
        PathError::SymlinkOutside {
            path: path.to_string(),
            root: self.root.clone(),
        }
    }

    fn inside(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.root)
    }

    /// The path relative to the root, spelled without `.` or `..`, before any symlink is looked at.
    ///
    /// `..` is applied lexically, and one that would climb above the root is refused. The result is
    /// only a candidate: the callers still resolve symlinks and check the outcome.
    fn relative(&self, path: &str) -> Result<PathBuf, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        let given = Path::new(path);
        let rest = if given.is_absolute() {
            given
                .strip_prefix(&self.root)
                .or_else(|_| given.strip_prefix(&self.configured))
                .map_err(|_| self.outside(path))?
        } else {
            given
        };
        let mut relative = PathBuf::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => relative.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !relative.pop() {
                        return Err(self.outside(path));
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(self.outside(path)),
            }
        }
        Ok(relative)
    }

    /// Resolves an existing path for reading or listing: every symlink followed, the result inside.
    pub(crate) fn resolve_existing(&self, path: &str) -> Result<PathBuf, PathError> {
        let candidate = self.root.join(self.relative(path)?);
        let resolved = candidate.canonicalize().map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                // A dangling symlink also lands here; either way there is nothing to read.
                PathError::NotFound {
                    path: path.to_string(),
                    root: self.root.clone(),
                }
            } else {
                PathError::Io {
                    action: "resolve",
                    path: path.to_string(),
                    source,
                }
            }
        })?;
        if !self.inside(&resolved) {
            return Err(self.symlink_outside(path));
        }
        self.check_unprotected(&resolved, path)?;
        Ok(resolved)
    }

    /// Opens an existing regular file for reading, confined as described in the module docs; also
    /// returns the resolved path.
    pub(crate) fn open_read(&self, path: &str) -> Result<(File, PathBuf), PathError> {
        let resolved = self.resolve_existing(path)?;
        // O_NONBLOCK only matters for a FIFO planted in the workspace: opening it would otherwise
        // block until a writer appears. The type check below then refuses it.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&resolved)
            .map_err(|source| self.open_error(path, "open", source))?;
        self.check_opened(&file, path)?;
        let kind = file
            .metadata()
            .map_err(|source| self.open_error(path, "inspect", source))?
            .file_type();
        if kind.is_dir() {
            return Err(PathError::IsADirectory {
                path: path.to_string(),
            });
        }
        if !kind.is_file() {
            return Err(PathError::NotARegularFile {
                path: path.to_string(),
            });
        }
        Ok((file, resolved))
    }

    /// Opens a file for writing, creating it and any missing parent directories inside the workspace;
    /// also returns the resolved path. The file is neither truncated nor written here: that happens
    /// after every check has passed, so an existing file behind a refused path is never changed; and
    /// everything it creates is created from the root's handle (see the module docs), so a race with
    /// a directory swapped for a link creates nothing outside.
    pub(crate) fn open_write(&self, path: &str) -> Result<(File, PathBuf), PathError> {
        let relative = self.relative(path)?;
        let Some(name) = relative.file_name().map(ToOwned::to_owned) else {
            return Err(PathError::NoFileName {
                path: path.to_string(),
            });
        };
        let candidate = self.root.join(&relative);
        let parent = candidate.parent().unwrap_or(&self.root);

        // The deepest ancestor that exists decides where new directories would be created.
        let mut missing = Vec::new();
        let mut base = self.root.clone();
        for ancestor in parent.ancestors() {
            match ancestor.canonicalize() {
                Ok(resolved) if self.inside(&resolved) => {
                    base = resolved;
                    break;
                }
                Ok(_) => return Err(self.symlink_outside(path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // A dangling symlink: creating directories through it could build its target,
                    // wherever that is.
                    if ancestor.symlink_metadata().is_ok() {
                        return Err(PathError::DanglingSymlink {
                            path: path.to_string(),
                        });
                    }
                    missing.extend(ancestor.file_name().map(ToOwned::to_owned));
                }
                Err(source) => return Err(self.open_error(path, "resolve", source)),
            }
        }

        let planned: PathBuf = base
            .iter()
            .chain(missing.iter().rev().map(|part| part.as_os_str()))
            .chain([name.as_os_str()])
            .collect();
        self.check_unprotected(&planned, path)?;

        // From here on nothing is resolved by path: `base` is canonical (no links in it), so it is
        // walked from the root's handle refusing every link, and what is missing is made below it.
        let mut dir = self.open_dir_beneath(&base, path)?;
        let mut dir_path = base;
        for part in missing.iter().rev() {
            match rustix::fs::mkdirat(&dir, part.as_os_str(), Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => {
                    return Err(PathError::Io {
                        action: "create the parent directories of",
                        path: path.to_string(),
                        source: errno.into(),
                    });
                }
            }
            dir = self.open_child_dir(&dir, part.as_os_str(), path)?;
            dir_path.push(part);
        }

        let mut name = name;
        let mut target = dir_path.join(&name);
        match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileType::from_raw_mode(stat.st_mode).is_symlink() => {
                // A link that stays inside is written through (to its resolved target, since
                // O_NOFOLLOW refuses the link itself); one pointing out is refused.
                match target.canonicalize() {
                    Ok(resolved) if self.inside(&resolved) => {
                        let Some(file_name) = resolved.file_name().map(ToOwned::to_owned) else {
                            return Err(PathError::IsADirectory {
                                path: path.to_string(),
                            });
                        };
                        dir =
                            self.open_dir_beneath(resolved.parent().unwrap_or(&self.root), path)?;
                        self.check_unprotected(&resolved, path)?;
                        name = file_name;
                        target = resolved;
                    }
                    Ok(_) => return Err(self.symlink_outside(path)),
                    // Creating the missing target would mean writing wherever the link points.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(PathError::DanglingSymlink {
                            path: path.to_string(),
                        });
                    }
                    Err(source) => return Err(self.open_error(path, "resolve", source)),
                }
            }
            Ok(stat) if FileType::from_raw_mode(stat.st_mode).is_dir() => {
                return Err(PathError::IsADirectory {
                    path: path.to_string(),
                });
            }
            _ => {}
        }
        let file = rustix::fs::openat(
            &dir,
            name.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )
        .map(File::from)
        .map_err(|errno| self.open_error(path, "open", errno.into()))?;
        self.check_opened(&file, path)?;
        let meta = file
            .metadata()
            .map_err(|source| self.open_error(path, "inspect", source))?;
        if !meta.is_file() {
            return Err(PathError::NotARegularFile {
                path: path.to_string(),
            });
        }
        Ok((file, target))
    }

    /// Opens `dir` (canonical, under the root) by walking it from the root's handle, one component
    /// at a time, following no link: one found there appeared after it was resolved.
    fn open_dir_beneath(&self, dir: &Path, path: &str) -> Result<OwnedFd, PathError> {
        let relative = dir
            .strip_prefix(&self.root)
            .map_err(|_| self.symlink_outside(path))?;
        let mut handle = rustix::fs::openat(
            &self.handle,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| self.open_error(path, "open the workspace for", errno.into()))?;
        for component in relative.components() {
            let Component::Normal(part) = component else {
                return Err(self.symlink_outside(path));
            };
            handle = self.open_child_dir(&handle, part, path)?;
        }
        Ok(handle)
    }

    fn open_child_dir(
        &self,
        parent: &OwnedFd,
        name: &std::ffi::OsStr,
        path: &str,
    ) -> Result<OwnedFd, PathError> {
        rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| {
            let is_link = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode).is_symlink());
            match errno {
                rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR if is_link => {
                    PathError::Changed {
                        path: path.to_string(),
                    }
                }
                rustix::io::Errno::NOTDIR => PathError::NotADirectory {
                    path: path.to_string(),
                },
                errno => self.open_error(path, "open a directory of", errno.into()),
            }
        })
    }

    /// Maps the errors `O_NOFOLLOW` and friends produce to what they mean here.
    fn open_error(&self, path: &str, action: &'static str, source: io::Error) -> PathError {
        match source.raw_os_error() {
            // O_NOFOLLOW on a symlink: it appeared after the checks, so it is refused, not followed.
            Some(libc::ELOOP) => self.symlink_outside(path),
            Some(libc::EISDIR) => PathError::IsADirectory {
                path: path.to_string(),
            },
            Some(libc::ENOENT) => PathError::NotFound {
                path: path.to_string(),
                root: self.root.clone(),
            },
            _ => PathError::Io {
                action,
                path: path.to_string(),
                source,
            },
        }
    }

    /// On Linux, the path the kernel actually opened must still be inside the root; this closes the
    /// window between resolving a path and opening it in which a parent directory could be replaced by
    /// a symlink. Where `/proc` is unavailable the earlier checks stand alone.
    fn check_opened(&self, file: &File, path: &str) -> Result<(), PathError> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
                && !self.inside(&opened)
            {
                return Err(self.symlink_outside(path));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (file, path);
        Ok(())
    }
}

/// `path` made absolute and resolved through its deepest existing ancestor, the rest appended: a
/// protected path that does not exist yet (an agents dir made later) still matches the canonical
/// paths it is compared with.
fn resolved_as_far_as_it_exists(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    for ancestor in absolute.ancestors() {
        if let Ok(resolved) = ancestor.canonicalize() {
            return resolved.join(rest.iter().rev().collect::<PathBuf>());
        }
        rest.extend(ancestor.file_name().map(ToOwned::to_owned));
    }
    absolute
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(&dir.path().join("ws"), &[]).unwrap();
        (dir, outside, workspace)
    }

    #[test]
    fn portico_s_own_files_are_refused_even_inside_the_workspace() {
        // A workspace that holds the data dir, the config file and an agents dir (`workspace = "~"`).
        let home = tempfile::tempdir().unwrap();
        let data = home.path().join("portico");
        let agents = home.path().join("project/agents");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(data.join("daemon.json"), "{\"token\": \"secret\"}").unwrap();
        let config = home.path().join("project/portico.toml");
        std::fs::write(&config, "[server]\n").unwrap();
        let ws =
            Workspace::open(home.path(), &[data.clone(), config.clone(), agents.clone()]).unwrap();
        for path in [
            "project/portico.toml",
            "portico/daemon.json",
            "portico/new/file.toml",
            "project/agents/evil.toml",
        ] {
            assert!(
                matches!(ws.open_write(path), Err(PathError::Protected { .. })),
                "write {path}"
            );
        }
        for path in ["project/portico.toml", "portico/daemon.json"] {
            assert!(
                matches!(ws.open_read(path), Err(PathError::Protected { .. })),
                "read {path}"
            );
        }
        assert!(!agents.join("evil.toml").exists());
        assert!(
            !data.join("new").exists(),
            "no directory is made on the way"
        );
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "[server]\n");
        // A link inside the workspace to the config is refused too.
        symlink(&config, home.path().join("innocent.txt")).unwrap();
        assert!(matches!(
            ws.open_write("innocent.txt"),
            Err(PathError::Protected { .. })
        ));
        assert!(matches!(
            ws.open_read("innocent.txt"),
            Err(PathError::Protected { .. })
        ));
        // A protected directory that does not exist yet, named relative to the working directory.
        let later = home.path().join("later/agents");
        let relative_later = later
            .strip_prefix(std::env::current_dir().unwrap())
            .map(Path::to_path_buf)
            .unwrap_or(later.clone());
        let ws2 = Workspace::open(home.path(), &[relative_later]).unwrap();
        assert!(matches!(
            ws2.open_write("later/agents/evil.toml"),
            Err(PathError::Protected { .. })
        ));
        assert!(!later.exists(), "nothing is made on the way");
        // The rest of the workspace is as usable as ever.
        assert!(ws.open_write("project/notes.md").is_ok());

        // The default layout: the workspace inside the data dir stays usable; the data dir's other
        // files are outside it anyway.
        let inner = Workspace::open(&data.join("workspace"), std::slice::from_ref(&data)).unwrap();
        assert!(inner.open_write("notes.md").is_ok());
        assert!(inner.open_read("notes.md").is_ok());
    }

    #[test]
    fn lexical_resolution() {
        let (_dir, _outside, ws) = setup();
        assert_eq!(ws.relative("a/./b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(ws.relative("a/../b").unwrap(), PathBuf::from("b"));
        assert_eq!(ws.relative(".").unwrap(), PathBuf::new());
        let inside = ws.root().join("x/y");
        assert_eq!(
            ws.relative(inside.to_str().unwrap()).unwrap(),
            PathBuf::from("x/y")
        );
        for escape in ["../x", "a/../../x", "/etc/passwd", ".."] {
            match ws.relative(escape) {
                Err(PathError::Outside { path, root }) => {
                    assert_eq!(path, escape);
                    assert_eq!(root, ws.root());
                }
                other => panic!("{escape}: {other:?}"),
            }
        }
        assert!(matches!(ws.relative(""), Err(PathError::Empty)));
    }

    #[test]
    fn symlinks_out_are_refused_for_reads_and_writes() {
        let (_dir, outside, ws) = setup();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "s3cret").unwrap();
        symlink(&secret, ws.root().join("link")).unwrap();
        symlink(outside.path(), ws.root().join("dirlink")).unwrap();
        symlink(
            outside.path().join("nope/deeper"),
            ws.root().join("dangling"),
        )
        .unwrap();

        assert!(matches!(
            ws.open_read("link"),
            Err(PathError::SymlinkOutside { .. })
        ));
        assert!(matches!(
            ws.open_read("dirlink/secret"),
            Err(PathError::SymlinkOutside { .. })
        ));
        assert!(matches!(
            ws.open_write("link"),
            Err(PathError::SymlinkOutside { .. })
        ));
        assert!(matches!(
            ws.open_write("dirlink/new"),
            Err(PathError::SymlinkOutside { .. })
        ));
        assert!(matches!(
            ws.open_write("dangling/x/y"),
            Err(PathError::DanglingSymlink { .. })
        ));
        assert!(matches!(
            ws.open_write("dangling"),
            Err(PathError::DanglingSymlink { .. })
        ));
        assert!(!outside.path().join("nope").exists());
        assert!(!outside.path().join("new").exists());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret");
    }

    /// A directory of the path swapped for a symlink out of the workspace while `file_write` runs:
    /// the checks saw a directory, the open followed the link, and an empty file was created
    /// outside before the after-open check refused it. Resolution from a directory handle never
    /// follows the swapped link, so nothing outside is ever created, whichever way the race falls.
    #[test]
    fn a_directory_swapped_for_a_symlink_never_creates_files_outside() {
        let (_dir, outside, ws) = setup();
        let ws = std::sync::Arc::new(ws);
        let real = ws.root().join("d");
        let parked = ws.root().join("d.real");
        std::fs::create_dir(&real).unwrap();
        let link = ws.root().join("d.link");
        symlink(outside.path(), &link).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = std::thread::spawn({
            let (real, parked, link, stop) =
                (real.clone(), parked.clone(), link.clone(), stop.clone());
            move || {
                // `d` is a directory, then a symlink out, then a directory again, for as long as
                // the writer runs; exchanged atomically, so `d` always exists.
                let _ = &parked;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        &real,
                        rustix::fs::CWD,
                        &link,
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
            }
        });
        let mut written = 0;
        for i in 0..20000 {
            if let Ok((_file, target)) = ws.open_write(&format!("d/f{i}")) {
                assert!(target.starts_with(ws.root()), "{}", target.display());
                written += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        let escaped: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            escaped.is_empty(),
            "created outside the workspace: {escaped:?}"
        );
        assert!(written > 0, "some writes land while `d` is a directory");
    }

    /// The step that closes the race, made to lose it on purpose: the path was resolved while `d`
    /// was a directory, and `d` is a symlink out by the time it is opened.
    #[test]
    fn a_link_met_after_resolution_is_refused_not_followed() {
        let (_dir, outside, ws) = setup();
        let resolved = ws.root().join("d");
        symlink(outside.path(), &resolved).unwrap();
        assert!(matches!(
            ws.open_dir_beneath(&resolved, "d/f"),
            Err(PathError::Changed { path }) if path == "d/f"
        ));
        assert!(ws.open_dir_beneath(ws.root(), "f").is_ok());
    }

    #[test]
    fn symlinks_inside_are_followed() {
        let (_dir, _outside, ws) = setup();
        std::fs::write(ws.root().join("real"), "r").unwrap();
        symlink(ws.root().join("real"), ws.root().join("alias")).unwrap();
        assert!(ws.open_read("alias").is_ok());
        let (_file, target) = ws.open_write("alias").unwrap();
        assert_eq!(target, ws.root().join("real"));
    }
}
