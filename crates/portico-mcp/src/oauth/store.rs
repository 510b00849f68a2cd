//! One server's OAuth credentials on disk: `{data_dir}/oauth/{server}.json`, mode 0600.
//!
//! The file is the one source of truth: the daemon, `portico mcp` and `portico auth login` all read
//! and write it, so a login in one process is picked up by the others at their next request. A read
//! is a `stat` while the file is unchanged (the parsed record is cached by its modification time,
//! length and inode). Writes go to a new file beside it, renamed over the old one, so a reader never
//! sees half a file.
//!
//! Tokens are bound to the server URL they were obtained for: a record whose `resource_url` is not
//! the configured URL is treated as absent, so editing a server's URL never sends its old tokens to
//! the new address.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The largest credentials file read: a token response is a few KiB.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Scopes kept pending, and the longest one: what a server's 403 challenges add to the file is
/// bounded, so a server asking for ever new scopes cannot grow it past what it may be.
pub const MAX_PENDING_SCOPES: usize = 32;
pub const MAX_SCOPE_CHARS: usize = 256;

/// What the file holds.
#[derive(Clone, Serialize, Deserialize)]
pub struct Record {
    /// The MCP server URL these credentials were obtained for; they are sent there only.
    pub resource_url: String,
    /// rmcp's record: client id, token response (access and refresh token, expiry), granted scopes,
    /// when it was received, and the issuing authorization server.
    pub credentials: StoredCredentials,
    /// Scopes a server asked for (403 `insufficient_scope`) that no login has obtained yet: the next
    /// login, wherever it runs (`portico auth login`), asks for them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_scopes: Vec<String>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `StoredCredentials`' own Debug redacts the tokens.
        f.debug_struct("Record")
            .field("resource_url", &self.resource_url)
            .field("credentials", &self.credentials)
            .field("pending_scopes", &self.pending_scopes)
            .finish()
    }
}

/// Identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

struct Cached {
    stamp: Option<FileStamp>,
    record: Option<Record>,
}

/// One server's credentials file. Cheap to share (`Arc`); rmcp's `CredentialStore` over it.
pub struct TokenFile {
    path: PathBuf,
    resource_url: String,
    cache: Mutex<Option<Cached>>,
    /// Held across a refresh and its save within this process (rmcp's refresh guard).
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why the credentials file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read OAuth credentials {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "OAuth credentials {path} are not readable as Portico's ({message}); remove the file (`portico auth logout`) and log in again"
    )]
    Corrupt { path: String, message: String },
    #[error("cannot write OAuth credentials {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl TokenFile {
    /// The file for `server` in `dir` (usually `{data_dir}/oauth`), for tokens of `resource_url`. The
    /// file is named by the server's normalized name (`[a-z0-9_]`, unique per config), so no name
    /// reaches outside `dir`.
    pub fn new(dir: &Path, server: &str, resource_url: &str) -> Self {
        let mut stem = portico_core::naming::normalize_segment(server);
        if stem.is_empty() {
            stem.push('_');
        }
        TokenFile {
            path: dir.join(format!("{stem}.json")),
            resource_url: resource_url.to_string(),
            cache: Mutex::new(None),
            refreshing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's current version, `None` when there is none.
    pub fn stamp(&self) -> Option<FileStamp> {
        let metadata = std::fs::metadata(&self.path).ok()?;
        Some(FileStamp {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: metadata.ino(),
        })
    }

    /// The record for this server's URL, if the file has one.
    pub fn current(&self) -> Result<Option<Record>, StoreError> {
        let stamp = self.stamp();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = cache.as_ref()
            && cached.stamp == stamp
        {
            return Ok(cached.record.clone());
        }
        let record = match stamp {
            None => None,
            Some(_) => self.read()?,
        };
        let record = record.filter(|r| r.resource_url == self.resource_url);
        *cache = Some(Cached {
            stamp,
            record: record.clone(),
        });
        Ok(record)
    }

    fn read(&self) -> Result<Option<Record>, StoreError> {
        let path = self.path.display().to_string();
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
            &mut text,
        )
        .map_err(|source| StoreError::Read {
            path: path.clone(),
            source,
        })?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(StoreError::Corrupt {
                path,
                message: format!("larger than {MAX_FILE_BYTES} bytes"),
            });
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path,
                message: e.to_string(),
            })
    }

    /// Replaces the credentials (a login's or a refresh's); scopes still pending that they were granted
    /// are no longer pending.
    pub fn write(&self, credentials: StoredCredentials) -> Result<(), StoreError> {
        let mut pending = self
            .current()
            .ok()
            .flatten()
            .map(|r| r.pending_scopes)
            .unwrap_or_default();
        if credentials.token_response.is_some() {
            pending.retain(|scope| !credentials.granted_scopes.contains(scope));
        }
        self.replace(Record {
            resource_url: self.resource_url.clone(),
            credentials,
            pending_scopes: pending,
        })
    }

    /// Records scopes a server asked for that the stored token lacks (nothing when there is no
    /// record: a login asks for the challenge's scopes anyway). At most [`MAX_PENDING_SCOPES`] are
    /// kept; a scope over [`MAX_SCOPE_CHARS`] is not.
    pub fn add_pending_scopes(&self, scopes: &[String]) -> Result<(), StoreError> {
        let Some(mut record) = self.current()? else {
            return Ok(());
        };
        let before = record.pending_scopes.len();
        for scope in scopes {
            if record.pending_scopes.len() >= MAX_PENDING_SCOPES {
                break;
            }
            if scope.len() <= MAX_SCOPE_CHARS && !record.pending_scopes.contains(scope) {
                record.pending_scopes.push(scope.clone());
            }
        }
        if record.pending_scopes.len() == before {
            return Ok(());
        }
        self.replace(record)
    }

    /// Writes `record` to a new file (0600, created new, so nothing planted at its name is
    /// followed) and renames it over the old one.
    fn replace(&self, record: Record) -> Result<(), StoreError> {
        let path = self.path.display().to_string();
        let failed = |source| StoreError::Write {
            path: path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        portico_config::create_private_dir_all(dir).map_err(failed)?;
        restrict_dir(dir).map_err(failed)?;
        let text =
            serde_json::to_vec_pretty(&record).map_err(|e| failed(std::io::Error::other(e)))?;
        portico_config::write_private_file(&self.path, &text).map_err(failed)?;
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(Cached {
            stamp: self.stamp(),
            record: Some(record),
        });
        Ok(())
    }

    /// Removes the file; true when there was one.
    pub fn remove(&self) -> Result<bool, StoreError> {
        let removed = match std::fs::remove_file(&self.path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(StoreError::Write {
                    path: self.path.display().to_string(),
                    source,
                });
            }
        };
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(removed)
    }
}

