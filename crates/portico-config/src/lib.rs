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
//! [`import`] turns Claude Desktop's, Cursor's and VS Code's MCP server configs into entries of this
//! format; [`export`] edits those clients' files to start `portico mcp` instead of the servers Portico
//! now serves; [`edit`] adds, removes, enables and disables one entry of a file's text, every other
//! byte kept; [`STARTER_CONFIG`] is the commented file `portico init` writes.
//!
//! This crate does not start anything and does not read the environment except in [`expand`],
//! [`locate`] and [`import::Places::current`]; [`environment_findings`] (what `config check` warns
//! of and `portico doctor` fails on: unset `${VAR}`s and stdio commands not found) is handed its
//! variables and only looks at the filesystem for commands.

mod check;
mod clients;
pub mod edit;
mod environment;
mod expand;
pub mod export;
pub mod import;
mod listen;
mod locate;
mod model;
mod private_file;
mod server_oauth;
mod upstream_oauth;

pub use check::{Problem, check, check_agent_file};
pub use clients::{
    ClientConfig, RESERVED_CLIENT_NAMES, is_client_name, parse_sha256_hex, reserved_client_name,
    token_sha256_hex,
};
pub use environment::{Finding, FindingKind, environment_findings, find_program};
pub use expand::{ExpandError, expand_vars, is_variable_name};
pub use import::json_config_hint;
pub use listen::{IpRange, listen_address, public_origin};
pub use locate::{
    ConfigSource, DEFAULT_CONFIG, STARTER_CONFIG, config_digest, data_dir, default_config_path,
    locate, path_to_write,
};
pub use model::{
    A2aSection, AgentConfig, ApprovalVia, BuiltinsSection, CardVersion, Config,
    DEFAULT_AGENT_TIMEOUT_SECS, DEFAULT_LISTEN, DEFAULT_MAX_CONCURRENT_CALLS,
    DEFAULT_MAX_ITERATIONS, DEFAULT_REGISTRY_URL, DEFAULT_STARTUP_TIMEOUT_SECS,
    DEFAULT_STORE_POOL_SIZE, DEFAULT_TIMEOUT_SECS, EnvEntry, ExposeSection, ExternalAgentConfig,
    MAX_APPROVAL_TTL_SECS, MAX_APPROVAL_WAIT_SECS, MAX_REPLICA_NAME, MAX_STORE_POOL_SIZE,
    McpServerConfig, ModelConfig, POLICY_ACTIONS, PROTOCOL_VERSIONS, PROVIDERS, PolicyAction,
    PolicyCondition, PolicyDefault, PolicySection, RateLimitSection, RegistrySection,
    SecretStoreChoice, SecretsSection, ServerSection, StoreSection, TelemetrySection,
    ToolPolicyConfig, ToolSearchMode, Transport, replica_name_problem,
};
pub use private_file::{create_private_dir_all, write_private_file};
pub use server_oauth::{
    MAX_OAUTH_LEEWAY_SECS, SERVER_OAUTH_ALGORITHMS, ServerOAuthConfig, is_scope_token,
    oauth_audience_problem, oauth_fetch_url_problem,
};
pub use upstream_oauth::UpstreamOAuthConfig;

/// The MCP tool an agent is served as: `portico_agent_{name}`, hyphens becoming underscores.
pub fn agent_tool_name(agent: &str) -> String {
    format!("portico_agent_{}", agent.replace('-', "_"))
}

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
    /// The file is another client's JSON config (or other JSON): the message says what to run.
    #[error("{hint}")]
    NotToml { hint: String },
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
    // TOML never starts with `{`, so a JSON file gets one message saying what it is, not a TOML
    // error per line.
    if let Some(hint) = json_config_hint(origin, text) {
        return Err(ConfigError::NotToml { hint });
    }
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
    let mut config = config;
    let base = match &source {
        ConfigSource::File(path) => path
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
        ConfigSource::Embedded => data_dir(),
    };
    load_agents_dir(&mut config, &base)?;
    Ok((config, source))
}

/// What Portico itself reads and keeps: the data dir, the config file and the agents dir. The
/// built-in file tools never reach these, whatever the workspace: a `file_write` into the config
/// or an agent file would otherwise start any command at the next (live) reload, and a `file_read`
/// of the data dir would give away `daemon.json`'s token.
pub fn owned_paths(config: &Config, source: &ConfigSource) -> Vec<std::path::PathBuf> {
    let mut paths = vec![data_dir()];
    let base = match source {
        ConfigSource::File(path) => {
            paths.push(path.clone());
            path.parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default()
        }
        ConfigSource::Embedded => data_dir(),
    };
    if let Some(dir) = &config.server.agents_dir {
        paths.push(base.join(dir));
    }
    paths
}

/// Adds the agents of `[server] agents_dir` (relative to `base`), else of `agents/` in the data dir when
/// that exists: one TOML file per agent, each checked like the main file. A name used twice is an error.
pub fn load_agents_dir(config: &mut Config, base: &std::path::Path) -> Result<(), ConfigError> {
    let dir = match &config.server.agents_dir {
        Some(dir) => base.join(dir),
        None => {
            let default = data_dir().join("agents");
            if !default.is_dir() {
                return Ok(());
            }
            default
        }
    };
    let read_error = |source| ConfigError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .map_err(read_error)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    for path in files {
        let origin = path.display().to_string();
        // A FIFO or a link to a device named `*.toml` would block the read or never end it.
        let regular = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
        if !regular {
            return Err(ConfigError::Read {
                path: origin,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file; an agent file is a TOML file",
                ),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        let problems = check_agent_file(&text);
        if !problems.is_empty() {
            return Err(ConfigError::Invalid { origin, problems });
        }
        let agent: AgentConfig = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            origin: origin.clone(),
            problems: vec![Problem::from_toml_error(&text, &e)],
        })?;
        let tool = agent_tool_name(&agent.name);
        if let Some(first) = config
            .agents
            .iter()
            .find(|a| agent_tool_name(&a.name) == tool)
        {
            return Err(ConfigError::Invalid {
                origin,
                problems: vec![Problem {
                    line: 1,
                    column: 1,
                    message: format!(
                        "agent `{}` clashes with agent `{}` defined earlier: both become the tool `{tool}`",
                        agent.name, first.name
                    ),
                    hint: Some("give each agent a distinct name".into()),
                }],
            });
        }
        config.agents.push(agent);
    }
    Ok(())
}
