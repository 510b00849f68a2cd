//! The legacy MCP "HTTP with SSE" client transport (protocol revision 2024-11-05).
//!
//! # Why this is hand-written
//!
//! rmcp, our MCP library, dropped its client for this transport when Streamable HTTP replaced it, but
//! many deployed servers still speak only the old one. So this module implements it directly and
//! plugs into rmcp through [`rmcp::transport::Transport`]: `handler.serve(transport)` runs an
//! ordinary rmcp client session over it.
//!
//! # The protocol
//!
//! 1. The client opens `GET {url}` with `Accept: text/event-stream` and keeps it open for the whole
//!    session.
//! 2. The server's first event is `event: endpoint`; its data is a URI, usually relative (such as
//!    `/message?sessionId=abc`), resolved against the SSE URL.
//! 3. The client POSTs each JSON-RPC message to that endpoint as `application/json`; the server
//!    answers `202 Accepted` (some answer `200`).
//! 4. Everything the server sends (responses, its own requests, notifications) arrives on the GET
//!    stream as `event: message`, one JSON-RPC message per event.
//!
//! Events are read by Portico's one SSE parser (`portico_net::sse`): comments (keepalives), unknown
//! event types and unknown fields are ignored, multi-line `data:` fields are joined with `\n`, and an
//! event larger than [`LegacySseConfig::max_event_bytes`] is skipped with a warning rather than ending
//! the session, so an oversized event never poisons the events after it.
//!
//! # The same-origin rule
//!
//! The `endpoint` event decides where every later message, with the configured headers (typically
//! credentials), is sent. A hostile or compromised server must not be able to point us at another
//! host, so the endpoint must have the same origin (scheme, host and port) as the configured SSE
//! URL; anything else fails [`connect`] with [`LegacySseError::CrossOriginEndpoint`]. The HTTP client
//! is the caller's: Portico passes its SSRF-guarded client, scoped to the configured origin when
//! headers are configured, which refuses a redirect that would take them elsewhere. A client that
//! follows one anyway (no headers, or another client) has its POST reported as
//! [`LegacySseError::PostRedirected`].
//!
//! # Lifecycle
//!
//! [`connect`] returns once the endpoint is known; a background task then reads the stream. When the
//! stream ends or fails, [`Transport::receive`] returns `None`, so rmcp's service sees the transport
//! closed and fails requests in flight at once instead of letting them wait for their timeouts, and
//! later sends fail with [`LegacySseError::StreamEnded`]. [`Transport::close`] (or dropping the
//! transport) stops the reader and drops the stream. POSTs are independent of each other and of the
//! reader, so concurrent sends never wait on one another.
//!
//! The client must not have a total request timeout (`reqwest::ClientBuilder::timeout`) or a read
//! timeout shorter than the server's keepalive interval: either would cut the long-lived GET stream.
//! POSTs get no timeout of their own here: bound calls with rmcp's request timeouts or the caller's
//! own; a POST still pending is abandoned when the transport closes.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use portico_net::sse::{ResponseEvents, SseError, SseEvent, SseLimits};
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap, HeaderValue};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use url::Url;

/// The default cap on one SSE event: 16 MiB, as rmcp uses for Streamable HTTP.
pub const DEFAULT_MAX_EVENT_BYTES: usize = portico_net::sse::DEFAULT_MAX_EVENT_BYTES;

/// The default bound on receiving the `endpoint` event.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How much of an error response body is kept for the error message.
const ERROR_BODY_LIMIT: usize = 500;

/// Messages read ahead of the rmcp service; beyond this the reader stops reading (TCP backpressure).
const INBOX_CAPACITY: usize = 64;

/// Where and how to open a legacy HTTP+SSE session.
#[derive(Clone)]
pub struct LegacySseConfig {
    /// The SSE URL (the `GET` stream), e.g. `https://example.com/sse`.
    pub url: Url,
    /// Sent on the GET and on every POST (e.g. `Authorization`). `Accept` on the GET and
    /// `Content-Type` on POSTs are set by the transport.
    pub headers: HeaderMap,
    /// Bound on the whole handshake: the GET's response and the `endpoint` event.
    pub connect_timeout: Duration,
    /// Largest accepted event (its `data` and `event` values and the line being read; comments
    /// never count); a larger one is skipped with a warning. Default [`DEFAULT_MAX_EVENT_BYTES`].
    pub max_event_bytes: usize,
}

