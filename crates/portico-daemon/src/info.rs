//! The daemon info file: how `portico mcp` finds a running daemon and authenticates to it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The longest `challenge` the health route answers: a client's nonce is 64 hex digits; anything much
/// longer is not one.
pub const MAX_CHALLENGE_CHARS: usize = 128;

/// What a running daemon publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// Where to connect, e.g. `127.0.0.1:4200`.
    pub address: SocketAddr,
    pub pid: u32,
    /// The bearer token to send, when the daemon requires one. The file is readable by its owner only.
    pub token: Option<String>,
    pub version: String,
    /// A secret made fresh at every start and known only to the daemon and to readers of this
    /// owner-only file. The daemon proves who it is by answering a challenge with an HMAC keyed by it,
    /// so a client checks the process on the recorded port before it sends the token (pids are
    /// public; a stale file's port can be taken by anyone). Absent in files from older versions.
    #[serde(default)]
    pub identity_key: Option<String>,
    /// The config the daemon runs, so `portico doctor` can tell whether it is the one on disk.
    /// Absent in files from older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigIdentity>,
}

/// Which config a daemon runs: where it was read from and a digest of its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigIdentity {
    /// The file's path as the daemon was given it, or `<embedded default>`.
    pub source: String,
    /// `portico_config::config_digest` of the text it read.
    pub sha256: String,
}

impl ConfigIdentity {
    /// The identity of `text`, read from `source` (a file by its canonical path).
    pub fn of(source: &portico_config::ConfigSource, text: &str) -> ConfigIdentity {
        use portico_config::ConfigSource;
        let source = match source {
            ConfigSource::File(path) => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string(),
            ConfigSource::Embedded => ConfigSource::Embedded.to_string(),
        };
        ConfigIdentity {
            source,
            sha256: portico_config::config_digest(text),
        }
    }

    /// The identity of the config as `source` holds it now (`None` if the file cannot be read).
    pub fn read(source: &portico_config::ConfigSource) -> Option<ConfigIdentity> {
        let text = match source {
            portico_config::ConfigSource::File(path) => std::fs::read_to_string(path).ok()?,
            portico_config::ConfigSource::Embedded => portico_config::DEFAULT_CONFIG.to_string(),
        };
        Some(ConfigIdentity::of(source, &text))
    }
}

impl DaemonInfo {
    pub fn new(address: SocketAddr, token: Option<String>, identity_key: IdentityKey) -> Self {
        DaemonInfo {
            address,
            pid: std::process::id(),
            token,
            version: env!("CARGO_PKG_VERSION").to_string(),
            identity_key: Some(identity_key.0),
            config: None,
        }
    }

    /// Checks a health answer's `proof` for `challenge` against this file's identity key.
    pub fn verify_identity(&self, challenge: &str, proof: &str) -> Result<(), IdentityError> {
        let key = self
            .identity_key
            .as_deref()
            .ok_or(IdentityError::NoKeyInFile)?;
        let proof = decode_hex(proof).ok_or(IdentityError::WrongProof)?;
        identity_mac(key, challenge)
            .verify_slice(&proof)
            .map_err(|_| IdentityError::WrongProof)
    }

    /// The URL of the MCP endpoint. An unspecified listen address is reached over loopback.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base_url())
    }

    pub fn base_url(&self) -> String {
        let mut address = self.address;
        if address.ip().is_unspecified() {
            address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{address}")
    }
}

/// The per-start secret a daemon proves its identity with (see [`DaemonInfo::identity_key`]).
#[derive(Clone)]
pub struct IdentityKey(String);

impl IdentityKey {
    pub fn generate() -> Self {
        IdentityKey(format!(
            "{:032x}{:032x}",
            rand::random::<u128>(),
            rand::random::<u128>()
        ))
    }

    /// The health route's answer to `challenge`: hex HMAC-SHA256 keyed by this key.
    pub fn prove(&self, challenge: &str) -> String {
        let tag = identity_mac(&self.0, challenge).finalize().into_bytes();
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityKey(..)")
    }
}

