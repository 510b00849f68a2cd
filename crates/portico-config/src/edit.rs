//! Editing the `[[mcp_servers]]` entries of a config file's text in place: adding one, removing
//! one, setting one's `enabled`. What `portico add|remove|enable|disable` write.
//!
//! Every byte outside the edited entry stays as it was: a new entry is appended as text (rendered
//! as `portico import` renders its entries), and a removal or an `enabled` change goes through
//! `toml_edit`, which keeps the rest of the document's text, comments and layout; a file it would
//! not give back byte for byte is refused rather than rewritten. The comment lines directly above
//! an entry's `[[mcp_servers]]` header belong to that entry and leave with it. The result must
//! pass [`check`](crate::check), or nothing is returned to write.
//!
//! Pure: the binary reads and writes the file.

use toml_edit::{DocumentMut, Item, Value};

use crate::import::{ImportedServer, ImportedTransport};
use crate::{McpServerConfig, Problem, Transport};
use portico_core::naming::normalize_segment;

/// The longest server name `portico add` writes.
pub const MAX_SERVER_NAME: usize = 64;

/// Why an edit was not made; nothing is to be written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EditError {
    #[error("{target} has problems of its own; fix them first (`portico config check` lists them), nothing was written:\n{}", render_problems(.problems))]
    ExistingInvalid {
        target: String,
        problems: Vec<Problem>,
    },
    #[error(
        "{target} cannot be edited in place: {why}; nothing was written. Edit the file by hand"
    )]
    NotEditable { target: String, why: String },
    #[error("`{name}` cannot be a server name: {why}; e.g. `github` or `my-files`")]
    BadName { name: String, why: &'static str },
    #[error(
        "{target} already has a server `{existing}` ({what}); nothing was written. Pick another name, or `portico remove {existing}` first"
    )]
    NameTaken {
        target: String,
        existing: String,
        what: String,
    },
    #[error("{target} has no server `{name}`; {}", configured_list(.configured))]
    UnknownServer {
        target: String,
        name: String,
        configured: Vec<String>,
    },
    #[error("the edited config would not pass `portico config check`, so nothing was written:\n{}", render_problems(.problems))]
    Invalid { problems: Vec<Problem> },
}

fn render_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn configured_list(names: &[String]) -> String {
    if names.is_empty() {
        "it has none".to_string()
    } else {
        format!("it has: {}", names.join(", "))
    }
}

/// Why `name` is not a name `portico add` writes: 1 to [`MAX_SERVER_NAME`] of ASCII letters,
/// digits, `-`, `_` and `.`, starting with a letter or digit. Names go into tool names, URL paths
/// and log lines, so anything that could change a path or a line is out.
pub fn server_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > MAX_SERVER_NAME {
        return Some("it is longer than 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or a digit");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Some("only ASCII letters, digits, `-`, `_` and `.` are allowed");
    }
    None
}

/// The config text with `server` appended as a new `[[mcp_servers]]` entry. `existing` is the file's
/// text (`None`: no file yet, which starts as [`STARTER_CONFIG`](crate::STARTER_CONFIG)); `target`
/// names it in messages. A name another entry has (or one that becomes the same in tool names,
/// `my-files` and `my_files`) is refused, naming that entry.
pub fn add_server(
    target: &str,
    existing: Option<&str>,
    server: &ImportedServer,
) -> Result<String, EditError> {
    if let Some(why) = server_name_problem(&server.name) {
        return Err(EditError::BadName {
            // Shown on a terminal: escaped, so a newline or a bidi override in it shows as such.
            name: portico_core::text::log_safe(&server.name).into_owned(),
            why,
        });
    }
    let base = existing.unwrap_or(crate::STARTER_CONFIG);
    let config = parsed(target, base)?;
    let wanted = normalize_segment(&server.name);
    if let Some(taken) = config
        .mcp_servers
        .iter()
        .find(|s| normalize_segment(&s.name) == wanted)
    {
        return Err(EditError::NameTaken {
            target: target.to_string(),
            existing: taken.name.clone(),
            what: describe(taken),
        });
    }
    let mut text = base.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&crate::import::render(server, &server.name, None));
    checked(text)
}