impl LegacySseConfig {
    /// No extra headers, [`DEFAULT_CONNECT_TIMEOUT`] and [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new(url: Url) -> Self {
        Self {
            url,
            headers: HeaderMap::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// Header values are left out: they are usually credentials.
impl fmt::Debug for LegacySseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacySseConfig")
            .field("url", &self.url.as_str())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("connect_timeout", &self.connect_timeout)
            .field("max_event_bytes", &self.max_event_bytes)
            .finish()
    }
}

/// What went wrong with a legacy HTTP+SSE session: what failed, on which URL, and what to check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LegacySseError {
    #[error("legacy SSE: {url} is not an http:// or https:// URL")]
    UnsupportedScheme { url: Url },

    #[error("legacy SSE: GET {url} failed: {source} (is the server running and reachable?)")]
    Connect {
        url: Url,
        #[source]
        source: reqwest::Error,
    },

    #[error("legacy SSE: GET {url} returned {status}{}; {}", show_body(.body), get_status_hint(.status))]
    Status {
        url: Url,
        status: StatusCode,
        /// The start of the response body (at most 500 bytes, lossily decoded).
        body: String,
    },

    #[error(
        "legacy SSE: GET {url} answered with Content-Type {}, not text/event-stream; this URL does not \
         speak the legacy HTTP+SSE transport (it may be a Streamable HTTP endpoint or a web page)",
        .content_type.as_deref().unwrap_or("(none)")
    )]
    NotEventStream {
        url: Url,
        content_type: Option<String>,
    },

    #[error(
        "legacy SSE: no `endpoint` event from {url} within {timeout:?}; the server never said where to \
         send messages (is this a legacy HTTP+SSE URL? raise the timeout if the server is just slow)"
    )]
    EndpointTimeout { url: Url, timeout: Duration },

    #[error(
        "legacy SSE: the stream from {url} ended before the `endpoint` event; the server closed the \
         connection (check its logs; this URL may not speak the legacy HTTP+SSE transport)"
    )]
    EndedBeforeEndpoint { url: Url },

    #[error("legacy SSE: reading the stream from {url} failed: {source}")]
    Stream {
        url: Url,
        #[source]
        source: reqwest::Error,
    },

    #[error(
        "legacy SSE: the `endpoint` event from {url} is not a usable URI ({endpoint:?}): {}",
        .source.map_or_else(|| "it is empty".to_owned(), |e| e.to_string())
    )]
    InvalidEndpoint {
        url: Url,
        endpoint: String,
        /// Why it does not parse; `None` when it is empty.
        #[source]
        source: Option<url::ParseError>,
    },

    #[error(
        "legacy SSE: refusing endpoint {endpoint} announced by {url}: it is not the same origin \
         (scheme, host and port) as the SSE URL, and a server may only have messages sent back to itself"
    )]
    CrossOriginEndpoint { url: Url, endpoint: Box<Url> },

    #[error("legacy SSE: cannot encode a message for {url}: {source}")]
    Encode {
        url: Url,
        #[source]
        source: serde_json::Error,
    },

    #[error("legacy SSE: POST {url} failed: {source} (the server may have gone away)")]
    Post {
        url: Url,
        #[source]
        source: reqwest::Error,
    },

    #[error("legacy SSE: POST {url} returned {status}{}; {}", show_body(.body), post_status_hint(.status))]
    PostStatus {
        url: Url,
        status: StatusCode,
        /// The start of the response body (at most 500 bytes, lossily decoded).
        body: String,
    },

    #[error(
        "legacy SSE: POST {url} was redirected to {location}, which is another origin; the server \
         must accept messages at the endpoint it announced"
    )]
    PostRedirected { url: Url, location: Box<Url> },

    #[error(
        "legacy SSE: the stream from {url} has ended, so the session is over (the server closed it or \
         the connection dropped); reconnect to continue"
    )]
    StreamEnded { url: Url },

    #[error("legacy SSE: the transport for {url} was closed")]
    Closed { url: Url },
}

