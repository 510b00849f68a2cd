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
        let pending: Vec<&str> = servers
            .iter()
            .filter(|s| s.state == ServerState::Connecting)
            .map(|s| s.name.as_str())
            .collect();
        if hub.settled() {
            let _ = write!(stderr, "\r\x1b[2K");
            return;
        }
        let _ = write!(
            stderr,
            "\r\x1b[2Kconnecting {}/{} servers… waiting for {}",
            total - pending.len(),
            total,
            pending.join(", ")
        );
        let _ = stderr.flush();
        if changes.changed().await.is_err() {
            return;
        }
    }
}
