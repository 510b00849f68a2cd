//! One live session with one upstream MCP server.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use portico_config::{McpServerConfig, Transport, expand_vars};
use portico_core::{
    CallError, CompletionRef, JsonObject, PromptDef, ResourceDef, ResourceTemplateDef,
    ServerCatalog, ToolDef, ToolResult, to_object,
};
use portico_net::{CredentialScope, NetPolicy, SafeClient};
use portico_secrets::Vars;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, CompleteRequestParams, GetExtensions,
    GetPromptRequestParams, InputRequest, InputRequests, InputResponses, ProtocolVersion,
    ReadResourceRequestParams, ServerNotification, ServerResult, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
// Logging is deprecated from 2026-07-28 on (SEP-2577); older servers still take `logging/setLevel`.
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, Peer, PeerRequestOptions,
    RoleClient, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::ServerLog;
use crate::client_handler::{ActiveCalls, PorticoClient, UpstreamEvent};
use crate::era_probe::{self, Era, Pings, ProbeError, WithoutProbeAnswers};
use crate::oauth::{AuthorizedHttp, UpstreamAuth};
use crate::ordering::ProgressInOrder;
use crate::results::tool_result_from_rmcp;
use crate::stderr_tail::StderrTail;
use crate::stdio::StopGrace;
use crate::trace_context::TracedHttp;
use crate::{legacy_sse, stdio};
use portico_core::relay::{CallContext, RelayRequest};

/// Everything that can go wrong with an upstream. Each variant names the server, says what failed and,
/// where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("server `{server}`: {message}")]
    Config { server: String, message: String },
    #[error("server `{server}`: cannot start `{command}`: {}", spawn_cause(.cause))]
    Spawn {
        server: String,
        command: String,
        /// Not a `#[source]`: the message already says it, in words.
        cause: std::io::Error,
    },
    #[error("server `{server}`: {message}")]
    Refused { server: String, message: String },
    #[error("server `{server}`: handshake failed: {message}")]
    Handshake { server: String, message: String },
    /// Nothing answered at the URL: the root cause of the failed connection, in plain words.
    #[error("server `{server}`: cannot reach {url}: {cause}")]
    Unreachable {
        server: String,
        url: String,
        cause: String,
    },
    /// A stdio child ended the connection before the handshake was done, with its last stderr lines.
    #[error("server `{server}`: `{command}` {message}{}", stderr_block(.stderr, .hint.as_deref()))]
    ChildFailed {
        server: String,
        command: String,
        message: String,
        stderr: Vec<String>,
        hint: Option<String>,
    },
    #[error(
        "server `{server}`: no handshake answer within {secs}s (raise startup_timeout_secs if the server is just slow to start){}", stderr_block(.stderr, .hint.as_deref())
    )]
    HandshakeTimeout {
        server: String,
        secs: u64,
        /// A stdio child's last stderr lines (empty otherwise).
        stderr: Vec<String>,
        hint: Option<String>,
    },
    #[error(
        "server `{server}`: {what} found no free place within {secs}s: {max} requests were already in flight to this server (its max_concurrent_calls); retry later, or raise max_concurrent_calls if the server copes"
    )]
    Busy {
        server: String,
        what: String,
        max: usize,
        secs: u64,
    },
    /// An OAuth-protected server with no usable token, in a process that may not open a browser.
    #[error("server `{server}` needs login ({reason}); run `portico auth login {server}`")]
    NeedsLogin { server: String, reason: String },
    /// `${NAME}`s in the server's `env` or `headers` that neither Portico's environment nor its
    /// secret store has: the server cannot start until they are set.
    #[error(
        "server `{server}` needs {}: set neither in Portico's environment nor in its secret store; run {}",
        secret_words(.names),
        set_commands(.names)
    )]
    NeedsSecret { server: String, names: Vec<String> },
    #[error("server `{server}`: {what} timed out after {secs}s")]
    Timeout {
        server: String,
        what: String,
        secs: u64,
    },
    #[error(
        "server `{server}`: connection closed during {what}; the server exited or dropped the connection and will be restarted"
    )]
    Closed { server: String, what: String },
    #[error("server `{server}`: {what} failed: {message}")]
    Remote {
        server: String,
        what: String,
        code: Option<i32>,
        message: String,
        /// The error's `data`, as the server sent it (a resource-not-found error's `uri`); boxed,
        /// as it is rare and every `Result` carrying this error would be as large.
        data: Option<Box<serde_json::Value>>,
    },
}

/// Why a command did not start, in words, with what to do.
fn spawn_cause(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            "no such program (is it installed, and on the PATH Portico was started with?)".into()
        }
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (is it an executable file?)".into()
        }
        _ => portico_net::root_cause(error),
    }
}

/// `secret A` or `secrets A, B`.
fn secret_words(names: &[String]) -> String {
    match names {
        [one] => format!("secret {one}"),
        _ => format!("secrets {}", names.join(", ")),
    }
}