impl LegacySseError {
    /// True when the URL answered but does not speak the legacy transport: the GET returned
    /// 404 or 405, or something other than an event stream.
    pub fn is_not_legacy_sse(&self) -> bool {
        match self {
            Self::Status { status, .. } => {
                matches!(
                    *status,
                    StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
                )
            }
            Self::NotEventStream { .. } => true,
            _ => false,
        }
    }

    /// The HTTP status of a refused GET or POST.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Self::Status { status, .. } | Self::PostStatus { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The URL the failure is about: the SSE URL, or the endpoint for POST failures.
    pub fn url(&self) -> &Url {
        match self {
            Self::UnsupportedScheme { url }
            | Self::Connect { url, .. }
            | Self::Status { url, .. }
            | Self::NotEventStream { url, .. }
            | Self::EndpointTimeout { url, .. }
            | Self::EndedBeforeEndpoint { url }
            | Self::Stream { url, .. }
            | Self::InvalidEndpoint { url, .. }
            | Self::CrossOriginEndpoint { url, .. }
            | Self::Encode { url, .. }
            | Self::Post { url, .. }
            | Self::PostStatus { url, .. }
            | Self::PostRedirected { url, .. }
            | Self::StreamEnded { url }
            | Self::Closed { url } => url,
        }
    }
}

fn show_body(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        String::new()
    } else {
        format!(" with body \"{}\"", body.escape_debug())
    }
}

fn get_status_hint(status: &StatusCode) -> &'static str {
    match *status {
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => {
            "this URL does not speak the legacy HTTP+SSE transport (check the path; legacy servers \
             usually serve `/sse`; or the server may only speak Streamable HTTP)"
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            "the server refused the credentials; check the configured headers (e.g. Authorization)"
        }
        s if s.is_server_error() => "the server failed; check its logs",
        _ => "the server refused to open an event stream",
    }
}

fn post_status_hint(status: &StatusCode) -> &'static str {
    match *status {
        StatusCode::NOT_FOUND => {
            "the server does not know this session (it may have restarted or expired it); reconnect"
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            "the server refused the credentials; check the configured headers (e.g. Authorization)"
        }
        s if s.is_server_error() => "the server failed; check its logs",
        _ => "the server rejected the message",
    }
}

/// Opens the GET stream, waits for the `endpoint` event (bounded by
/// [`LegacySseConfig::connect_timeout`]), checks it is same-origin, and starts reading messages.
pub async fn connect(
    client: reqwest::Client,
    config: LegacySseConfig,
) -> Result<LegacySseTransport, LegacySseError> {
    let LegacySseConfig {
        url,
        headers,
        connect_timeout,
        max_event_bytes,
    } = config;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LegacySseError::UnsupportedScheme { url });
    }

    let handshake = open_stream(&client, &url, &headers, max_event_bytes);
    let (events, endpoint) = tokio::time::timeout(connect_timeout, handshake)
        .await
        .map_err(|_| LegacySseError::EndpointTimeout {
            url: url.clone(),
            timeout: connect_timeout,
        })??;
    tracing::debug!(url = %url, endpoint = %endpoint, "legacy SSE session open");

    let mut post_headers = headers;
    post_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let shared = Arc::new(Shared {
        client,
        endpoint,
        post_headers,
        closed: CancellationToken::new(),
        stream_ended: CancellationToken::new(),
    });
    let (inbox_tx, inbox) = mpsc::channel(INBOX_CAPACITY);
    let reader = tokio::spawn(read_messages(
        events,
        inbox_tx,
        url.clone(),
        shared.stream_ended.clone(),
    ));
    Ok(LegacySseTransport {
        sse_url: url,
        shared,
        inbox,
        reader: Some(reader),
    })
}

