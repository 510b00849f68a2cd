//! `portico import`: the MCP servers another client is configured with, as Portico TOML.
//!
//! Three shapes are read. Claude Desktop's `claude_desktop_config.json` and Cursor's `mcp.json` (and
//! Claude Code's `.mcp.json`) have `mcpServers`: name → `command`/`args`/`env`, or `url`/`headers`.
//! VS Code's `mcp.json` has `servers` with a `type` (stdio, http, sse) and `inputs` that values refer
//! to as `${input:ID}`; its `settings.json` has the same under `mcp`. Comments and trailing commas are
//! allowed, as VS Code allows them.
//!
//! What comes out never holds a secret the source file held: a literal env or header value under a
//! secret-looking name (`*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`, `Authorization`, ...) becomes a
//! `${VAR}` reference, and so does every `${input:ID}`, each with an [`Export`] saying which variable
//! to set. Entries are appended to the config as text ([`Import::merge`]), so the file's comments and
//! `${VAR}`s are never rewritten; a name clash is refused or renamed, and the result must pass
//! [`check`](crate::check) before anything is written.
//!
//! Pure, apart from [`Places::current`], which asks where the home, config and working directories
//! are: the binary reads and writes the files.

mod jsonc;
mod toml_text;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use portico_core::naming::normalize_segment;
use serde::Deserialize;
use serde_json::Value;

use crate::{Config, McpServerConfig, Problem};

/// An MCP client whose config Portico can import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    Cursor,
    VsCode,
}

impl Client {
    pub const ALL: [Client; 3] = [Client::ClaudeDesktop, Client::Cursor, Client::VsCode];

    pub fn label(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::Cursor => "Cursor",
            Client::VsCode => "VS Code",
        }
    }
}

/// The directories the clients keep their configs under.
#[derive(Debug, Clone, Default)]
pub struct Places {
    pub home: Option<PathBuf>,
    /// `~/.config` (or `$XDG_CONFIG_HOME`) on Linux, `~/Library/Application Support` on macOS.
    pub config_dir: Option<PathBuf>,
    /// Where a project's `.vscode/mcp.json` and `.cursor/mcp.json` are looked for.
    pub cwd: Option<PathBuf>,
}

impl Places {
    /// This process's home, config and working directories.
    pub fn current() -> Places {
        Places {
            home: dirs::home_dir(),
            config_dir: dirs::config_dir(),
            cwd: std::env::current_dir().ok(),
        }
    }

    /// Where `client` keeps its MCP servers, project files first.
    pub fn of(&self, client: Client) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        match client {
            Client::ClaudeDesktop => {
                if let Some(dir) = &self.config_dir {
                    paths.push(dir.join("Claude/claude_desktop_config.json"));
                }
            }
            Client::Cursor => {
                if let Some(cwd) = &self.cwd {
                    paths.push(cwd.join(".cursor/mcp.json"));
                }
                if let Some(home) = &self.home {
                    paths.push(home.join(".cursor/mcp.json"));
                }
            }
            Client::VsCode => {
                if let Some(cwd) = &self.cwd {
                    paths.push(cwd.join(".vscode/mcp.json"));
                }
                if let Some(dir) = &self.config_dir {
                    paths.push(dir.join("Code/User/mcp.json"));
                    paths.push(dir.join("Code/User/settings.json"));
                }
            }
        }
        paths
    }
}

/// The project a `.vscode/mcp.json` or `.cursor/mcp.json` belongs to: what `${workspaceFolder}` means.
pub fn workspace_of(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let name = dir.file_name()?;
    (name == ".vscode" || name == ".cursor").then(|| dir.parent().map(Path::to_path_buf))?
}

/// One file to import.
#[derive(Debug, Clone, Copy)]
pub struct SourceFile<'a> {
    /// How messages and the written comments name the file (its path).
    pub origin: &'a str,
    pub text: &'a str,
    /// What `${workspaceFolder}` stands for, when known.
    pub workspace: Option<&'a Path>,
    /// What `${userHome}` stands for.
    pub home: Option<&'a Path>,
}

