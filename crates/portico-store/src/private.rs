//! Owner-only files: the store holds conversations, memories (secrets included, in the WAL in clear)
//! and push credentials, so its directory is created 0700 and its files 0600, before SQLite creates
//! them, so that there is no moment at which another local user could open one.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::StoreError;

/// Group and other bits: any of them set means someone else may read or enter.
const OPEN_TO_OTHERS: u32 = 0o077;

/// Creates `dir` owner-only (its missing parents as usual). An existing directory is left as the
/// operator made it, with a warning when others may read it.
pub(crate) fn create_dir(dir: &Path, store: &Path) -> Result<(), StoreError> {
    let create_error = |source| StoreError::CreateDir {
        dir: dir.to_path_buf(),
        path: store.to_path_buf(),
        source,
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Missing parents too (the data dir itself, when the store is in a subdirectory of it).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(create_error)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {
            warn_if_open(dir);
            Ok(())
        }
        Err(e) => Err(create_error(e)),
    }
}

/// Logs when other users may list or enter `dir`; returns the mode seen.
pub(crate) fn warn_if_open(dir: &Path) -> Option<u32> {
    // Said once per process and directory: a command that opens the store twice says it once.
    static WARNED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mode = std::fs::metadata(dir).ok()?.permissions().mode() & 0o777;
    let first = || {
        let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
        let first = !warned.iter().any(|d| d == dir);
        if first {
            warned.push(dir.to_path_buf());
        }
        first
    };
    if mode & OPEN_TO_OTHERS != 0 && first() {
        tracing::warn!(
            "the data directory {} is open to other users (mode {mode:03o}); Portico's files in it are owner-only, but other users can see their names and anything else kept there: run `chmod 700 {}`",
            dir.display(),
            dir.display()
        );
    }
    Some(mode)
}

/// Makes the database file, and its `-wal` and `-shm` files if an earlier run left them, owner-only
/// before SQLite opens them: SQLite creates the `-wal` and `-shm` files with the main file's mode, so
/// creating the main file 0600 here covers all three.
pub(crate) fn prepare_database_files(path: &Path) -> Result<(), StoreError> {
    let error = |file: &Path, source| StoreError::Permissions {
        path: file.to_path_buf(),
        source,
    };
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| error(path, e))?;
    for file in [
        path.to_path_buf(),
        sibling(path, "-wal"),
        sibling(path, "-shm"),
    ] {
        match std::fs::metadata(&file) {
            Ok(meta) if meta.permissions().mode() & OPEN_TO_OTHERS != 0 => {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| error(&file, e))?;
                tracing::info!(
                    "made {} owner-only (it was readable by others)",
                    file.display()
                );
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(error(&file, e)),
        }
    }
    Ok(())
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Reads the 32-byte secret kept in `path`, creating it (0600, random) on first use. Created under
/// a temporary name and linked into place, so two processes starting at once agree on one secret and
/// neither reads a half-written file.
pub fn load_or_create_secret(path: &Path) -> Result<[u8; 32], StoreError> {
    let error = |source| StoreError::Secret {
        path: path.to_path_buf(),
        source,
    };
    if let Some(secret) = read_secret(path).map_err(error)? {
        return Ok(secret);
    }
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir(dir, path)?;
    }
    let secret: [u8; 32] = rand::random();
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = sibling(path, &format!(".{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(format!("{hex}\n").as_bytes())?;
        file.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => Ok(secret),
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_secret(path)
            .map_err(error)?
            .ok_or_else(|| error(std::io::Error::other("the file vanished while being read"))),
        Err(e) => Err(error(e)),
    }
}

fn read_secret(path: &Path) -> std::io::Result<Option<[u8; 32]>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = text.trim();
    let mut secret = [0u8; 32];
    let valid = text.len() == 64
        && secret.iter_mut().enumerate().all(|(i, byte)| {
            text.get(2 * i..2 * i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .map(|b| *byte = b)
                .is_some()
        });
    if !valid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not 64 hex digits",
        ));
    }
    Ok(Some(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_directory_and_database_are_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/data");
        let path = dir.join("portico.db");
        create_dir(&dir, &path).unwrap();
        prepare_database_files(&path).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn files_left_open_by_an_earlier_run_are_closed_and_an_open_dir_is_reported() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join("portico.db");
        for file in [path.clone(), sibling(&path, "-wal"), sibling(&path, "-shm")] {
            std::fs::write(&file, b"").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        create_dir(&dir, &path).unwrap();
        assert_eq!(
            warn_if_open(&dir),
            Some(0o755),
            "left as the operator made it"
        );
        prepare_database_files(&path).unwrap();
        for file in [path.clone(), sibling(&path, "-wal"), sibling(&path, "-shm")] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }

    #[test]
    fn a_secret_is_made_once_owner_only_and_read_back() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("data/audit.key");
        let first = load_or_create_secret(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(load_or_create_secret(&path).unwrap(), first);
        let other = load_or_create_secret(&root.path().join("other/audit.key")).unwrap();
        assert_ne!(first, other);
        std::fs::write(&path, "short").unwrap();
        let error = load_or_create_secret(&path).unwrap_err().to_string();
        assert!(error.contains("not 64 hex digits"), "{error}");
    }
}
