//! Progress while servers connect: a live line on a terminal, nothing when piped or with `-q`.

use std::io::{IsTerminal, Write};

use portico_core::ServerState;
use portico_engine::Upstreams;

/// Waits until every server's first connection attempt has finished. When stdout is a terminal, shows
/// which servers are still connecting on stderr, so that a slow server is visibly the slow one.
pub async fn until_settled(hub: &Upstreams) {
    if !std::io::stdout().is_terminal() || crate::oneview_cli::quiet() {
        hub.wait_settled().await;
        return;
    }
    let mut changes = hub.changes();
    let mut stderr = std::io::stderr();
    loop {
        let servers = hub.servers();
        let total = servers
            .iter()
            .filter(|s| !matches!(s.state, ServerState::Disabled | ServerState::Idle))
            .count();
        let pending: Vec<String> = servers
            .iter()
            .filter(|s| s.state == ServerState::Starting)
            .map(|s| match s.starting_secs {
                Some(secs) => format!("{} ({secs}s)", s.name),
                None => s.name.clone(),
            })
            .collect();
        if hub.settled() {
            let _ = write!(stderr, "\r\x1b[2K");
            return;
        }
        // The slowest start's last stderr line: what `npx` or `uvx` is downloading.
        let doing = servers
            .iter()
            .filter(|s| s.state == ServerState::Starting)
            .max_by_key(|s| s.starting_secs)
            .and_then(|s| s.last_stderr.as_deref())
            .map(|line| format!(": {}", crate::output::printable(line)))
            .unwrap_or_default();
        let line = format!(
            "starting {}/{} servers… waiting for {}{doing}",
            total - pending.len(),
            total,
            pending.join(", ")
        );
        let _ = write!(stderr, "\r\x1b[2K{}", fit_to_terminal(&line));
        let _ = stderr.flush();
        // Redrawn on every change, and each second for the elapsed times.
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
    }
}

/// Cut to the terminal's width, so the line redraws in place instead of wrapping.
pub fn fit_to_terminal(line: &str) -> String {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(100)
        .max(20);
    match line.char_indices().nth(width - 1) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}