/// Why a file could not be imported at all (a single bad entry is a warning instead).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("{origin}:{line}:{column}: not valid JSON: {message}")]
    NotJson {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{origin} has no MCP servers: expected an `mcpServers` object (Claude Desktop, Cursor) or `servers` (VS Code's mcp.json; `mcp.servers` in its settings.json)"
    )]
    NoServers { origin: String },
    #[error("{origin}: `{key}` is {found}, not an object of servers by name")]
    NotAnObject {
        origin: String,
        key: &'static str,
        found: &'static str,
    },
}

/// The servers read from one or more files, with what the user has to do about them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Import {
    pub servers: Vec<ImportedServer>,
    /// Variables to set before starting Portico, one per variable.
    pub exports: Vec<Export>,
    /// Entries skipped and settings that could not be carried over, each naming its server.
    pub warnings: Vec<String>,
}

/// One server as it will be written.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedServer {
    pub name: String,
    /// The file it came from.
    pub origin: String,
    pub enabled: bool,
    /// Literal values and `${VAR}` references, in the file's order.
    pub env: Vec<(String, String)>,
    pub transport: ImportedTransport,
    /// Set when the URL is on this machine or a private network, which Portico otherwise refuses.
    pub allow_private_network: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImportedTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<String>,
    },
    Remote {
        /// `http` (Streamable HTTP) or `sse` (legacy HTTP+SSE, or no type given: Portico's `sse`
        /// tries Streamable HTTP first and falls back).
        kind: &'static str,
        /// No type was given, so the transport is detected when connecting.
        detected: bool,
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// A variable the imported config refers to, which must be set in Portico's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub variable: String,
    /// Why: which server and setting, e.g. "server `github`: env GITHUB_TOKEN had a literal value".
    pub reason: String,
    /// The literal value the source file held, when it held one: what `portico import` offers to
    /// move into the secret store. Never shown.
    pub literal: Option<Literal>,
}

/// A secret value read from another client's config. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Literal(String);

impl Literal {
    /// The value itself, for the secret store.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Literal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Literal(..)")
    }
}

/// What to do when an imported server's name is taken by a different server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnClash {
    /// Write nothing and say which names clash.
    Refuse,
    /// Import it as `{name}-2` (or the next free number).
    Rename,
}

/// The config text after an import, and what happened to each server.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The whole file to write.
    pub text: String,
    /// Only what was added (for `--dry-run` of a merge, or the whole file when it is new).
    pub added_text: String,
    /// Names written, after any renaming.
    pub added: Vec<String>,
    /// Servers left out because the config already has the same server: (name, the config's name).
    pub unchanged: Vec<(String, String)>,
    /// (imported name, name written).
    pub renamed: Vec<(String, String)>,
}

/// Why an import was not merged; nothing is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("{target} has problems of its own; fix them first (`portico config check`), nothing was written:\n{}", render_problems(.problems))]
    ExistingInvalid {
        target: String,
        problems: Vec<Problem>,
    },
    #[error(
        "{}; nothing was written. Rename or remove them in the source or the config, or pass --rename to import them under new names",
        .clashes.join("; ")
    )]
    Clashes { clashes: Vec<String> },
    #[error("the imported config would not pass `portico config check`, so nothing was written (please report this):\n{}", render_problems(.problems))]
    Invalid { problems: Vec<Problem> },
}

fn render_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An `mcpServers` / `servers` entry, in any of the three shapes (their keys are the same).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: serde_json::Map<String, Value>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: serde_json::Map<String, Value>,
    #[serde(default)]
    disabled: bool,
    env_file: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

/// A VS Code input: a value the editor asks for, referred to as `${input:ID}`.
#[derive(Debug, Deserialize)]
struct Input {
    id: String,
    #[serde(default)]
    description: Option<String>,
}

/// Reads one file.
pub fn translate(file: &SourceFile<'_>) -> Result<Import, ImportError> {
    let root = parse_json(file.origin, file.text)?;
    let (key, servers, inputs) = if let Some(servers) = root.get("mcpServers") {
        ("mcpServers", servers, None)
    } else if let Some(servers) = root.get("servers") {
        ("servers", servers, root.get("inputs"))
    } else if let Some(servers) = root.get("mcp").and_then(|mcp| mcp.get("servers")) {
        (
            "mcp.servers",
            servers,
            root.get("mcp").and_then(|m| m.get("inputs")),
        )
    } else {
        return Err(ImportError::NoServers {
            origin: file.origin.to_string(),
        });
    };
    let Value::Object(servers) = servers else {
        return Err(ImportError::NotAnObject {
            origin: file.origin.to_string(),
            key,
            found: json_type(servers),
        });
    };
    Ok(read_servers(file, servers, inputs))
}

