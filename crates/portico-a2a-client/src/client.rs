//! Portico's A2A client: reads another agent's card, picks an interface Portico speaks, sends it a
//! message, and follows the task to an answer.
//!
//! - Discovery: `{url}/.well-known/agent-card.json` (asked for with `A2A-Version: 1.0`), then the
//!   legacy `{url}/.well-known/agent.json`, then `{url}` itself; a URL ending in `.json` is read as the
//!   card. 1.0 cards (`supportedInterfaces`) and 0.3 cards (top-level `url`, `preferredTransport`,
//!   `additionalInterfaces`) are both understood.
//! - The interface: JSON-RPC 1.0, else HTTP+JSON 1.0, else JSON-RPC 0.3.
//! - Sending: a card with `capabilities.streaming` gets `SendStreamingMessage` (`message/stream` at
//!   0.3) and its events are reported as they arrive; otherwise `SendMessage` with
//!   `returnImmediately` (`blocking: false` at 0.3) and `GetTask` polled with capped, jittered
//!   exponential backoff (a poll answered 429 or 503 is tried again after the agent's
//!   `Retry-After`). Either way the call ends at a terminal or interrupted state
//!   (input-required, auth-required) or at the timeout, when the task is canceled.
//! - Everything is kept in the 1.0 JSON form; 0.3 answers are converted on arrival.
//!
//! Every request goes through [`SafeClient`], with the configured headers and the chosen
//! interface's `A2A-Version`.

mod v03;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use portico_config::ExternalAgentConfig;
use portico_core::retry::RetryPolicy;
use portico_net::sse::{ResponseEvents, SseError, SseLimits};
use portico_net::{CredentialScope, NetError, NetPolicy, SafeClient};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::wire::{self, Version, is_interrupted, is_terminal};