/// A fresh nonce for the health route's `challenge`.
pub fn new_challenge() -> String {
    format!(
        "{:032x}{:032x}",
        rand::random::<u128>(),
        rand::random::<u128>()
    )
}

/// Why the process at a daemon's recorded address is not taken for that daemon.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("the info file has no identity key (written by an older Portico; restart the daemon)")]
    NoKeyInFile,
    #[error("it did not answer the identity challenge with a valid proof")]
    WrongProof,
}

/// Domain-separated so the tag can never be mistaken for any other HMAC made with the key.
fn identity_mac(key: &str, challenge: &str) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes keys of any size");
    mac.update(b"portico-daemon-identity\0");
    mac.update(challenge.as_bytes());
    mac
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The info file's location, `daemon.json` in Portico's data dir.
#[derive(Debug, Clone)]
pub struct InfoFile {
    path: PathBuf,
}

impl InfoFile {
    pub fn in_dir(dir: &Path) -> Self {
        InfoFile {
            path: dir.join("daemon.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes atomically (temp file and rename) with owner-only permissions, since it may hold the token.
    pub fn write(&self, info: &DaemonInfo) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = self.path.parent() {
            // The data dir, owner-only as the store makes it, should the daemon write here first.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let tmp = self
            .path
            .with_extension(format!("json.{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(info).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }

    /// Reads the file; `None` when absent or unreadable. Whether the daemon is alive is the caller's
    /// question (a stale file from a crashed daemon is normal).
    pub fn read(&self) -> Option<DaemonInfo> {
        let bytes = std::fs::read(&self.path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Removes the file if it still describes this daemon (another daemon may have replaced it).
    pub fn remove_if_ours(&self, info: &DaemonInfo) {
        if self.read().as_ref() == Some(info) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_permissions_and_removal() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile_dir();
        let file = InfoFile::in_dir(&dir);
        assert!(file.read().is_none());
        let info = DaemonInfo::new(
            "127.0.0.1:4200".parse().unwrap(),
            Some("t".into()),
            IdentityKey::generate(),
        );
        file.write(&info).unwrap();
        assert_eq!(file.read(), Some(info.clone()));
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = DaemonInfo {
            pid: info.pid + 1,
            ..info.clone()
        };
        file.remove_if_ours(&other);
        assert!(
            file.read().is_some(),
            "must not remove another daemon's file"
        );
        file.remove_if_ours(&info);
        assert!(file.read().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn unspecified_address_is_reached_over_loopback() {
        let info = DaemonInfo::new(
            "0.0.0.0:4200".parse().unwrap(),
            None,
            IdentityKey::generate(),
        );
        assert_eq!(info.mcp_url(), "http://127.0.0.1:4200/mcp");
    }

    #[test]
    fn only_the_key_holder_proves_identity() {
        let key = IdentityKey::generate();
        let info = DaemonInfo::new("127.0.0.1:4200".parse().unwrap(), None, key.clone());
        let proof = key.prove("nonce-1");
        assert_eq!(proof.len(), 64);
        assert_eq!(info.verify_identity("nonce-1", &proof), Ok(()));
        // A replayed proof does not answer another challenge, and another key's proof is refused.
        assert_eq!(
            info.verify_identity("nonce-2", &proof),
            Err(IdentityError::WrongProof)
        );
        let other = IdentityKey::generate().prove("nonce-1");
        assert_eq!(
            info.verify_identity("nonce-1", &other),
            Err(IdentityError::WrongProof)
        );
        assert_eq!(
            info.verify_identity("nonce-1", "not hex"),
            Err(IdentityError::WrongProof)
        );
        let old = DaemonInfo {
            identity_key: None,
            ..info
        };
        assert_eq!(
            old.verify_identity("nonce-1", &proof),
            Err(IdentityError::NoKeyInFile)
        );
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "portico-info-test-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