/// A client's file as JSON: comments and trailing commas allowed, an error pointing at the line and
/// column in the file as the user sees it.
pub(crate) fn parse_json(origin: &str, text: &str) -> Result<Value, ImportError> {
    let strict = jsonc::to_strict_json(text);
    serde_json::from_str(&strict).map_err(|e| {
        let message = e.to_string();
        // serde_json ends with its own " at line L column C", which the error shows up front.
        let message = match message.rsplit_once(" at line ") {
            Some((message, _)) => message.to_string(),
            None => message,
        };
        ImportError::NotJson {
            origin: origin.to_string(),
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

/// The servers of one `mcpServers` / `servers` object; `inputs` is VS Code's list of them.
pub(crate) fn read_servers(
    file: &SourceFile<'_>,
    servers: &serde_json::Map<String, Value>,
    inputs: Option<&Value>,
) -> Import {
    let mut reader = Reader {
        file,
        inputs: HashMap::new(),
        secrets: HashMap::new(),
        import: Import::default(),
    };
    if let Some(Value::Array(inputs)) = inputs {
        for input in inputs {
            if let Ok(input) = serde_json::from_value::<Input>(input.clone()) {
                reader.inputs.insert(input.id, input.description);
            }
        }
    }
    for (name, entry) in servers {
        reader.entry(name, entry);
    }
    reader.import
}

struct Reader<'a> {
    file: &'a SourceFile<'a>,
    /// VS Code input ids and their descriptions.
    inputs: HashMap<String, Option<String>>,
    /// Variable → the literal it stands for, so two different secrets never share a variable.
    secrets: HashMap<String, String>,
    import: Import,
}

/// `name` in the server-name alphabet ([`crate::edit::server_name_problem`]): every run of other
/// characters becomes one `-`, the name starts with a letter or digit and is cut to
/// [`crate::edit::MAX_SERVER_NAME`]. Empty when nothing of it is left.
fn safe_server_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut out: String = out.chars().take(crate::edit::MAX_SERVER_NAME).collect();
    while out.ends_with('-') {
        out.pop();
    }
    out
}

impl Reader<'_> {
    fn entry(&mut self, raw_name: &str, value: &Value) {
        let trimmed = raw_name.trim();
        if trimmed.is_empty() {
            self.warn(format!(
                "a server with an empty name in {} was skipped",
                self.file.origin
            ));
            return;
        }
        // Names go into tool names, log lines and terminals: only the alphabet `portico add`
        // writes. The source's name is shown escaped, never raw.
        let name = safe_server_name(trimmed);
        let shown = portico_core::text::log_safe(trimmed);
        if name.is_empty() {
            self.warn(format!(
                "server `{shown}` was skipped: its name has none of the characters server names are made of (ASCII letters, digits, `-`, `_`, `.`); rename it in {}",
                self.file.origin
            ));
            return;
        }
        if name != trimmed {
            self.warn(format!(
                "server `{shown}` was imported as `{name}`: server names are ASCII letters, digits, `-`, `_` and `.`"
            ));
        }
        let entry: Entry = match serde_json::from_value(value.clone()) {
            Ok(entry) => entry,
            Err(e) => {
                self.warn(format!("server `{name}` was skipped: {e}"));
                return;
            }
        };
        let ignored: Vec<String> = entry.other.keys().map(|k| format!("`{k}`")).collect();
        if !ignored.is_empty() {
            self.warn(format!(
                "server `{name}`: {} not imported (Portico has no such setting)",
                ignored.join(", ")
            ));
        }
        if let Some(env_file) = &entry.env_file {
            self.warn(format!(
                "server `{name}`: envFile `{env_file}` is not read; add its variables to the entry's env"
            ));
        }
        let Some(transport) = self.transport(&name, &entry) else {
            return;
        };
        let mut env = Vec::new();
        for (key, value) in &entry.env {
            let Some(value) = self.string_value(&name, "env", key, value) else {
                continue;
            };
            let value = self.references(&name, &format!("env {key}"), &value, true);
            let value = self.unsecret(&name, &format!("env {key}"), key, key, &value);
            env.push((key.clone(), value));
        }
        let allow_private_network = match &transport {
            ImportedTransport::Remote { url, .. } => is_private_url(url),
            ImportedTransport::Stdio { .. } => false,
        };
        self.import.servers.push(ImportedServer {
            name,
            origin: self.file.origin.to_string(),
            enabled: !entry.disabled,
            env,
            transport,
            allow_private_network,
        });
    }

    fn transport(&mut self, name: &str, entry: &Entry) -> Option<ImportedTransport> {
        let kind = entry.kind.as_deref().map(str::to_ascii_lowercase);
        let remote = match kind.as_deref() {
            None => match (&entry.command, &entry.url) {
                (Some(_), None) => None,
                (None, Some(_)) => Some(("sse", true)),
                (Some(_), Some(_)) => {
                    self.warn(format!(
                        "server `{name}` was skipped: it has both `command` and `url`; keep one"
                    ));
                    return None;
                }
                (None, None) => {
                    self.warn(format!(
                        "server `{name}` was skipped: it has neither `command` nor `url`"
                    ));
                    return None;
                }
            },
            Some("stdio") => None,
            Some("http" | "streamablehttp" | "streamable-http" | "streamable_http") => {
                Some(("http", false))
            }
            Some("sse") => Some(("sse", false)),
            Some(other) => {
                self.warn(format!(
                    "server `{name}` was skipped: type `{other}` is not one Portico knows (stdio, http, sse)"
                ));
                return None;
            }
        };
        match remote {
            None => {
                let Some(command) = &entry.command else {
                    self.warn(format!(
                        "server `{name}` was skipped: a stdio server needs a `command`"
                    ));
                    return None;
                };
                let command = self.references(name, "command", command, false);
                let args = entry
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| self.references(name, &format!("args[{i}]"), arg, false))
                    .collect();
                let cwd = entry
                    .cwd
                    .as_ref()
                    .map(|cwd| self.references(name, "cwd", cwd, false));
                Some(ImportedTransport::Stdio { command, args, cwd })
            }
            Some((kind, detected)) => {
                let Some(url) = &entry.url else {
                    self.warn(format!(
                        "server `{name}` was skipped: a {kind} server needs a `url`"
                    ));
                    return None;
                };
                let url = self.references(name, "url", url, false);
                let mut headers = Vec::new();
                for (header, value) in &entry.headers {
                    let Some(value) = self.string_value(name, "header", header, value) else {
                        continue;
                    };
                    let what = format!("header {header}");
                    let value = self.references(name, &what, &value, true);
                    let variable = if header.eq_ignore_ascii_case("authorization") {
                        format!("{name}_TOKEN")
                    } else {
                        format!("{name}_{header}")
                    };
                    let value = self.unsecret(name, &what, header, &variable, &value);
                    headers.push((header.clone(), value));
                }
                Some(ImportedTransport::Remote {
                    kind,
                    detected,
                    url,
                    headers,
                })
            }
        }
    }

    /// An env or header value as a string (numbers and booleans as their JSON text).
    fn string_value(
        &mut self,
        server: &str,
        what: &str,
        key: &str,
        value: &Value,
    ) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(_) | Value::Bool(_) => Some(value.to_string()),
            other => {
                self.warn(format!(
                    "server `{server}`: {what} `{key}` was skipped: its value is {}, not a string",
                    json_type(other)
                ));
                None
            }
        }
    }

    /// Rewrites the `${...}` forms of the IDEs into Portico's `${VAR}` (or the value, where it is
    /// known now). `expanded`: whether Portico expands `${VAR}` in this setting (env values and
    /// headers); elsewhere a reference left over is a warning.
    fn references(&mut self, server: &str, what: &str, value: &str, expanded: bool) -> String {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        let mut left_over = Vec::new();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let inner = &after[..end];
            rest = &after[end + 1..];
            // A variable is worth exporting only where Portico expands it; elsewhere it is warned
            // about below.
            if let Some(variable) = inner.strip_prefix("env:") {
                if expanded {
                    self.export(variable, format!("server `{server}`: {what} refers to it"));
                }
                left_over.push(variable.to_string());
                out.push_str(&format!("${{{variable}}}"));
            } else if let Some(id) = inner.strip_prefix("input:") {
                let variable = env_var_name(id);
                let described = match self.inputs.get(id) {
                    Some(Some(description)) => format!(" ({description})"),
                    _ => String::new(),
                };
                if expanded {
                    self.export(
                        &variable,
                        format!("server `{server}`: {what} was VS Code's input `{id}`{described}"),
                    );
                }
                left_over.push(variable.clone());
                out.push_str(&format!("${{{variable}}}"));
            } else if inner == "workspaceFolder" && self.file.workspace.is_some() {
                out.push_str(
                    &self
                        .file
                        .workspace
                        .unwrap_or(Path::new(""))
                        .display()
                        .to_string(),
                );
            } else if inner == "userHome" && self.file.home.is_some() {
                out.push_str(
                    &self
                        .file
                        .home
                        .unwrap_or(Path::new(""))
                        .display()
                        .to_string(),
                );
            } else if inner == "pathSeparator" || inner == "/" {
                out.push('/');
            } else if is_env_name(inner) && inner != "workspaceFolder" && inner != "userHome" {
                if expanded {
                    self.export(inner, format!("server `{server}`: {what} refers to it"));
                }
                left_over.push(inner.to_string());
                out.push_str(&format!("${{{inner}}}"));
            } else {
                self.warn(format!(
                    "server `{server}`: {what} has `${{{inner}}}`, which Portico cannot fill in; edit it in the config"
                ));
                out.push_str(&format!("${{{inner}}}"));
            }
        }
        out.push_str(rest);
        if !expanded && !left_over.is_empty() {
            self.warn(format!(
                "server `{server}`: {what} refers to ${{{}}}, but Portico expands ${{VAR}} only in env values and headers; write the value there instead",
                left_over.join("}, ${")
            ));
        }
        out
    }

    /// A literal value under a secret-looking name becomes `${variable}` (a header's auth scheme is
    /// kept: `Bearer ${VAR}`). Values that already refer to a variable are left as they are.
    fn unsecret(
        &mut self,
        server: &str,
        what: &str,
        key: &str,
        variable: &str,
        value: &str,
    ) -> String {
        if !(is_secret_name(key) || looks_like_secret_value(value))
            || value.is_empty()
            || value.contains("${")
        {
            return value.to_string();
        }
        let (scheme, secret) = match value.split_once(' ') {
            Some((scheme, secret))
                if ["bearer", "basic", "token"].contains(&scheme.to_ascii_lowercase().as_str())
                    && !secret.is_empty() =>
            {
                (format!("{scheme} "), secret)
            }
            _ => (String::new(), value),
        };
        let mut variable = env_var_name(variable);
        if self
            .secrets
            .get(&variable)
            .is_some_and(|known| known != secret)
        {
            variable = env_var_name(&format!("{server}_{variable}"));
        }
        self.secrets.insert(variable.clone(), secret.to_string());
        self.export(
            &variable,
            format!(
                "server `{server}`: {what} had a literal value (still in {}; not copied)",
                self.file.origin
            ),
        );
        if let Some(export) = self
            .import
            .exports
            .iter_mut()
            .find(|e| e.variable == variable && e.literal.is_none())
        {
            export.literal = Some(Literal(secret.to_string()));
        }
        format!("{scheme}${{{variable}}}")
    }

    fn export(&mut self, variable: &str, reason: String) {
        if !self.import.exports.iter().any(|e| e.variable == variable) {
            self.import.exports.push(Export {
                variable: variable.to_string(),
                reason,
                literal: None,
            });
        }
    }

    fn warn(&mut self, warning: String) {
        self.import.warnings.push(warning);
    }
}

