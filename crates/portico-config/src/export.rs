//! `portico export`: Claude Desktop, Cursor or VS Code pointed at `portico mcp`, in that client's
//! own config file.
//!
//! [`export`] takes the file's text and returns the text to write: the `portico` entry added (or
//! replaced where it stands, so there is never a second one), the entries Portico now serves removed
//! (else each of those servers runs twice: once from the client, once through Portico), and the rest
//! as it was: other keys and their order, comments, trailing commas, indentation, line endings.
//!
//! An entry is served by Portico when an enabled `[[mcp_servers]]` entry starts it the same way:
//! the same command, args and cwd, or the same URL, read through [`import`](crate::import)'s
//! translation, so the entries `portico import` brought in match. Env and headers are not compared:
//! import turned their secrets into `${VAR}`s, and the user may have changed them since.
//!
//! The edit is made on `jsonc-parser`'s concrete syntax tree, which keeps what a JSON value loses
//! (comments, layout). Pure: the binary reads the file, backs it up and writes it.

use std::path::PathBuf;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{
    CstInputValue, CstLeafNode, CstNode, CstObject, CstObjectProp, CstRootNode,
};
use serde_json::{Value, json};

use crate::import::{
    Client, ImportError, ImportedTransport, Places, SourceFile, json_type, parse_json, read_servers,
};
use crate::{Config, Transport};

/// The name of Portico's entry in a client's servers.
pub const ENTRY: &str = "portico";

/// How a client starts Portico: this executable, `mcp`, and the config it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
}

impl Client {
    /// The key its servers are under in its own file.
    pub fn servers_key(self) -> &'static str {
        match self {
            Client::ClaudeDesktop | Client::Cursor => "mcpServers",
            Client::VsCode => "servers",
        }
    }
}

/// Portico's entry in `client`'s form (VS Code's names the transport).
pub fn entry(client: Client, launch: &Launch) -> Value {
    match client {
        Client::ClaudeDesktop | Client::Cursor => {
            json!({"command": launch.command, "args": launch.args})
        }
        Client::VsCode => json!({"type": "stdio", "command": launch.command, "args": launch.args}),
    }
}

/// The whole file a client needs to start Portico, and nothing else.
pub fn snippet(client: Client, launch: &Launch) -> Value {
    json!({ client.servers_key(): { ENTRY: entry(client, launch) } })
}

/// The file `export` edits unless told another: the user's own, which every project sees. A
/// project's `.cursor/mcp.json` or `.vscode/mcp.json` is shared with whoever clones it, and an
/// absolute path to this user's binary does not belong there.
pub fn user_file(places: &Places, client: Client) -> Option<PathBuf> {
    match client {
        Client::ClaudeDesktop => places
            .config_dir
            .as_ref()
            .map(|dir| dir.join("Claude/claude_desktop_config.json")),
        Client::Cursor => places
            .home
            .as_ref()
            .map(|home| home.join(".cursor/mcp.json")),
        Client::VsCode => places
            .config_dir
            .as_ref()
            .map(|dir| dir.join("Code/User/mcp.json")),
    }
}

/// A client's entry that Portico serves now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Its name in the client's file.
    pub entry: String,
    /// The `[[mcp_servers]]` entry that serves it.
    pub server: String,
}

/// What happened to the `portico` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryChange {
    Added,
    /// There was one that ran Portico differently (another path, another `--config`).
    Replaced,
    Unchanged,
}

/// The client's file after the export.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The whole file to write; the text given when nothing changes.
    pub text: String,
    pub removed: Vec<Served>,
    pub entry: EntryChange,
}

/// Why a client's file cannot be edited; nothing is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExportError {
    /// Not JSON (with line and column), or its servers are not an object.
    #[error(transparent)]
    Unreadable(#[from] ImportError),
    #[error("{origin} holds {found}, not a JSON object")]
    NotAnObject { origin: String, found: &'static str },
}

/// Where the servers are in a parsed file.
struct Place<'a> {
    /// `mcpServers`, `servers`, or `mcp` then `servers` (VS Code's settings.json).
    path: &'static [&'static str],
    /// `None`: not there yet.
    servers: Option<&'a serde_json::Map<String, Value>>,
    inputs: Option<&'a Value>,
}

fn place<'a>(client: Client, origin: &str, root: &'a Value) -> Result<Place<'a>, ExportError> {
    if !root.is_object() {
        return Err(ExportError::NotAnObject {
            origin: origin.to_string(),
            found: json_type(root),
        });
    }
    let (path, key, found, inputs): (&'static [&'static str], _, _, _) = match client {
        Client::ClaudeDesktop | Client::Cursor => {
            (&["mcpServers"], "mcpServers", root.get("mcpServers"), None)
        }
        Client::VsCode => match (root.get("servers"), root.get("mcp")) {
            (None, Some(mcp)) if mcp.get("servers").is_some() => (
                &["mcp", "servers"],
                "mcp.servers",
                mcp.get("servers"),
                mcp.get("inputs"),
            ),
            (servers, _) => (&["servers"], "servers", servers, root.get("inputs")),
        },
    };
    let servers = match found {
        None => None,
        Some(Value::Object(servers)) => Some(servers),
        Some(other) => {
            return Err(ImportError::NotAnObject {
                origin: origin.to_string(),
                key,
                found: json_type(other),
            }
            .into());
        }
    };
    Ok(Place {
        path,
        servers,
        inputs,
    })
}

/// The entries of a client's file that Portico serves now (never its own entry).
pub fn served(
    client: Client,
    file: &SourceFile<'_>,
    config: &Config,
) -> Result<Vec<Served>, ExportError> {
    if file.text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let root = parse_json(file.origin, file.text)?;
    let place = place(client, file.origin, &root)?;
    Ok(served_in(file, &place, config))
}