/// Where a 1.0 (and current 0.3) agent publishes its card, under its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// Where early 0.x agents published it.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// Discovery never takes longer than this, whatever the agent's timeout.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a CancelTask after a timeout may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer (card, JSON-RPC response, one streamed event) read into memory.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Polling GetTask: the first wait, doubling up to the cap.
const POLL_FIRST: Duration = Duration::from_millis(200);
const POLL_MAX: Duration = Duration::from_secs(5);
/// Failed polls in a row (the connection dropped, or the agent answered 429 or 503) retried before
/// the send gives up; the call's own deadline may end it sooner.
const POLL_RETRIES: u32 = 10;
/// The longest wait after a failed poll, for backoff and for the agent's `Retry-After` alike.
const POLL_RETRY_CAP: Duration = Duration::from_secs(30);

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
fn chain(error: &dyn std::error::Error) -> String {
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
fn retry_after_of(response: &reqwest::Response) -> Option<Duration> {
    portico_net::retry_after(response.headers(), SystemTime::now())
}

fn timeout_suffix(task_id: &Option<String>, cancel: &Option<Result<(), String>>) -> String {
    match (task_id, cancel) {
        (Some(id), Some(Ok(()))) => format!("; task {id} was canceled"),
        (Some(id), Some(Err(e))) => format!("; canceling task {id} failed too: {e}"),
        _ => String::new(),
    }
}

fn safe_client(policy: NetPolicy, credentials: CredentialScope) -> Result<SafeClient, ClientError> {
    SafeClient::builder()
        .policy(policy)
        .credentials(credentials)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("portico/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ClientError::Build(e.to_string()))
}

fn net_error(url: &str, error: NetError) -> ClientError {
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

fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// The binding of an interface Portico can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Binding {
    #[serde(rename = "JSONRPC")]
    JsonRpc,
    #[serde(rename = "HTTP+JSON")]
    HttpJson,
}

impl Binding {
    pub fn label(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    fn parse(label: &str) -> Option<Binding> {
        match label.trim().to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" | "JSON_RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "HTTP_JSON" | "REST" => Some(Binding::HttpJson),
            _ => None,
        }
    }
}

/// `1.0`, `1`, `v1.0` → 1.0; `0.3`, `0.3.0`, `0.2.5` → 0.3 (the 0.x method names).
fn version_of(label: &str) -> Option<Version> {
    let label = label.trim().trim_start_matches(['v', 'V']);
    if label == "1" || label.starts_with("1.") {
        Some(Version::V1)
    } else if label.starts_with("0.") {
        Some(Version::V03)
    } else {
        None
    }
}

/// One interface a card lists, as written there (URLs made absolute).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardInterface {
    pub url: String,
    pub binding: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The interface the client talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub url: String,
    pub binding: Binding,
    pub version: Version,
    /// Sent in every request when the card's interface names one.
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
}

/// An agent card, read.
#[derive(Debug, Clone)]
pub struct AgentCard {
    /// Where the card was read from.
    pub card_url: String,
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    pub interfaces: Vec<CardInterface>,
    pub streaming: bool,
    pub push_notifications: bool,
    pub skills: Vec<Skill>,
    /// The interface chosen: JSON-RPC 1.0, else HTTP+JSON 1.0, else JSON-RPC 0.3.
    pub endpoint: Endpoint,
    /// The card as served.
    pub raw: Value,
}

impl AgentCard {
    /// What `portico a2a discover --json` prints: the summary, the chosen interface and the raw card.
    pub fn summary(&self) -> Value {
        json!({
            "card_url": self.card_url,
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "interfaces": self.interfaces,
            "selected": {
                "url": self.endpoint.url,
                "binding": self.endpoint.binding.label(),
                "version": self.endpoint.version.label(),
            },
            "capabilities": {
                "streaming": self.streaming,
                "pushNotifications": self.push_notifications,
            },
            "skills": self.skills,
            "card": self.raw,
        })
    }

    /// Reads a card document. `card_url` resolves relative interface URLs.
    pub fn parse(card_url: &str, value: &Value) -> Result<AgentCard, String> {
        let object = value.as_object().ok_or("it is not a JSON object")?;
        let text = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| object.get(*k).and_then(Value::as_str))
                .map(str::to_string)
        };
        let name = text(&["name"])
            .filter(|n| !n.trim().is_empty())
            .ok_or("it has no `name`")?;
        let base = url::Url::parse(card_url).ok();
        let absolute = |href: &str| -> Result<String, String> {
            match url::Url::parse(href) {
                Ok(url) => Ok(url.to_string()),
                Err(url::ParseError::RelativeUrlWithoutBase) => base
                    .as_ref()
                    .and_then(|b| b.join(href).ok())
                    .map(|u| u.to_string())
                    .ok_or_else(|| format!("interface URL `{href}` cannot be resolved")),
                Err(e) => Err(format!("interface URL `{href}` is invalid: {e}")),
            }
        };

        let mut interfaces: Vec<CardInterface> = Vec::new();
        let mut add = |interface: CardInterface| {
            let key = |i: &CardInterface| {
                (
                    i.url.clone(),
                    i.binding.to_ascii_uppercase(),
                    version_of(&i.version),
                )
            };
            if !interfaces.iter().any(|i| key(i) == key(&interface)) {
                interfaces.push(interface);
            }
        };
        let supported = object
            .get("supportedInterfaces")
            .or_else(|| object.get("supported_interfaces"));
        if let Some(list) = supported {
            let list = list
                .as_array()
                .ok_or("`supportedInterfaces` is not a list")?;
            for (i, item) in list.iter().enumerate() {
                let field = |keys: &[&str]| {
                    keys.iter()
                        .find_map(|k| item.get(*k).and_then(Value::as_str))
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                };
                let url = field(&["url"])
                    .ok_or_else(|| format!("supportedInterfaces[{i}] has no `url`"))?;
                let binding = field(&["protocolBinding", "protocol_binding", "transport"])
                    .ok_or_else(|| format!("supportedInterfaces[{i}] has no `protocolBinding`"))?;
                add(CardInterface {
                    url: absolute(&url)?,
                    binding,
                    // Required in 1.0; a 1.0 card that leaves it out most likely means 1.0.
                    version: field(&["protocolVersion", "protocol_version"])
                        .unwrap_or_else(|| "1.0".into()),
                    tenant: field(&["tenant"]),
                });
            }
        }
        // The 0.3 form: the main URL with its preferred transport, then the additional ones.
        if let Some(url) = text(&["url"]) {
            let version = text(&["protocolVersion"])
                .filter(|v| version_of(v) == Some(Version::V03))
                .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
                .unwrap_or_else(|| "0.3".into());
            add(CardInterface {
                url: absolute(&url)?,
                binding: text(&["preferredTransport"]).unwrap_or_else(|| "JSONRPC".into()),
                version: version.clone(),
                tenant: None,
            });
            for item in object
                .get("additionalInterfaces")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(url), Some(transport)) = (
                    item.get("url").and_then(Value::as_str),
                    item.get("transport").and_then(Value::as_str),
                ) {
                    add(CardInterface {
                        url: absolute(url)?,
                        binding: transport.to_string(),
                        version: version.clone(),
                        tenant: None,
                    });
                }
            }
        }
        if interfaces.is_empty() {
            return Err(
                "it lists no interfaces: neither `supportedInterfaces` (A2A 1.0) nor a \
                        top-level `url` (A2A 0.3)"
                    .into(),
            );
        }
        let endpoint = choose(&interfaces).ok_or_else(|| {
            let offered: Vec<String> = interfaces
                .iter()
                .map(|i| format!("{} {} at {}", i.binding, i.version, i.url))
                .collect();
            format!(
                "none of its interfaces is one Portico speaks (JSONRPC or HTTP+JSON at A2A 1.0, \
                 JSONRPC at 0.3); it offers {}",
                offered.join(", ")
            )
        })?;

        let capabilities = object.get("capabilities");
        let flag = |key: &str| {
            capabilities
                .and_then(|c| c.get(key))
                .and_then(Value::as_bool)
                == Some(true)
        };
        let skills = object
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|skill| {
                let field = |k: &str| {
                    skill
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                Skill {
                    id: field("id"),
                    name: field("name"),
                    description: field("description"),
                }
            })
            .collect();
        Ok(AgentCard {
            card_url: card_url.to_string(),
            name,
            description: text(&["description"]).unwrap_or_default(),
            version: text(&["version"]),
            streaming: flag("streaming"),
            push_notifications: flag("pushNotifications") || flag("push_notifications"),
            interfaces,
            skills,
            endpoint,
            raw: value.clone(),
        })
    }
}

/// JSON-RPC 1.0, else HTTP+JSON 1.0, else JSON-RPC 0.3; the card's order within each.
fn choose(interfaces: &[CardInterface]) -> Option<Endpoint> {
    [
        (Binding::JsonRpc, Version::V1),
        (Binding::HttpJson, Version::V1),
        (Binding::JsonRpc, Version::V03),
    ]
    .into_iter()
    .find_map(|(binding, version)| {
        interfaces
            .iter()
            .find(|i| {
                Binding::parse(&i.binding) == Some(binding)
                    && version_of(&i.version) == Some(version)
            })
            .map(|i| Endpoint {
                url: i.url.clone(),
                binding,
                version,
                tenant: i.tenant.clone(),
            })
    })
}

/// Where to look for the card of the agent at `url`.
fn card_candidates(url: &url::Url) -> Vec<String> {
    if url.path().ends_with(".json") {
        return vec![url.to_string()];
    }
    let mut base = url.clone();
    base.set_query(None);
    base.set_fragment(None);
    let base = base.as_str().trim_end_matches('/').to_string();
    vec![
        format!("{base}{CARD_PATH}"),
        format!("{base}{LEGACY_CARD_PATH}"),
        url.to_string(),
    ]
}