/// What was removed: the file's text without the entry, and the entry as it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Removed {
    pub text: String,
    pub server: McpServerConfig,
}

/// The config text without the `[[mcp_servers]]` entry named `name` (and the comment lines
/// directly above its header).
pub fn remove_server(target: &str, text: &str, name: &str) -> Result<Removed, EditError> {
    let config = parsed(target, text)?;
    let (index, server) = find(target, &config, name)?;
    let mut document = editable(target, text)?;
    let entries = entries_mut(target, &mut document)?;
    entries.remove(index);
    Ok(Removed {
        text: checked(document.to_string())?,
        server: server.clone(),
    })
}

/// The config text with `enabled = {enabled}` in the entry named `name`; `None` when the entry is
/// already so (a missing `enabled` is `true`). An existing `enabled` keeps its place and comment;
/// a new one is added after the entry's other keys.
pub fn set_enabled(
    target: &str,
    text: &str,
    name: &str,
    enabled: bool,
) -> Result<Option<String>, EditError> {
    let config = parsed(target, text)?;
    let (index, server) = find(target, &config, name)?;
    if server.enabled == enabled {
        return Ok(None);
    }
    let mut document = editable(target, text)?;
    let entries = entries_mut(target, &mut document)?;
    let Some(entry) = entries.get_mut(index) else {
        return Err(not_editable(
            target,
            "its servers are not where they were read",
        ));
    };
    match entry.get_mut("enabled").and_then(Item::as_value_mut) {
        Some(value) => {
            let decor = value.decor().clone();
            *value = Value::from(enabled);
            *value.decor_mut() = decor;
        }
        None => {
            entry.insert("enabled", toml_edit::value(enabled));
        }
    }
    checked(document.to_string()).map(Some)
}

/// One line about a configured server for messages: its transport and what it runs or reaches,
/// without arguments, headers or env values (which may hold credentials).
pub fn describe(server: &McpServerConfig) -> String {
    match &server.transport {
        Transport::Stdio { command, .. } => format!("stdio, runs `{command}`"),
        Transport::Http { url, .. } | Transport::Sse { url, .. } => {
            format!(
                "{} at {}",
                server.transport.kind(),
                url_without_secrets(url)
            )
        }
    }
}

/// A URL without its user info, query and fragment.
fn url_without_secrets(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => "an invalid URL".to_string(),
    }
}

/// A stdio server entry for [`add_server`]: `command` with `args`, run without a shell; `env` as
/// (name, value) pairs.
pub fn stdio_server(
    name: &str,
    command: &str,
    args: &[String],
    env: Vec<(String, String)>,
) -> ImportedServer {
    ImportedServer {
        name: name.to_string(),
        origin: String::new(),
        enabled: true,
        env,
        transport: ImportedTransport::Stdio {
            command: command.to_string(),
            args: args.to_vec(),
            cwd: None,
        },
        allow_private_network: false,
    }
}

/// A remote server entry for [`add_server`]: `sse` (legacy HTTP+SSE, Streamable HTTP tried first)
/// when `sse`, else `http` (Streamable HTTP). A URL on this machine or a private network gets
/// `allow_private_network = true`: the user named it.
pub fn remote_server(
    name: &str,
    url: &str,
    sse: bool,
    headers: Vec<(String, String)>,
    env: Vec<(String, String)>,
) -> ImportedServer {
    ImportedServer {
        name: name.to_string(),
        origin: String::new(),
        enabled: true,
        env,
        transport: ImportedTransport::Remote {
            kind: if sse { "sse" } else { "http" },
            detected: false,
            url: url.to_string(),
            headers,
        },
        allow_private_network: crate::import::is_private_url(url),
    }
}

