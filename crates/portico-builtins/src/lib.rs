//! `portico-builtins` holds Portico's built-in tools: each one a [`LocalTool`] with a typed,
//! schema-described input and output, registered into a [`LocalTools`] registry by [`register`].
//!
//! | tool | what it does | marked |
//! | --- | --- | --- |
//! | `file_read`, `file_write`, `file_list` | files under one workspace directory, never outside it | `file_write` sensitive |
//! | `web_fetch` | one GET through the SSRF-safe [`SafeClient`], body capped | untrusted output |
//! | `memory_store`, `memory_recall` | a key/value memory per agent, in the [`Store`] | |
//! | `system_time` | the current UTC time | |
//! | `shell_exec` | `/bin/sh -c` in the workspace; only registered when enabled | sensitive |
//!
//! The security boundaries live here, next to the tools that need them: the file tools confine every
//! path to the workspace (no `..` or symlink escapes), `web_fetch` makes no request except through
//! `SafeClient`, and `shell_exec` runs with a cleared environment in its own process group, killed
//! whole on timeout or cancellation.
//!
//! What it is not: the call pipeline that runs these tools, checks arguments and applies the taint
//! rule (`portico-pipeline`), the agents, or the agent tools `agent_send`/`agent_list` (both in
//! `portico-agents`).

mod files;
mod memory;
mod shell;
mod text;
mod time;
mod web;
mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use portico_net::LazyClient;
use portico_pipeline::{LocalTool, LocalTools};
use portico_store::Store;

pub use memory::CLIENT_SCOPE;
pub use web::web_fetch_policy;
pub use workspace::PathError;

/// The name of every built-in tool, `shell_exec` included (it is registered only when enabled).
pub const NAMES: &[&str] = &[
    "file_read",
    "file_write",
    "file_list",
    "web_fetch",
    "memory_store",
    "memory_recall",
    "system_time",
    "shell_exec",
];

/// How the built-ins are set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinSettings {
    /// The directory the file tools are confined to and `shell_exec` runs in; created if missing.
    pub workspace: PathBuf,
    /// Whether `shell_exec` is registered at all. Off by default: a shell can do anything the
    /// Portico process can, so it has to be asked for.
    pub shell_exec: bool,
    /// The longest a `shell_exec` command may run; a call may ask for less, never more.
    pub shell_timeout: Duration,
    /// The most body bytes `web_fetch` returns; a call may ask for less, never more.
    pub web_fetch_max_bytes: usize,
    /// The most bytes one `file_read` returns; a call may ask for less, never more.
    pub max_file_bytes: usize,
    /// Paths the file tools refuse even inside the workspace (Portico's own config and data); the
    /// workspace's own tree stays usable when it lies inside one of them.
    pub protected: Vec<PathBuf>,
}

/// 1 MiB, the default cap for `web_fetch` bodies and `file_read` reads.
pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;

/// The default `shell_exec` timeout.
pub const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(30);

impl BuiltinSettings {
    /// Settings for `workspace` with the defaults: no shell, 30 s shell timeout, 1 MiB caps.
    pub fn new(workspace: PathBuf) -> Self {
        BuiltinSettings {
            workspace,
            shell_exec: false,
            shell_timeout: DEFAULT_SHELL_TIMEOUT,
            web_fetch_max_bytes: DEFAULT_MAX_BYTES,
            max_file_bytes: DEFAULT_MAX_BYTES,
            protected: Vec::new(),
        }
    }
}

/// What can stop the built-ins from being registered.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    #[error(
        "could not create the built-in tools' workspace {path}: {source}; create it yourself or set \
         another workspace directory"
    )]
    CreateWorkspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "could not resolve the built-in tools' workspace {path}: {source}; check that it exists and \
         is readable"
    )]
    ResolveWorkspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the built-in tools' workspace {path} is not a directory; point it at a directory")]
    WorkspaceNotADirectory { path: PathBuf },
}

/// Registers every built-in (shell_exec only when enabled) into `tools`.
///
/// Creates the workspace directory if it is missing and resolves it once, so every later path check
/// compares against the same canonical root.
pub fn register(
    tools: &LocalTools,
    settings: &BuiltinSettings,
    store: Store,
    web: LazyClient,
) -> Result<(), BuiltinError> {
    for tool in builtin_tools(settings, store, web)? {
        tools.register(tool);
    }
    Ok(())
}

fn builtin_tools(
    settings: &BuiltinSettings,
    store: Store,
    web: LazyClient,
) -> Result<Vec<LocalTool>, BuiltinError> {
    let workspace = Arc::new(workspace::Workspace::open(
        &settings.workspace,
        &settings.protected,
    )?);
    let mut tools = vec![
        files::file_read(workspace.clone(), settings.max_file_bytes),
        files::file_write(workspace.clone()),
        files::file_list(workspace.clone()),
        web::web_fetch(web, settings.web_fetch_max_bytes),
        memory::memory_store(store.clone()),
        memory::memory_recall(store),
        time::system_time(),
    ];
    if settings.shell_exec {
        tools.push(shell::shell_exec(workspace, settings.shell_timeout));
    }
    Ok(tools)
}