/// Something that happened while the agent worked, in the order it was seen.
#[derive(Debug, Clone, PartialEq)]
pub enum A2aEvent {
    /// The task's status changed; `state` is the 1.0 name (`TASK_STATE_WORKING`), `text` the status
    /// message's text.
    Status {
        task_id: Option<String>,
        state: String,
        text: Option<String>,
    },
    /// Artifact text: a whole artifact, or the next chunk of one (`append`) being streamed.
    Artifact {
        task_id: Option<String>,
        artifact_id: String,
        name: String,
        text: String,
        append: bool,
        last_chunk: bool,
    },
    /// A message that is the agent's whole answer (no task was made).
    Message { text: String },
}

/// One message to send.
#[derive(Debug, Clone, Default)]
pub struct SendRequest {
    pub text: String,
    /// Continue this task (one waiting for input).
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// Overrides the client's timeout for this send.
    pub timeout: Option<Duration>,
    /// The turn this message is sent for had read untrusted output from this tool. It travels in the
    /// message's metadata (`portico/untrusted`), so a Portico at the other end starts its run tainted.
    pub untrusted: Option<String>,
}

impl SendRequest {
    pub fn new(text: impl Into<String>) -> Self {
        SendRequest {
            text: text.into(),
            ..SendRequest::default()
        }
    }
}

/// How a send ended: at a terminal or interrupted state, or with a message.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// The task in the 1.0 form (for a bare message answer, a task-shaped wrapper without an id).
    pub task: Value,
    /// `TASK_STATE_*`.
    pub state: String,
    /// The answer: the artifacts' text, else the status message's (for input-required, the
    /// question; for failed, the reason).
    pub text: String,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
}

impl SendOutcome {
    /// `completed`, `input-required`, ...
    pub fn state_label(&self) -> &'static str {
        wire::state_to_v03(&self.state)
    }

    /// Waiting for the caller: more input, or authorization.
    pub fn is_interrupted(&self) -> bool {
        is_interrupted(&self.state)
    }

    /// Failed or rejected.
    pub fn is_failure(&self) -> bool {
        matches!(
            self.state.as_str(),
            "TASK_STATE_FAILED" | "TASK_STATE_REJECTED"
        )
    }
}

/// How a client is set up.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sent with every request (e.g. `Authorization`), already expanded.
    pub headers: Vec<(String, String)>,
    /// Bounds each send (and discovery, which is also capped at 30 s).
    pub timeout: Duration,
    /// Loopback and private addresses allowed; metadata and link-local addresses never are.
    pub allow_private_network: bool,
}

/// An A2A client. Cheap to clone.
#[derive(Clone)]
pub struct A2aClient {
    http: SafeClient,
    headers: HeaderMap,
    /// When set, the headers go only to URLs of this origin.
    header_origin: Option<url::Origin>,
    timeout: Duration,
    poll_first: Duration,
    poll_max: Duration,
    ids: Arc<AtomicU64>,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("policy", self.http.policy())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn message_id() -> String {
    let n: u128 = rand::random();
    let hex = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A path segment with everything but unreserved characters percent-encoded.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// Reads a body, refusing more than [`MAX_BODY_BYTES`].
async fn read_body(url: &str, response: reqwest::Response) -> Result<Vec<u8>, ClientError> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| net_error(url, e.into()))?;
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY_BYTES {
            return Err(ClientError::Protocol {
                url: url.to_string(),
                reason: format!("the answer is larger than {} MiB", MAX_BODY_BYTES >> 20),
            });
        }
    }
    Ok(body)
}

/// The 1.0 `StreamResponse` form (`{"task"|"message"|"statusUpdate"|"artifactUpdate": ...}`) of a
/// send result or streamed event, in whichever form it came (1.0 wrapped, a bare 1.0 task, 0.3
/// `kind`-tagged).
fn normalize_event(value: &Value) -> Option<Value> {
    for key in ["task", "message", "statusUpdate", "artifactUpdate"] {
        if value.get(key).is_some_and(Value::is_object) {
            return Some(json!({ key: value[key] }));
        }
    }
    v03::event_from_v03(value)
}

/// An HTTP+JSON error body (`{"error": {"code", "status", "message"}}`, or a bare `{code, message}`).
fn rest_error(
    url: &str,
    operation: &str,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> ClientError {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let error = value
        .as_ref()
        .map(|v| v.get("error").unwrap_or(v))
        .filter(|e| e.get("message").is_some());
    match error {
        Some(error) => ClientError::Remote {
            url: url.to_string(),
            operation: operation.to_string(),
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(status.as_u16() as i64),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        },
        None => ClientError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            detail: if body.is_empty() {
                String::new()
            } else {
                format!(": {}", snippet(body))
            },
            retry_after,
        },
    }
}

/// The `result` of a JSON-RPC response, or its error.
fn rpc_payload(
    url: &str,
    method: &str,
    value: Value,
    status: StatusCode,
    retry_after: Option<Duration>,
) -> Result<Value, ClientError> {
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        let mut message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_string();
        if let Some(reason) = error
            .pointer("/data/0/reason")
            .and_then(Value::as_str)
            .filter(|r| !message.contains(r))
        {
            message.push_str(&format!(" ({reason})"));
        }
        return Err(ClientError::Remote {
            url: url.to_string(),
            operation: method.to_string(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message,
        });
    }
    if let Some(result) = value.get("result") {
        return Ok(result.clone());
    }
    if !status.is_success() {
        return Err(ClientError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            detail: format!(": {}", snippet(value.to_string().as_bytes())),
            retry_after,
        });
    }
    Err(ClientError::Protocol {
        url: url.to_string(),
        reason: format!("the {method} answer has neither `result` nor `error`"),
    })
}

/// The errors after which a server that advertised streaming is asked without it.
fn streaming_unsupported(error: &ClientError) -> bool {
    match error {
        ClientError::Remote { code, .. } => matches!(code, -32601 | -32004 | 404 | 405 | 501),
        ClientError::Status { status, .. } => matches!(status, 404 | 405 | 406 | 415 | 501),
        _ => false,
    }
}

