//! Confining paths to the workspace directory.
//!
//! A path a model gives is untrusted: `../../etc/passwd`, `/etc/passwd`, or a symlink planted inside
//! the workspace that points outside must all be refused. The checks work on resolved paths, not on
//! spelling: the workspace root is canonicalized once, reads canonicalize their target and require it
//! to lie under the root, and writes canonicalize the deepest ancestor that exists. Opening then uses
//! `O_NOFOLLOW`, so a final component swapped for a symlink after the check fails instead of being
//! followed, and on Linux the opened descriptor's real path is checked once more, which also catches
//! an intermediate directory swapped for a symlink in between.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

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
}

impl Workspace {
    /// Creates the directory if needed and resolves it once.
    pub(crate) fn open(path: &Path) -> Result<Workspace, BuiltinError> {
        std::fs::create_dir_all(path).map_err(|source| BuiltinError::CreateWorkspace {
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
        Ok(Workspace {
            root,
            configured: path.to_path_buf(),
        })
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
    /// after every check has passed, so an existing file behind a refused path is never changed (a race
    /// lost at the last check can at most leave a new, empty file behind).
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
        for ancestor in parent.ancestors() {
            match ancestor.canonicalize() {
                Ok(resolved) if self.inside(&resolved) => break,
                Ok(_) => return Err(self.symlink_outside(path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // A dangling symlink: creating directories through it could build its target,
                    // wherever that is.
                    if ancestor.symlink_metadata().is_ok() {
                        return Err(PathError::DanglingSymlink {
                            path: path.to_string(),
                        });
                    }
                }
                Err(source) => return Err(self.open_error(path, "resolve", source)),
            }
        }
        std::fs::create_dir_all(parent).map_err(|source| PathError::Io {
            action: "create the parent directories of",
            path: path.to_string(),
            source,
        })?;
        // Re-resolve after creating: a directory swapped for a symlink in between is caught here.
        let parent = parent
            .canonicalize()
            .map_err(|source| self.open_error(path, "resolve", source))?;
        if !self.inside(&parent) {
            return Err(self.symlink_outside(path));
        }

        let mut target = parent.join(&name);
        match target.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                // A link that stays inside is written through (to its resolved target, since
                // O_NOFOLLOW refuses the link itself); one pointing out is refused.
                match target.canonicalize() {
                    Ok(resolved) if self.inside(&resolved) => target = resolved,
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
            Ok(meta) if meta.is_dir() => {
                return Err(PathError::IsADirectory {
                    path: path.to_string(),
                });
            }
            _ => {}
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&target)
            .map_err(|source| self.open_error(path, "open", source))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(&dir.path().join("ws")).unwrap();
        (dir, outside, workspace)
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
