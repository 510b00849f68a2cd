//! `secrets.json`: the store's index, and the values kept in the file.
//!
//! Mode 0600 from its creation on: every write goes to a new file created with that mode (and
//! `O_EXCL`, so nothing planted at its name is followed), synced, then renamed over the old one; a
//! reader never sees half a file, or a moment in which the file is readable by others. Writers
//! take an `flock` on `secrets.json.lock` around read-change-write, so two `portico secret set`s
//! at once both land.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::{Place, SecretError};

/// The largest file read: far more than any set of tokens.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// What the file holds.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Contents {
    version: u32,
    secrets: BTreeMap<String, Kept>,
}

/// Where one secret is, as the file says it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "in", rename_all = "lowercase", deny_unknown_fields)]
enum Kept {
    File { value: String },
    Keyring,
}

impl Contents {
    pub(crate) fn place_of(&self, name: &str) -> Option<Place> {
        self.secrets.get(name).map(|kept| match kept {
            Kept::File { .. } => Place::File,
            Kept::Keyring => Place::Keyring,
        })
    }

    pub(crate) fn value_of(&self, name: &str) -> Option<&str> {
        match self.secrets.get(name)? {
            Kept::File { value } => Some(value),
            Kept::Keyring => None,
        }
    }

    pub(crate) fn keep_value(&mut self, name: &str, value: &str) {
        self.secrets.insert(
            name.to_string(),
            Kept::File {
                value: value.to_string(),
            },
        );
    }

    pub(crate) fn keep_in_keyring(&mut self, name: &str) {
        self.secrets.insert(name.to_string(), Kept::Keyring);
    }

    /// True when there was something to forget.
    pub(crate) fn forget(&mut self, name: &str) -> bool {
        self.secrets.remove(name).is_some()
    }

    pub(crate) fn names(&self) -> Vec<(String, Place)> {
        self.secrets
            .keys()
            .filter_map(|name| Some((name.clone(), self.place_of(name)?)))
            .collect()
    }
}

pub(crate) struct SecretsFile {
    path: PathBuf,
}

impl SecretsFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        SecretsFile { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    pub(crate) fn stamp(&self) -> Option<FileStamp> {
        let metadata = std::fs::metadata(&self.path).ok()?;
        Some(FileStamp {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: metadata.ino(),
        })
    }

    /// The file's contents; empty when there is no file.
    pub(crate) fn read(&self) -> Result<Contents, SecretError> {
        let read_error = |e: std::io::Error| SecretError::Read {
            path: self.shown(),
            cause: e.to_string(),
        };
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::default()),
            Err(e) => return Err(read_error(e)),
        };
        let metadata = file.metadata().map_err(read_error)?;
        if metadata.permissions().mode() & 0o077 != 0 {
            // Someone widened it; secrets are the owner's alone.
            tracing::warn!(
                "the secret store {} was readable by others; made it owner-only again",
                self.shown()
            );
            std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600))
                .map_err(read_error)?;
        }
        if metadata.len() > MAX_FILE_BYTES {
            return Err(SecretError::Corrupt {
                path: self.shown(),
                cause: format!("larger than {MAX_FILE_BYTES} bytes"),
            });
        }
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(read_error)?;
        // serde_json's messages name a position, never the text around it.
        serde_json::from_slice(&text).map_err(|e| SecretError::Corrupt {
            path: self.shown(),
            cause: e.to_string(),
        })
    }

    /// Reads, changes and writes the file under the lock; `change`'s answer is returned.
    pub(crate) fn update<R>(
        &self,
        change: impl FnOnce(&mut Contents) -> R,
    ) -> Result<R, SecretError> {
        let _lock = self.lock()?;
        let mut contents = self.read()?;
        let answer = change(&mut contents);
        contents.version = 1;
        self.replace(&contents)?;
        Ok(answer)
    }

    fn write_error(&self, e: std::io::Error) -> SecretError {
        SecretError::Write {
            path: self.shown(),
            cause: e.to_string(),
        }
    }

    /// Replaces the file with `contents` (owner-only, whole or not at all).
    fn replace(&self, contents: &Contents) -> Result<(), SecretError> {
        let mut text = serde_json::to_vec_pretty(contents)
            .map_err(|e| self.write_error(std::io::Error::other(e)))?;
        text.push(b'\n');
        portico_config::write_private_file(&self.path, &text).map_err(|e| self.write_error(e))
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// `secrets.json.lock`, opened (0600) and locked exclusively; unlocked when dropped.
    fn lock(&self) -> Result<std::fs::File, SecretError> {
        let dir = self.dir();
        portico_config::create_private_dir_all(&dir).map_err(|e| self.write_error(e))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.path.with_extension("json.lock"))
            .map_err(|e| self.write_error(e))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| self.write_error(e.into()))?;
        Ok(file)
    }
}