fn parsed(target: &str, text: &str) -> Result<crate::Config, EditError> {
    crate::parse(target, text).map_err(|e| match e {
        crate::ConfigError::Invalid { problems, .. } => EditError::ExistingInvalid {
            target: target.to_string(),
            problems,
        },
        other => EditError::NotEditable {
            target: target.to_string(),
            why: other.to_string(),
        },
    })
}

fn find<'a>(
    target: &str,
    config: &'a crate::Config,
    name: &str,
) -> Result<(usize, &'a McpServerConfig), EditError> {
    config
        .mcp_servers
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .ok_or_else(|| EditError::UnknownServer {
            target: target.to_string(),
            name: name.to_string(),
            configured: config.mcp_servers.iter().map(|s| s.name.clone()).collect(),
        })
}

fn not_editable(target: &str, why: &str) -> EditError {
    EditError::NotEditable {
        target: target.to_string(),
        why: why.to_string(),
    }
}

/// The document, when `toml_edit` gives its text back unchanged (so an edit changes only the
/// entry it touches).
fn editable(target: &str, text: &str) -> Result<DocumentMut, EditError> {
    let document: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| not_editable(target, e.message()))?;
    if document.to_string() != text {
        return Err(not_editable(
            target,
            "writing it back would change parts of it other than the entry",
        ));
    }
    Ok(document)
}

/// The `[[mcp_servers]]` array, in the same order as the parsed config's servers.
fn entries_mut<'a>(
    target: &str,
    document: &'a mut DocumentMut,
) -> Result<&'a mut toml_edit::ArrayOfTables, EditError> {
    document
        .get_mut("mcp_servers")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| {
            not_editable(
                target,
                "its servers are not written as [[mcp_servers]] tables (an inline array?)",
            )
        })
}