impl A2aClient {
    pub fn new(options: ClientOptions) -> Result<A2aClient, ClientError> {
        let mut headers = HeaderMap::new();
        for (name, value) in &options.headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| ClientError::Header {
                    name: name.clone(),
                    reason: format!("not a valid header name: {e}"),
                })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| ClientError::Header {
                name: name.clone(),
                reason: "the value (after ${VAR} expansion) is not a valid header value".into(),
            })?;
            value.set_sensitive(true);
            headers.append(header, value);
        }
        let policy = if options.allow_private_network {
            NetPolicy::allow_private_network()
        } else {
            NetPolicy::public_only()
        };
        let credentials = if headers.is_empty() {
            CredentialScope::Nowhere
        } else {
            CredentialScope::Everywhere
        };
        let http = safe_client(policy, credentials)?;
        Ok(A2aClient {
            http,
            headers,
            header_origin: None,
            timeout: options.timeout,
            poll_first: POLL_FIRST,
            poll_max: POLL_MAX,
            ids: Arc::new(AtomicU64::new(1)),
        })
    }

    /// A client for a configured `[[a2a.external_agents]]` entry: its headers with `${VAR}` expanded
    /// by `env`, its timeout, and its network policy (public only unless `allow_private_network`).
    pub fn for_agent(
        config: &ExternalAgentConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<A2aClient, ClientError> {
        let mut headers = Vec::new();
        for (name, value) in &config.headers {
            let value =
                portico_config::expand_vars(value, env).map_err(|e| ClientError::Header {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
            headers.push((name.clone(), value));
        }
        A2aClient::new(ClientOptions {
            headers,
            timeout: Duration::from_secs(config.timeout_secs.max(1)),
            allow_private_network: config.allow_private_network,
        })?
        .headers_only_for(&config.url)
    }

    /// Sends the configured headers (credentials, usually) only to URLs of `url`'s origin: a card
    /// may list interfaces anywhere, and a card that names another host must not collect the
    /// credentials meant for this one. Requests elsewhere go without them.
    /// Redirects follow the same rule: one that would take them off that origin is refused.
    pub fn headers_only_for(mut self, url: &str) -> Result<Self, ClientError> {
        let Ok(parsed) = url::Url::parse(url) else {
            return Err(ClientError::InvalidUrl(format!("invalid URL {url:?}")));
        };
        self.header_origin = Some(parsed.origin());
        let credentials = CredentialScope::for_url(&parsed, !self.headers.is_empty());
        self.http = safe_client(self.http.policy().clone(), credentials)?;
        Ok(self)
    }

    fn headers_for(&self, url: &str) -> HeaderMap {
        match &self.header_origin {
            Some(origin) if !self.headers.is_empty() => {
                let same = url::Url::parse(url).is_ok_and(|u| &u.origin() == origin);
                if same {
                    self.headers.clone()
                } else {
                    tracing::debug!(
                        "not sending the configured headers to {url}: another origin than {}",
                        origin.ascii_serialization()
                    );
                    HeaderMap::new()
                }
            }
            _ => self.headers.clone(),
        }
    }

    /// Changes the GetTask polling schedule (first wait, doubling up to `max`).
    pub fn with_poll_interval(mut self, first: Duration, max: Duration) -> Self {
        self.poll_first = first;
        self.poll_max = max.max(first);
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        version: Version,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut builder = self
            .http
            .request(method, url)
            .map_err(|e| net_error(url, e))?
            .headers(self.headers_for(url))
            .header("A2A-Version", version.label())
            .header(ACCEPT, accept);
        if let Some(body) = body {
            builder = builder
                .header(CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(body).unwrap_or_default());
        }
        self.http.send(builder).await.map_err(|e| net_error(url, e))
    }

    // -----------------------------------------------------------------------------------------------
    // Discovery.

    /// Fetches and reads the card of the agent at `url` (a base URL, or the card's own URL).
    pub async fn discover(&self, url: &str) -> Result<AgentCard, ClientError> {
        let limit = self.timeout.min(DISCOVERY_TIMEOUT);
        match tokio::time::timeout(limit, self.discover_within(url)).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::DiscoveryTimeout {
                url: url.to_string(),
                limit,
            }),
        }
    }

    async fn discover_within(&self, url: &str) -> Result<AgentCard, ClientError> {
        // Refusals and bad URLs are reported before anything is sent.
        let parsed = self.http.check_url(url).map_err(|e| net_error(url, e))?;
        let candidates = card_candidates(&parsed);
        let last = candidates.len() - 1;
        let mut tried = Vec::new();
        for (i, candidate) in candidates.iter().enumerate() {
            let response = self
                .request(
                    Method::GET,
                    candidate,
                    Version::V1,
                    None,
                    "application/json",
                )
                .await?;
            let status = response.status();
            if matches!(status.as_u16(), 429 | 503) {
                // The agent is there but asks us to come back: another path would not answer
                // sooner, and the refresh must know how long to wait.
                return Err(ClientError::Status {
                    url: candidate.clone(),
                    status: status.as_u16(),
                    detail: String::new(),
                    retry_after: retry_after_of(&response),
                });
            }
            if !status.is_success() {
                tried.push(format!("{candidate} (HTTP {})", status.as_u16()));
                continue;
            }
            let body = read_body(candidate, response).await?;
            let value: Value = match serde_json::from_slice(&body) {
                Ok(value) => value,
                Err(e) => {
                    tried.push(format!("{candidate} (not JSON: {e})"));
                    continue;
                }
            };
            match AgentCard::parse(candidate, &value) {
                Ok(card) => return Ok(card),
                // A well-known path (or a URL given as the card) that serves JSON serves the card:
                // say what is wrong with it.
                Err(reason) if i < last || candidates.len() == 1 => {
                    return Err(ClientError::InvalidCard {
                        url: candidate.clone(),
                        reason,
                    });
                }
                Err(reason) => tried.push(format!("{candidate} (not an agent card: {reason})")),
            }
        }
        Err(ClientError::NoCard {
            url: url.to_string(),
            tried,
        })
    }

    // -----------------------------------------------------------------------------------------------
    // Calls.

    /// One JSON-RPC call; its `result`.
    async fn rpc(
        &self,
        endpoint: &Endpoint,
        method: &str,
        mut params: Value,
    ) -> Result<Value, ClientError> {
        if let (Some(tenant), Some(params)) = (&endpoint.tenant, params.as_object_mut()) {
            params.insert("tenant".into(), json!(tenant));
        }
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params});
        let url = &endpoint.url;
        let response = self
            .request(
                Method::POST,
                url,
                endpoint.version,
                Some(&body),
                "application/json",
            )
            .await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        let bytes = read_body(url, response).await?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => rpc_payload(url, method, value, status, retry_after),
            Err(_) if !status.is_success() => {
                Err(rest_error(url, method, status, retry_after, &bytes))
            }
            Err(e) => Err(ClientError::Protocol {
                url: url.clone(),
                reason: format!("the {method} answer is not JSON ({e}): {}", snippet(&bytes)),
            }),
        }
    }

    fn rest_url(endpoint: &Endpoint, path: &str) -> String {
        let base = endpoint.url.trim_end_matches('/');
        match &endpoint.tenant {
            Some(tenant) => format!("{base}/{}{path}", segment(tenant)),
            None => format!("{base}{path}"),
        }
    }

    /// One HTTP+JSON call; the body it answered.
    async fn rest(
        &self,
        endpoint: &Endpoint,
        method: Method,
        path: &str,
        operation: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let url = Self::rest_url(endpoint, path);
        let response = self
            .request(method, &url, endpoint.version, body, "application/json")
            .await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        let bytes = read_body(&url, response).await?;
        if !status.is_success() {
            return Err(rest_error(&url, operation, status, retry_after, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
            url,
            reason: format!(
                "the {operation} answer is not JSON ({e}): {}",
                snippet(&bytes)
            ),
        })
    }

    fn method(version: Version, v1: &'static str, v03: &'static str) -> &'static str {
        match version {
            Version::V1 => v1,
            Version::V03 => v03,
        }
    }

    fn wire_message(endpoint: &Endpoint, message: &Value) -> Value {
        match endpoint.version {
            Version::V1 => message.clone(),
            Version::V03 => wire::message_to_v03(message),
        }
    }

    /// The task `id`, in the 1.0 form.
    pub async fn get_task(&self, endpoint: &Endpoint, id: &str) -> Result<Value, ClientError> {
        let method = Self::method(endpoint.version, "GetTask", "tasks/get");
        let result = match endpoint.binding {
            Binding::JsonRpc => self.rpc(endpoint, method, json!({"id": id})).await?,
            Binding::HttpJson => {
                let path = format!("/tasks/{}", segment(id));
                self.rest(endpoint, Method::GET, &path, method, None)
                    .await?
            }
        };
        self.task_of(endpoint, method, &result)
    }

    /// Asks the agent to cancel task `id`; the task as it answered, in the 1.0 form.
    pub async fn cancel_task(&self, endpoint: &Endpoint, id: &str) -> Result<Value, ClientError> {
        let method = Self::method(endpoint.version, "CancelTask", "tasks/cancel");
        let result = match endpoint.binding {
            Binding::JsonRpc => self.rpc(endpoint, method, json!({"id": id})).await?,
            Binding::HttpJson => {
                let path = format!("/tasks/{}:cancel", segment(id));
                self.rest(endpoint, Method::POST, &path, method, Some(&json!({})))
                    .await?
            }
        };
        self.task_of(endpoint, method, &result)
    }

    fn task_of(
        &self,
        endpoint: &Endpoint,
        method: &str,
        result: &Value,
    ) -> Result<Value, ClientError> {
        normalize_event(result)
            .and_then(|event| event.get("task").cloned())
            .ok_or_else(|| ClientError::Protocol {
                url: endpoint.url.clone(),
                reason: format!(
                    "the {method} answer is not a task: {}",
                    snippet(result.to_string().as_bytes())
                ),
            })
    }

    /// Sends a message and follows the task to a terminal or interrupted state, reporting what
    /// happens on the way through `on_event`. On timeout the task is canceled.
    pub async fn send(
        &self,
        card: &AgentCard,
        request: &SendRequest,
        on_event: &(dyn Fn(A2aEvent) + Send + Sync),
    ) -> Result<SendOutcome, ClientError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let mut message = json!({
            "messageId": message_id(),
            "role": "ROLE_USER",
            "parts": [{"text": request.text}],
        });
        if let Some(task_id) = &request.task_id {
            message["taskId"] = json!(task_id);
        }
        if let Some(context_id) = &request.context_id {
            message["contextId"] = json!(context_id);
        }
        if let Some(tool) = &request.untrusted {
            message["metadata"] = json!({ wire::UNTRUSTED_METADATA: tool });
        }
        let mut tracker = Tracker::new(on_event);
        tracker.continuing = request.task_id.is_some();
        let run = self.run(card, &message, &mut tracker);
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(())) => Ok(tracker.outcome()),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                let task_id = tracker.task_id();
                let cancel = match &task_id {
                    Some(id) => Some(
                        match tokio::time::timeout(
                            CANCEL_TIMEOUT,
                            self.cancel_task(&card.endpoint, id),
                        )
                        .await
                        {
                            Ok(Ok(_)) => Ok(()),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(_) => {
                                Err(format!("no answer within {}s", CANCEL_TIMEOUT.as_secs()))
                            }
                        },
                    ),
                    None => None,
                };
                Err(ClientError::Timeout {
                    url: card.endpoint.url.clone(),
                    limit: timeout,
                    task_id,
                    cancel,
                })
            }
        }
    }

    async fn run(
        &self,
        card: &AgentCard,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let endpoint = &card.endpoint;
        if card.streaming {
            match self.stream(endpoint, message, tracker).await {
                Ok(()) => {}
                Err(error) if tracker.is_empty() && streaming_unsupported(&error) => {
                    tracing::debug!(
                        "{}: streaming refused ({error}); sending without it",
                        endpoint.url
                    );
                    self.send_once(endpoint, message, tracker).await?;
                }
                Err(error) => return Err(error),
            }
        } else {
            self.send_once(endpoint, message, tracker).await?;
        }
        if tracker.settled() {
            return Ok(());
        }
        // Not streamed, or the stream ended early: poll.
        let Some(task_id) = tracker.task_id() else {
            return Err(ClientError::Protocol {
                url: endpoint.url.clone(),
                reason: "the answer carried neither a task nor a message".into(),
            });
        };
        self.poll(endpoint, &task_id, tracker).await
    }

    /// SendMessage, answering at once; the first state of the task.
    async fn send_once(
        &self,
        endpoint: &Endpoint,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let method = Self::method(endpoint.version, "SendMessage", "message/send");
        let configuration = match endpoint.version {
            Version::V1 => json!({"returnImmediately": true}),
            Version::V03 => json!({"blocking": false}),
        };
        let params = json!({
            "message": Self::wire_message(endpoint, message),
            "configuration": configuration,
        });
        let result = match endpoint.binding {
            Binding::JsonRpc => self.rpc(endpoint, method, params).await?,
            Binding::HttpJson => {
                self.rest(
                    endpoint,
                    Method::POST,
                    "/message:send",
                    method,
                    Some(&params),
                )
                .await?
            }
        };
        let event = normalize_event(&result).ok_or_else(|| ClientError::Protocol {
            url: endpoint.url.clone(),
            reason: format!(
                "the {method} answer is neither a task nor a message: {}",
                snippet(result.to_string().as_bytes())
            ),
        })?;
        tracker.absorb(&event);
        // Answering at once, a server may still show the continued task as it was: poll for what
        // our message did.
        if tracker.continuing && tracker.state().is_some_and(is_interrupted) {
            tracker.stale = true;
        }
        Ok(())
    }

    /// GetTask with capped exponential backoff until the task settles. A failed poll (the
    /// connection dropped, or the agent answered 429 or 503) is retried after at least the
    /// agent's `Retry-After`, up to [`POLL_RETRIES`] in a row; an A2A error ends it. The send's
    /// deadline bounds it all.
    async fn poll(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let schedule = RetryPolicy::unlimited(self.poll_first, self.poll_max);
        let failed = RetryPolicy {
            max_retries: POLL_RETRIES,
            base: self.poll_first,
            cap: POLL_RETRY_CAP,
        };
        let mut attempt = 0u32;
        let mut failures = 0u32;
        let mut wait = schedule.backoff(attempt);
        loop {
            tokio::time::sleep(wait).await;
            attempt = attempt.saturating_add(1);
            match self.get_task(endpoint, task_id).await {
                Ok(task) => {
                    failures = 0;
                    tracker.absorb(&json!({"task": task}));
                    if tracker.settled() {
                        return Ok(());
                    }
                    wait = schedule.backoff(attempt);
                }
                Err(error) if error.is_transient() && failed.allows_retry(failures) => {
                    wait = failed.delay(failures, error.retry_after());
                    failures += 1;
                    tracing::debug!(
                        "polling task {task_id}: {error}; trying again in {wait:?} ({failures} of {POLL_RETRIES})"
                    );
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// SendStreamingMessage: reads events until the task settles or the stream ends.
    async fn stream(
        &self,
        endpoint: &Endpoint,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let method = Self::method(endpoint.version, "SendStreamingMessage", "message/stream");
        let wire_message = Self::wire_message(endpoint, message);
        let (url, body) = match endpoint.binding {
            Binding::JsonRpc => {
                let mut params = json!({"message": wire_message});
                if let Some(tenant) = &endpoint.tenant {
                    params["tenant"] = json!(tenant);
                }
                (
                    endpoint.url.clone(),
                    json!({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}),
                )
            }
            Binding::HttpJson => (
                Self::rest_url(endpoint, "/message:stream"),
                json!({"message": wire_message}),
            ),
        };
        let response = self
            .request(
                Method::POST,
                &url,
                endpoint.version,
                Some(&body),
                "text/event-stream",
            )
            .await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        if !is_event_stream(&response) {
            // One JSON answer instead of a stream: an error, or a single result.
            let bytes = read_body(&url, response).await?;
            let value = serde_json::from_slice::<Value>(&bytes).ok();
            return match value {
                Some(value)
                    if endpoint.binding == Binding::JsonRpc
                        && (value.get("error").is_some() || value.get("result").is_some()) =>
                {
                    self.stream_event(endpoint, &url, method, value, tracker)
                }
                Some(value) if status.is_success() => {
                    self.stream_event(endpoint, &url, method, value, tracker)
                }
                _ if !status.is_success() => {
                    Err(rest_error(&url, method, status, retry_after, &bytes))
                }
                _ => Err(ClientError::Protocol {
                    url: url.clone(),
                    reason: format!(
                        "the {method} answer is neither an event stream nor JSON: {}",
                        snippet(&bytes)
                    ),
                }),
            };
        }
        if !status.is_success() {
            return Err(ClientError::Status {
                url,
                status: status.as_u16(),
                detail: String::new(),
                retry_after,
            });
        }
        let mut events = ResponseEvents::from_response(
            response,
            SseLimits::with_max_event_bytes(MAX_BODY_BYTES).dispatching_unterminated(),
        );
        while let Some(event) = events.next().await {
            let data = match event {
                Ok(event) => event.data,
                Err(SseError::Body(error)) => return Err(net_error(&url, error.into())),
                Err(too_large) => {
                    return Err(ClientError::Protocol {
                        url,
                        reason: too_large.to_string(),
                    });
                }
            };
            // Keep-alives and priming events carry no data.
            if data.trim().is_empty() {
                continue;
            }
            let value = match serde_json::from_str::<Value>(&data) {
                Ok(value) => value,
                // What a stream left unterminated at its end is read only if it is whole.
                Err(_) if events.body_ended() => break,
                Err(e) => {
                    return Err(ClientError::Protocol {
                        url: url.clone(),
                        reason: format!(
                            "a {method} event is not JSON ({e}): {}",
                            snippet(data.as_bytes())
                        ),
                    });
                }
            };
            self.stream_event(endpoint, &url, method, value, tracker)?;
            if tracker.settled() {
                return Ok(());
            }
        }
        Ok(())
    }

    fn stream_event(
        &self,
        endpoint: &Endpoint,
        url: &str,
        method: &str,
        value: Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let payload = match endpoint.binding {
            Binding::JsonRpc => rpc_payload(url, method, value, StatusCode::OK, None)?,
            Binding::HttpJson => {
                if let Some(error) = value.get("error").filter(|e| e.is_object()) {
                    return Err(ClientError::Remote {
                        url: url.to_string(),
                        operation: method.to_string(),
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    });
                }
                value
            }
        };
        match normalize_event(&payload) {
            Some(event) => tracker.absorb_streamed(&event),
            None => tracing::debug!(
                "{url}: skipping an event that is none of task, message, statusUpdate, artifactUpdate: {payload}"
            ),
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------
// Following a task.

/// Folds events into the task and reports what is new.
struct Tracker<'a> {
    on_event: &'a (dyn Fn(A2aEvent) + Send + Sync),
    task: Option<Value>,
    message: Option<Value>,
    /// The last status reported: state and text.
    reported_status: Option<(String, String)>,
    /// The text of each artifact reported so far, by artifact id.
    reported_artifacts: HashMap<String, String>,
    /// The message continues a task (one that was waiting for input).
    continuing: bool,
    /// The task's interrupted state is the one before our message: a server may open the stream of a
    /// continuation with the task as it was (the JS SDK does), still input-required.
    stale: bool,
}

fn text_of(value: &Value) -> String {
    wire::message_text(value)
}

fn normalize_status(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(state) = status.get("state").and_then(Value::as_str) {
        let state = wire::state_from_any(state).unwrap_or("TASK_STATE_UNSPECIFIED");
        status["state"] = json!(state);
    }
    if let Some(message) = status.get("message").filter(|m| m.is_object()) {
        status["message"] = wire::message_from_any(message);
    }
    status
}

fn artifact_key(artifact: &Value) -> String {
    artifact
        .get("artifactId")
        .or_else(|| artifact.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("artifact")
        .to_string()
}

impl<'a> Tracker<'a> {
    fn new(on_event: &'a (dyn Fn(A2aEvent) + Send + Sync)) -> Self {
        Tracker {
            on_event,
            task: None,
            message: None,
            reported_status: None,
            reported_artifacts: HashMap::new(),
            continuing: false,
            stale: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.task.is_none() && self.message.is_none()
    }

    fn task_id(&self) -> Option<String> {
        self.task
            .as_ref()
            .and_then(|t| t.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
    }

    fn state(&self) -> Option<&str> {
        self.task.as_ref()?.pointer("/status/state")?.as_str()
    }

    fn settled(&self) -> bool {
        self.message.is_some()
            || (!self.stale
                && self
                    .state()
                    .is_some_and(|s| is_terminal(s) || is_interrupted(s)))
    }

    /// A streamed event. The first event of a continuation that shows the task still interrupted
    /// is the task as it was: not reported, and not the end (the stream goes on, or the task is
    /// polled when it ends).
    fn absorb_streamed(&mut self, event: &Value) {
        let snapshot_state = event
            .pointer("/task/status/state")
            .and_then(Value::as_str)
            .and_then(wire::state_from_any);
        if self.continuing && self.is_empty() && snapshot_state.is_some_and(is_interrupted) {
            if let Some(task) = event.get("task") {
                let mut task = task.clone();
                task["status"] = normalize_status(&task["status"]);
                let text = task
                    .pointer("/status/message")
                    .map(text_of)
                    .unwrap_or_default();
                self.reported_status = snapshot_state.map(|s| (s.to_string(), text));
                self.task = Some(task);
            }
            self.stale = true;
            return;
        }
        self.absorb(event);
    }

    /// The task an update belongs to, made from the update's ids if no task was seen yet.
    fn task_for(&mut self, update: &Value) -> &mut Map<String, Value> {
        let task = self.task.get_or_insert_with(|| {
            json!({
                "id": update.get("taskId").cloned().unwrap_or(json!("")),
                "contextId": update.get("contextId").cloned().unwrap_or(json!("")),
                "status": {"state": "TASK_STATE_SUBMITTED"},
            })
        });
        if !task.is_object() {
            *task = json!({});
        }
        task.as_object_mut().expect("an object")
    }

    fn absorb(&mut self, event: &Value) {
        self.stale = false;
        if let Some(task) = event.get("task").filter(|t| t.is_object()) {
            let mut task = task.clone();
            if let Some(status) = task.get("status") {
                task["status"] = normalize_status(status);
            }
            // A task event without artifacts does not take back the ones streamed so far.
            let has_artifacts = task
                .get("artifacts")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if !has_artifacts && let Some(old) = self.task.as_ref().and_then(|t| t.get("artifacts"))
            {
                task["artifacts"] = old.clone();
            }
            self.task = Some(task);
            self.report_status();
            self.report_artifacts();
        } else if let Some(update) = event.get("statusUpdate") {
            let status = normalize_status(update.get("status").unwrap_or(&Value::Null));
            self.task_for(update).insert("status".into(), status);
            self.report_status();
        } else if let Some(update) = event.get("artifactUpdate") {
            self.absorb_artifact(update);
        } else if let Some(message) = event.get("message").filter(|m| m.is_object()) {
            let message = wire::message_from_any(message);
            (self.on_event)(A2aEvent::Message {
                text: text_of(&message),
            });
            self.message = Some(message);
        }
    }

    fn absorb_artifact(&mut self, update: &Value) {
        let Some(artifact) = update.get("artifact").filter(|a| a.is_object()) else {
            return;
        };
        let key = artifact_key(artifact);
        let append = update.get("append").and_then(Value::as_bool) == Some(true);
        let last_chunk = update.get("lastChunk").and_then(Value::as_bool) != Some(false);
        let chunk = text_of(artifact);
        let task = self.task_for(update);
        let artifacts = task
            .entry("artifacts")
            .or_insert_with(|| json!([]))
            .as_array_mut();
        let Some(artifacts) = artifacts else {
            return;
        };
        let existing = artifacts.iter_mut().find(|a| artifact_key(a) == key);
        let full = match (existing, append) {
            (Some(existing), true) => {
                let parts = existing
                    .as_object_mut()
                    .map(|e| e.entry("parts").or_insert_with(|| json!([])));
                if let Some(Value::Array(parts)) = parts {
                    for part in artifact
                        .get("parts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        // Text chunks join the text part before them, so the text reads whole.
                        if let (Some(more), Some(Value::String(last))) = (
                            part.get("text").and_then(Value::as_str),
                            parts.last_mut().and_then(|p| p.get_mut("text")),
                        ) {
                            last.push_str(more);
                            continue;
                        }
                        parts.push(part.clone());
                    }
                }
                text_of(existing)
            }
            (Some(existing), false) => {
                *existing = artifact.clone();
                chunk.clone()
            }
            (None, _) => {
                artifacts.push(artifact.clone());
                chunk.clone()
            }
        };
        let name = artifact
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&key)
            .to_string();
        let (text, append) = if append {
            (chunk, true)
        } else {
            self.unreported(&key, &full)
        };
        self.reported_artifacts.insert(key.clone(), full);
        if !text.is_empty() {
            (self.on_event)(A2aEvent::Artifact {
                task_id: self.task_id(),
                artifact_id: key,
                name,
                text,
                append,
                last_chunk,
            });
        }
    }

    /// What of an artifact's whole text `full` has not been reported, and whether it continues what
    /// was (a server may close a streamed artifact by sending it whole again).
    fn unreported(&self, key: &str, full: &str) -> (String, bool) {
        match self.reported_artifacts.get(key) {
            Some(seen) if !seen.is_empty() && full.starts_with(seen.as_str()) => {
                (full[seen.len()..].to_string(), true)
            }
            _ => (full.to_string(), false),
        }
    }

    fn report_status(&mut self) {
        let Some(status) = self.task.as_ref().and_then(|t| t.get("status")) else {
            return;
        };
        let state = status
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or("TASK_STATE_UNSPECIFIED")
            .to_string();
        let text = status.get("message").map(text_of).unwrap_or_default();
        let current = (state.clone(), text.clone());
        if self.reported_status.as_ref() == Some(&current) {
            return;
        }
        self.reported_status = Some(current);
        let task_id = self.task_id();
        (self.on_event)(A2aEvent::Status {
            task_id,
            state,
            text: (!text.is_empty()).then_some(text),
        });
    }

    /// Reports artifact text not reported yet (artifacts seen whole, in a task).
    fn report_artifacts(&mut self) {
        let artifacts: Vec<Value> = self
            .task
            .as_ref()
            .and_then(|t| t.get("artifacts"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let task_id = self.task_id();
        for artifact in artifacts {
            let key = artifact_key(&artifact);
            let full = text_of(&artifact);
            if self.reported_artifacts.get(&key) == Some(&full) {
                continue;
            }
            let (text, append) = self.unreported(&key, &full);
            self.reported_artifacts.insert(key.clone(), full);
            if text.is_empty() {
                continue;
            }
            (self.on_event)(A2aEvent::Artifact {
                task_id: task_id.clone(),
                artifact_id: key.clone(),
                name: artifact
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&key)
                    .to_string(),
                text,
                append,
                last_chunk: true,
            });
        }
    }

    fn outcome(self) -> SendOutcome {
        let settled_task = self
            .state()
            .is_some_and(|s| is_terminal(s) || is_interrupted(s));
        if let Some(message) = &self.message
            && !settled_task
        {
            let context_id = message
                .get("contextId")
                .and_then(Value::as_str)
                .map(str::to_string);
            return SendOutcome {
                task: json!({
                    "contextId": context_id.clone().unwrap_or_default(),
                    "status": {"state": "TASK_STATE_COMPLETED", "message": message},
                }),
                state: "TASK_STATE_COMPLETED".into(),
                text: text_of(message),
                task_id: None,
                context_id,
            };
        }
        let task = self.task.clone().unwrap_or_else(|| json!({}));
        let state = self.state().unwrap_or("TASK_STATE_UNSPECIFIED").to_string();
        SendOutcome {
            text: answer_text(&task, &state),
            task_id: self.task_id(),
            context_id: task
                .get("contextId")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            state,
            task,
        }
    }
}

/// The text answer of a task: the artifacts' text, else the status message's. A task that waits or
/// failed says why in its status message, which comes first then.
fn answer_text(task: &Value, state: &str) -> String {
    let artifacts: Vec<String> = task
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(text_of)
        .filter(|t| !t.is_empty())
        .collect();
    let status = task
        .pointer("/status/message")
        .map(text_of)
        .unwrap_or_default();
    let explains =
        is_interrupted(state) || matches!(state, "TASK_STATE_FAILED" | "TASK_STATE_REJECTED");
    if explains && !status.is_empty() {
        return status;
    }
    if !artifacts.is_empty() {
        return artifacts.join("\n");
    }
    status
}

#[cfg(test)]
mod tests;