/// The GET and the wait for the `endpoint` event.
async fn open_stream(
    client: &reqwest::Client,
    url: &Url,
    headers: &HeaderMap,
    max_event_bytes: usize,
) -> Result<(SseEvents, Url), LegacySseError> {
    let mut get_headers = headers.clone();
    get_headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    get_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let response = client
        .get(url.clone())
        .headers(get_headers)
        .send()
        .await
        .map_err(|source| LegacySseError::Connect {
            url: url.clone(),
            source,
        })?;

    let status = response.status();
    if !status.is_success() {
        let body = read_body_prefix(response, ERROR_BODY_LIMIT).await;
        return Err(LegacySseError::Status {
            url: url.clone(),
            status,
            body,
        });
    }
    let content_type = response.headers().get(header::CONTENT_TYPE);
    if !content_type.is_some_and(|value| media_type_is(value.as_bytes(), "text/event-stream")) {
        return Err(LegacySseError::NotEventStream {
            url: url.clone(),
            content_type: content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        });
    }

    let mut events = SseEvents(ResponseEvents::from_response(
        response,
        SseLimits::with_max_event_bytes(max_event_bytes),
    ));
    loop {
        let sse = match events.next(url).await {
            Some(Ok(sse)) => sse,
            Some(Err(source)) => {
                return Err(LegacySseError::Stream {
                    url: url.clone(),
                    source,
                });
            }
            None => return Err(LegacySseError::EndedBeforeEndpoint { url: url.clone() }),
        };
        match sse.event.as_str() {
            "endpoint" => {
                let endpoint = resolve_endpoint(url, &sse.data)?;
                return Ok((events, endpoint));
            }
            "message" => {
                tracing::warn!(url = %url, "legacy SSE: ignoring a message sent before the `endpoint` event");
            }
            other => {
                tracing::debug!(url = %url, event = other, "legacy SSE: ignoring event of unknown type");
            }
        }
    }
}

/// Resolves the `endpoint` event's data against the SSE URL and enforces the same-origin rule.
fn resolve_endpoint(sse_url: &Url, data: &str) -> Result<Url, LegacySseError> {
    let invalid = |source| LegacySseError::InvalidEndpoint {
        url: sse_url.clone(),
        endpoint: data.to_owned(),
        source,
    };
    let raw = data.trim();
    if raw.is_empty() {
        return Err(invalid(None));
    }
    let mut endpoint = sse_url.join(raw).map_err(|e| invalid(Some(e)))?;
    // `origin()` compares scheme, host and port (default ports included); a non-http(s) scheme has an
    // opaque origin, which never equals another.
    if endpoint.origin() != sse_url.origin() {
        return Err(LegacySseError::CrossOriginEndpoint {
            url: sse_url.clone(),
            endpoint: Box::new(endpoint),
        });
    }
    // Userinfo would become a Basic `Authorization` header chosen by the server; fragments are never
    // sent. Neither belongs in a message endpoint.
    let _ = endpoint.set_username("");
    let _ = endpoint.set_password(None);
    endpoint.set_fragment(None);
    Ok(endpoint)
}