/// The commands that set each of `names`.
fn set_commands(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`portico secret set {name}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Expands `${VAR}`s, noting the names the lookup does not know instead of stopping at the first,
/// so one error can name every secret a server needs.
#[derive(Default)]
pub(crate) struct MissingVars {
    names: std::cell::RefCell<Vec<String>>,
    /// The first `${...}` whose text cannot be a variable's name: no secret can be set for it.
    malformed: std::cell::RefCell<Option<String>>,
}

impl MissingVars {
    /// `value` expanded, a missing variable as empty text (the value is not used when one is
    /// missing: [`MissingVars::into_result`] fails).
    pub(crate) fn expand(
        &self,
        value: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<String, portico_config::ExpandError> {
        expand_vars(value, |name| {
            Some(lookup(name).unwrap_or_else(|| {
                if !portico_config::is_variable_name(name) {
                    self.malformed
                        .borrow_mut()
                        .get_or_insert_with(|| name.to_string());
                    return String::new();
                }
                let mut missing = self.names.borrow_mut();
                if !missing.iter().any(|n| n == name) {
                    missing.push(name.to_string());
                }
                String::new()
            }))
        })
    }

    pub(crate) fn into_result(self, server: &str) -> Result<(), UpstreamError> {
        if let Some(text) = self.malformed.into_inner() {
            return Err(UpstreamError::Config {
                server: server.to_string(),
                message: format!(
                    "`${{{text}}}` does not name a variable: write `${{NAME}}` with letters, digits and `_`"
                ),
            });
        }
        let names = self.names.into_inner();
        if names.is_empty() {
            return Ok(());
        }
        Err(UpstreamError::NeedsSecret {
            server: server.to_string(),
            names,
        })
    }
}

/// A child's last stderr lines under its error, indented, and the hint they led to.
fn stderr_block(lines: &[String], hint: Option<&str>) -> String {
    let mut block = String::new();
    if !lines.is_empty() {
        block.push_str("; its stderr ended with:");
        for line in lines {
            block.push_str("\n    ");
            block.push_str(line);
        }
    }
    if let Some(hint) = hint {
        block.push_str("\n  (");
        block.push_str(hint);
        block.push(')');
    }
    block
}

impl UpstreamError {
    /// The last stderr lines of a stdio child that failed at start (empty for other errors).
    pub fn stderr_tail(&self) -> &[String] {
        match self {
            UpstreamError::ChildFailed { stderr, .. }
            | UpstreamError::HandshakeTimeout { stderr, .. } => stderr,
            _ => &[],
        }
    }

    /// What kind of failure it is, as a trace's `error.kind` says it.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Config { .. } => "config",
            UpstreamError::Spawn { .. } => "spawn",
            UpstreamError::Refused { .. } => "refused",
            UpstreamError::Handshake { .. } => "handshake",
            UpstreamError::Unreachable { .. } => "unreachable",
            UpstreamError::ChildFailed { .. } => "child_failed",
            UpstreamError::HandshakeTimeout { .. } => "handshake_timeout",
            UpstreamError::Busy { .. } => "busy",
            UpstreamError::NeedsLogin { .. } => "needs_login",
            UpstreamError::NeedsSecret { .. } => "needs_secret",
            UpstreamError::Timeout { .. } => "timeout",
            UpstreamError::Closed { .. } => "closed",
            UpstreamError::Remote { .. } => "remote",
        }
    }

    /// True when retrying cannot help until the configuration changes.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            UpstreamError::Config { .. } | UpstreamError::Refused { .. }
        )
    }
}

/// What kind of failure it is for a tool call; the message stays the error's own.
impl From<UpstreamError> for CallError {
    fn from(error: UpstreamError) -> Self {
        let message = error.to_string();
        match error {
            UpstreamError::Timeout { .. } | UpstreamError::HandshakeTimeout { .. } => {
                CallError::Timeout(message)
            }
            UpstreamError::Busy { .. } => CallError::Budget(message),
            UpstreamError::Closed { .. }
            | UpstreamError::Spawn { .. }
            | UpstreamError::Handshake { .. }
            | UpstreamError::Unreachable { .. }
            | UpstreamError::ChildFailed { .. }
            | UpstreamError::Config { .. }
            | UpstreamError::Refused { .. }
            | UpstreamError::NeedsLogin { .. }
            | UpstreamError::NeedsSecret { .. } => CallError::UpstreamGone(message),
            UpstreamError::Remote { .. } => CallError::UpstreamFailed(message),
        }
    }
}

/// `capabilities.extensions` declaring the MCP tasks extension (SEP-2663).
fn tasks_extension() -> serde_json::Value {
    serde_json::json!({ rmcp::model::TASKS_EXTENSION_ID: {} })
}

/// What the handshake told us about the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandshakeInfo {
    pub protocol_version: String,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub instructions: Option<String>,
    /// `stdio`, `streamable-http` or `legacy-sse`: what the connection really speaks.
    pub transport: &'static str,
    pub pid: Option<u32>,
}

/// Resolves when the session ends, with the reason. Await it after [`Upstream::shutdown`] to be sure a
/// stdio child has been stopped and reaped.
pub struct UpstreamExit(tokio::task::JoinHandle<String>, Option<StderrTail>);

impl UpstreamExit {
    /// Why the session ended, in words: `exited or closed the connection`, with a stdio child's
    /// last stderr lines when it ended by itself.
    pub async fn wait(self) -> String {
        let reason = self
            .0
            .await
            .unwrap_or_else(|e| format!("session task failed: {e}"));
        match self.1 {
            Some(tail) if reason == CLOSED => {
                let stderr = tail.settle(STDERR_SETTLE).await;
                let hint = certificate_hint_for(&stderr);
                format!("{reason}{}", stderr_block(&stderr, hint.as_deref()))
            }
            _ => reason,
        }
    }
}

/// The session ended from the other side.
const CLOSED: &str = "exited or closed the connection";

fn quit_reason(reason: Result<rmcp::service::QuitReason, tokio::task::JoinError>) -> String {
    match reason {
        Ok(rmcp::service::QuitReason::Closed) => CLOSED.to_string(),
        Ok(rmcp::service::QuitReason::Cancelled) => "was stopped".to_string(),
        Ok(rmcp::service::QuitReason::JoinError(e)) | Err(e) => {
            format!("session task failed: {e}")
        }
        Ok(other) => format!("session ended: {other:?}"),
    }
}

/// A connected pair, whose exit also reports the child's last stderr lines.
trait WithStderr {
    fn with_stderr(self, tail: &StderrTail) -> Self;
}

impl WithStderr for (Upstream, UpstreamExit) {
    fn with_stderr(self, tail: &StderrTail) -> Self {
        let (upstream, UpstreamExit(task, _)) = self;
        (upstream, UpstreamExit(task, Some(tail.clone())))
    }
}

/// A live session with one upstream. Cheap to share behind an `Arc`: calls only clone the rmcp peer
/// handle, so concurrent calls never wait on each other.
pub struct Upstream {
    server: String,
    peer: Peer<RoleClient>,
    active: Arc<ActiveCalls>,
    info: HandshakeInfo,
    timeout: Duration,
    /// Places for requests in flight (`max_concurrent_calls`); past them a request waits, within its
    /// timeout.
    places: tokio::sync::Semaphore,
    max_in_flight: usize,
    /// Requests waiting for a place now.
    waiting_for_place: std::sync::atomic::AtomicUsize,
    stop: CancellationToken,
    /// The `notifications/cancelled` being sent for calls dropped mid-flight: the session waits
    /// for them (briefly) before it closes, so a command that stops right after cancelling a call
    /// (Ctrl-C on `portico call`) still tells the server.
    cancels: tokio_util::task::TaskTracker,
    /// Where the session's events go: list changes, resource updates.
    events: mpsc::UnboundedSender<UpstreamEvent>,
    /// On a 2026-07-28 session, the update stream of each subscribed resource.
    resource_streams: crate::resource_updates::ResourceStreams,
    /// On a handshake-era session, how many subscribers each subscribed resource has.
    handshake_subscriptions: crate::resource_updates::HandshakeSubscriptions,
    /// On a 2026-07-28 session, which has no `logging/setLevel`, the level a client set: sent in
    /// the `_meta` of each call instead (`io.modelcontextprotocol/logLevel`).
    #[allow(deprecated)]
    log_level: std::sync::Mutex<Option<rmcp::model::LoggingLevel>>,
}

/// Names a request in the errors it may end with; called only to write one, so a call that succeeds
/// formats nothing.
type What<'a> = dyn Fn() -> String + Sync + 'a;

/// How many `input_required` rounds one call may take before Portico gives up on it.
const MAX_INPUT_ROUNDS: usize = 10;

/// How often a handshake waiting on a login looks whether it is over.
const LOGIN_POLL: Duration = Duration::from_millis(250);

const PREFERRED_VERSIONS: &[ProtocolVersion] = &[ProtocolVersion::V_2026_07_28];

impl Upstream {
    /// Connects and completes the handshake within the server's `startup_timeout_secs`. A stdio child is
    /// stopped with `grace` when the session ends. `${VAR}`s are read from Portico's environment
    /// only.
    pub async fn connect(
        config: &McpServerConfig,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        grace: StopGrace,
    ) -> Result<(Upstream, UpstreamExit), UpstreamError> {
        Self::connect_with_auth(config, events, grace, None, &Vars::environment()).await
    }

    /// [`Upstream::connect`], authorizing an HTTP server with `auth` when it requires OAuth, and
    /// reading `env` names and `${VAR}`s through `vars` (Portico's environment, then its secret
    /// store; [`UpstreamError::NeedsSecret`] names those it has not). The handshake's deadline
    /// does not count the time a login waits for the browser.
    pub async fn connect_with_auth(
        config: &McpServerConfig,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        grace: StopGrace,
        auth: Option<Arc<UpstreamAuth>>,
        vars: &Vars,
    ) -> Result<(Upstream, UpstreamExit), UpstreamError> {
        Self::connect_logged(config, events, grace, auth, vars, &ServerLog::default()).await
    }

    /// [`Upstream::connect_with_auth`], with a stdio child's stderr going to `log` as well (the
    /// supervisor's log of this server, which outlives one connection). The start, handshake
    /// included, is bounded by the server's `startup_timeout_secs`, not by `timeout_secs`.
    pub async fn connect_logged(
        config: &McpServerConfig,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        grace: StopGrace,
        auth: Option<Arc<UpstreamAuth>>,
        vars: &Vars,
        log: &ServerLog,
    ) -> Result<(Upstream, UpstreamExit), UpstreamError> {
        let timeout = config.startup_timeout();
        let server = config.name.clone();
        let tail = StderrTail::logging_to(log);
        let refusals_before = auth.as_ref().map(|a| a.refusals());
        let connecting = Self::connect_inner(config, events, grace, &tail, auth.as_ref(), vars);
        let mut connecting = std::pin::pin!(connecting);
        let mut deadline = tokio::time::Instant::now() + timeout;
        let mut waited_for_login = false;
        let result = loop {
            tokio::select! {
                result = &mut connecting => break Some(result),
                _ = tokio::time::sleep_until(deadline) => {
                    let login = auth.as_ref().is_some_and(|a| a.login_running());
                    if login {
                        waited_for_login = true;
                        deadline = tokio::time::Instant::now() + LOGIN_POLL;
                    } else if waited_for_login {
                        // The login is over: the handshake gets its full time again.
                        waited_for_login = false;
                        deadline = tokio::time::Instant::now() + timeout;
                    } else {
                        break None;
                    }
                }
            }
        };
        match result {
            Some(Ok(connected)) => Ok(connected),
            // Only a refusal of this attempt's own requests is `needs login`.
            Some(Err(error)) => Err(
                match auth
                    .as_ref()
                    .zip(refusals_before)
                    .and_then(|(a, before)| a.needs_login_since(before))
                {
                    Some(reason) => UpstreamError::NeedsLogin { server, reason },
                    None => error,
                },
            ),
            None => {
                let stderr = tail.lines();
                // A package runner that never answers is often stuck downloading, behind a proxy
                // whose CA it was not given.
                let fetches_packages = matches!(&config.transport,
                    Transport::Stdio { command, .. } if is_package_runner(command));
                let hint = certificate_hint_for(&stderr).or_else(|| {
                    fetches_packages.then(|| {
                        crate::stderr_tail::certificate_hint(|name| std::env::var(name).ok())
                    })
                });
                Err(UpstreamError::HandshakeTimeout {
                    server,
                    secs: config.startup_timeout_secs(),
                    hint,
                    stderr,
                })
            }
        }
    }

    async fn connect_inner(
        config: &McpServerConfig,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        grace: StopGrace,
        tail: &StderrTail,
        auth: Option<&Arc<UpstreamAuth>>,
        vars: &Vars,
    ) -> Result<(Upstream, UpstreamExit), UpstreamError> {
        let server = config.name.as_str();
        let active = Arc::new(ActiveCalls::default());
        let handler = || PorticoClient {
            server: server.to_string(),
            events: events.clone(),
            active: active.clone(),
            protocol_version: pinned_version(config),
        };
        let lifecycle = lifecycle_for(config);
        match &config.transport {
            Transport::Stdio { command, args, cwd } => {
                let (child, pid) = stdio::spawn(
                    &stdio::StdioSpec {
                        server,
                        command,
                        args,
                        cwd: cwd.as_deref(),
                        env: &config.env,
                        vars,
                    },
                    grace,
                    tail,
                )?;
                let mut child = child;
                let (client, lifecycle) = match lifecycle {
                    ClientLifecycleMode::Auto {
                        preferred_versions, ..
                    } => match probed_lifecycle(
                        &mut child,
                        &handler,
                        preferred_versions,
                        server,
                        Pings::Send,
                    )
                    .await
                    {
                        Ok((client, lifecycle, _)) => (client, lifecycle),
                        Err(ProbeError::Closed) => {
                            return Err(child_failed(
                                server,
                                command,
                                ClientInitializeError::ConnectionClosed("before answering".into()),
                                tail,
                            )
                            .await);
                        }
                        Err(ProbeError::Send(error)) => {
                            return Err(child_failed_with(
                                server,
                                command,
                                format!("could not be written to: {error}"),
                                tail,
                            )
                            .await);
                        }
                    },
                    pinned => (handler(), pinned),
                };
                let transport =
                    ProgressInOrder::new(WithoutProbeAnswers::new(child, server), server, &active);
                let service = match client.serve_with_lifecycle(transport, lifecycle).await {
                    Ok(service) => service,
                    Err(error) => return Err(child_failed(server, command, error, tail).await),
                };
                Ok(Self::start(
                    config,
                    service,
                    "stdio",
                    pid,
                    events.clone(),
                    active.clone(),
                )
                .with_stderr(tail))
            }
            Transport::Http { url, headers } => {
                let client = safe_client(config, url, headers)?;
                let url = check_url(server, &client, url)?;
                let headers = expand_headers(server, headers, vars)?;
                let service = serve_streamable(
                    handler, &client, &url, &headers, config, &active, &lifecycle, auth,
                )
                .await?;
                Ok(Self::start(
                    config,
                    service,
                    "streamable-http",
                    None,
                    events.clone(),
                    active.clone(),
                ))
            }
            Transport::Sse { url, headers } => {
                let client = safe_client(config, url, headers)?;
                let url = check_url(server, &client, url)?;
                let headers = expand_headers(server, headers, vars)?;
                // Many URLs labelled "sse" really speak Streamable HTTP; the spec's backwards-compatibility
                // rule is to try that first and fall back to the legacy GET stream when it fails.
                let streamable_error = match serve_streamable(
                    handler, &client, &url, &headers, config, &active, &lifecycle, auth,
                )
                .await
                {
                    Ok(service) => {
                        return Ok(Self::start(
                            config,
                            service,
                            "streamable-http",
                            None,
                            events.clone(),
                            active.clone(),
                        ));
                    }
                    Err(e) => e,
                };
                // Nothing listening there answers legacy HTTP+SSE either.
                if matches!(
                    streamable_error,
                    UpstreamError::Refused { .. } | UpstreamError::Unreachable { .. }
                ) {
                    return Err(streamable_error);
                }
                tracing::debug!(
                    server,
                    "not Streamable HTTP ({streamable_error}); trying legacy HTTP+SSE"
                );
                let mut header_map = reqwest::header::HeaderMap::new();
                for (name, value) in &headers {
                    header_map.insert(name.clone(), value.clone());
                }
                // The legacy transport (2024-11-05) predates MCP's authorization spec: a stored
                // token is sent, but a refusal is not answered with a login.
                if let Some(auth) = auth
                    && let Ok(Some(token)) = auth.token().await
                    && let Ok(mut value) = http::HeaderValue::try_from(format!("Bearer {token}"))
                {
                    value.set_sensitive(true);
                    header_map.insert(http::header::AUTHORIZATION, value);
                }
                let legacy = legacy_sse::connect(
                    client.http().clone(),
                    legacy_sse::LegacySseConfig {
                        url: url.clone(),
                        headers: header_map,
                        connect_timeout: config.timeout(),
                        max_event_bytes: 16 * 1024 * 1024,
                    },
                )
                .await
                .map_err(|e| match (client.last_refusal_message(), client.last_connect_failure()) {
                    (Some(message), _) => UpstreamError::Refused {
                        server: server.to_string(),
                        message,
                    },
                    (None, Some(cause)) => UpstreamError::Unreachable {
                        server: server.to_string(),
                        url: url.to_string(),
                        cause,
                    },
                    (None, None) => UpstreamError::Handshake {
                    server: server.to_string(),
                    message: format!("neither Streamable HTTP ({}) nor legacy HTTP+SSE ({e}) worked at {url}", without_server(&streamable_error)),
                    },
                })?;
                let service = handler()
                    .serve_with_lifecycle(ProgressInOrder::new(legacy, server, &active), lifecycle)
                    .await
                    .map_err(|e| handshake_error_via(server, e, Some((&client, &url))))?;
                Ok(Self::start(
                    config,
                    service,
                    "legacy-sse",
                    None,
                    events.clone(),
                    active.clone(),
                ))
            }
        }
    }

    fn start(
        config: &McpServerConfig,
        service: rmcp::service::RunningService<RoleClient, PorticoClient>,
        transport: &'static str,
        pid: Option<u32>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        active: Arc<ActiveCalls>,
    ) -> (Upstream, UpstreamExit) {
        let peer = service.peer().clone();
        let peer_info = peer.peer_info();
        let info = HandshakeInfo {
            protocol_version: peer_info
                .as_ref()
                .map(|i| i.protocol_version.to_string())
                .unwrap_or_else(|| "unknown".into()),
            server_name: peer_info
                .as_ref()
                .and_then(|i| i.server_info.as_ref().map(|s| s.name.clone())),
            server_version: peer_info
                .as_ref()
                .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone())),
            instructions: peer_info.as_ref().and_then(|i| i.instructions.clone()),
            transport,
            pid,
        };
        let stop = CancellationToken::new();
        let service_stop = service.cancellation_token();
        let task_stop = stop.clone();
        let cancels = tokio_util::task::TaskTracker::new();
        let pending_cancels = cancels.clone();
        let exit = tokio::spawn(async move {
            let waiting = service.waiting();
            tokio::pin!(waiting);
            let reason = tokio::select! {
                reason = &mut waiting => quit_reason(reason),
                _ = task_stop.cancelled() => {
                    send_pending_cancels(&pending_cancels).await;
                    service_stop.cancel();
                    quit_reason(waiting.await)
                }
            };
            if let Some(pid) = pid {
                stdio::kill_leftover_group(pid);
            }
            reason
        });
        let upstream = Upstream {
            server: config.name.clone(),
            peer,
            active,
            info,
            timeout: config.timeout(),
            places: tokio::sync::Semaphore::new(config.max_concurrent_calls.max(1)),
            max_in_flight: config.max_concurrent_calls.max(1),
            waiting_for_place: std::sync::atomic::AtomicUsize::new(0),
            stop,
            cancels,
            events: events.clone(),
            resource_streams: Default::default(),
            handshake_subscriptions: Default::default(),
            log_level: Default::default(),
        };
        upstream.listen_for_changes(peer_info.as_deref(), events);
        (upstream, UpstreamExit(exit, None))
    }

    /// On 2026-07-28 sessions list-change notifications are only sent on a `subscriptions/listen` stream;
    /// older servers send them unprompted and the handler relays them.
    fn listen_for_changes(
        &self,
        peer_info: Option<&rmcp::model::ServerPeerInfo>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
    ) {
        let Some(info) = peer_info else { return };
        if info.protocol_version < ProtocolVersion::NO_INITIALIZE {
            return;
        }
        let caps = &info.capabilities;
        let mut filter = SubscriptionFilter::builder();
        let mut any = false;
        if caps
            .tools
            .as_ref()
            .is_some_and(|t| t.list_changed == Some(true))
        {
            filter = filter.tools_list_changed();
            any = true;
        }
        if caps
            .prompts
            .as_ref()
            .is_some_and(|p| p.list_changed == Some(true))
        {
            filter = filter.prompts_list_changed();
            any = true;
        }
        if caps
            .resources
            .as_ref()
            .is_some_and(|r| r.list_changed == Some(true))
        {
            filter = filter.resources_list_changed();
            any = true;
        }
        if !any {
            return;
        }
        let filter = filter.build();
        let peer = self.peer.clone();
        let server = self.server.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let mut subscription = match peer.listen(filter).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        server,
                        "cannot subscribe to list changes: {}",
                        portico_core::text::log_safe(&e.to_string())
                    );
                    return;
                }
            };
            loop {
                let next = tokio::select! {
                    next = subscription.next() => next,
                    _ = stop.cancelled() => return,
                };
                let event = match next {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                        UpstreamEvent::ToolsChanged
                    }
                    Ok(Some(ServerNotification::PromptListChangedNotification(_))) => {
                        UpstreamEvent::PromptsChanged
                    }
                    Ok(Some(ServerNotification::ResourceListChangedNotification(_))) => {
                        UpstreamEvent::ResourcesChanged
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => return,
                };
                if events.send(event).is_err() {
                    return;
                }
            }
        });
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn info(&self) -> &HandshakeInfo {
        &self.info
    }

    /// Ends the session: closes the transport and, for stdio, stops the child (stdin closed, then
    /// SIGTERM, then SIGKILL, with the [`StopGrace`] it was connected with). Await the matching
    /// [`UpstreamExit`] to know it is done.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Requests in flight to this server now.
    pub fn in_flight(&self) -> usize {
        self.max_in_flight - self.places.available_permits()
    }

    /// Requests waiting for a place now (places are given in arrival order).
    pub fn waiting_for_place(&self) -> usize {
        self.waiting_for_place
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Takes a place for a request in flight, waiting until `deadline` for one to be free.
    async fn place(
        &self,
        what: &What<'_>,
        deadline: tokio::time::Instant,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, UpstreamError> {
        if let Ok(place) = self.places.try_acquire() {
            return Ok(place);
        }
        self.waiting_for_place
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let waited = tokio::time::timeout_at(deadline, self.places.acquire()).await;
        self.waiting_for_place
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        match waited {
            Ok(Ok(place)) => Ok(place),
            // The semaphore is never closed; a timeout is the only way here.
            _ => Err(UpstreamError::Busy {
                server: self.server.clone(),
                what: what(),
                max: self.max_in_flight,
                secs: self.timeout.as_secs(),
            }),
        }
    }

    /// A request holding a place in flight: the wait for the place and the request share the timeout.
    fn request<'a, T: 'a>(
        &'a self,
        what: impl Into<String>,
        future: impl Future<Output = Result<T, ServiceError>> + 'a,
    ) -> impl Future<Output = Result<T, UpstreamError>> + 'a {
        // Boxed before it is captured: rmcp's request futures are 10–16 KB, and every future awaiting
        // this one (and every task holding it) would be as large.
        let future = Box::pin(future);
        let what = what.into();
        async move {
            let what = || what.clone();
            let deadline = tokio::time::Instant::now() + self.timeout;
            let _place = self.place(&what, deadline).await?;
            self.timed(&what, deadline, future).await
        }
    }

    async fn timed<T>(
        &self,
        what: &What<'_>,
        deadline: tokio::time::Instant,
        future: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, UpstreamError> {
        match tokio::time::timeout_at(deadline, future).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(service_error(&self.server, what(), e)),
            Err(_) => Err(UpstreamError::Timeout {
                server: self.server.clone(),
                what: what(),
                secs: self.timeout.as_secs(),
            }),
        }
    }

    /// Lists the server's tools (following pagination), each definition verbatim. Over Streamable
    /// HTTP from 2026-07-28 on, the listing is also where the transport learns which arguments a
    /// call sends as `Mcp-Param-*` headers (SEP-2243): a session that calls a tool with such
    /// arguments lists first.
    pub async fn list_tools(&self) -> Result<Vec<ToolDef>, UpstreamError> {
        Ok(self
            .request("tools/list", self.peer.list_all_tools())
            .await?
            .into_iter()
            .map(|tool| ToolDef {
                name: tool.name.to_string(),
                definition: to_object(&tool),
            })
            .collect())
    }

    /// Lists everything the server offers (following pagination), keeping each definition verbatim.
    pub async fn list_catalog(&self) -> Result<ServerCatalog, UpstreamError> {
        let caps = self
            .peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let mut catalog = ServerCatalog {
            server: self.server.clone(),
            ..Default::default()
        };
        if caps.tools.is_some() {
            catalog.tools = self.list_tools().await?;
        }
        if caps.prompts.is_some() {
            for prompt in self
                .request("prompts/list", self.peer.list_all_prompts())
                .await?
            {
                let definition = to_object(&prompt);
                catalog.prompts.push(PromptDef {
                    name: prompt.name.to_string(),
                    definition,
                });
            }
        }
        if caps.resources.is_some() {
            for resource in self
                .request("resources/list", self.peer.list_all_resources())
                .await?
            {
                let definition = to_object(&resource);
                catalog.resources.push(ResourceDef {
                    uri: resource.uri.to_string(),
                    definition,
                });
            }
            for template in self
                .request(
                    "resources/templates/list",
                    self.peer.list_all_resource_templates(),
                )
                .await?
            {
                let definition = to_object(&template);
                catalog.resource_templates.push(ResourceTemplateDef {
                    uri_template: template.uri_template.to_string(),
                    definition,
                });
            }
        }
        Ok(catalog)
    }

    /// Calls a tool by its upstream name. The result is the server's `CallToolResult`: every content
    /// block, the error flag, structured content and `_meta` untouched.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<ToolResult, UpstreamError> {
        self.call_tool_with(tool, arguments, &CallContext::default())
            .await
    }

    /// Calls a tool on behalf of a client: progress, logging and requests the upstream sends during the
    /// call are relayed to `context.caller`. If this future is dropped (the client cancelled) or times
    /// out, the upstream is told to cancel too.
    pub async fn call_tool_with(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<ToolResult, UpstreamError> {
        // The call's span for traces (`portico_core::trace`); its context goes with the request.
        let span = tracing::trace_span!(
            target: portico_core::trace::SPAN_TARGET,
            portico_core::trace::UPSTREAM,
            otel.kind = "client",
            server = self.server.as_str(),
            tool,
            mcp.method = "tools/call",
            transport = self.info.transport,
            error.kind = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = self
            .call_tool_traced(tool, arguments, context, &span)
            .instrument(span.clone())
            .await;
        if let Err(error) = &result {
            span.record("error.kind", error.kind());
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    async fn call_tool_traced(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
        span: &tracing::Span,
    ) -> Result<ToolResult, UpstreamError> {
        // What the call is called in errors, written only for one.
        let what = || format!("tools/call `{tool}`");
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        if let Some(level) = *self.log_level.lock().expect("log level lock") {
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.set_log_level(level);
            params.meta = Some(meta);
        }
        params.input_responses = context
            .caller
            .as_ref()
            .and_then(|caller| caller.take_answers_given())
            .map(|answers| answers.into_iter().collect());
        // One place for the whole call, its input rounds included.
        let _place = self
            .place(&what, tokio::time::Instant::now() + self.timeout)
            .await?;
        // From 2026-07-28 on, a server that needs the client (sampling, elicitation, roots) answers
        // `input_required` with its questions, and the client calls again with the answers. Portico
        // asks its own client those questions, in whatever era that client speaks, and retries.
        for _round in 0..MAX_INPUT_ROUNDS {
            let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            // Registered before sending: the upstream may ask the client something before the send
            // call even returns.
            let mut registration = context
                .caller
                .as_ref()
                .map(|caller| self.active.register(caller.clone()));
            if let Some(registration) = &registration {
                request.extensions_mut().insert(registration.marker());
            }
            // rmcp's request futures are kilobytes (3 KB to send, 7 KB to await the answer); boxed, they
            // stop inflating every future and task that holds a call (this one was 16.7 KB).
            let mut options = self.call_options(context);
            crate::trace_context::inject(span, options.meta.get_or_insert_default());
            let handle = Box::pin(self.peer.send_request_with_option(request, options))
                .await
                .map_err(|e| service_error(&self.server, what(), e))?;
            let mut cancel = CancelOnDrop {
                peer: self.peer.clone(),
                sending: self.cancels.clone(),
                id: Some(handle.id.clone()),
            };
            let deadline = tokio::time::Instant::now() + self.timeout;
            let response = self.timed(&what, deadline, Box::pin(handle.await_response()));
            // Progress and logs the server sends during the call reach the client in the order they
            // were sent, and those sent before the answer go out before it.
            let result = match &mut registration {
                Some(registration) => registration.relay_until(response).await,
                None => response.await,
            };
            if !matches!(result, Err(UpstreamError::Timeout { .. })) {
                cancel.id = None;
            }
            match result? {
                ServerResult::InputRequiredResult(input) => {
                    let answers = self
                        .ask_caller(&what(), input.input_requests.unwrap_or_default(), context)
                        .await?;
                    params.input_responses = (!answers.is_empty()).then_some(answers);
                    params.request_state = input.request_state;
                }
                ServerResult::CallToolResult(result) => {
                    return Ok(tool_result_from_rmcp(result));
                }
                // Only sent when the call declared the tasks extension (rmcp refuses it otherwise):
                // the caller takes tasks, and asks this server about it by its id later.
                ServerResult::CreateTaskResult(created) => {
                    let mut state = portico_core::to_object(&created);
                    state.remove("resultType");
                    return Ok(ToolResult {
                        task: Some(Box::new(portico_core::CreatedTask {
                            server: self.server.clone(),
                            state,
                        })),
                        ..ToolResult::default()
                    });
                }
                // No client could read it as a tool's answer: the server broke the protocol.
                other => {
                    let mut shown = serde_json::to_string(&other).unwrap_or_default();
                    shown.truncate(shown.floor_char_boundary(200));
                    return Err(UpstreamError::Remote {
                        server: self.server.clone(),
                        what: what(),
                        code: None,
                        message: format!(
                            "the server answered with something that is not a tool result: {shown}"
                        ),
                        data: None,
                    });
                }
            }
        }
        Err(UpstreamError::Remote {
            server: self.server.clone(),
            what: what(),
            code: None,
            message: format!("the server still asked for input after {MAX_INPUT_ROUNDS} rounds"),
            data: None,
        })
    }

    /// Asks this server about one of its tasks (`tasks/get`, `tasks/update`, `tasks/cancel`), for a
    /// caller that takes tasks: the request declares the tasks extension. The answer is the
    /// server's result object, `resultType` dropped.
    pub async fn task_operation(
        &self,
        operation: portico_core::TaskOperation,
    ) -> Result<JsonObject, UpstreamError> {
        use portico_core::TaskOperation;
        use rmcp::model::{
            CancelTaskParams, CancelTaskRequest, GetTaskParams, GetTaskRequest, UpdateTaskParams,
            UpdateTaskRequest,
        };
        let (method, request) = match &operation {
            TaskOperation::Get { task_id } => (
                "tasks/get",
                ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(
                    task_id.clone(),
                ))),
            ),
            TaskOperation::Update { task_id, answers } => (
                "tasks/update",
                ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(UpdateTaskParams::new(
                    task_id.clone(),
                    answers.clone().into_iter().collect(),
                ))),
            ),
            TaskOperation::Cancel { task_id } => (
                "tasks/cancel",
                ClientRequest::CancelTaskRequest(CancelTaskRequest::new(CancelTaskParams::new(
                    task_id.clone(),
                ))),
            ),
        };
        let what = || format!("{method} `{}`", operation.task_id());
        let _place = self
            .place(&what, tokio::time::Instant::now() + self.timeout)
            .await?;
        let mut options = PeerRequestOptions::no_options();
        if self.listens() {
            let capabilities =
                serde_json::from_value(serde_json::json!({"extensions": tasks_extension()}))
                    .unwrap_or_default();
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.set_client_capabilities(capabilities);
            options.meta = Some(meta);
        }
        let handle = Box::pin(self.peer.send_request_with_option(request, options))
            .await
            .map_err(|e| service_error(&self.server, what(), e))?;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let result = self
            .timed(&what, deadline, Box::pin(handle.await_response()))
            .await?;
        let mut object = portico_core::to_object(&result);
        object.remove("resultType");
        Ok(object)
    }

    /// A 2026-07-28 request declares its client's capabilities itself: a call says what its
    /// calling client can answer (the session's own, which offer everything so that Portico is
    /// asked, would have the server ask what nobody can answer, instead of refusing the call).
    fn call_options(&self, context: &CallContext) -> PeerRequestOptions {
        let mut options = PeerRequestOptions::no_options();
        if !self.listens() {
            return options;
        }
        let accepts = |request| {
            context
                .caller
                .as_ref()
                .is_some_and(|caller| caller.accepts(request))
        };
        let mut declared = JsonObject::new();
        if accepts(RelayRequest::Sampling) {
            declared.insert("sampling".into(), serde_json::json!({}));
        }
        if accepts(RelayRequest::Elicitation) {
            declared.insert(
                "elicitation".into(),
                serde_json::json!({"form": {}, "url": {}}),
            );
        }
        if accepts(RelayRequest::Roots) {
            declared.insert("roots".into(), serde_json::json!({"listChanged": false}));
        }
        if context
            .caller
            .as_ref()
            .is_some_and(|caller| caller.accepts_tasks())
        {
            declared.insert("extensions".into(), tasks_extension());
        }
        let capabilities =
            serde_json::from_value(serde_json::Value::Object(declared)).unwrap_or_default();
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.set_client_capabilities(capabilities);
        options.meta = Some(meta);
        options
    }

    /// Puts an `input_required` round's questions to the client whose call it is.
    async fn ask_caller(
        &self,
        what: &str,
        requests: InputRequests,
        context: &CallContext,
    ) -> Result<InputResponses, UpstreamError> {
        let refused = |message: String| UpstreamError::Remote {
            server: self.server.clone(),
            what: what.to_string(),
            code: Some(-32600),
            message,
            data: None,
        };
        // Checked first, so nothing is asked of a client that cannot answer every question.
        let mut questions = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let (relayed, params) = match &request {
                InputRequest::CreateMessage(r) => (RelayRequest::Sampling, to_object(&r.params)),
                InputRequest::Elicitation(r) => (RelayRequest::Elicitation, to_object(&r.params)),
                InputRequest::ListRoots(_) => (RelayRequest::Roots, JsonObject::new()),
                _ => {
                    return Err(refused(
                        "the server asked for a kind of input Portico cannot relay".into(),
                    ));
                }
            };
            let method = crate::methods::request_method(relayed);
            let caller = context
                .caller
                .as_ref()
                .filter(|caller| caller.accepts(relayed))
                .ok_or_else(|| {
                    refused(format!(
                        "the server needs {method}, which the calling client does not support"
                    ))
                })?;
            questions.push((key, relayed, params, caller));
        }
        // Asked together, under the server's own keys: a client that answers in input rounds gets
        // the round as the server made it.
        let asked = questions
            .iter()
            .map(|(key, relayed, params, caller)| async move {
                let method = crate::methods::request_method(*relayed);
                let mut answer = caller
                    .request_keyed(key, *relayed, params.clone())
                    .await
                    .map_err(|e| refused(format!("the client did not answer {method}: {e}")))?;
                if *relayed == RelayRequest::Elicitation {
                    crate::elicitation::apply_defaults(params, &mut answer);
                }
                Ok::<_, UpstreamError>((key.clone(), serde_json::Value::Object(answer)))
            });
        let answers = futures::future::try_join_all(asked).await?;
        Ok(answers.into_iter().collect())
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, UpstreamError> {
        let params = ReadResourceRequestParams::new(uri.to_string());
        let result = self
            .request(
                format!("resources/read `{uri}`"),
                self.peer.read_resource(params),
            )
            .await?;
        Ok(to_object(&result))
    }

    /// Gets a prompt; `rest` is the rest of the client's request (on 2026-07-28, its
    /// `inputResponses` and `requestState`), passed on unread. The answer is the prompt, or the
    /// server's `input_required` result as it sent it, for the client to answer.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        mut rest: JsonObject,
    ) -> Result<JsonObject, UpstreamError> {
        rest.insert("name".into(), name.into());
        if let Some(arguments) = arguments {
            rest.insert("arguments".into(), serde_json::Value::Object(arguments));
        }
        let params: GetPromptRequestParams = from_params(&self.server, "prompts/get", rest)?;
        let result = self
            .request(
                format!("prompts/get `{name}`"),
                self.peer.get_prompt_once(params),
            )
            .await?;
        Ok(match result {
            rmcp::model::GetPromptResponse::Complete(result) => to_object(&result),
            rmcp::model::GetPromptResponse::InputRequired(input) => to_object(&input),
            // A kind of answer newer than this code.
            _ => {
                return Err(UpstreamError::Remote {
                    server: self.server.clone(),
                    what: format!("prompts/get `{name}`"),
                    code: None,
                    message: "the server answered with something that is neither a prompt nor an input round".into(),
                    data: None,
                });
            }
        })
    }
}

impl Upstream {
    /// Whether the upstream declared a capability (`logging`, `completions`, `resources.subscribe`).
    pub fn supports(&self, capability: &str) -> bool {
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        let caps = serde_json::to_value(&info.capabilities).unwrap_or_default();
        let mut value = &caps;
        for part in capability.split('.') {
            match value.get(part) {
                Some(v) => value = v,
                None => return false,
            }
        }
        !value.is_null() && value != &serde_json::Value::Bool(false)
    }

    /// Forwards `completion/complete` for `reference` (in the upstream's own names); `request` is the
    /// rest of the request's JSON (the argument and its context).
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        mut request: JsonObject,
    ) -> Result<JsonObject, UpstreamError> {
        request.insert("ref".into(), completion_ref_json(reference));
        let params: CompleteRequestParams =
            from_params(&self.server, "completion/complete", request)?;
        let result = self
            .request("completion/complete", self.peer.complete(params))
            .await?;
        Ok(to_object(&result))
    }

    /// Forwards `logging/setLevel`; `level` is the protocol's level name. A 2026-07-28 session has
    /// no such request: the level goes with each call instead.
    #[allow(deprecated)]
    pub async fn set_level(&self, level: &str) -> Result<(), UpstreamError> {
        let params: SetLevelRequestParams = from_params(
            &self.server,
            "logging/setLevel",
            serde_json::json!({"level": level})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )?;
        if self.listens() {
            *self.log_level.lock().expect("log level lock") = Some(params.level);
            return Ok(());
        }
        self.request("logging/setLevel", self.peer.set_level(params))
            .await
    }

    /// Whether this session speaks 2026-07-28 or later, where notifications outside a request
    /// come only on `subscriptions/listen` streams.
    fn listens(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.protocol_version >= ProtocolVersion::NO_INITIALIZE)
    }

    /// Subscribes to updates of `uri` (the upstream's own URI), which then arrive as
    /// [`UpstreamEvent::ResourceUpdated`]: by `resources/subscribe` on a handshake-era session;
    /// on a 2026-07-28 one, where that method is gone, by a `subscriptions/listen` stream for the
    /// URI, open once the upstream acknowledged it.
    #[allow(deprecated)]
    pub async fn subscribe(&self, uri: &str) -> Result<(), UpstreamError> {
        if self.listens() {
            return self.listen_for_updates(uri).await;
        }
        let params = SubscribeRequestParams::new(uri.to_string());
        self.request(
            format!("resources/subscribe `{uri}`"),
            self.peer.subscribe(params),
        )
        .await?;
        self.handshake_subscriptions.subscribed(uri);
        Ok(())
    }

    async fn listen_for_updates(&self, uri: &str) -> Result<(), UpstreamError> {
        use crate::resource_updates::{Added, MAX_RESOURCE_STREAMS, acknowledged, listen};
        let what = || format!("subscriptions/listen for updates of `{uri}`");
        // The place is taken before the round-trip and given back if the stream is not kept.
        let reserved = match self.resource_streams.add(uri) {
            Added::Shared => return Ok(()),
            Added::New(reserved) => reserved,
            Added::Full => {
                return Err(UpstreamError::Remote {
                    server: self.server.clone(),
                    what: what(),
                    code: Some(-32603),
                    message: format!(
                        "Portico already follows {MAX_RESOURCE_STREAMS} resources of this server, its limit per server; unsubscribe from one first"
                    ),
                    data: None,
                });
            }
        };
        // Translated from the client's `resources/subscribe`, so the upstream's refusal is
        // Portico's to explain, not the client's to read as an answer to what it sent.
        let subscription = match self.request(what(), listen(&self.peer, uri)).await {
            Ok(subscription) => subscription,
            Err(UpstreamError::Remote {
                server,
                what,
                code: Some(code),
                message,
                ..
            }) => {
                return Err(UpstreamError::Remote {
                    server,
                    what,
                    code: None,
                    message: format!(
                        "the server refused the stream ({code} {message}): a 2026-07-28 server without subscriptions/listen offers no resource updates"
                    ),
                    data: None,
                });
            }
            Err(other) => return Err(other),
        };
        if !acknowledged(&subscription, uri) {
            return Err(UpstreamError::Remote {
                server: self.server.clone(),
                what: what(),
                code: Some(-32602),
                message: "the server does not send updates for this resource (its acknowledgment left it out)".into(),
                data: None,
            });
        }
        self.resource_streams
            .opened(reserved, uri, subscription, self.events.clone(), &self.stop);
        Ok(())
    }

    #[allow(deprecated)]
    pub async fn unsubscribe(&self, uri: &str) -> Result<(), UpstreamError> {
        if self.listens() {
            // Unsubscribing from what is not subscribed is not an error, as with
            // `resources/unsubscribe`.
            self.resource_streams.remove(uri);
            return Ok(());
        }
        if !self.handshake_subscriptions.unsubscribed(uri) {
            // Other subscribers through Portico still want it.
            return Ok(());
        }
        let params = UnsubscribeRequestParams::new(uri.to_string());
        self.request(
            format!("resources/unsubscribe `{uri}`"),
            self.peer.unsubscribe(params),
        )
        .await
    }
}

/// A completion reference in the protocol's form.
fn completion_ref_json(reference: &CompletionRef) -> serde_json::Value {
    let reference = match reference {
        CompletionRef::Prompt { name, title } => {
            let mut prompt = rmcp::model::PromptReference::new(name.clone());
            prompt.title = title.clone();
            rmcp::model::Reference::Prompt(prompt)
        }
        CompletionRef::Resource { uri } => rmcp::model::Reference::for_resource(uri.clone()),
    };
    serde_json::to_value(reference).unwrap_or_default()
}

fn from_params<T: serde::de::DeserializeOwned>(
    server: &str,
    what: &str,
    params: JsonObject,
) -> Result<T, UpstreamError> {
    serde_json::from_value(serde_json::Value::Object(params)).map_err(|e| UpstreamError::Remote {
        server: server.to_string(),
        what: what.to_string(),
        code: Some(-32602),
        message: format!("invalid params: {e}"),
        data: None,
    })
}

/// How long a closing session waits for the `notifications/cancelled` still being sent.
const CANCEL_SEND_BOUND: Duration = Duration::from_secs(1);

/// Waits, within [`CANCEL_SEND_BOUND`], for the cancellations already being sent.
async fn send_pending_cancels(cancels: &tokio_util::task::TaskTracker) {
    cancels.close();
    let _ = tokio::time::timeout(CANCEL_SEND_BOUND, cancels.wait()).await;
}

/// Tells the upstream to stop working on a request the caller no longer waits for.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    /// The session's cancellations in flight, which its shutdown waits for.
    sending: tokio_util::task::TaskTracker,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let notify = async move {
                let params = rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some("the client cancelled or the call timed out".into()),
                );
                let _ = peer.notify_cancelled(params).await;
            };
            self.sending.spawn_on(notify, &runtime);
        }
    }
}

fn pinned_version(config: &McpServerConfig) -> Option<ProtocolVersion> {
    let version = config.protocol_version.as_deref()?;
    serde_json::from_value(serde_json::Value::String(version.to_string())).ok()
}

/// Newest era first, falling back to `initialize`; or exactly the pinned version.
fn lifecycle_for(config: &McpServerConfig) -> ClientLifecycleMode {
    match pinned_version(config) {
        Some(version) if version.has_initialize() => ClientLifecycleMode::Initialize,
        Some(version) => ClientLifecycleMode::Discover {
            preferred_versions: vec![version],
        },
        None => ClientLifecycleMode::Auto {
            preferred_versions: PREFERRED_VERSIONS.to_vec(),
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// Asks the server on `transport` which era it speaks ([`era_probe`]) and returns the client and the
/// lifecycle that fit: `server/discover` for the stateless era, else `initialize` (with what the
/// probe was answered with, for an error if that fails too).
async fn probed_lifecycle<T: rmcp::transport::Transport<RoleClient>>(
    transport: &mut T,
    handler: &impl Fn() -> PorticoClient,
    preferred_versions: Vec<ProtocolVersion>,
    server: &str,
    pings: Pings,
) -> Result<(PorticoClient, ClientLifecycleMode, Option<String>), ProbeError> {
    let preferred = preferred_versions
        .first()
        .cloned()
        .unwrap_or(ProtocolVersion::V_2026_07_28);
    let client_info = rmcp::ClientHandler::get_info(&handler());
    Ok(
        match era_probe::probe(transport, &client_info, &preferred, server, pings).await? {
            Era::Discover => (
                handler(),
                ClientLifecycleMode::Discover { preferred_versions },
                None,
            ),
            Era::Handshake(answered) => {
                let mut legacy = handler();
                legacy.protocol_version = Some(ProtocolVersion::LATEST_WITH_INITIALIZE);
                (legacy, ClientLifecycleMode::Initialize, Some(answered))
            }
        },
    )
}

/// Serves `handler` over rmcp's Streamable HTTP client. In the `Auto` lifecycle, a handshake-era
/// server that answers `server/discover` with a result of another kind is connected again, on a
/// fresh transport, with `initialize`.
#[allow(clippy::too_many_arguments)]
async fn serve_streamable(
    handler: impl Fn() -> PorticoClient,
    client: &SafeClient,
    url: &url::Url,
    headers: &[(http::HeaderName, http::HeaderValue)],
    config: &McpServerConfig,
    active: &Arc<ActiveCalls>,
    lifecycle: &ClientLifecycleMode,
    auth: Option<&Arc<UpstreamAuth>>,
) -> Result<rmcp::service::RunningService<RoleClient, PorticoClient>, UpstreamError> {
    match auth {
        Some(auth) => {
            let http = TracedHttp::new(AuthorizedHttp::new(client.http().clone(), auth.clone()));
            serve_streamable_over(
                handler, http, client, url, headers, config, active, lifecycle,
            )
            .await
        }
        None => {
            let http = TracedHttp::new(client.http().clone());
            serve_streamable_over(
                handler, http, client, url, headers, config, active, lifecycle,
            )
            .await
        }
    }
}

/// [`serve_streamable`] over one kind of HTTP client: reqwest's, or reqwest's with OAuth.
#[allow(clippy::too_many_arguments)]
async fn serve_streamable_over<C: StreamableHttpClient + Sync>(
    handler: impl Fn() -> PorticoClient,
    http: C,
    client: &SafeClient,
    url: &url::Url,
    headers: &[(http::HeaderName, http::HeaderValue)],
    config: &McpServerConfig,
    active: &Arc<ActiveCalls>,
    lifecycle: &ClientLifecycleMode,
) -> Result<rmcp::service::RunningService<RoleClient, PorticoClient>, UpstreamError> {
    let server = config.name.as_str();
    // What the probe's `server/discover` was answered with, when that sent it to `initialize`.
    let mut discover_answer = None;
    let (service_client, lifecycle) = match lifecycle {
        ClientLifecycleMode::Auto {
            preferred_versions, ..
        } => {
            // Asked on a connection of its own, so that nothing of the probe (a late answer
            // above all) can reach the lifecycle's. A probe that fails at the transport leaves the
            // server to rmcp's own automatic lifecycle, whose errors say what failed.
            let mut probing = streamable_transport(http.clone(), url, headers, config)?;
            let probed = probed_lifecycle(
                &mut probing,
                &handler,
                preferred_versions.clone(),
                server,
                Pings::None,
            )
            .await;
            let _ = rmcp::transport::Transport::<RoleClient>::close(&mut probing).await;
            match probed {
                Ok((client, lifecycle, answered)) => {
                    discover_answer = answered;
                    (client, lifecycle)
                }
                Err(error) => {
                    tracing::debug!(server, "the era probe failed ({error:?}); rmcp decides");
                    (handler(), lifecycle.clone())
                }
            }
        }
        pinned => (handler(), pinned.clone()),
    };
    let lifecycle = &lifecycle;
    let transport = streamable_transport(http.clone(), url, headers, config)?;
    let error = match service_client
        .serve_with_lifecycle(
            ProgressInOrder::new(transport, server, active),
            lifecycle.clone(),
        )
        .await
    {
        Ok(service) => return Ok(service),
        Err(e) => e,
    };
    if let Some(answered) = discover_answer {
        return Err(
            match handshake_error_via(server, error, Some((client, url))) {
                UpstreamError::Handshake { server, message } => UpstreamError::Handshake {
                    server,
                    message: format!(
                        "`server/discover` was answered with {answered}, and `initialize` then \
                         failed: {message}"
                    ),
                },
                other => other,
            },
        );
    }
    if !discover_answered_by_a_handshake_server(lifecycle, &error) {
        return Err(handshake_error_via(server, error, Some((client, url))));
    }
    tracing::debug!(
        server,
        "`server/discover` was answered with something else ({error}); connecting with `initialize`"
    );
    let transport = streamable_transport(http, url, headers, config)?;
    let mut legacy = handler();
    legacy.protocol_version = Some(ProtocolVersion::LATEST_WITH_INITIALIZE);
    legacy
        .serve_with_lifecycle(
            ProgressInOrder::new(transport, server, active),
            ClientLifecycleMode::Initialize,
        )
        .await
        .map_err(|e| match handshake_error_via(server, e, Some((client, url))) {
            UpstreamError::Handshake { server, message } => UpstreamError::Handshake {
                server,
                message: format!(
                    "`server/discover` was answered with something other than a discover result \
                     ({error}), and `initialize` then failed: {message}"
                ),
            },
            other => other,
        })
}

/// Whether a failed `Auto` handshake was a server of the handshake era answering `server/discover`
/// with a result that is not a discover result, as servers that answer every method they do not know
/// with `{}` do: rmcp falls back to `initialize` only on an error answer, so Portico does it for this
/// one, on a fresh connection.
fn discover_answered_by_a_handshake_server(
    lifecycle: &ClientLifecycleMode,
    error: &ClientInitializeError,
) -> bool {
    matches!(lifecycle, ClientLifecycleMode::Auto { .. })
        && matches!(
            error,
            ClientInitializeError::ExpectedInitResult(Some(result))
                if !matches!(result, ServerResult::DiscoverResult(_))
        )
}

/// The server's client. Its configured headers (credentials, usually) go to its URL's origin only:
/// a redirect to another origin is refused rather than followed with them.
fn safe_client(
    config: &McpServerConfig,
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<SafeClient, UpstreamError> {
    let credentials = match url::Url::parse(url) {
        Ok(url) => CredentialScope::for_url(&url, !headers.is_empty()),
        // `check_url` refuses it next, saying why.
        Err(_) => CredentialScope::Everywhere,
    };
    SafeClient::builder()
        .policy(NetPolicy::private_network(config.allow_private_network))
        .credentials(credentials)
        .build()
        .map_err(|e| UpstreamError::Config {
            server: config.name.clone(),
            message: format!("cannot build HTTP client: {e}"),
        })
}

fn check_url(server: &str, client: &SafeClient, url: &str) -> Result<url::Url, UpstreamError> {
    client.check_url(url).map_err(|e| UpstreamError::Refused {
        server: server.to_string(),
        message: e.to_string(),
    })
}

/// The configured headers with their `${VAR}`s read through `vars`; every variable it has not is
/// named in one [`UpstreamError::NeedsSecret`].
fn expand_headers(
    server: &str,
    headers: &BTreeMap<String, String>,
    vars: &Vars,
) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, UpstreamError> {
    let config_error = |message: String| UpstreamError::Config {
        server: server.to_string(),
        message,
    };
    let missing = MissingVars::default();
    let mut expanded = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let value = missing
            .expand(value, |var| vars.get(var))
            .map_err(|e| config_error(format!("header `{name}`: {e}")))?;
        expanded.push((name, value));
    }
    missing.into_result(server)?;
    expanded
        .into_iter()
        .map(|(name, value)| {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|e| config_error(format!("header name `{name}` is invalid: {e}")))?;
            let mut value = http::HeaderValue::try_from(value)
                .map_err(|e| config_error(format!("header `{name}` has an invalid value: {e}")))?;
            // Header values usually carry credentials; keep them out of debug output.
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// rmcp's Streamable HTTP client over the server's `SafeClient`. It may have as many requests in
/// flight as the server's `max_concurrent_calls` lets in: rmcp's own cap (16) would otherwise queue,
/// in its one worker, calls Portico had already given a place.
fn streamable_transport<C: StreamableHttpClient>(
    http: C,
    url: &url::Url,
    headers: &[(http::HeaderName, http::HeaderValue)],
    server: &McpServerConfig,
) -> Result<StreamableHttpClientTransport<C>, UpstreamError> {
    let custom: HashMap<_, _> = headers.iter().cloned().collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(custom)
        .max_concurrent_requests(server.max_concurrent_calls.max(1));
    Ok(StreamableHttpClientTransport::with_client(http, config))
}

/// An error's message without the `server `x`: ` it starts with, for nesting in another of the
/// same server's errors.
fn without_server(error: &UpstreamError) -> String {
    match error {
        UpstreamError::Handshake { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// How long a child that failed the handshake gets to finish writing to stderr (it is usually
/// exiting) before its last lines are read for the error.
const STDERR_SETTLE: Duration = Duration::from_millis(500);

/// A stdio child's failed handshake, with the last lines it wrote to stderr and, when they speak of
/// certificates, which CA-bundle variables it was given.
async fn child_failed(
    server: &str,
    command: &str,
    error: ClientInitializeError,
    tail: &StderrTail,
) -> UpstreamError {
    let message = match &error {
        ClientInitializeError::ConnectionClosed(_) => {
            "exited or closed its stdout before answering the handshake".to_string()
        }
        other => format!("failed the handshake: {}", describe_initialize_error(other)),
    };
    child_failed_with(server, command, message, tail).await
}

/// A stdio child that failed at start, in `message`'s words, with its last stderr lines.
async fn child_failed_with(
    server: &str,
    command: &str,
    message: String,
    tail: &StderrTail,
) -> UpstreamError {
    let stderr = tail.settle(STDERR_SETTLE).await;
    UpstreamError::ChildFailed {
        server: server.to_string(),
        command: command.to_string(),
        message,
        hint: certificate_hint_for(&stderr),
        stderr,
    }
}

/// Whether `command` downloads the server it runs on first start (`npx -y pkg`, `uvx pkg`).
fn is_package_runner(command: &str) -> bool {
    let program = std::path::Path::new(command)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(command);
    matches!(program, "npx" | "uvx" | "pipx" | "bunx" | "pnpx" | "dlx")
}

fn certificate_hint_for(stderr: &[String]) -> Option<String> {
    crate::stderr_tail::mentions_certificates(stderr)
        .then(|| crate::stderr_tail::certificate_hint(|name| std::env::var(name).ok()))
}

/// A failed handshake over HTTP. The HTTP client is asked whether it refused an address or failed to
/// connect: rmcp's transport errors keep only a top-level message, which names neither the rule that
/// refused what nor the cause (`connection refused`), which rmcp only logs.
fn handshake_error_via(
    server: &str,
    error: ClientInitializeError,
    client: Option<(&SafeClient, &url::Url)>,
) -> UpstreamError {
    let refusal = portico_net::blocked_in_error_chain(&error)
        .map(ToString::to_string)
        .or_else(|| client.and_then(|(client, _)| client.last_refusal_message()));
    if let Some(message) = refusal {
        return UpstreamError::Refused {
            server: server.to_string(),
            message,
        };
    }
    if let Some((client, url)) = client
        && let Some(cause) = client.last_connect_failure()
    {
        return UpstreamError::Unreachable {
            server: server.to_string(),
            url: url.to_string(),
            cause,
        };
    }
    let described = describe_initialize_error(&error);
    UpstreamError::Handshake {
        server: server.to_string(),
        message: match client {
            Some((_, url)) => format!("{url}: {described}"),
            None => described,
        },
    }
}

/// A failed handshake in words: for a transport error, what was being done and the transport's own
/// error, without rmcp's wrapping (which names the transport by its Rust type).
fn describe_initialize_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{context}: {}", error_chain(&*error.error))
        }
        // rmcp's own words for these name JSON-RPC ids and Rust values; say what happened.
        ClientInitializeError::UncorrelatedErrorResponse { .. }
        | ClientInitializeError::ConflictInitResponseId(..) => {
            "the server answered a request Portico had not sent (or sent earlier), instead of the \
             handshake; it may be confused by an earlier request: pin `protocol_version` for it"
                .to_string()
        }
        ClientInitializeError::ExpectedInitResponse(_) => {
            "the server sent something other than an answer to the handshake".to_string()
        }
        ClientInitializeError::ExpectedInitResult(_) => {
            "the server answered the handshake with something that is not a handshake result"
                .to_string()
        }
        ClientInitializeError::JsonRpcError(error) => {
            format!(
                "the server refused the handshake: {} (code {})",
                error.message, error.code.0
            )
        }
        ClientInitializeError::NoCompatibleProtocolVersion {
            server_supported, ..
        } => format!(
            "no protocol version in common: the server speaks {}, Portico speaks every version \
             from 2024-11-05 to 2026-07-28",
            server_supported
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            describe_initialize_error(fallback)
        }
        other => error_chain(other),
    }
}

fn service_error(server: &str, what: String, error: ServiceError) -> UpstreamError {
    match error {
        ServiceError::TransportClosed => UpstreamError::Closed {
            server: server.to_string(),
            what,
        },
        ServiceError::McpError(e) => UpstreamError::Remote {
            server: server.to_string(),
            what,
            code: Some(e.code.0),
            message: e.message.to_string(),
            data: e.data.map(Box::new),
        },
        other => UpstreamError::Remote {
            server: server.to_string(),
            what,
            code: None,
            message: error_chain(&other),
            data: None,
        },
    }
}

/// Renders an error with its sources, since rmcp's top-level messages alone often hide the cause.
/// rmcp's transport wrapper names the transport by its Rust type (`Transport [portico_mcp::…<…>]
/// error: …`), which says nothing to a user: that part is left out.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = without_transport_type(&error.to_string());
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = without_transport_type(&cause.to_string());
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `text` without each `Transport [<type name>] error: ` that rmcp's `DynamicTransportError` writes.
fn without_transport_type(text: &str) -> String {
    const START: &str = "Transport [";
    const END: &str = "] error: ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(START) {
        let Some(end) = rest[start..].find(END) else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + end + END.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("Transport send error: {0}")]
    struct Outer(#[source] rmcp::transport::DynamicTransportError);

    #[test]
    fn transport_type_names_are_left_out_of_error_text() {
        let inner: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::other("Transport channel closed"));
        let dynamic = rmcp::transport::DynamicTransportError::from_parts(
            "portico_mcp::ordering::ProgressInOrder<rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::Client>>>",
            std::any::TypeId::of::<()>(),
            inner,
        );
        let error = Outer(dynamic);
        assert_eq!(
            error_chain(&error),
            "Transport send error: Transport channel closed"
        );
        let initialize = ClientInitializeError::TransportError {
            error: rmcp::transport::DynamicTransportError::from_parts(
                "portico_mcp::ordering::ProgressInOrder<X>",
                std::any::TypeId::of::<()>(),
                Box::new(std::io::Error::other("Transport channel closed")),
            ),
            context: "send initialize request".into(),
        };
        assert_eq!(
            describe_initialize_error(&initialize),
            "send initialize request: Transport channel closed"
        );
        assert_eq!(without_transport_type("no wrapper here"), "no wrapper here");
        assert_eq!(
            without_transport_type("a Transport [T<U>] error: b; Transport [V] error: c"),
            "a b; c"
        );
        // An unterminated wrapper is left as it is.
        assert_eq!(without_transport_type("Transport [T"), "Transport [T");
    }

    #[test]
    fn package_runners_are_known_by_their_program_name() {
        assert!(is_package_runner("npx"));
        assert!(is_package_runner("/usr/local/bin/uvx"));
        assert!(!is_package_runner("node"));
        assert!(!is_package_runner("/opt/npx-like/server"));
    }

    #[test]
    fn a_failed_child_error_puts_its_stderr_under_the_cause() {
        let error = UpstreamError::ChildFailed {
            server: "crashy".into(),
            command: "python3".into(),
            message: "exited or closed its stdout before answering the handshake".into(),
            stderr: vec!["fatal: cannot start".into(), "bye".into()],
            hint: None,
        };
        assert_eq!(
            error.to_string(),
            "server `crashy`: `python3` exited or closed its stdout before answering the handshake; \
             its stderr ended with:\n    fatal: cannot start\n    bye"
        );
        assert_eq!(error.stderr_tail(), ["fatal: cannot start", "bye"]);
        let unreachable = UpstreamError::Unreachable {
            server: "dead".into(),
            url: "http://127.0.0.1:9/mcp".into(),
            cause: "connection refused".into(),
        };
        assert_eq!(
            unreachable.to_string(),
            "server `dead`: cannot reach http://127.0.0.1:9/mcp: connection refused"
        );
        assert!(unreachable.stderr_tail().is_empty());
    }
}
