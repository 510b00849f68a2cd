//! What a valid config needs from the machine it runs on: the `${VAR}`s it references set and its
//! stdio commands found. `config check` reports these as warnings (the file is fine; this
//! environment is not ready for it) and `portico doctor` as failures. (An open listen address
//! without a token is a problem of the file itself: `check` reports it.)

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::check::Problem;

/// One environment finding, with where in the file it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    /// The position in the file, as `config check` prints it.
    pub problem: Problem,
}

/// What kind of finding it is, so `portico doctor` can group them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindingKind {
    /// A `${VAR}` that is not set.
    UnsetVariable { name: String },
    /// A stdio server's command that is not found.
    MissingCommand { server: String, command: String },
}

/// The environment's findings for config text `config check` accepts (on other text, whatever
/// can be found). `var` reads Portico's environment, then its secret store.
pub fn environment_findings(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Vec<Finding> {
    let Ok(root) = DeTable::parse(text) else {
        return Vec::new();
    };
    let root = root.get_ref();
    let mut findings = Vec::new();
    let mut push =
        |kind: FindingKind, span: Range<usize>, message: String, hint: Option<String>| {
            findings.push(Finding {
                kind,
                problem: Problem::at(text, span, message, hint),
            });
        };

    // Every `${VAR}` in the values Portico expands: tokens, headers and literal env values.
    let mut strings = Vec::new();
    expanded_strings(root, &mut Vec::new(), &mut strings);
    for (path, value, span) in strings {
        for name in referenced_vars(&value) {
            if !crate::is_variable_name(&name) {
                push(
                    FindingKind::UnsetVariable { name: name.clone() },
                    span.clone(),
                    format!("{path} refers to ${{{name}}}, which does not name a variable"),
                    Some("write ${NAME} with letters, digits and `_`".into()),
                );
                continue;
            }
            if var(&name).is_some() {
                continue;
            }
            push(
                FindingKind::UnsetVariable { name: name.clone() },
                span.clone(),
                format!(
                    "{path} references ${{{name}}}, which is set neither in this environment nor in the secret store"
                ),
                Some(format!(
                    "run `portico secret set {name}`, or export {name} before starting Portico"
                )),
            );
        }
    }

    // An OAuth client secret named by its variable.
    if let Some(servers) = table_array(root, "mcp_servers") {
        for server in servers {
            let name = string_at(server, &["name"])
                .map(|(n, _)| n)
                .unwrap_or_default();
            let Some((variable, span)) = string_at(server, &["oauth", "client_secret_env"]) else {
                continue;
            };
            if var(&variable).is_some() {
                continue;
            }
            push(
                FindingKind::UnsetVariable {
                    name: variable.clone(),
                },
                span,
                format!(
                    "server `{name}`: oauth.client_secret_env names `{variable}`, which is set neither in this environment nor in the secret store"
                ),
                Some(format!(
                    "run `portico secret set {variable}` (the client's secret), or export it before `portico auth login {name}` and before starting Portico"
                )),
            );
        }
    }

    // Stdio commands: found on PATH, or, given as a path, present.
    if let Some(servers) = table_array(root, "mcp_servers") {
        for server in servers {
            let name = string_at(server, &["name"])
                .map(|(n, _)| n)
                .unwrap_or_default();
            let enabled = !matches!(
                server.get("enabled").map(|v| v.get_ref()),
                Some(DeValue::Boolean(false))
            );
            let is_stdio =
                string_at(server, &["transport", "type"]).is_some_and(|(t, _)| t == "stdio");
            let Some((command, span)) = string_at(server, &["transport", "command"]) else {
                continue;
            };
            if !enabled || !is_stdio {
                continue;
            }
            let cwd = string_at(server, &["transport", "cwd"]).map(|(c, _)| PathBuf::from(c));
            if find_program(&command, cwd.as_deref(), var("PATH").as_deref()).is_some() {
                continue;
            }
            let (message, hint) = if command.contains('/') {
                (
                    format!(
                        "server `{name}`: command `{command}` does not exist or is not executable"
                    ),
                    "check the path, or give a program on PATH".to_string(),
                )
            } else {
                (
                    format!("server `{name}`: command `{command}` is not on PATH"),
                    "install it, or give its full path (Portico searches the PATH it was started with)"
                        .to_string(),
                )
            };
            push(
                FindingKind::MissingCommand {
                    server: name,
                    command,
                },
                span,
                message,
                Some(hint),
            );
        }
    }

    findings.sort_by_key(|f| (f.problem.line, f.problem.column));
    findings
}

/// Where `command` runs from: itself when it has a `/` (relative to `cwd` when given), else the
/// first executable of that name on `path`.
pub fn find_program(command: &str, cwd: Option<&Path>, path: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        let candidate = match cwd {
            Some(cwd) if Path::new(command).is_relative() => cwd.join(command),
            _ => PathBuf::from(command),
        };
        return is_executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The names in each `${NAME}` of `value`.
fn referenced_vars(value: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        names.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    names
}

/// The string values Portico runs through `${VAR}` expansion, with a readable path to each:
/// any `token`, anything under a `headers` table, and literal `env` values (`NAME=value` items, or
/// a table's values).
fn expanded_strings(
    table: &DeTable<'_>,
    path: &mut Vec<String>,
    out: &mut Vec<(String, String, Range<usize>)>,
) {
    for (key, value) in table.iter() {
        path.push(key.get_ref().to_string());
        visit(value, path, out);
        path.pop();
    }
}

fn visit(
    value: &Spanned<DeValue<'_>>,
    path: &mut Vec<String>,
    out: &mut Vec<(String, String, Range<usize>)>,
) {
    match value.get_ref() {
        DeValue::String(text) => {
            let expanded = path.last().is_some_and(|k| k == "token")
                || path.iter().any(|k| k == "headers" || k == "env");
            if expanded && text.contains("${") {
                out.push((path.join("."), text.to_string(), value.span()));
            }
        }
        DeValue::Table(table) => expanded_strings(table, path, out),
        DeValue::Array(items) => {
            for item in items.iter() {
                visit(item, path, out);
            }
        }
        _ => {}
    }
}

fn table_array<'a, 'i>(root: &'a DeTable<'i>, key: &str) -> Option<Vec<&'a DeTable<'i>>> {
    match root.get(key)?.get_ref() {
        DeValue::Array(items) => Some(
            items
                .iter()
                .filter_map(|item| match item.get_ref() {
                    DeValue::Table(t) => Some(t),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}

fn string_at(table: &DeTable<'_>, keys: &[&str]) -> Option<(String, Range<usize>)> {
    let (last, parents) = keys.split_last()?;
    let mut table = table;
    for key in parents {
        match table.get(*key)?.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return None,
        }
    }
    let value = table.get(*last)?;
    match value.get_ref() {
        DeValue::String(s) => Some((s.to_string(), value.span())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "PATH" => Some("/usr/bin:/bin".into()),
            "SET" => Some("yes".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn rendered(text: &str) -> Vec<String> {
        environment_findings(text, &env)
            .iter()
            .map(|f| f.problem.to_string())
            .collect()
    }

    #[test]
    fn an_unset_oauth_client_secret_variable_is_named_at_its_key() {
        let text = "[[mcp_servers]]\nname = \"linear\"\n[mcp_servers.transport]\ntype = \"http\"\nurl = \"https://mcp.example/mcp\"\n[mcp_servers.oauth]\nclient_id = \"portico\"\nclient_secret_env = \"LINEAR_SECRET\"\n";
        assert_eq!(
            rendered(text),
            vec![
                "8:21: server `linear`: oauth.client_secret_env names `LINEAR_SECRET`, which is set neither in this environment nor in the secret store (hint: run `portico secret set LINEAR_SECRET` (the client's secret), or export it before `portico auth login linear` and before starting Portico)",
            ]
        );
    }

    #[test]
    fn unset_variables_are_named_where_they_are_expanded() {
        let text = "[server]\ntoken = \"${PORTICO_TOKEN}\"\ninstructions = \"${NOT_EXPANDED}\"\n\n[[mcp_servers]]\nname = \"gh\"\nenv = [\"A=${SET}\", \"B=${EMPTY}\"]\n[mcp_servers.transport]\ntype = \"http\"\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${GH_TOKEN}\" }\n";
        assert_eq!(
            rendered(text),
            vec![
                "2:9: server.token references ${PORTICO_TOKEN}, which is set neither in this environment nor in the secret store (hint: run `portico secret set PORTICO_TOKEN`, or export PORTICO_TOKEN before starting Portico)",
                "11:29: mcp_servers.transport.headers.Authorization references ${GH_TOKEN}, which is set neither in this environment nor in the secret store (hint: run `portico secret set GH_TOKEN`, or export GH_TOKEN before starting Portico)",
            ]
        );
    }

    #[test]
    fn missing_commands_are_found_on_path_or_as_paths() {
        let text = "[[mcp_servers]]\nname = \"a\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"sh\"\n\n[[mcp_servers]]\nname = \"b\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"no-such-program-anywhere\"\n\n[[mcp_servers]]\nname = \"c\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"/nonexistent/server\"\n\n[[mcp_servers]]\nname = \"d\"\nenabled = false\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"also-missing\"\n";
        let findings = environment_findings(text, &env);
        assert_eq!(
            findings
                .iter()
                .map(|f| f.problem.to_string())
                .collect::<Vec<_>>(),
            vec![
                "11:11: server `b`: command `no-such-program-anywhere` is not on PATH (hint: install it, or give its full path (Portico searches the PATH it was started with))",
                "17:11: server `c`: command `/nonexistent/server` does not exist or is not executable (hint: check the path, or give a program on PATH)",
            ]
        );
        assert_eq!(
            findings[0].kind,
            FindingKind::MissingCommand {
                server: "b".into(),
                command: "no-such-program-anywhere".into()
            }
        );
    }

    #[test]
    fn programs_are_found_like_the_spawn_finds_them() {
        assert!(find_program("sh", None, Some("/nonexistent:/bin:/usr/bin")).is_some());
        assert!(find_program("sh", None, None).is_none());
        assert!(find_program("/bin/sh", None, None).is_some());
        assert!(find_program("./sh", Some(Path::new("/bin")), None).is_some());
        assert!(find_program("./sh", Some(Path::new("/nonexistent")), None).is_none());
    }
}
