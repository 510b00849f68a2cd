//! Human-readable rendering of servers, tools and call results.

use portico_core::{ServerState, ServerStatus};
use serde_json::Value;

pub fn servers_table(servers: &[ServerStatus]) -> String {
    if servers.is_empty() {
        return "no MCP servers configured; `portico import` adds the ones Claude Desktop, Cursor or VS Code run\n".into();
    }
    let mut rows = vec![[
        "NAME".to_string(),
        "TRANSPORT".into(),
        "STATE".into(),
        "PROTOCOL".into(),
        "TOOLS".into(),
        "RESOURCES".into(),
        "PROMPTS".into(),
        "LAST ERROR".into(),
    ]];
    for s in servers {
        let transport = match &s.transport_detail {
            Some(detail) if detail != &s.transport => format!("{} ({detail})", s.transport),
            _ => s.transport.clone(),
        };
        rows.push([
            s.name.clone(),
            transport,
            state_cell(s),
            s.protocol_version.clone().unwrap_or_else(|| "-".into()),
            s.tools.to_string(),
            (s.resources + s.resource_templates).to_string(),
            s.prompts.to_string(),
            last_words(s).map_or_else(|| "-".into(), |words| printable(&words)),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            if c < 7 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

/// The state, with how long the connection attempt in progress has taken; a restarting server's
/// failed attempts and when it tries next.
fn state_cell(s: &ServerStatus) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
    if let Some(words) = s.retry_words(now_ms) {
        return words;
    }
    match s.starting_secs {
        Some(secs) => format!("{} ({secs}s)", s.state_label()),
        None => s.state_label(),
    }
}

/// The daemon's ready line: the tools a client gets (built-in and agent tools among them), the
/// servers connected of those configured, and which are not, in what state.
pub fn ready_line(listed: &Value, servers: &[ServerStatus]) -> String {
    let tools = listed["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let from_servers = tools.iter().filter(|t| t["server"].is_string()).count();
    let enabled: Vec<&ServerStatus> = servers
        .iter()
        .filter(|s| s.state != ServerState::Disabled)
        .collect();
    let connected = enabled
        .iter()
        .filter(|s| s.state == ServerState::Ready)
        .count();
    let down: Vec<String> = enabled
        .iter()
        .filter(|s| !matches!(s.state, ServerState::Ready | ServerState::Idle))
        .map(|s| format!("`{}` {}", s.name, state_cell(s)))
        .collect();
    let down = match down.is_empty() {
        true => String::new(),
        false => format!(
            "; not connected: {} (`portico servers` says why)",
            down.join(", ")
        ),
    };
    format!(
        "portico: ready; {} tool(s): {} built-in or agent, {from_servers} from {connected} of {} server(s){down}. Ctrl-C to stop.",
        tools.len(),
        tools.len() - from_servers,
        enabled.len(),
    )
}

/// What a person wants to read about a server that is not ready: its error, else while it starts
/// the last line it wrote to stderr (a package runner's download progress).
fn last_words(s: &ServerStatus) -> Option<String> {
    match (&s.last_error, &s.last_stderr) {
        (Some(error), _) => Some(error.clone()),
        (None, Some(line)) => Some(format!("stderr: {line}")),
        (None, None) => None,
    }
}

/// Why a tool that is not in the catalog may be missing, said after `unknown` (the "no tool named"
/// message): the servers that would offer it (by its `mcp_{server}_` name) and are not connected,
/// with their state and cause; else any server that is down, whose tools are all missing. `None`
/// when every server is up (the name is simply wrong).
pub fn missing_tool_message(tool: &str, unknown: &str, servers: &[ServerStatus]) -> Option<String> {
    let down = |s: &&ServerStatus| !matches!(s.state, ServerState::Ready | ServerState::Idle);
    let describe = |s: &ServerStatus| {
        let own = format!("server `{}`: ", s.name);
        let cause = last_words(s).map_or_else(String::new, |w| {
            format!(": {}", printable(w.strip_prefix(&own).unwrap_or(&w)))
        });
        let state = state_cell(s);
        // "down, retrying (2 failed attempts, next in 4s)" rather than parentheses in parentheses.
        match state.starts_with("retrying") {
            true => format!("server `{}` is down, {state}{cause}", s.name),
            false => format!("server `{}` is down ({state}){cause}", s.name),
        }
    };
    let owners: Vec<&ServerStatus> = servers
        .iter()
        .filter(|s| portico_core::naming::may_be_named_for(tool, &s.name))
        .filter(down)
        .collect();
    if let Some(owner) = owners.first() {
        return Some(format!(
            "no tool named `{tool}`: its {}; `portico servers` shows its state",
            describe(owner)
        ));
    }
    let others: Vec<String> = servers.iter().filter(down).map(describe).collect();
    if others.is_empty() {
        return None;
    }
    Some(format!(
        "{unknown}; the catalog lacks the tools of every server that is down: {}",
        others.join("; ")
    ))
}

pub fn warn_unready(servers: &[ServerStatus]) {
    if crate::oneview_cli::quiet() {
        return;
    }
    for s in servers {
        if s.state == ServerState::NeedsSecret {
            // Its tools are missing from the list: say why, and what brings them.
            eprintln!(
                "warning: server `{}` lists no tools: it {}; run {}",
                s.name,
                s.state_label(),
                s.missing_secrets
                    .iter()
                    .map(|name| format!("`portico secret set {name}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            );
        } else if !matches!(
            s.state,
            ServerState::Ready | ServerState::Disabled | ServerState::Idle
        ) {
            let words = last_words(s).unwrap_or_else(|| "no error recorded".into());
            let own = format!("server `{}`: ", s.name);
            eprintln!(
                "warning: server `{}` is {}: {}",
                s.name,
                state_cell(s),
                printable(words.strip_prefix(&own).unwrap_or(&words))
            );
        }
    }
}

/// Renders a tool's result for a person: text as is, other content types summarised, structured
/// content as pretty JSON.
pub fn call_result(result: &portico_core::ToolResult, refused: Option<&str>) -> String {
    let mut out = String::new();
    match refused {
        // Portico's own check stopped the call: its message is the whole story.
        Some(words) => out.push_str(&format!("error: {words}\n")),
        None if result.is_error() => out.push_str("error: the tool reported a failure\n"),
        None => {}
    }
    for block in &result.content {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => out.push_str(field("text")),
            "image" | "audio" => out.push_str(&format!(
                "[{kind}: {}, {} bytes base64]",
                field("mimeType"),
                field("data").len()
            )),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => out.push_str(&format!("[resource {uri}]\n{text}")),
                    None => out.push_str(&format!("[resource {uri}: binary]")),
                }
            }
            "resource_link" => out.push_str(&format!("[link: {} {}]", field("uri"), field("name"))),
            other => out.push_str(&format!("[{other} content]")),
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if let Some(structured) = &result.structured_content {
        out.push_str("structured content:\n");
        out.push_str(&serde_json::to_string_pretty(structured).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// `portico agents`: one row per agent.
pub fn agents_table(agents: &[portico_agents::AgentInfo]) -> String {
    if agents.is_empty() {
        return "no agents configured; add [[agents]] entries to the config\n".into();
    }
    let mut out = String::new();
    for agent in agents {
        match &agent.needs_model {
            // Not offered to clients until it has one: no tool name to show.
            Some(fix) => {
                out.push_str(&format!(
                    "{}  ({}: not offered as a tool or A2A agent until it has one)\n",
                    agent.name,
                    portico_agents::NEEDS_A_MODEL
                ));
                out.push_str(&format!("    {fix}\n"));
            }
            None => {
                out.push_str(&format!("{}  ({})\n", agent.name, agent.tool));
                out.push_str(&format!("    model: {}\n", agent.model));
            }
        }
        out.push_str(&format!("    tools: {}\n", agent.tools.join(", ")));
        if !agent.description.is_empty() {
            out.push_str(&format!("    {}\n", agent.description));
        }
    }
    out
}

/// Text a server or child wrote (its errors, its stderr), made safe for a terminal: control
/// characters other than newline and tab are shown escaped (`\u{1b}`), so that a hostile peer's
/// escape sequences cannot rewrite what the user sees.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Server names for a one-line message: `a, b`, or `none`.
pub fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        return "none".into();
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_text_cannot_drive_the_terminal() {
        assert_eq!(
            printable("boom\u{1b}[2J\u{7}\nline two\tend"),
            "boom\\u{1b}[2J\\u{7}\nline two\tend"
        );
    }
}