impl Import {
    /// Adds another file's servers, exports and warnings after these.
    pub fn extend(&mut self, other: Import) {
        self.servers.extend(other.servers);
        for export in other.exports {
            if !self.exports.iter().any(|e| e.variable == export.variable) {
                self.exports.push(export);
            }
        }
        self.warnings.extend(other.warnings);
    }

    /// Appends the servers to `existing` (a config's text; `None`: a new file, which starts as
    /// [`STARTER_CONFIG`](crate::STARTER_CONFIG)). `target` names the config in messages. A server
    /// the config already has, the same in every setting, is left out; one whose name is taken by a
    /// different server is refused or renamed, as `on_clash` says.
    pub fn merge(
        &self,
        target: &str,
        existing: Option<&str>,
        on_clash: OnClash,
    ) -> Result<Merged, MergeError> {
        let base = existing.unwrap_or(crate::STARTER_CONFIG);
        let config = crate::parse(target, base).map_err(|e| match e {
            crate::ConfigError::Invalid { problems, .. } => MergeError::ExistingInvalid {
                target: target.to_string(),
                problems,
            },
            other => MergeError::ExistingInvalid {
                target: target.to_string(),
                problems: vec![Problem {
                    line: 1,
                    column: 1,
                    message: other.to_string(),
                    hint: None,
                }],
            },
        })?;
        // Normalised name → (name, the server, whether the config had it).
        let mut taken: HashMap<String, (String, McpServerConfig, bool)> = config
            .mcp_servers
            .iter()
            .map(|s| {
                (
                    normalize_segment(&s.name),
                    (s.name.clone(), s.clone(), true),
                )
            })
            .collect();
        let mut merged = Merged {
            text: String::new(),
            added_text: String::new(),
            added: Vec::new(),
            unchanged: Vec::new(),
            renamed: Vec::new(),
        };
        let mut clashes = Vec::new();
        let mut blocks = Vec::new();
        for server in &self.servers {
            let mut name = server.name.clone();
            if let Some((other, _, in_config)) = taken.get(&normalize_segment(&name)) {
                // The same server under this name, or under a name an earlier `--rename` gave it.
                let parsed = parsed_server(&render(server, &name, Some(&imported_from(server))));
                let same = taken.values().find(|(taken_name, existing, _)| {
                    is_name_or_renamed(taken_name, &server.name)
                        && parsed.as_ref().is_some_and(|p| same_server(p, existing))
                });
                if let Some((taken_name, _, _)) = same {
                    merged.unchanged.push((name, taken_name.clone()));
                    continue;
                }
                let place = if *in_config {
                    format!("{target} already has a different server `{other}`")
                } else {
                    format!("another imported server is named `{other}`")
                };
                match on_clash {
                    OnClash::Refuse => {
                        clashes.push(format!("server `{name}` from {}: {place}", server.origin));
                        continue;
                    }
                    OnClash::Rename => {
                        name = (2..)
                            .map(|n| format!("{}-{n}", server.name))
                            .find(|candidate| !taken.contains_key(&normalize_segment(candidate)))
                            .unwrap_or_default();
                        merged.renamed.push((server.name.clone(), name.clone()));
                    }
                }
            }
            let block = render(server, &name, Some(&imported_from(server)));
            if let Some(parsed) = parsed_server(&block) {
                taken.insert(normalize_segment(&name), (name.clone(), parsed, false));
            }
            merged.added.push(name);
            blocks.push(block);
        }
        if !clashes.is_empty() {
            return Err(MergeError::Clashes { clashes });
        }
        let mut text = base.to_string();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let appended = blocks.join("\n");
        if !appended.is_empty() {
            text.push('\n');
            text.push_str(&appended);
        }
        let problems = crate::check(&text);
        if !problems.is_empty() {
            return Err(MergeError::Invalid { problems });
        }
        merged.added_text = if existing.is_some() {
            appended
        } else {
            text.clone()
        };
        merged.text = text;
        Ok(merged)
    }
}