#[cfg(test)]
pub(crate) mod test_support {
    use portico_pipeline::{LocalTool, ToolContext};
    use serde_json::Value;

    /// Calls `tool` as a client and returns its result object.
    pub async fn call(tool: &LocalTool, arguments: Value) -> portico_core::ToolResult {
        call_as(tool, arguments, ToolContext::client("test")).await
    }

    pub async fn call_as(
        tool: &LocalTool,
        arguments: Value,
        context: ToolContext,
    ) -> portico_core::ToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        tool.call(arguments, context).await
    }

    /// The structured output of a successful call; panics with the error text otherwise.
    pub fn ok(result: &portico_core::ToolResult) -> &Value {
        assert!(!result.is_error(), "{result:?}");
        result
            .structured_content
            .as_ref()
            .expect("a successful call has structured content")
    }

    /// The error text of a failed call; panics if the call succeeded.
    pub fn err(result: &portico_core::ToolResult) -> String {
        assert!(result.is_error(), "{result:?}");
        result.content[0]["text"].as_str().unwrap().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_net::NetPolicy;

    fn web() -> LazyClient {
        LazyClient::ready(portico_net::SafeClient::new(NetPolicy::public_only()).unwrap())
    }

    #[test]
    fn registers_every_builtin_but_shell_unless_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("not/yet/there");
        let tools = LocalTools::default();
        let settings = BuiltinSettings::new(workspace.clone());
        assert!(!settings.shell_exec);
        assert_eq!(settings.shell_timeout, Duration::from_secs(30));
        assert_eq!(settings.web_fetch_max_bytes, 1024 * 1024);
        assert_eq!(settings.max_file_bytes, 1024 * 1024);

        register(&tools, &settings, Store::open_in_memory().unwrap(), web()).unwrap();
        assert!(workspace.is_dir(), "the workspace is created");
        let mut names: Vec<String> = tools.all().iter().map(|t| t.name().to_string()).collect();
        names.sort();
        let mut expected: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|n| *n != "shell_exec")
            .collect();
        expected.sort();
        assert_eq!(names, expected);
        assert!(tools.get("shell_exec").is_none());

        assert!(tools.get("file_write").unwrap().is_sensitive());
        assert!(!tools.get("file_read").unwrap().is_sensitive());
        assert_eq!(
            tools.get("web_fetch").unwrap().trust(),
            portico_pipeline::Trust::Untrusted
        );
        assert_eq!(
            tools.get("file_read").unwrap().trust(),
            portico_pipeline::Trust::Trusted
        );

        let enabled = LocalTools::default();
        let settings = BuiltinSettings {
            shell_exec: true,
            ..settings
        };
        register(&enabled, &settings, Store::open_in_memory().unwrap(), web()).unwrap();
        assert_eq!(enabled.all().len(), NAMES.len());
        assert!(enabled.get("shell_exec").unwrap().is_sensitive());
    }

    #[test]
    fn every_schema_field_is_described() {
        let dir = tempfile::tempdir().unwrap();
        let settings = BuiltinSettings {
            shell_exec: true,
            ..BuiltinSettings::new(dir.path().to_path_buf())
        };
        let tools = builtin_tools(&settings, Store::open_in_memory().unwrap(), web()).unwrap();
        for tool in &tools {
            let definition = tool.definition();
            assert!(
                definition["description"].as_str().unwrap().len() > 20,
                "{}",
                tool.name()
            );
            for schema in ["inputSchema", "outputSchema"] {
                assert_eq!(
                    definition[schema]["type"],
                    "object",
                    "{} {schema}",
                    tool.name()
                );
                assert_described(&definition[schema], &format!("{} {schema}", tool.name()));
            }
        }
    }

    /// Every property of every object schema (including `$defs`) carries a description.
    fn assert_described(schema: &serde_json::Value, at: &str) {
        if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
            for (name, property) in properties {
                assert!(
                    property
                        .get("description")
                        .and_then(|d| d.as_str())
                        .is_some(),
                    "{at}: property `{name}` has no description: {property}"
                );
            }
        }
        if let Some(defs) = schema.get("$defs").and_then(|d| d.as_object()) {
            for (name, def) in defs {
                assert_described(def, &format!("{at} $defs/{name}"));
            }
        }
    }

    #[test]
    fn a_workspace_that_is_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let error = register(
            &LocalTools::default(),
            &BuiltinSettings::new(file.clone()),
            Store::open_in_memory().unwrap(),
            web(),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(&file.display().to_string()), "{error}");
    }
}