fn served_in(file: &SourceFile<'_>, place: &Place<'_>, config: &Config) -> Vec<Served> {
    let Some(servers) = place.servers else {
        return Vec::new();
    };
    read_servers(file, servers, place.inputs)
        .servers
        .iter()
        .filter(|entry| entry.name != ENTRY)
        .filter_map(|entry| {
            config
                .mcp_servers
                .iter()
                .find(|server| server.enabled && starts_alike(&entry.transport, &server.transport))
                .map(|server| Served {
                    entry: entry.name.clone(),
                    server: server.name.clone(),
                })
        })
        .collect()
}

/// The same process or the same endpoint.
fn starts_alike(entry: &ImportedTransport, server: &Transport) -> bool {
    match (entry, server) {
        (
            ImportedTransport::Stdio { command, args, cwd },
            Transport::Stdio {
                command: c,
                args: a,
                cwd: w,
            },
        ) => command == c && args == a && cwd == w,
        (
            ImportedTransport::Remote { url, .. },
            Transport::Sse { url: u, .. } | Transport::Http { url: u, .. },
        ) => url == u,
        _ => false,
    }
}

/// `file` (`None`, or nothing but whitespace: a new file) with Portico's entry in and the entries
/// Portico serves out.
pub fn export(
    client: Client,
    file: Option<&SourceFile<'_>>,
    config: &Config,
    launch: &Launch,
) -> Result<Exported, ExportError> {
    let wanted = entry(client, launch);
    let Some(file) = file.filter(|f| !f.text.trim().is_empty()) else {
        let text =
            serde_json::to_string_pretty(&snippet(client, launch)).unwrap_or_default() + "\n";
        return Ok(Exported {
            text,
            removed: Vec::new(),
            entry: EntryChange::Added,
        });
    };
    let root_value = parse_json(file.origin, file.text)?;
    let place = place(client, file.origin, &root_value)?;
    let removed = served_in(file, &place, config);
    let existing = place.servers.and_then(|servers| servers.get(ENTRY));
    let change = match existing {
        Some(value) if *value == wanted => EntryChange::Unchanged,
        Some(_) => EntryChange::Replaced,
        None => EntryChange::Added,
    };
    if removed.is_empty() && change == EntryChange::Unchanged {
        return Ok(Exported {
            text: file.text.to_string(),
            removed,
            entry: change,
        });
    }

    let tree = CstRootNode::parse(file.text, &ParseOptions::default()).map_err(|e| {
        ImportError::NotJson {
            origin: file.origin.to_string(),
            line: e.line_display(),
            column: e.column_display(),
            message: e.kind().to_string(),
        }
    })?;
    let root = tree.object_value_or_set();
    multiline(&root);
    let servers = servers_object(&root, place.path);
    multiline(&servers);
    for served in &removed {
        let prop = servers.properties().into_iter().find(|prop| {
            prop.decoded_name()
                .is_some_and(|n| n.trim() == served.entry)
        });
        if let Some(prop) = prop {
            remove_with_its_comments(prop);
        }
    }
    match (change, servers.get(ENTRY)) {
        (EntryChange::Unchanged, _) => {}
        (_, Some(prop)) => prop.set_value(cst_value(&wanted)),
        (_, None) => {
            servers.append(ENTRY, cst_value(&wanted));
        }
    }
    Ok(Exported {
        text: tree.to_string(),
        removed,
        entry: change,
    })
}

/// The servers object at `path`, made when it is not there.
fn servers_object(root: &CstObject, path: &[&str]) -> CstObject {
    let mut object = root.clone();
    for key in path {
        // `place` checked that what is there is an object.
        object = object.object_value_or_set(key);
    }
    object
}

/// An object written on one line gets a line per property before one is added, as the rest of the
/// file would be indented, rather than a multi-line value inside a one-line object.
fn multiline(object: &CstObject) {
    if !object.to_string().contains('\n') {
        object.ensure_multiline();
    }
}

/// Removes a property with the comment lines right above it (no blank line between), which are
/// about it; the library removes its comma and a comment after it on the same line.
fn remove_with_its_comments(prop: CstObjectProp) {
    let before: Vec<CstNode> = prop.previous_siblings().collect();
    let is_whitespace =
        |node: Option<&CstNode>| matches!(node, Some(CstNode::Leaf(CstLeafNode::Whitespace(_))));
    let mut at = 0;
    while is_whitespace(before.get(at)) {
        at += 1;
    }
    let mut doomed = Vec::new();
    // Each turn: the newline ending the line above, then that line back to its start.
    while let Some(CstNode::Leaf(CstLeafNode::Newline(_))) = before.get(at) {
        let mut start = at + 1;
        let mut comment = false;
        let whole_line = loop {
            match before.get(start) {
                Some(CstNode::Leaf(CstLeafNode::Whitespace(_))) => start += 1,
                Some(CstNode::Leaf(CstLeafNode::Comment(_))) => {
                    comment = true;
                    start += 1;
                }
                Some(CstNode::Leaf(CstLeafNode::Newline(_))) => break true,
                // A comment after `{` or after a value on its line belongs there.
                _ => break false,
            }
        };
        if !(whole_line && comment) {
            break;
        }
        // The line and the newline before it (not the one after: that one is the removed
        // property's line's, which the library removes with the property). The library removes
        // the same from a line comment itself; a node removed twice is left alone the second time.
        doomed.extend_from_slice(&before[at + 1..=start]);
        at = start;
    }
    for node in doomed {
        node.remove();
    }
    prop.remove();
}

fn cst_value(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(cst_value).collect()),
        Value::Object(map) => CstInputValue::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), cst_value(value)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests;
