//! Where the configuration and Portico's data live.

use std::path::{Path, PathBuf};

/// The configuration used when no file is found: no upstreams, loopback listener.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// The commented config `portico init` writes (and `portico import` starts a new file with): the
/// embedded default's settings and agent, with examples of servers in comments.
pub const STARTER_CONFIG: &str = include_str!("starter.toml");

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    File(PathBuf),
    Embedded,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::Embedded => f.write_str("<embedded default>"),
        }
    }
}

/// Portico's data directory: `$PORTICO_HOME` if set, else `portico` in the user's data dir.
pub fn data_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("PORTICO_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("portico")
}

/// `config.toml` in [`data_dir`]: where the config is found when neither `--config` nor
/// `$PORTICO_CONFIG` names one.
pub fn default_config_path() -> PathBuf {
    data_dir().join("config.toml")
}

/// Where a command that creates or edits the config (`portico init`, `portico import`) writes:
/// `--config` if given, then `$PORTICO_CONFIG`, then [`default_config_path`], whether or not the file
/// exists yet.
pub fn path_to_write(explicit: Option<&Path>) -> PathBuf {
    match locate(explicit) {
        ConfigSource::File(path) => path,
        ConfigSource::Embedded => default_config_path(),
    }
}

/// Finds the config: `--config` if given, then `$PORTICO_CONFIG`, then `config.toml` in [`data_dir`];
/// when none of these names an existing file, the embedded default. An explicit path (flag or variable)
/// is returned even if missing, so that the error names it instead of silently using defaults.
pub fn locate(explicit: Option<&Path>) -> ConfigSource {
    if let Some(path) = explicit {
        return ConfigSource::File(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PORTICO_CONFIG").filter(|v| !v.is_empty()) {
        return ConfigSource::File(PathBuf::from(path));
    }
    let default = data_dir().join("config.toml");
    if default.is_file() {
        ConfigSource::File(default)
    } else {
        ConfigSource::Embedded
    }
}

/// The digest a daemon publishes of the config text it runs, so `portico doctor` can tell whether the
/// file on disk is still what it runs: SHA-256 as hex.
pub fn config_digest(text: &str) -> String {
    crate::token_sha256_hex(text)
}