fn imported_from(server: &ImportedServer) -> String {
    format!("Imported from {}", server.origin)
}

/// `name`, or `name-N` as [`OnClash::Rename`] writes it.
fn is_name_or_renamed(candidate: &str, name: &str) -> bool {
    candidate == name
        || candidate
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

fn parsed_server(block: &str) -> Option<McpServerConfig> {
    toml::from_str::<Config>(block)
        .ok()
        .and_then(|c| c.mcp_servers.into_iter().next())
}

/// Equal in everything but the name.
fn same_server(a: &McpServerConfig, b: &McpServerConfig) -> bool {
    let mut a = a.clone();
    a.name.clone_from(&b.name);
    a == *b
}

/// One `[[mcp_servers]]` block, under `# {comment}` when given (import names the file the server
/// came from).
pub(crate) fn render(server: &ImportedServer, name: &str, comment: Option<&str>) -> String {
    use toml_text::{comment_text, inline_table, string, string_array};
    let mut out = match comment {
        Some(comment) => format!("# {}\n", comment_text(comment)),
        None => String::new(),
    };
    out.push_str(&format!("[[mcp_servers]]\nname = {}\n", string(name)));
    if !server.enabled {
        out.push_str("enabled = false                # disabled where it was imported from\n");
    }
    if server.allow_private_network {
        out.push_str(
            "allow_private_network = true   # its URL is on this machine or a private network\n",
        );
    }
    if !server.env.is_empty() {
        out.push_str(&format!("env = {}\n", inline_table(&server.env)));
    }
    out.push_str("[mcp_servers.transport]\n");
    match &server.transport {
        ImportedTransport::Stdio { command, args, cwd } => {
            out.push_str(&format!(
                "type = \"stdio\"\ncommand = {}\n",
                string(command)
            ));
            if !args.is_empty() {
                out.push_str(&format!("args = {}\n", string_array(args)));
            }
            if let Some(cwd) = cwd {
                out.push_str(&format!("cwd = {}\n", string(cwd)));
            }
        }
        ImportedTransport::Remote {
            kind,
            detected,
            url,
            headers,
        } => {
            out.push_str(&format!("type = {}", string(kind)));
            if *detected {
                out.push_str("   # no type was given: Streamable HTTP, else legacy HTTP+SSE");
            }
            out.push_str(&format!("\nurl = {}\n", string(url)));
            if !headers.is_empty() {
                out.push_str(&format!("headers = {}\n", inline_table(headers)));
            }
        }
    }
    out
}

/// Whether a name says its value is a credential.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
    ]
    .iter()
    .any(|word| upper.contains(word))
}