/// Whether a `Content-Type` value has the given media type, ignoring case and parameters.
fn media_type_is(value: &[u8], expected: &str) -> bool {
    value
        .split(|byte| *byte == b';')
        .next()
        .and_then(|essence| std::str::from_utf8(essence).ok())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

/// The first `limit` bytes of a response body, for an error message; read errors just end it.
async fn read_body_prefix(mut response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let take = chunk.len().min(limit - body.len());
                body.extend_from_slice(&chunk[..take]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A live legacy HTTP+SSE session. Hand it to rmcp: `handler.serve(transport)`.
pub struct LegacySseTransport {
    sse_url: Url,
    shared: Arc<Shared>,
    inbox: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: Option<JoinHandle<()>>,
}

/// What a send needs; shared so that the futures returned by `send` are `'static`.
struct Shared {
    client: reqwest::Client,
    endpoint: Url,
    post_headers: HeaderMap,
    /// Cancelled by `close()` or drop.
    closed: CancellationToken,
    /// Cancelled when the reader stops, whatever the reason.
    stream_ended: CancellationToken,
}

impl LegacySseTransport {
    /// The SSE URL the stream was opened on.
    pub fn sse_url(&self) -> &Url {
        &self.sse_url
    }

    /// Where messages are POSTed, as announced by the server.
    pub fn endpoint(&self) -> &Url {
        &self.shared.endpoint
    }
}

impl fmt::Debug for LegacySseTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacySseTransport")
            .field("sse_url", &self.sse_url.as_str())
            .field("endpoint", &self.shared.endpoint.as_str())
            .field("closed", &self.shared.closed.is_cancelled())
            .field("stream_ended", &self.shared.stream_ended.is_cancelled())
            .finish()
    }
}

impl Drop for LegacySseTransport {
    fn drop(&mut self) {
        self.shared.closed.cancel();
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

impl Shared {
    /// POSTs one message, with the configured headers and the message's trace headers.
    async fn post(
        &self,
        body: Vec<u8>,
        trace: Vec<(http::HeaderName, HeaderValue)>,
    ) -> Result<(), LegacySseError> {
        let url = &self.endpoint;
        let mut headers = self.post_headers.clone();
        headers.extend(trace);
        let request = self
            .client
            .post(url.clone())
            .headers(headers)
            .body(body)
            .send();
        let response = tokio::select! {
            biased;
            () = self.closed.cancelled() => return Err(LegacySseError::Closed { url: url.clone() }),
            () = self.stream_ended.cancelled() => {
                return Err(LegacySseError::StreamEnded { url: url.clone() });
            }
            response = request => response.map_err(|source| LegacySseError::Post {
                url: url.clone(),
                source,
            })?,
        };
        if response.url().origin() != url.origin() {
            return Err(LegacySseError::PostRedirected {
                url: url.clone(),
                location: Box::new(response.url().clone()),
            });
        }
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = tokio::select! {
            biased;
            () = self.closed.cancelled() => String::new(),
            body = read_body_prefix(response, ERROR_BODY_LIMIT) => body,
        };
        Err(LegacySseError::PostStatus {
            url: url.clone(),
            status,
            body,
        })
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("legacy-sse")
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let body = serde_json::to_vec(&item);
        let trace = crate::trace_context::trace_headers(&item);
        async move {
            let url = &shared.endpoint;
            let body = body.map_err(|source| LegacySseError::Encode {
                url: url.clone(),
                source,
            })?;
            if shared.closed.is_cancelled() {
                return Err(LegacySseError::Closed { url: url.clone() });
            }
            if shared.stream_ended.is_cancelled() {
                return Err(LegacySseError::StreamEnded { url: url.clone() });
            }
            shared.post(body, trace).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.inbox.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.closed.cancel();
        self.inbox.close();
        if let Some(reader) = self.reader.take() {
            reader.abort();
            // Wait until the task (and with it the response stream) is gone.
            let _ = reader.await;
        }
        Ok(())
    }
}

/// The background reader: forwards every `message` event to the inbox until the stream ends.
async fn read_messages(
    mut events: SseEvents,
    inbox: mpsc::Sender<ServerJsonRpcMessage>,
    url: Url,
    stream_ended: CancellationToken,
) {
    // The guard also covers abort (`close()` or drop).
    let ended = stream_ended.drop_guard();
    forward_messages(&mut events, &inbox, &url).await;
    // Mark the stream ended before closing the inbox: once `receive()` sees the end, sends fail fast.
    drop(ended);
    drop(inbox);
}

async fn forward_messages(
    events: &mut SseEvents,
    inbox: &mpsc::Sender<ServerJsonRpcMessage>,
    url: &Url,
) {
    loop {
        let sse = match events.next(url).await {
            Some(Ok(sse)) => sse,
            Some(Err(error)) => {
                tracing::warn!(url = %url, error = %portico_core::text::log_safe(&error.to_string()), "legacy SSE stream failed; the session is over");
                return;
            }
            None => {
                tracing::info!(url = %url, "legacy SSE stream ended; the session is over");
                return;
            }
        };
        match sse.event.as_str() {
            "message" => {}
            "endpoint" => {
                tracing::debug!(url = %url, "legacy SSE: ignoring a repeated `endpoint` event");
                continue;
            }
            other => {
                tracing::debug!(url = %url, event = other, "legacy SSE: ignoring event of unknown type");
                continue;
            }
        }
        for message in decode_messages(url, &sse.data) {
            if inbox.send(message).await.is_err() {
                return; // the transport was closed or dropped
            }
        }
    }
}

/// One JSON-RPC message, or a batch (allowed in 2024-11-05); what does not parse is logged and
/// dropped.
fn decode_messages(url: &Url, data: &str) -> Vec<ServerJsonRpcMessage> {
    if !data.trim_start().starts_with('[') {
        return match serde_json::from_str(data) {
            Ok(message) => vec![message],
            Err(error) => {
                tracing::warn!(url = %url, error = %portico_core::text::log_safe(&error.to_string()), "legacy SSE: ignoring a message that is not JSON-RPC");
                Vec::new()
            }
        };
    }
    match serde_json::from_str::<Vec<serde_json::Value>>(data) {
        Ok(batch) => batch
            .into_iter()
            .filter_map(|value| {
                serde_json::from_value(value)
                    .inspect_err(|error| {
                        tracing::warn!(url = %url, error = %portico_core::text::log_safe(&error.to_string()), "legacy SSE: ignoring a batch entry that is not JSON-RPC");
                    })
                    .ok()
            })
            .collect(),
        Err(error) => {
            tracing::warn!(url = %url, error = %portico_core::text::log_safe(&error.to_string()), "legacy SSE: ignoring a batch that is not JSON");
            Vec::new()
        }
    }
}

/// The events of the GET stream. An event over the cap is skipped with a warning; the session
/// goes on.
struct SseEvents(ResponseEvents);

impl SseEvents {
    /// The next event; an error when the body broke off; `None` at its end.
    async fn next(&mut self, url: &Url) -> Option<Result<SseEvent, reqwest::Error>> {
        loop {
            match self.0.next().await? {
                Ok(event) => return Some(Ok(event)),
                Err(SseError::Body(error)) => return Some(Err(error)),
                Err(too_large) => {
                    tracing::warn!(url = %url, error = %too_large, "legacy SSE: skipped an event larger than the limit");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_resolution_and_same_origin() {
        let base = Url::parse("http://127.0.0.1:8080/mcp/sse?x=1").unwrap();
        let ok = |data: &str| resolve_endpoint(&base, data).unwrap().to_string();
        assert_eq!(
            ok("/message?sessionId=a"),
            "http://127.0.0.1:8080/message?sessionId=a"
        );
        assert_eq!(
            ok(" messages?s=b \n"),
            "http://127.0.0.1:8080/mcp/messages?s=b"
        );
        assert_eq!(
            ok("http://127.0.0.1:8080/m?s=c#frag"),
            "http://127.0.0.1:8080/m?s=c"
        );
        assert_eq!(ok("http://u:p@127.0.0.1:8080/m"), "http://127.0.0.1:8080/m");
        assert_eq!(ok("//127.0.0.1:8080/m"), "http://127.0.0.1:8080/m");

        let default_port = Url::parse("https://example.com/sse").unwrap();
        assert_eq!(
            resolve_endpoint(&default_port, "https://example.com:443/m")
                .unwrap()
                .as_str(),
            "https://example.com/m"
        );

        for hostile in [
            "http://127.0.0.1:8081/m",
            "https://127.0.0.1:8080/m",
            "http://localhost:8080/m",
            "//evil.example/m",
            "data:text/plain,hi",
            "file:///etc/passwd",
        ] {
            let err = resolve_endpoint(&base, hostile).unwrap_err();
            assert!(
                matches!(err, LegacySseError::CrossOriginEndpoint { .. }),
                "{hostile}: {err}"
            );
        }
        assert!(matches!(
            resolve_endpoint(&base, "  "),
            Err(LegacySseError::InvalidEndpoint { .. })
        ));
        assert!(matches!(
            resolve_endpoint(&base, "http://[::1"),
            Err(LegacySseError::InvalidEndpoint { .. })
        ));
    }

    #[test]
    fn media_type_ignores_case_and_parameters() {
        assert!(media_type_is(b"text/event-stream", "text/event-stream"));
        assert!(media_type_is(
            b"Text/Event-Stream; charset=utf-8",
            "text/event-stream"
        ));
        assert!(!media_type_is(b"application/json", "text/event-stream"));
        assert!(!media_type_is(b"text/event-streamx", "text/event-stream"));
    }
}
