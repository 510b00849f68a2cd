//! Portico's configuration: the TOML format, where the file is found, and `portico config check`.
//!
//! The format follows the reference system (`[[mcp_servers]]` with `name`, `timeout_secs`, `env` and a
//! `[mcp_servers.transport]` table) and adds what users need: `headers` with `${VAR}` expansion, `cwd`,
//! `enabled`, literal environment values and `allow_private_network`.
//!
//! Loading is two passes. [`check`] walks a spanned parse tree and reports *every* problem with its
//! line, column and a hint; only a file with no problems is deserialised into [`Config`]. Serde alone
//! would stop at the first error, which makes fixing a config a slow loop.
//!
//! This crate does not start anything and does not read the environment except in [`expand`] and
//! [`locate`].

mod check;
mod expand;
mod locate;
mod model;

pub use check::{Problem, check};
pub use expand::{ExpandError, expand_vars};
pub use locate::{ConfigSource, DEFAULT_CONFIG, data_dir, locate};
pub use model::{
    Config, DEFAULT_LISTEN, DEFAULT_TIMEOUT_SECS, EnvEntry, ExposeSection, McpServerConfig,
    PROTOCOL_VERSIONS, ServerSection, ToolSearchMode, Transport,
};

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{} has {} problem(s):\n{}", .origin, .problems.len(), render_problems(.origin, .problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
}

fn render_problems(origin: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {origin}:{p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses and checks config text. `origin` names the text in messages (a path, or `<embedded>`).
pub fn parse(origin: &str, text: &str) -> Result<Config, ConfigError> {
    let problems = check(text);
    if !problems.is_empty() {
        return Err(ConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        });
    }
    // `check` accepts exactly what the model deserialises, so this only fails if the two drift apart;
    // report it as a problem rather than panicking.
    toml::from_str::<Config>(text).map_err(|e| ConfigError::Invalid {
        origin: origin.to_string(),
        problems: vec![Problem::from_toml_error(text, &e)],
    })
}

/// Loads the configuration from where [`locate`] finds it.
pub fn load(explicit: Option<&std::path::Path>) -> Result<(Config, ConfigSource), ConfigError> {
    let source = locate(explicit);
    let config = match &source {
        ConfigSource::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            parse(&path.display().to_string(), &text)?
        }
        ConfigSource::Embedded => parse("<embedded default>", DEFAULT_CONFIG)?,
    };
    Ok((config, source))
}