/// Whether a value is a credential by its form, whatever its name: the prefixes well-known services
/// give their tokens.
pub fn looks_like_secret_value(value: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "github_pat_",
        "glpat-",
        "sk-",
        "xoxb-",
        "xoxp-",
        "xapp-",
        "AKIA",
        "AIza",
    ];
    PREFIXES.iter().any(|prefix| value.starts_with(prefix))
}

/// `github-token` → `GITHUB_TOKEN`: upper case, `_` for anything else, never starting with a digit.
pub fn env_var_name(raw: &str) -> String {
    let name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        format!("MCP_{name}")
    } else {
        name
    }
}

fn is_env_name(name: &str) -> bool {
    crate::is_variable_name(name)
}

/// Loopback, private ranges and `localhost` names: what Portico refuses without
/// `allow_private_network`.
pub(crate) fn is_private_url(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(host)) => host == "localhost" || host.ends_with(".localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback()
                || ip.is_unique_local()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private())
        }
        None => false,
    }
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// When config text is another client's JSON rather than Portico's TOML: the message that says so
/// and what to run, instead of a screenful of TOML errors. `origin` is the file's path.
pub fn json_config_hint(origin: &str, text: &str) -> Option<String> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(&jsonc::to_strict_json(text)).ok()?;
    let kind = if value.get("mcpServers").is_some() {
        "a Claude Desktop config"
    } else if value.get("servers").is_some() || value.get("mcp").is_some() {
        "a VS Code MCP config"
    } else {
        return Some(format!(
            "{origin} is JSON, but Portico's config is TOML; `portico init` writes a starter config"
        ));
    };
    Some(format!(
        "{origin}: this looks like {kind} (JSON), not Portico's TOML; run `portico import {}` to turn its servers into a Portico config",
        shell_word(origin)
    ))
}

/// A path as one shell word, quoted only when it needs it.
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%~".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests;