fn checked(text: String) -> Result<String, EditError> {
    let problems = crate::check(&text);
    if !problems.is_empty() {
        return Err(EditError::Invalid { problems });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# My Portico config.\n\
[server]\n\
listen = \"127.0.0.1:4200\"   # the usual port\n\
\n\
# Files, read-only.\n\
[[mcp_servers]]\n\
name = \"files\"\n\
timeout_secs = 30\n\
[mcp_servers.transport]\n\
type = \"stdio\"\n\
command = \"npx\"\n\
args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]\n\
\n\
# The GitHub one.\n\
[[mcp_servers]]\n\
name    =   \"github\"\n\
enabled = true  # keep\n\
env = [\"GITHUB_TOKEN\"]\n\
[mcp_servers.transport]\n\
type = \"http\"\n\
url = \"https://api.example.com/mcp?key=s3cret\"\n\
\n\
[telemetry]\n\
service_name = \"me\"  # trailing\n";

    #[test]
    fn a_removed_entry_takes_its_comment_and_leaves_every_other_byte() {
        let removed = remove_server("c.toml", FILE, "files").unwrap();
        let expected = FILE.replace(
            "\n# Files, read-only.\n[[mcp_servers]]\nname = \"files\"\ntimeout_secs = 30\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]\n",
            "",
        );
        assert_eq!(removed.text, expected);
        assert_eq!(removed.server.name, "files");
        let last = remove_server("c.toml", &removed.text, "github").unwrap();
        assert_eq!(
            last.text,
            "# My Portico config.\n[server]\nlisten = \"127.0.0.1:4200\"   # the usual port\n\n[telemetry]\nservice_name = \"me\"  # trailing\n"
        );
        assert_eq!(
            remove_server("c.toml", FILE, "nope")
                .unwrap_err()
                .to_string(),
            "c.toml has no server `nope`; it has: files, github"
        );
    }

    #[test]
    fn enabled_is_set_in_place_or_added_to_the_entry() {
        let off = set_enabled("c.toml", FILE, "github", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            off,
            FILE.replace("enabled = true  # keep", "enabled = false  # keep")
        );
        assert_eq!(set_enabled("c.toml", FILE, "github", true).unwrap(), None);
        let files_off = set_enabled("c.toml", FILE, "files", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            files_off,
            FILE.replace(
                "timeout_secs = 30\n",
                "timeout_secs = 30\nenabled = false\n"
            )
        );
        let back = set_enabled("c.toml", &files_off, "files", true)
            .unwrap()
            .unwrap();
        assert_eq!(
            back,
            FILE.replace("timeout_secs = 30\n", "timeout_secs = 30\nenabled = true\n")
        );
        assert!(!crate::parse("c", &files_off).unwrap().mcp_servers[0].enabled);
    }

    #[test]
    fn an_added_entry_is_appended_and_a_taken_name_is_refused_naming_the_entry() {
        let server = stdio_server(
            "everything",
            "npx",
            &[
                "-y".into(),
                "@modelcontextprotocol/server-everything".into(),
            ],
            vec![
                ("MODE".into(), "fast".into()),
                ("TOKEN".into(), "${TOKEN}".into()),
            ],
        );
        let added = add_server("c.toml", Some(FILE), &server).unwrap();
        assert_eq!(
            added,
            format!(
                "{FILE}\n[[mcp_servers]]\nname = \"everything\"\nenv = {{ MODE = \"fast\", TOKEN = \"${{TOKEN}}\" }}\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-everything\"]\n"
            )
        );
        let taken = add_server(
            "c.toml",
            Some(FILE),
            &stdio_server("GitHub", "x", &[], vec![]),
        )
        .unwrap_err();
        assert_eq!(
            taken.to_string(),
            "c.toml already has a server `github` (http at https://api.example.com/mcp); nothing was written. Pick another name, or `portico remove github` first"
        );
        let remote = remote_server(
            "local",
            "http://127.0.0.1:9/mcp",
            true,
            vec![("X-Api-Key".into(), "${KEY}".into())],
            vec![],
        );
        let added = add_server("c.toml", None, &remote).unwrap();
        assert!(added.starts_with(crate::STARTER_CONFIG), "{added}");
        assert!(
            added.ends_with("\n[[mcp_servers]]\nname = \"local\"\nallow_private_network = true   # its URL is on this machine or a private network\n[mcp_servers.transport]\ntype = \"sse\"\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { X-Api-Key = \"${KEY}\" }\n"),
            "{added}"
        );
    }

    #[test]
    fn hostile_names_and_entries_that_fail_the_check_write_nothing() {
        for bad in [
            "",
            "../x",
            "a/b",
            "a b",
            "a\nb",
            "-rf",
            ".hidden",
            "$(reboot)",
            "é",
            &"x".repeat(65),
        ] {
            let error =
                add_server("c.toml", Some(FILE), &stdio_server(bad, "x", &[], vec![])).unwrap_err();
            assert!(
                matches!(error, EditError::BadName { .. }),
                "{bad:?}: {error}"
            );
        }
        assert_eq!(server_name_problem("io.github.x-y_z9"), None);
        let empty_command = add_server("c.toml", Some(FILE), &stdio_server("e", "", &[], vec![]));
        assert!(
            matches!(empty_command, Err(EditError::Invalid { .. })),
            "{empty_command:?}"
        );
        let bad_env = stdio_server("e", "x", &[], vec![("1BAD".into(), "v".into())]);
        assert!(matches!(
            add_server("c.toml", Some(FILE), &bad_env),
            Err(EditError::Invalid { .. })
        ));
        let broken = "[[mcp_servers]]\nname = 1\n";
        assert!(matches!(
            add_server("c.toml", Some(broken), &stdio_server("e", "x", &[], vec![])),
            Err(EditError::ExistingInvalid { .. })
        ));
    }

    #[test]
    fn servers_in_an_inline_array_are_not_rewritten() {
        let inline =
            "mcp_servers = [{ name = \"a\", transport = { type = \"stdio\", command = \"x\" } }]\n";
        let error = remove_server("c.toml", inline, "a").unwrap_err();
        assert!(matches!(error, EditError::NotEditable { .. }), "{error}");
        assert!(matches!(
            set_enabled("c.toml", inline, "a", false),
            Err(EditError::NotEditable { .. })
        ));
    }
}
