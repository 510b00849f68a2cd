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
//!
//! By concern: `card` (discovery and the interface choice), `send` (sending, streamed or polled,
//! and what the caller hears), `tracker` (a task followed through its events), `error`
//! (`ClientError`), `v03` (0.3 answers in the 1.0 form); this file holds the client and its
//! JSON-RPC and HTTP+JSON calls.

mod v03;

mod card;
mod error;
mod send;
mod tracker;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use portico_config::ExternalAgentConfig;
use portico_net::{CredentialScope, NetPolicy, SafeClient};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::wire::{self, Version};

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

pub use card::{AgentCard, Binding, CardInterface, Endpoint, Skill};
pub use error::ClientError;
use error::*;
pub use send::{A2aEvent, SendOutcome, SendRequest};
use tracker::*;

/// What a refusal of a private address says to a configured agent's owner.
const EXTERNAL_AGENT_REMEDY: &str =
    "; set allow_private_network = true on this [[a2a.external_agents]] entry to allow it";

/// How a client is set up.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sent with every request (e.g. `Authorization`), already expanded.
    pub headers: Vec<(String, String)>,
    /// Bounds each send (and discovery, which is also capped at 30 s).
    pub timeout: Duration,
    /// Whether loopback and private addresses are allowed (metadata and link-local addresses never
    /// are), and what a refusal tells the user to do.
    pub network: NetPolicy,
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
        let policy = options.network;
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
            network: NetPolicy::private_network(config.allow_private_network)
                .with_private_network_remedy(EXTERNAL_AGENT_REMEDY),
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
            Binding::JsonRpc => self.rpc(endpoint, method, task_id_params(id)).await?,
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
            Binding::JsonRpc => self.rpc(endpoint, method, task_id_params(id)).await?,
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
}

/// The params of a request for one task (`GetTask`, `CancelTask`, and their 0.3 names).
fn task_id_params(id: &str) -> Value {
    let request = crate::protocol::v1::TaskIdRequest {
        id: id.to_string(),
        ..Default::default()
    };
    serde_json::to_value(request).unwrap_or_default()
}

#[cfg(test)]
mod tests;