/// The credentials directory is the user's alone.
fn restrict_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// `path` opened (0600) and locked exclusively; the lock goes with the file when it is dropped.
fn lock_file(path: &Path) -> Result<std::fs::File, StoreError> {
    let failed = |source| StoreError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        portico_config::create_private_dir_all(dir).map_err(failed)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(failed)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| failed(e.into()))?;
    Ok(file)
}

/// rmcp's view of a [`TokenFile`].
#[derive(Debug, Clone)]
pub struct SharedTokenFile(pub Arc<TokenFile>);

fn store_error(e: StoreError) -> AuthError {
    AuthError::CredentialStoreError(e.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for SharedTokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self
            .0
            .current()
            .map_err(store_error)?
            .map(|r| r.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.0.write(credentials).map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.0.remove().map(|_| ()).map_err(store_error)
    }

    /// One refresh at a time across every Portico process sharing the file: rmcp reads the stored
    /// refresh token inside the guard, so a refresh never spends a token another process has just
    /// rotated (which an authorization server detecting reuse answers by revoking the grant).
    async fn acquire_refresh_guard(
        &self,
    ) -> Result<Option<rmcp::transport::auth::CredentialRefreshGuard>, AuthError> {
        let in_process = self.0.refreshing.clone().lock_owned().await;
        let lock_path = self.0.path.with_extension("lock");
        let across_processes = tokio::task::spawn_blocking(move || lock_file(&lock_path))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        Ok(Some(rmcp::transport::auth::CredentialRefreshGuard::new((
            in_process,
            across_processes,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_string(), None, vec!["read".into()], Some(1))
    }

    #[test]
    fn a_record_is_written_0600_and_read_back_for_its_url_only() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = TokenFile::new(&dir, "linear", "https://mcp.example/mcp");
        assert!(file.current().unwrap().is_none());
        // Nothing to attach pending scopes to yet.
        file.add_pending_scopes(&["admin".into()]).unwrap();
        assert!(!file.path().exists());
        file.write(credentials("client-1")).unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode & 0o077, 0);
        let record = file.current().unwrap().expect("written");
        assert_eq!(record.credentials.client_id, "client-1");
        assert_eq!(record.credentials.granted_scopes, ["read"]);

        // The same file read for another URL is nobody's.
        let moved = TokenFile::new(&dir, "linear", "https://elsewhere.example/mcp");
        assert!(moved.current().unwrap().is_none());
    }

    #[test]
    fn a_server_name_never_names_a_file_outside_the_directory() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = TokenFile::new(&dir, "../../etc/x", "https://mcp.example/mcp");
        assert_eq!(file.path(), dir.join("______etc_x.json"));
    }

    #[test]
    fn pending_scopes_are_kept_until_a_token_is_granted_them() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = TokenFile::new(&dir, "s", "https://mcp.example/mcp");
        file.write(credentials("c")).unwrap();
        file.add_pending_scopes(&["admin".into(), "read".into()])
            .unwrap();
        file.add_pending_scopes(&["admin".into()]).unwrap();
        assert_eq!(
            file.current().unwrap().unwrap().pending_scopes,
            ["admin", "read"]
        );
        // A record without a token (a registration kept) grants nothing.
        file.write(credentials("c")).unwrap();
        assert_eq!(
            file.current().unwrap().unwrap().pending_scopes,
            ["admin", "read"]
        );
        let token: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": "a", "token_type": "bearer"}),
        )
        .unwrap();
        let granted = StoredCredentials::new(
            "c".into(),
            Some(token),
            vec!["read".into(), "admin".into()],
            Some(1),
        );
        file.write(granted).unwrap();
        assert!(file.current().unwrap().unwrap().pending_scopes.is_empty());
    }

    #[test]
    fn a_server_asking_for_ever_new_scopes_cannot_grow_the_file() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = TokenFile::new(&dir, "s", "https://mcp.example/mcp");
        file.write(credentials("c")).unwrap();
        for round in 0..100 {
            let scopes: Vec<String> = (0..10).map(|i| format!("scope-{round}-{i}")).collect();
            file.add_pending_scopes(&scopes).unwrap();
        }
        file.add_pending_scopes(&["x".repeat(MAX_SCOPE_CHARS + 1)])
            .unwrap();
        let pending = file.current().unwrap().unwrap().pending_scopes;
        assert_eq!(pending.len(), MAX_PENDING_SCOPES);
        assert_eq!(pending[0], "scope-0-0");
        assert!(pending.iter().all(|s| s.len() <= MAX_SCOPE_CHARS));
    }

    #[tokio::test]
    async fn the_refresh_guard_is_held_across_processes_by_a_file_lock() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = Arc::new(TokenFile::new(&dir, "s", "https://mcp.example/mcp"));
        let store = SharedTokenFile(file.clone());
        let guard = store.acquire_refresh_guard().await.unwrap();
        // Another open file description (as another process has) cannot take the lock now.
        let other = std::fs::OpenOptions::new()
            .write(true)
            .open(file.path().with_extension("lock"))
            .unwrap();
        assert!(
            rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .is_err()
        );
        drop(guard);
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    }

    #[test]
    fn a_change_by_another_writer_is_seen_at_the_next_read() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let reader = TokenFile::new(&dir, "s", "https://mcp.example/mcp");
        let writer = TokenFile::new(&dir, "s", "https://mcp.example/mcp");
        writer.write(credentials("first")).unwrap();
        assert_eq!(
            reader.current().unwrap().unwrap().credentials.client_id,
            "first"
        );
        writer.write(credentials("second-and-longer")).unwrap();
        assert_eq!(
            reader.current().unwrap().unwrap().credentials.client_id,
            "second-and-longer"
        );
        assert!(writer.remove().unwrap());
        assert!(reader.current().unwrap().is_none());
        assert!(!writer.remove().unwrap());
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_and_the_way_out() {
        let temp = tempdir();
        let dir = temp.path().to_path_buf();
        let file = TokenFile::new(&dir, "s", "https://mcp.example/mcp");
        std::fs::write(file.path(), b"{not json").unwrap();
        let error = file.current().unwrap_err().to_string();
        assert!(error.contains("s.json"), "{error}");
        assert!(error.contains("portico auth logout"), "{error}");
    }

    /// A directory removed when the test ends, loosened to 0755 so that a test can see the store
    /// tighten it.
    fn tempdir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }
}
