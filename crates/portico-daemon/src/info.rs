//! The daemon info file: how `portico mcp` finds a running daemon and authenticates to it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a running daemon publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// Where to connect, e.g. `127.0.0.1:4200`.
    pub address: SocketAddr,
    pub pid: u32,
    /// The bearer token to send, when the daemon requires one. The file is readable by its owner only.
    pub token: Option<String>,
    pub version: String,
}

impl DaemonInfo {
    pub fn new(address: SocketAddr, token: Option<String>) -> Self {
        DaemonInfo {
            address,
            pid: std::process::id(),
            token,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
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
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
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
        let info = DaemonInfo::new("127.0.0.1:4200".parse().unwrap(), Some("t".into()));
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
        let info = DaemonInfo::new("0.0.0.0:4200".parse().unwrap(), None);
        assert_eq!(info.mcp_url(), "http://127.0.0.1:4200/mcp");
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
