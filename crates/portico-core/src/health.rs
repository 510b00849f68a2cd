//! The health model of an upstream server, as shown by `portico servers` and the API.

use serde::{Deserialize, Serialize};

/// Where an upstream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Configured with `enabled = false`.
    Disabled,
    /// Not connected, because this Portico has not needed it: one-shot commands connect only the
    /// servers they use.
    Idle,
    /// Starting: the first connection attempt is in progress (a child being spawned, a package
    /// runner downloading, the handshake).
    Starting,
    /// Handshake done and catalog listed.
    Ready,
    /// The last attempt failed; a restart is scheduled.
    Restarting,
    /// An OAuth-protected server with no usable token: it connects again as soon as a login (`portico
    /// auth login`, or a browser login this process started) stores one.
    NeedsLogin,
    /// Its `env` or `headers` refer to `${NAME}`s that neither Portico's environment nor its secret
    /// store has (`ServerStatus::missing_secrets`): it connects as soon as `portico secret set`
    /// stores them.
    NeedsSecret,
    /// Gave up (only when the hub is shutting down or the server cannot be started at all, such as a
    /// refused command).
    Failed,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerState::Disabled => "disabled",
            ServerState::Idle => "idle",
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::NeedsLogin => "needs login",
            ServerState::NeedsSecret => "needs secret",
            ServerState::Failed => "failed",
        })
    }
}

/// A snapshot of one upstream's status.
/// Deserialized by the CLI from a daemon's `GET /api/servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStatus {
    pub name: String,
    /// `stdio`, `http` or `sse`; for `sse`, what the URL turned out to speak is in `transport_detail`.
    pub transport: String,
    pub transport_detail: Option<String>,
    pub state: ServerState,
    /// The MCP protocol version negotiated with the server.
    pub protocol_version: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub tools: usize,
    pub resources: usize,
    pub resource_templates: usize,
    pub prompts: usize,
    pub last_error: Option<String>,
    /// The last lines a stdio child wrote to stderr before it failed at start (bounded; empty
    /// once it is ready, and for other transports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr_tail: Vec<String>,
    /// While `needs secret`: the names to set, each with `portico secret set NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_secrets: Vec<String>,
    /// How many times the connection was (re)established.
    pub connects: u32,
    /// False while the server is off: `enabled = false` in the config, or disabled at run time
    /// (the dashboard's `POST /api/servers/{name}/disable`) until enabled again.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// When the current session became ready (RFC 3339, UTC); none while there is none.
    #[serde(default)]
    pub connected_at: Option<String>,
    /// How many times the server was connected again after its first connection: `connects`
    /// minus one, at least 0.
    #[serde(default)]
    pub restarts: u32,
    /// While a connection attempt is in progress (starting, or restarting), how long it has taken
    /// so far, in whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_secs: Option<u64>,
    /// The last line the server wrote to stderr (stdio servers; cut to a few hundred bytes) while it
    /// is not ready: a package runner's download lines say what a slow start is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stderr: Option<String>,
    /// While `restarting`: how many connection attempts in a row have failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_attempts: Option<u32>,
    /// While `restarting`: when the next connection attempt is due (Unix time, milliseconds); in
    /// the past once it is under way (`starting_secs` then says for how long).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at_ms: Option<u64>,
}

impl ServerStatus {
    /// The state as `portico servers` shows it: `needs secret GITHUB_TOKEN` names what to set.
    pub fn state_label(&self) -> String {
        match self.state {
            ServerState::NeedsSecret if !self.missing_secrets.is_empty() => {
                format!("needs secret {}", self.missing_secrets.join(", "))
            }
            state => state.to_string(),
        }
    }

    /// A restarting server's retries in words, `retrying (3 failed attempts, next in 8s)`, as of
    /// `now_ms` (Unix time, milliseconds); none when it is not retrying.
    pub fn retry_words(&self, now_ms: u64) -> Option<String> {
        if self.state != ServerState::Restarting {
            return None;
        }
        let failed = self.failed_attempts?;
        let plural = if failed == 1 { "" } else { "s" };
        let next = match (self.starting_secs, self.next_retry_at_ms) {
            (Some(secs), _) => format!("trying again for {secs}s"),
            (None, Some(at)) if at > now_ms => format!("next in {}s", (at - now_ms).div_ceil(1000)),
            _ => "trying again now".to_string(),
        };
        Some(format!(
            "retrying ({failed} failed attempt{plural}, {next})"
        ))
    }
}

fn enabled_by_default() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restarting(failed: u32, starting_secs: Option<u64>) -> ServerStatus {
        let mut status: ServerStatus = serde_json::from_value(serde_json::json!({
            "name": "api", "transport": "http", "transport_detail": null, "state": "restarting",
            "protocol_version": null, "server_name": null, "server_version": null, "tools": 0,
            "resources": 0, "resource_templates": 0, "prompts": 0, "last_error": "connection refused",
            "connects": 0,
        }))
        .unwrap();
        status.failed_attempts = Some(failed);
        status.next_retry_at_ms = Some(10_000);
        status.starting_secs = starting_secs;
        status
    }

    #[test]
    fn a_retrying_server_says_how_often_it_failed_and_when_it_tries_next() {
        let one = restarting(1, None);
        assert_eq!(
            one.retry_words(2_500).as_deref(),
            Some("retrying (1 failed attempt, next in 8s)")
        );
        let four = restarting(4, None);
        assert_eq!(
            four.retry_words(10_000).as_deref(),
            Some("retrying (4 failed attempts, trying again now)")
        );
        let trying = restarting(4, Some(3));
        assert_eq!(
            trying.retry_words(12_000).as_deref(),
            Some("retrying (4 failed attempts, trying again for 3s)")
        );
        let mut ready = restarting(4, None);
        ready.state = ServerState::Ready;
        assert_eq!(ready.retry_words(0), None);
    }
}
