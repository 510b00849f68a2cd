//! What goes wrong talking to a remote agent: `ClientError`, and the helpers that make one say
//! which URL and what to do.

use std::time::{Duration, SystemTime};

use portico_net::{CredentialScope, NetError, NetPolicy, SafeClient};

/// What went wrong talking to a remote agent. Each says which URL and what to do where it can.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The SSRF policy refused the destination; the text names the URL and the rule.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    InvalidUrl(String),
    #[error("cannot reach {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url} answered HTTP {status}{detail}")]
    Status {
        url: String,
        status: u16,
        /// Empty, or `: ` and what the body said.
        detail: String,
        /// How long the agent asked us to wait (`Retry-After`), if it said.
        retry_after: Option<Duration>,
    },
    #[error("{url} is not a valid A2A agent card: {reason}")]
    InvalidCard { url: String, reason: String },
    #[error("no A2A agent card found for {url}; tried {}", .tried.join("; "))]
    NoCard { url: String, tried: Vec<String> },
    #[error("fetching the agent card of {url} took longer than {limit:?}")]
    DiscoveryTimeout { url: String, limit: Duration },
    /// The agent answered with an A2A (JSON-RPC or HTTP+JSON) error.
    #[error("{url} answered {operation} with error {code}: {message}")]
    Remote {
        url: String,
        operation: String,
        code: i64,
        message: String,
    },
    #[error("unexpected answer from {url}: {reason}")]
    Protocol { url: String, reason: String },
    #[error(
        "the A2A agent at {url} did not finish within {limit:?}{}",
        timeout_suffix(.task_id, .cancel)
    )]
    Timeout {
        url: String,
        limit: Duration,
        task_id: Option<String>,
        cancel: Option<Result<(), String>>,
    },
    #[error("header `{name}`: {reason}")]
    Header { name: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// An error and every cause under it, as one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

impl ClientError {
    /// Whether the same request may succeed later: the agent could not be reached, or it asked us
    /// to come back (429, 503).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Status { status, .. } => matches!(status, 429 | 503),
            _ => false,
        }
    }

    /// The wait the agent asked for with `Retry-After`, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The wait a response asks for (`Retry-After`), read before its body is consumed.
pub(crate) fn retry_after_of(response: &reqwest::Response) -> Option<Duration> {
    portico_net::retry_after(response.headers(), SystemTime::now())
}

pub(crate) fn timeout_suffix(
    task_id: &Option<String>,
    cancel: &Option<Result<(), String>>,
) -> String {
    match (task_id, cancel) {
        (Some(id), Some(Ok(()))) => format!("; task {id} was canceled"),
        (Some(id), Some(Err(e))) => format!("; canceling task {id} failed too: {e}"),
        _ => String::new(),
    }
}

pub(crate) fn safe_client(
    policy: NetPolicy,
    credentials: CredentialScope,
) -> Result<SafeClient, ClientError> {
    SafeClient::builder()
        .policy(policy)
        .credentials(credentials)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("portico/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ClientError::Build(e.to_string()))
}

pub(crate) fn net_error(url: &str, error: NetError) -> ClientError {
    match error {
        NetError::Blocked(_)
        | NetError::UnsupportedScheme { .. }
        | NetError::TooManyRedirects { .. }
        | NetError::CredentialsCrossOrigin { .. } => ClientError::Refused(error.to_string()),
        NetError::InvalidUrl { .. } | NetError::MissingHost { .. } => {
            ClientError::InvalidUrl(error.to_string())
        }
        NetError::Build(e) => ClientError::Build(e.to_string()),
        NetError::Http(e) => ClientError::Unreachable {
            url: url.to_string(),
            detail: if e.is_timeout() {
                "the request timed out".to_string()
            } else {
                chain(&e)
            },
        },
    }
}

pub(crate) fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}
