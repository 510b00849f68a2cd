use portico_core::text::log_safe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use portico_config::{Config, McpServerConfig};
use portico_core::relay::CallContext;
use portico_core::retry::RetryPolicy;
use portico_core::{
    CallError, Catalog, CompletionRef, JsonObject, ProtocolError, ServerCatalog, ServerState,
    ServerStatus, ToolResult,
};
use portico_mcp::oauth::{OAuthHome, UpstreamAuth};
use portico_mcp::{ServerLog, StopGrace, Upstream, UpstreamError, UpstreamEvent};
use portico_metrics::{ConnectOutcome, Metrics};
use portico_secrets::Vars;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Restart delays: jittered, so many servers failing together (a network blip) do not all retry in
/// lockstep.
const RESTARTS: RetryPolicy =
    RetryPolicy::unlimited(Duration::from_millis(500), Duration::from_secs(60));
/// A session that lived at least this long resets the backoff: the server was healthy, so its next
/// failure is a new incident rather than part of a crash loop.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// A list a server can announce a change of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

/// Why the hub could not serve a request.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("no tool named `{name}`{hint}")]
    UnknownTool { name: String, hint: String },
    #[error("no prompt named `{name}`")]
    UnknownPrompt { name: String },
    #[error("no resource `{uri}`: Portico resource URIs look like portico://SERVER/URI")]
    UnknownResource { uri: String },
    #[error("server `{server}` is {state}{}; try again once it is ready (see `portico servers`)", .last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    Unavailable {
        server: String,
        state: ServerState,
        last_error: Option<String>,
    },
    #[error("server `{server}` is restarting (attempt {attempt}, {}); its tools stay listed and work again once it is back{}", next_try(*.next_in), .last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    Restarting {
        server: String,
        /// 1 for the first restart after a failure.
        attempt: u32,
        /// Until the next connection attempt; `None` once it is under way.
        next_in: Option<Duration>,
        last_error: Option<String>,
    },
    #[error("no server named `{name}` is configured (`portico servers` lists them)")]
    UnknownServer { name: String },
    #[error(
        "server `{server}` is disabled in the config (`enabled = false`); set `enabled = true` in its [[mcp_servers]] entry to run it"
    )]
    DisabledInConfig { server: String },
    #[error("server `{server}` is disabled; enable it to connect it again")]
    Disabled { server: String },
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The passed-through upstream's own JSON-RPC error (see [`Hub::passthrough_server`]), as it
    /// sent it: no Portico words around the message, its code and data kept.
    #[error("{}", .0.message)]
    Answered(ProtocolError),
}

impl HubError {
    /// The JSON-RPC error code the upstream answered with, when the upstream itself refused.
    pub fn jsonrpc_code(&self) -> Option<i32> {
        match self {
            HubError::Upstream(UpstreamError::Remote { code, .. }) => *code,
            HubError::Answered(error) => Some(error.code),
            _ => None,
        }
    }
}

/// What kind of failure it is for a tool call; the message stays the error's own.
impl From<HubError> for CallError {
    fn from(error: HubError) -> Self {
        match error {
            HubError::Upstream(upstream) => upstream.into(),
            HubError::Unavailable { .. } | HubError::Restarting { .. } => {
                CallError::UpstreamGone(error.to_string())
            }
            HubError::UnknownTool { .. }
            | HubError::UnknownPrompt { .. }
            | HubError::UnknownResource { .. }
            | HubError::UnknownServer { .. } => CallError::NotFound(error.to_string()),
            HubError::DisabledInConfig { .. } | HubError::Disabled { .. } => {
                CallError::UpstreamGone(error.to_string())
            }
            HubError::Answered(error) => CallError::Protocol(error),
        }
    }
}

fn next_try(next_in: Option<Duration>) -> String {
    match next_in {
        Some(delay) => format!("next in {:.1}s", delay.as_secs_f64()),
        None => "connecting now".to_string(),
    }
}

/// Where a restarting server is in its backoff.
#[derive(Debug, Clone, Copy)]
struct Restart {
    attempt: u32,
    next_at: Instant,
    /// `next_at` as Unix time in milliseconds, for the status (taken once, so the status stays
    /// the same between changes).
    next_at_unix_ms: u64,
}

impl Restart {
    /// After backoff attempt `attempt` (0-based), the next try in `delay`.
    fn after(attempt: u32, delay: Duration) -> Self {
        let unix_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Restart {
            attempt: attempt.saturating_add(1),
            next_at: Instant::now() + delay,
            next_at_unix_ms: u64::try_from((unix_now + delay).as_millis()).unwrap_or(u64::MAX),
        }
    }
}

struct SlotState {
    status: ServerStatus,
    upstream: Option<Arc<Upstream>>,
    /// The server's last listed catalog. Kept while it restarts, so its tools stay listed (and its
    /// calls are answered with when it will be back) instead of vanishing and coming back: two list
    /// changes for every crash, and `no tool named ...` for a call in between.
    catalog: Option<ServerCatalog>,
    /// Set while the server is restarting.
    restart: Option<Restart>,
    /// The first connection attempt has finished, one way or the other.
    settled: bool,
    /// When the connection attempt in progress started; none between attempts and once ready.
    attempt_started: Option<Instant>,
}

struct Slot {
    config: McpServerConfig,
    /// Whether this server's catalog is namespaced (its `prefix`, else `[expose] prefix`).
    prefixed: bool,
    state: Mutex<SlotState>,
    /// Stops this server alone (a reload removed or changed it); a child of the hub's shutdown.
    stop: CancellationToken,
    /// Its supervisor, once started; awaited when it is stopped.
    supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Its OAuth authorization (HTTP servers, when the hub has an [`OAuthHome`]).
    auth: Option<Arc<UpstreamAuth>>,
    /// What its stdio child wrote to stderr, across restarts (bounded).
    log: ServerLog,
}

impl Slot {
    fn new(
        server: &McpServerConfig,
        expose: &portico_config::ExposeSection,
        shared: SlotContext<'_>,
    ) -> Slot {
        Self::with_prefix(server, server.prefixed(expose), shared)
    }

    /// A fresh slot for `server`: idle, or disabled when the config or a run-time disable says so.
    fn with_prefix(server: &McpServerConfig, prefixed: bool, shared: SlotContext<'_>) -> Slot {
        let auth = shared
            .oauth
            .and_then(|home| UpstreamAuth::for_server(server, home));
        let enabled = server.enabled && !shared.disabled.contains(&server.name);
        let shutdown = shared.shutdown;
        Slot {
            auth,
            config: server.clone(),
            prefixed,
            state: Mutex::new(SlotState {
                status: ServerStatus {
                    name: server.name.clone(),
                    transport: server.transport.kind().to_string(),
                    transport_detail: None,
                    state: if enabled {
                        ServerState::Idle
                    } else {
                        ServerState::Disabled
                    },
                    protocol_version: None,
                    server_name: None,
                    server_version: None,
                    tools: 0,
                    resources: 0,
                    resource_templates: 0,
                    prompts: 0,
                    last_error: None,
                    stderr_tail: Vec::new(),
                    missing_secrets: Vec::new(),
                    connects: 0,
                    enabled,
                    connected_at: None,
                    restarts: 0,
                    starting_secs: None,
                    last_stderr: None,
                    failed_attempts: None,
                    next_retry_at_ms: None,
                },
                upstream: None,
                catalog: None,
                restart: None,
                settled: true,
                attempt_started: None,
            }),
            stop: shutdown.child_token(),
            supervisor: Mutex::new(None),
            log: ServerLog::default(),
        }
    }

    /// Its status now: while a connection attempt runs, how long it has taken, and while it is not
    /// ready, the last line its child wrote to stderr.
    fn status(&self) -> ServerStatus {
        let state = self.state.lock().expect("slot lock");
        let mut status = state.status.clone();
        status.starting_secs = state.attempt_started.map(|at| at.elapsed().as_secs());
        if let Some(restart) = state.restart
            && status.state == ServerState::Restarting
        {
            status.failed_attempts = Some(restart.attempt);
            status.next_retry_at_ms = Some(restart.next_at_unix_ms);
        }
        if !matches!(
            status.state,
            ServerState::Ready | ServerState::Disabled | ServerState::Idle
        ) {
            status.last_stderr = self.log.last_line();
        }
        status
    }

    /// Whether a reload may keep this server running as it is for `server` in the new config.
    fn same_as(&self, server: &McpServerConfig, expose: &portico_config::ExposeSection) -> bool {
        self.config == *server && self.prefixed == server.prefixed(expose)
    }
}

/// What a new slot needs of the hub.
#[derive(Clone, Copy)]
struct SlotContext<'a> {
    shutdown: &'a CancellationToken,
    oauth: Option<&'a OAuthHome>,
    /// Servers disabled at run time.
    disabled: &'a std::collections::HashSet<String>,
}

/// What a reload did to the servers, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Servers whose entry changed: stopped and started again with the new one.
    pub restarted: Vec<String>,
    /// Left running: their sessions and calls in progress are not touched.
    pub unchanged: Vec<String>,
}

impl ServerChanges {
    /// Whether the reload changed any server.
    pub fn any(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
}

/// How a hub runs its upstreams.
#[derive(Debug, Clone)]
pub struct HubSettings {
    /// Restart delays after a failure (its `max_retries` is not consulted: a failure worth
    /// retrying is retried for as long as the hub runs).
    pub backoff: RetryPolicy,
    /// How stdio children are stopped when their session ends: patient in the daemon, brief in
    /// one-shot commands.
    pub child_stop: StopGrace,
    /// Where OAuth credentials of HTTP servers are kept, and whether this process may start a
    /// browser login; `None`: no OAuth (a server that requires it fails to connect).
    pub oauth: Option<OAuthHome>,
    /// Where upstream calls and connects are timed and restarts counted (`/metrics`); by default
    /// a handle of the hub's own that nobody reads.
    pub metrics: Metrics,
    /// Where servers' `env` names and `${VAR}`s are read: Portico's environment (the default),
    /// then, when given one, its secret store.
    pub vars: Vars,
}

impl Default for HubSettings {
    /// Restarts from 0.5 s up to a minute; children stopped patiently.
    fn default() -> Self {
        HubSettings {
            backoff: RESTARTS,
            child_stop: StopGrace::default(),
            oauth: None,
            metrics: Metrics::new(),
            vars: Vars::environment(),
        }
    }
}

struct Shared {
    /// In config order; replaced whole by a reload, each kept server's `Arc` carried over.
    slots: RwLock<Vec<Arc<Slot>>>,
    catalog: RwLock<Arc<Catalog>>,
    /// Bumped on every state or catalog change; lets callers wait for readiness and show progress.
    changes: watch::Sender<u64>,
    shutdown: CancellationToken,
    backoff: RetryPolicy,
    child_stop: StopGrace,
    oauth: Option<OAuthHome>,
    metrics: Metrics,
    vars: Vars,
    /// Exposed URIs of subscribed resources that changed upstream.
    resource_updates: broadcast::Sender<String>,
    /// List changes the passed-through server announced although its lists read the same.
    announced: broadcast::Sender<ListKind>,
    /// Held while a catalog is built and swapped in: two supervisors rebuilding at once could
    /// otherwise swap in last the catalog built from the older snapshots, losing a server's tools.
    rebuilding: Mutex<()>,
    /// Held through a reload (and a server's restart, disable or enable), so two of them do not
    /// interleave.
    reloading: tokio::sync::Mutex<()>,
    /// Servers disabled at run time ([`Hub::disable_server`]): they stay disabled across reloads
    /// until enabled, or until a reload removes them.
    disabled: Mutex<std::collections::HashSet<String>>,
}

/// What [`Hub::renew_slot`] does to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotChange {
    Restart,
    Disable,
    Enable,
}

impl SlotChange {
    fn log(self) -> &'static str {
        match self {
            SlotChange::Restart => "restarting on request",
            SlotChange::Disable => "disabled on request",
            SlotChange::Enable => "enabled on request",
        }
    }
}

/// The running hub. Clone it freely; all clones share one set of upstreams.
#[derive(Clone)]
pub struct Hub {
    shared: Arc<Shared>,
}

impl Hub {
    /// Starts a supervisor for every enabled server, concurrently, and returns at once.
    pub fn start(config: &Config) -> Hub {
        Self::start_with(config, HubSettings::default())
    }

    pub fn start_with_backoff(config: &Config, backoff: RetryPolicy) -> Hub {
        Self::start_with(
            config,
            HubSettings {
                backoff,
                ..HubSettings::default()
            },
        )
    }

    pub fn start_with(config: &Config, settings: HubSettings) -> Hub {
        let hub = Self::idle(config, settings);
        hub.connect_all();
        hub
    }

    /// A hub that knows every configured server but connects none until [`Hub::connect`]: for
    /// one-shot commands, which start only the servers they need. Servers not connected are
    /// [`ServerState::Idle`] and count as settled.
    pub fn idle(config: &Config, settings: HubSettings) -> Hub {
        let shutdown = CancellationToken::new();
        let none_disabled = std::collections::HashSet::new();
        let context = SlotContext {
            shutdown: &shutdown,
            oauth: settings.oauth.as_ref(),
            disabled: &none_disabled,
        };
        let slots = config
            .mcp_servers
            .iter()
            .map(|server| Arc::new(Slot::new(server, &config.expose, context)))
            .collect();
        let (changes, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            slots: RwLock::new(slots),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            changes,
            shutdown,
            backoff: settings.backoff,
            child_stop: settings.child_stop,
            oauth: settings.oauth.clone(),
            metrics: settings.metrics,
            vars: settings.vars,
            resource_updates: broadcast::channel(256).0,
            announced: broadcast::channel(64).0,
            rebuilding: Mutex::new(()),
            reloading: tokio::sync::Mutex::new(()),
            disabled: Mutex::default(),
        });
        Hub { shared }
    }

    /// Starts a supervisor for each named server that is enabled and not connected yet, and returns
    /// at once. Names not in the config are ignored.
    pub fn connect(&self, servers: &[String]) {
        if self.shared.shutdown.is_cancelled() {
            return;
        }
        let mut started = false;
        for slot in self.shared.slots().iter() {
            if !servers.contains(&slot.config.name) {
                continue;
            }
            {
                let mut state = slot.state.lock().expect("slot lock");
                if state.status.state != ServerState::Idle {
                    continue;
                }
                state.status.state = ServerState::Starting;
                state.settled = false;
            }
            let supervisor = tokio::spawn(supervise(self.shared.clone(), slot.clone()));
            *slot.supervisor.lock().expect("supervisor lock") = Some(supervisor);
            started = true;
        }
        if started {
            self.shared.changes.send_modify(|n| *n += 1);
        }
    }

    /// Tells whoever follows [`Hub::subscribe`] that what clients may list changed although the
    /// catalog did not (a pinned tool's new definition was approved), so doors list again.
    pub fn announce_change(&self) {
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// Cancelled when the hub shuts down: for tasks that follow it and should end with it.
    pub fn stopped(&self) -> CancellationToken {
        self.shared.shutdown.clone()
    }

    /// Drops `server`'s session (its stdio child stopped) and connects it again now. Its tools stay
    /// listed meanwhile, as in a restart after a failure.
    pub async fn restart_server(&self, server: &str) -> Result<(), HubError> {
        self.renew_slot(server, SlotChange::Restart).await
    }

    /// Closes `server`'s session (its stdio child stopped and reaped before this returns); its
    /// tools leave the catalog and it does not connect again until [`Hub::enable_server`]. A
    /// reload keeps it disabled. Disabling a disabled server changes nothing.
    pub async fn disable_server(&self, server: &str) -> Result<(), HubError> {
        self.renew_slot(server, SlotChange::Disable).await
    }

    /// Connects a server [`Hub::disable_server`] disabled; one the config disables stays so.
    /// Enabling an enabled server changes nothing.
    pub async fn enable_server(&self, server: &str) -> Result<(), HubError> {
        self.renew_slot(server, SlotChange::Enable).await
    }

    /// Replaces `server`'s slot with a fresh one (its supervisor stopped alone, as a reload does for
    /// a changed entry), started unless it is disabled.
    async fn renew_slot(&self, server: &str, change: SlotChange) -> Result<(), HubError> {
        let _reloading = self.shared.reloading.lock().await;
        if self.shared.shutdown.is_cancelled() {
            return Err(HubError::Unavailable {
                server: server.to_string(),
                state: ServerState::Failed,
                last_error: Some("Portico is shutting down".into()),
            });
        }
        let old = {
            let _rebuilding = self.shared.rebuilding.lock().expect("rebuild lock");
            let mut slots = self.shared.slots.write().expect("slots lock");
            let Some(index) = slots.iter().position(|s| s.config.name == server) else {
                return Err(HubError::UnknownServer {
                    name: server.to_string(),
                });
            };
            let old = slots[index].clone();
            if !old.config.enabled {
                return Err(HubError::DisabledInConfig {
                    server: server.to_string(),
                });
            }
            let mut disabled = self.shared.disabled.lock().expect("disabled lock");
            match change {
                SlotChange::Restart if disabled.contains(server) => {
                    return Err(HubError::Disabled {
                        server: server.to_string(),
                    });
                }
                SlotChange::Disable if !disabled.insert(server.to_string()) => return Ok(()),
                SlotChange::Enable if !disabled.remove(server) => return Ok(()),
                _ => {}
            }
            let context = SlotContext {
                shutdown: &self.shared.shutdown,
                oauth: self.shared.oauth.as_ref(),
                disabled: &disabled,
            };
            let mut fresh = Slot::with_prefix(&old.config, old.prefixed, context);
            fresh.log = old.log.clone();
            {
                let before = old.state.lock().expect("slot lock");
                let mut state = fresh.state.lock().expect("slot lock");
                state.status.connects = before.status.connects;
                state.status.restarts = before.status.restarts;
                if change == SlotChange::Restart {
                    // Listed meanwhile, as while a failed server restarts.
                    state.catalog = before.catalog.clone();
                    state.status.tools = before.status.tools;
                    state.status.prompts = before.status.prompts;
                    state.status.resources = before.status.resources;
                    state.status.resource_templates = before.status.resource_templates;
                }
            }
            old.stop.cancel();
            slots[index] = Arc::new(fresh);
            drop(slots);
            self.shared.rebuild_catalog_locked();
            old
        };
        tracing::info!(server, "{}", change.log());
        self.connect(&[server.to_string()]);
        let supervisor = old.supervisor.lock().expect("supervisor lock").take();
        if let Some(supervisor) = supervisor {
            let _ = supervisor.await;
        }
        portico_mcp::reap_dropped_children(std::time::Duration::from_secs(2)).await;
        Ok(())
    }

    /// Makes the running servers what `config` says, touching only what changed: a server whose
    /// entry (and naming) is the same keeps its session, its calls in progress and its catalog;
    /// a new one is started, a removed one stopped (its child stopped and reaped before this
    /// returns) and its tools dropped from the catalog, a changed one stopped and started again.
    /// Whoever follows [`Hub::subscribe`] hears of the new catalog.
    pub async fn reload(&self, config: &Config) -> ServerChanges {
        let _reloading = self.shared.reloading.lock().await;
        if self.shared.shutdown.is_cancelled() {
            return ServerChanges::default();
        }
        let mut changes = ServerChanges::default();
        let mut stopped: Vec<Arc<Slot>> = Vec::new();
        let mut started: Vec<String> = Vec::new();
        {
            let _rebuilding = self.shared.rebuilding.lock().expect("rebuild lock");
            let mut disabled = self.shared.disabled.lock().expect("disabled lock");
            // A server the new config no longer has forgets that it was disabled.
            disabled.retain(|name| config.mcp_servers.iter().any(|s| &s.name == name));
            let context = SlotContext {
                shutdown: &self.shared.shutdown,
                oauth: self.shared.oauth.as_ref(),
                disabled: &disabled,
            };
            let mut slots = self.shared.slots.write().expect("slots lock");
            let mut next = Vec::with_capacity(config.mcp_servers.len());
            for server in &config.mcp_servers {
                let log = match slots.iter().find(|slot| slot.config.name == server.name) {
                    Some(old) if old.same_as(server, &config.expose) => {
                        changes.unchanged.push(server.name.clone());
                        next.push(old.clone());
                        continue;
                    }
                    Some(old) => {
                        changes.restarted.push(server.name.clone());
                        stopped.push(old.clone());
                        // A changed entry is the same server: its stderr log goes on.
                        Some(old.log.clone())
                    }
                    None => {
                        changes.added.push(server.name.clone());
                        None
                    }
                };
                started.push(server.name.clone());
                let mut slot = Slot::new(server, &config.expose, context);
                if let Some(log) = log {
                    slot.log = log;
                }
                next.push(Arc::new(slot));
            }
            for old in slots.iter() {
                if !config.mcp_servers.iter().any(|s| s.name == old.config.name) {
                    changes.removed.push(old.config.name.clone());
                    stopped.push(old.clone());
                }
            }
            for old in &stopped {
                old.stop.cancel();
            }
            *slots = next;
        }
        if changes.any() {
            // The stopped servers' tools leave the catalog now, not when their children have exited.
            let _rebuilding = self.shared.rebuilding.lock().expect("rebuild lock");
            self.shared.rebuild_catalog_locked();
        }
        self.connect(&started);
        for old in stopped {
            let supervisor = old.supervisor.lock().expect("supervisor lock").take();
            if let Some(supervisor) = supervisor {
                let _ = supervisor.await;
            }
        }
        if changes.any() {
            portico_mcp::reap_dropped_children(std::time::Duration::from_secs(2)).await;
        }
        changes
    }

    /// [`Hub::connect`] for every configured server.
    pub fn connect_all(&self) {
        self.connect(&self.server_names());
    }

    /// Every configured server's name, in config order.
    pub fn server_names(&self) -> Vec<String> {
        self.shared
            .slots()
            .iter()
            .map(|slot| slot.config.name.clone())
            .collect()
    }

    /// The servers that may serve a tool exposed as `name`, for connecting only what a call needs:
    /// every unprefixed server (its tools keep their own names) and each prefixed server whose prefix
    /// the name can carry ([`portico_core::naming::may_be_named_for`]). When none can, every server:
    /// the name is unknown, and the error should still suggest the tools they have.
    pub fn servers_for_tool(&self, name: &str) -> Vec<String> {
        let candidates: Vec<String> = self
            .shared
            .slots()
            .iter()
            .filter(|slot| {
                !slot.prefixed || portico_core::naming::may_be_named_for(name, &slot.config.name)
            })
            .map(|slot| slot.config.name.clone())
            .collect();
        if candidates.is_empty() {
            self.server_names()
        } else {
            candidates
        }
    }

    /// The current aggregated catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.catalog.read().expect("catalog lock").clone()
    }

    /// A status snapshot of every configured server, in config order.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.shared
            .slots()
            .iter()
            .map(|slot| slot.status())
            .collect()
    }

    /// What `server`'s stdio child wrote to stderr over its life in this hub (bounded); none for a
    /// server not in the config.
    pub fn server_log(&self, server: &str) -> Option<ServerLog> {
        self.slot(server).map(|slot| slot.log.clone())
    }

    /// Notifies on every state or catalog change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// True once every connected server has finished its first connection attempt (each attempt is
    /// bounded by that server's `startup_timeout_secs`).
    pub fn settled(&self) -> bool {
        // Under the rebuild lock: a server marked settled by `update_catalog` is in the catalog by
        // the time the lock is free, so whoever sees every server settled also sees every catalog.
        let _rebuilding = self.shared.rebuilding.lock().expect("rebuild lock");
        self.shared
            .slots()
            .iter()
            .all(|slot| slot.state.lock().expect("slot lock").settled)
    }

    /// Waits until [`Hub::settled`].
    pub async fn wait_settled(&self) {
        let mut changes = self.subscribe();
        while !self.settled() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Requests in flight to `server` now (each holds one of its `max_concurrent_calls` places);
    /// `None` if it is not connected.
    pub fn in_flight(&self, server: &str) -> Option<usize> {
        let slot = self.slot(server)?;
        let state = slot.state.lock().expect("slot lock");
        state.upstream.as_ref().map(|upstream| upstream.in_flight())
    }

    /// Requests waiting for one of `server`'s places now; `None` if it is not connected.
    pub fn waiting_for_place(&self, server: &str) -> Option<usize> {
        let slot = self.slot(server)?;
        let state = slot.state.lock().expect("slot lock");
        state
            .upstream
            .as_ref()
            .map(|upstream| upstream.waiting_for_place())
    }

    /// The OAuth authorization of `server` (an HTTP server of a hub with an [`OAuthHome`]).
    pub fn auth(&self, server: &str) -> Option<Arc<UpstreamAuth>> {
        self.slot(server).and_then(|slot| slot.auth.clone())
    }

    fn slot(&self, server: &str) -> Option<Arc<Slot>> {
        self.shared
            .slots()
            .iter()
            .find(|s| s.config.name == server)
            .cloned()
    }

    fn upstream(&self, server: &str) -> Result<Arc<Upstream>, HubError> {
        let slot = self.slot(server).ok_or_else(|| HubError::Unavailable {
            server: server.to_string(),
            state: ServerState::Failed,
            last_error: Some("not configured".into()),
        })?;
        let state = slot.state.lock().expect("slot lock");
        if let Some(upstream) = &state.upstream {
            return Ok(upstream.clone());
        }
        Err(match state.restart {
            Some(restart) if state.status.state == ServerState::Restarting => {
                HubError::Restarting {
                    server: server.to_string(),
                    attempt: restart.attempt,
                    next_in: restart
                        .next_at
                        .checked_duration_since(Instant::now())
                        .filter(|d| !d.is_zero()),
                    last_error: state.status.last_error.clone(),
                }
            }
            _ => HubError::Unavailable {
                server: server.to_string(),
                state: state.status.state,
                last_error: state.status.last_error.clone(),
            },
        })
    }

    /// Calls a tool by its exposed name, routed through the catalog's exact reverse map.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<ToolResult, HubError> {
        self.call_tool_with(name, arguments, &CallContext::default())
            .await
    }

    /// Calls a tool on behalf of a client, relaying what the upstream sends during the call to it.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<ToolResult, HubError> {
        let catalog = self.catalog();
        let (server, upstream_name) = match catalog.tool(name) {
            Some(tool) => (tool.server.clone(), tool.upstream_name.as_str()),
            // The passed-through upstream answers for names it does not list.
            None => match self.passthrough_server() {
                Some(server) => (server, name),
                None => {
                    return Err(HubError::UnknownTool {
                        name: name.to_string(),
                        hint: portico_core::naming::suggest(
                            name,
                            catalog.tools().iter().map(|t| t.name.as_str()),
                        ),
                    });
                }
            },
        };
        let upstream = self.upstream(&server)?;
        let started = Instant::now();
        let called = upstream
            .call_tool_with(upstream_name, arguments, context)
            .await;
        self.shared
            .metrics
            .time_upstream_call(&server, started.elapsed());
        self.answered(&server, called)
    }

    /// The server a gateway passes through: with `[expose] prefix = false` (or the server's own
    /// `prefix = false`) and exactly one server, Portico adds no names of its own, so what that
    /// server defines is its to answer: names and URIs it does not list (it may serve them
    /// anyway, or answer with its own error), and its errors, passed on as it sent them.
    pub fn passthrough_server(&self) -> Option<String> {
        match self.shared.slots().as_slice() {
            [only] if !only.prefixed => Some(only.config.name.clone()),
            _ => None,
        }
    }

    /// An upstream's answer, its JSON-RPC error passed on whole when `server` is passed through.
    fn answered<T>(&self, server: &str, result: Result<T, UpstreamError>) -> Result<T, HubError> {
        match result {
            Err(UpstreamError::Remote {
                code: Some(code),
                message,
                data,
                ..
            }) if self.passthrough_server().as_deref() == Some(server) => {
                Err(HubError::Answered(ProtocolError {
                    code,
                    message,
                    data: data.map(|data| *data),
                }))
            }
            other => Ok(other?),
        }
    }

    /// Routes `completion/complete` by its reference: a prompt by exposed name, a resource by URI.
    /// `request` is the rest of the request (the argument, its context), passed on unread.
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        request: JsonObject,
    ) -> Result<JsonObject, HubError> {
        let (server, upstream_ref) = match upstream_completion_ref(&self.catalog(), reference) {
            Ok(found) => found,
            Err(unknown) => match self.passthrough_server() {
                Some(server) => (server, reference.clone()),
                None => return Err(unknown),
            },
        };
        let completed = self
            .upstream(&server)?
            .complete(&upstream_ref, request)
            .await;
        self.answered(&server, completed)
    }

    /// Forwards `logging/setLevel` to every ready upstream that logs. Failures are logged, not returned:
    /// one server refusing must not fail the client's request for the others.
    pub async fn set_log_level(&self, level: &str) {
        let upstreams: Vec<Arc<Upstream>> = self
            .shared
            .slots()
            .iter()
            .filter_map(|slot| slot.state.lock().expect("slot lock").upstream.clone())
            .filter(|u| u.supports("logging"))
            .collect();
        for upstream in upstreams {
            if let Err(e) = upstream.set_level(level).await {
                tracing::warn!("{e}");
            }
        }
    }

    /// Subscribes to a resource at its upstream; changes arrive on [`Hub::resource_updates`].
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), HubError> {
        let (server, upstream_uri) = self.resource_owner(uri)?;
        let subscribed = self.upstream(&server)?.subscribe(&upstream_uri).await;
        self.answered(&server, subscribed)
    }

    /// Asks `server` about one of its tasks (the MCP tasks extension); the door that relayed the
    /// task's creation knows which server runs it.
    pub async fn task_operation(
        &self,
        server: &str,
        operation: portico_core::TaskOperation,
    ) -> Result<JsonObject, HubError> {
        let answered = self.upstream(server)?.task_operation(operation).await;
        self.answered(server, answered)
    }

    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), HubError> {
        let (server, upstream_uri) = self.resource_owner(uri)?;
        let unsubscribed = self.upstream(&server)?.unsubscribe(&upstream_uri).await;
        self.answered(&server, unsubscribed)
    }

    /// The server of an exposed resource URI and the URI in its own terms; a URI nobody lists
    /// belongs to the passed-through server, if there is one.
    fn resource_owner(&self, uri: &str) -> Result<(String, String), HubError> {
        let catalog = self.catalog();
        catalog
            .resolve_resource_uri(uri)
            .map(|(s, u)| (s.to_string(), u.to_string()))
            .or_else(|| self.passthrough_server().map(|s| (s, uri.to_string())))
            .ok_or_else(|| HubError::UnknownResource {
                uri: uri.to_string(),
            })
    }

    /// Exposed URIs of subscribed resources as their upstreams report changes.
    pub fn resource_updates(&self) -> broadcast::Receiver<String> {
        self.shared.resource_updates.subscribe()
    }

    /// The list changes (`ToolsChanged`, `PromptsChanged`, `ResourcesChanged`) the passed-through
    /// server ([`Hub::passthrough_server`]) announced while its lists read the same as before:
    /// the announcement is its to make, so the doors pass it on. A change that shows in the lists
    /// comes through [`Hub::subscribe`] only.
    pub fn announced_changes(&self) -> broadcast::Receiver<ListKind> {
        self.shared.announced.subscribe()
    }

    /// Gets a prompt by its exposed name; `rest` is the rest of the request, passed on unread.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        rest: JsonObject,
    ) -> Result<JsonObject, HubError> {
        let catalog = self.catalog();
        let (server, upstream_name) = match catalog.prompt(name) {
            Some(prompt) => (prompt.server.clone(), prompt.upstream_name.as_str()),
            None => match self.passthrough_server() {
                Some(server) => (server, name),
                None => {
                    return Err(HubError::UnknownPrompt {
                        name: name.to_string(),
                    });
                }
            },
        };
        let got = self
            .upstream(&server)?
            .get_prompt(upstream_name, arguments, rest)
            .await;
        self.answered(&server, got)
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, HubError> {
        let (server, upstream_uri) = self.resource_owner(uri)?;
        let upstream = self.upstream(&server)?;
        let read = upstream.read_resource(&upstream_uri).await;
        let mut result = self.answered(&server, read)?;
        // Contents carry the upstream URI; give the client back the URI it asked with (through
        // a passed-through server they are the same: its contents stay as it wrote them).
        if self.passthrough_server().as_deref() != Some(server.as_str()) {
            rewrite_content_uris(&mut result, &server, &upstream_uri, uri);
        }
        Ok(result)
    }

    /// The handshake details of a connected server, such as its pid for a stdio child.
    pub fn handshake(&self, server: &str) -> Option<portico_mcp::HandshakeInfo> {
        self.upstream(server).ok().map(|u| u.info().clone())
    }

    /// Kills every stdio child's process group now, without its stop sequence: for a daemon told a
    /// second time to stop. [`Hub::shutdown`] still reaps them.
    pub fn kill_children_now(&self) {
        for slot in self.shared.slots().iter() {
            let pid = slot
                .state
                .lock()
                .expect("slot lock")
                .upstream
                .as_ref()
                .and_then(|upstream| upstream.info().pid);
            if let Some(pid) = pid {
                portico_mcp::kill_child_group_now(pid);
            }
        }
    }

    /// Stops every supervisor: sessions are closed and stdio children stopped and reaped before this
    /// returns.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        // A reload in progress finishes stopping what it stopped before this looks at the slots.
        let _reloading = self.shared.reloading.lock().await;
        let handles: Vec<JoinHandle<()>> = self
            .shared
            .slots()
            .iter()
            .filter_map(|slot| slot.supervisor.lock().expect("supervisor lock").take())
            .collect();
        for handle in handles {
            let _ = handle.await;
        }
        // A supervisor cancelled mid-handshake dropped its child's transport, which killed the child
        // without waiting for it; nothing Portico started may be left once shutdown returns.
        portico_mcp::reap_dropped_children(std::time::Duration::from_secs(2)).await;
    }
}

/// A completion reference may name a resource template itself rather than a URI expanded from it.
/// The server a completion reference belongs to, and the reference in that server's own names.
fn upstream_completion_ref(
    catalog: &Catalog,
    reference: &CompletionRef,
) -> Result<(String, CompletionRef), HubError> {
    match reference {
        CompletionRef::Prompt { name, title } => {
            let prompt = catalog
                .prompt(name)
                .ok_or_else(|| HubError::UnknownPrompt { name: name.clone() })?;
            let upstream = CompletionRef::Prompt {
                name: prompt.upstream_name.clone(),
                title: title.clone(),
            };
            Ok((prompt.server.clone(), upstream))
        }
        CompletionRef::Resource { uri } => {
            let (server, upstream_uri) = catalog
                .resolve_resource_uri(uri)
                .or_else(|| resolve_template_reference(catalog, uri))
                .ok_or_else(|| HubError::UnknownResource { uri: uri.clone() })?;
            let upstream = CompletionRef::Resource {
                uri: upstream_uri.to_string(),
            };
            Ok((server.to_string(), upstream))
        }
    }
}

fn resolve_template_reference<'a>(
    catalog: &'a Catalog,
    uri: &'a str,
) -> Option<(&'a str, &'a str)> {
    catalog
        .resource_templates()
        .iter()
        .find(|t| t.uri_template == uri)
        .map(|t| (t.server.as_str(), t.upstream_uri_template.as_str()))
}

fn rewrite_content_uris(
    result: &mut JsonObject,
    server: &str,
    upstream_uri: &str,
    exposed_uri: &str,
) {
    let Some(serde_json::Value::Array(contents)) = result.get_mut("contents") else {
        return;
    };
    for content in contents {
        if let Some(uri) = content.get_mut("uri") {
            if uri.as_str() == Some(upstream_uri) {
                *uri = exposed_uri.into();
            } else if let Some(other) = uri.as_str() {
                *uri = portico_core::naming::namespace_resource_uri(server, other).into();
            }
        }
    }
}

impl Shared {
    fn slots(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Slot>>> {
        self.slots.read().expect("slots lock")
    }

    fn update(&self, slot: &Slot, f: impl FnOnce(&mut SlotState)) {
        {
            let mut state = slot.state.lock().expect("slot lock");
            f(&mut state);
        }
        self.changes.send_modify(|n| *n += 1);
    }

    /// Applies a change that affects the server's catalog and rebuilds the aggregate *before* anyone is
    /// notified, so that a waiter who sees the new state also sees the new catalog.
    ///
    /// The change and the rebuild happen under one hold of the rebuild lock, which
    /// [`Hub::settled`] takes too: a waiter woken by some other change cannot see a server
    /// settled before its catalog is in the aggregate (it once saw one of two colliding
    /// servers' tools, unsuffixed).
    fn update_catalog(&self, slot: &Slot, f: impl FnOnce(&mut SlotState)) {
        let _rebuilding = self.rebuilding.lock().expect("rebuild lock");
        {
            let mut state = slot.state.lock().expect("slot lock");
            f(&mut state);
        }
        self.rebuild_catalog_locked();
    }

    /// Rebuilds the aggregate; the caller holds `rebuilding`.
    fn rebuild_catalog_locked(&self) {
        let snapshots: Vec<ServerCatalog> = self
            .slots()
            .iter()
            .filter_map(|slot| slot.state.lock().expect("slot lock").catalog.clone())
            .collect();
        let catalog = Arc::new(Catalog::build(&snapshots));
        *self.catalog.write().expect("catalog lock") = catalog;
        self.changes.send_modify(|n| *n += 1);
    }
}

fn record_catalog(state: &mut SlotState, mut catalog: ServerCatalog, prefixed: bool) {
    catalog.unprefixed = !prefixed;
    state.status.tools = catalog.tools.len();
    state.status.prompts = catalog.prompts.len();
    state.status.resources = catalog.resources.len();
    state.status.resource_templates = catalog.resource_templates.len();
    state.catalog = Some(catalog);
}

/// One server's life: connect, serve, and restart on failure until shutdown.
async fn supervise(shared: Arc<Shared>, slot: Arc<Slot>) {
    let slot = &*slot;
    let config = slot.config.clone();
    let server = config.name.as_str();
    let mut attempt: u32 = 0;
    loop {
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let refusals_before = slot.auth.as_ref().map(|a| a.refusals());
        // Taken before the secrets are read, so a secret set during the attempt is noticed.
        let secrets_before = shared.vars.stamp();
        let connecting = Instant::now();
        shared.update(slot, |s| s.attempt_started = Some(connecting));
        let connected = tokio::select! {
            result = Upstream::connect_logged(&config, events_tx, shared.child_stop, slot.auth.clone(), &shared.vars, &slot.log) => result,
            _ = slot.stop.cancelled() => return,
        };
        // Quietly: whatever the attempt ended in updates the state next, and notifies then.
        slot.state.lock().expect("slot lock").attempt_started = None;
        let outcome = match &connected {
            Ok(_) => ConnectOutcome::Ok,
            Err(UpstreamError::NeedsLogin { .. }) => ConnectOutcome::NeedsLogin,
            Err(UpstreamError::NeedsSecret { .. }) => ConnectOutcome::NeedsSecret,
            Err(_) => ConnectOutcome::Failed,
        };
        shared
            .metrics
            .time_connect(server, outcome, connecting.elapsed());
        let (upstream, exit) = match connected {
            Ok(pair) => pair,
            Err(error @ UpstreamError::NeedsLogin { .. }) => {
                if !wait_for_login(&shared, slot, &error).await {
                    return;
                }
                attempt = 0;
                continue;
            }
            Err(error @ UpstreamError::NeedsSecret { .. }) => {
                if !wait_for_secret(&shared, slot, &error, secrets_before).await {
                    return;
                }
                attempt = 0;
                continue;
            }
            Err(error) => {
                if !connect_failed(&shared, slot, &error, attempt).await {
                    return;
                }
                attempt = attempt.saturating_add(1);
                continue;
            }
        };
        let upstream = Arc::new(upstream);
        let started = Instant::now();
        let mut exit = std::pin::pin!(exit.wait());

        let listed = tokio::select! {
            listed = upstream.list_catalog() => listed,
            reason = &mut exit => Err(listing_closed(server, &reason)),
            _ = slot.stop.cancelled() => {
                upstream.shutdown();
                exit.await;
                return;
            }
        };
        match listed {
            Ok(catalog) => mark_ready(&shared, slot, &upstream, catalog),
            Err(error) => {
                upstream.shutdown();
                exit.await;
                // A server that lets the handshake through and asks for authorization on its
                // listings.
                if let Some(reason) = slot
                    .auth
                    .as_ref()
                    .zip(refusals_before)
                    .and_then(|(a, before)| a.needs_login_since(before))
                {
                    let error = UpstreamError::NeedsLogin {
                        server: server.to_string(),
                        reason,
                    };
                    if !wait_for_login(&shared, slot, &error).await {
                        return;
                    }
                    attempt = 0;
                    continue;
                }
                tracing::warn!(server, "{}", log_safe(&error.to_string()));
                if !listing_failed(&shared, slot, &error, attempt).await {
                    return;
                }
                attempt = attempt.saturating_add(1);
                continue;
            }
        }

        let Some(reason) = serve(&shared, slot, &upstream, exit.as_mut(), &mut events_rx).await
        else {
            return;
        };
        tracing::warn!(
            server,
            "session ended ({}); restarting",
            log_safe(&reason.to_string())
        );
        if started.elapsed() >= STABLE_AFTER {
            attempt = 0;
        }
        if !session_ended(&shared, slot, &reason, attempt).await {
            return;
        }
        attempt = attempt.saturating_add(1);
    }
}

/// A connect failed: a permanent failure fails the server (its tools go), any other waits out the
/// backoff. False when the server is done: failed, or shutdown came first.
async fn connect_failed(shared: &Shared, slot: &Slot, error: &UpstreamError, attempt: u32) -> bool {
    let server = slot.config.name.as_str();
    tracing::warn!(server, "{}", log_safe(&error.to_string()));
    let permanent = error.is_permanent();
    let delay = shared.backoff.backoff(attempt);
    let change = |s: &mut SlotState| {
        if !permanent {
            // In the same change, so whoever sees `restarting` sees when the next try comes.
            s.restart = Some(Restart::after(attempt, delay));
        }
        s.status.state = if permanent {
            ServerState::Failed
        } else {
            ServerState::Restarting
        };
        s.status.last_error = Some(error.to_string());
        s.status.stderr_tail = error.stderr_tail().to_vec();
        s.status.missing_secrets.clear();
        s.settled = true;
        if permanent {
            // It will not come back: its tools go.
            forget_catalog(s);
        }
    };
    if permanent {
        shared.update_catalog(slot, change);
        return false;
    }
    // Counted before the state says so, so whoever sees `restarting` sees the count.
    shared.metrics.count_restart(server);
    shared.update(slot, change);
    sleep(slot, delay).await
}

/// How often a server waiting for a secret looks whether the secret store changed (a `stat`).
const SECRET_POLL: Duration = Duration::from_millis(500);

/// The server's `${VAR}`s name secrets nobody has set: it waits, marked `needs secret`, until the
/// secret store changes from `before` (a `portico secret set` in any process), then connects
/// again; the attempt says whether anything is still missing. False when it was stopped first.
async fn wait_for_secret(
    shared: &Shared,
    slot: &Slot,
    error: &UpstreamError,
    before: Option<portico_secrets::FileStamp>,
) -> bool {
    let server = slot.config.name.as_str();
    tracing::warn!(server, "{}", log_safe(&error.to_string()));
    let names = match error {
        UpstreamError::NeedsSecret { names, .. } => names.clone(),
        _ => Vec::new(),
    };
    shared.update(slot, |s| {
        s.status.state = ServerState::NeedsSecret;
        s.status.last_error = Some(error.to_string());
        s.status.missing_secrets = names;
        s.status.stderr_tail.clear();
        s.restart = None;
        s.settled = true;
    });
    loop {
        if !sleep(slot, SECRET_POLL).await {
            return false;
        }
        if shared.vars.stamp() != before {
            tracing::info!(server, "the secret store changed; connecting");
            return true;
        }
    }
}

/// The server needs an OAuth login nobody here can start: it waits, marked `needs login`, until its
/// credentials file changes. False when it was stopped first.
async fn wait_for_login(shared: &Shared, slot: &Slot, error: &UpstreamError) -> bool {
    let server = slot.config.name.as_str();
    tracing::warn!(server, "{}", log_safe(&error.to_string()));
    shared.update(slot, |s| {
        s.status.state = ServerState::NeedsLogin;
        s.status.last_error = Some(error.to_string());
        s.status.stderr_tail.clear();
        s.status.missing_secrets.clear();
        s.restart = None;
        s.settled = true;
    });
    let Some(auth) = slot.auth.as_ref() else {
        return sleep(slot, RESTARTS.backoff(0)).await;
    };
    tokio::select! {
        _ = auth.wait_for_login() => {
            tracing::info!(server, "new OAuth credentials; connecting");
            true
        }
        _ = slot.stop.cancelled() => false,
    }
}

fn listing_closed(server: &str, reason: &str) -> UpstreamError {
    UpstreamError::Closed {
        server: server.to_string(),
        what: format!("listing ({reason})"),
    }
}

/// Connected and listed: the server is ready, with its catalog.
fn mark_ready(shared: &Shared, slot: &Slot, upstream: &Arc<Upstream>, catalog: ServerCatalog) {
    let server = slot.config.name.as_str();
    let prefixed = slot.prefixed;
    let info = upstream.info().clone();
    tracing::info!(
        server,
        protocol = info.protocol_version,
        transport = info.transport,
        tools = catalog.tools.len(),
        "connected"
    );
    shared.update_catalog(slot, |s| {
        s.status.state = ServerState::Ready;
        s.status.protocol_version = Some(info.protocol_version.clone());
        s.status.transport_detail = Some(info.transport.to_string());
        s.status.server_name = info.server_name.clone();
        s.status.server_version = info.server_version.clone();
        s.status.last_error = None;
        s.status.stderr_tail.clear();
        s.status.missing_secrets.clear();
        s.status.connects += 1;
        s.status.restarts = s.status.connects.saturating_sub(1);
        s.status.connected_at = Some(portico_core::time::rfc3339(portico_core::time::now_ms()));
        s.upstream = Some(upstream.clone());
        s.restart = None;
        record_catalog(s, catalog, prefixed);
        s.settled = true;
    });
}

/// Listing the catalog of a new session failed (the session is closed by now): the server restarts
/// after the backoff. False when shutdown came first.
async fn listing_failed(shared: &Shared, slot: &Slot, error: &UpstreamError, attempt: u32) -> bool {
    shared.metrics.count_restart(&slot.config.name);
    let delay = shared.backoff.backoff(attempt);
    shared.update(slot, |s| {
        s.status.state = ServerState::Restarting;
        s.status.last_error = Some(error.to_string());
        s.settled = true;
        s.restart = Some(Restart::after(attempt, delay));
    });
    sleep(slot, delay).await
}

/// Serves a session until it ends (its reason) or we are told to stop (`None`, the session closed).
async fn serve(
    shared: &Shared,
    slot: &Slot,
    upstream: &Upstream,
    mut exit: Pin<&mut impl Future<Output = String>>,
    events: &mut mpsc::UnboundedReceiver<UpstreamEvent>,
) -> Option<String> {
    loop {
        tokio::select! {
            reason = &mut exit => return Some(reason),
            Some(event) = events.recv() => on_event(shared, slot, upstream, event, events).await,
            _ = slot.stop.cancelled() => {
                upstream.shutdown();
                exit.await;
                shared.update(slot, |s| {
                    s.upstream = None;
                    s.status.connected_at = None;
                });
                return None;
            }
        }
    }
}

/// An event of a served session: a resource update goes out under its exposed URI; a burst of list
/// changes is coalesced into one refresh of the catalog.
async fn on_event(
    shared: &Shared,
    slot: &Slot,
    upstream: &Upstream,
    event: UpstreamEvent,
    events: &mut mpsc::UnboundedReceiver<UpstreamEvent>,
) {
    let server = slot.config.name.as_str();
    let prefixed = slot.prefixed;
    if let UpstreamEvent::ResourceUpdated(uri) = &event {
        let exposed = if prefixed {
            portico_core::naming::namespace_resource_uri(server, uri)
        } else {
            uri.clone()
        };
        let _ = shared.resource_updates.send(exposed);
        return;
    }
    // Coalesce a burst of list changes into one refresh; resource updates in it still go out.
    let mut kinds = vec![event.clone()];
    while let Ok(next) = events.try_recv() {
        match next {
            UpstreamEvent::ResourceUpdated(uri) => {
                let exposed = if prefixed {
                    portico_core::naming::namespace_resource_uri(server, &uri)
                } else {
                    uri
                };
                let _ = shared.resource_updates.send(exposed);
            }
            other if !kinds.contains(&other) => kinds.push(other),
            _ => {}
        }
    }
    tracing::debug!(server, ?event, "list changed; refreshing");
    let before = slot.state.lock().expect("slot lock").catalog.clone();
    match upstream.list_catalog().await {
        Ok(catalog) => {
            let same = before.is_some_and(|before| {
                before.tools == catalog.tools
                    && before.prompts == catalog.prompts
                    && before.resources == catalog.resources
                    && before.resource_templates == catalog.resource_templates
            });
            shared.update_catalog(slot, |s| record_catalog(s, catalog, prefixed));
            let passed_through = shared.slots().len() == 1 && !prefixed;
            if same && passed_through {
                for kind in kinds {
                    let kind = match kind {
                        UpstreamEvent::ToolsChanged => ListKind::Tools,
                        UpstreamEvent::PromptsChanged => ListKind::Prompts,
                        UpstreamEvent::ResourcesChanged => ListKind::Resources,
                        UpstreamEvent::ResourceUpdated(_) => continue,
                    };
                    let _ = shared.announced.send(kind);
                }
            }
        }
        Err(error) => tracing::warn!(
            server,
            "refresh after {event:?} failed: {}",
            log_safe(&error.to_string())
        ),
    }
}

/// The session ended: the server restarts after the backoff, its catalog kept. False when shutdown
/// came first.
async fn session_ended(shared: &Shared, slot: &Slot, reason: &str, attempt: u32) -> bool {
    let server = slot.config.name.as_str();
    // The catalog stays: the aggregate is unchanged, so no list change goes out, and a call in
    // the meantime hears when the server will be back (one update, so no call sees the one
    // without the other).
    let delay = shared.backoff.backoff(attempt);
    shared.metrics.count_restart(server);
    shared.update(slot, |s| {
        s.upstream = None;
        s.status.connected_at = None;
        s.status.state = ServerState::Restarting;
        s.status.last_error = Some(format!("server `{server}` {reason}"));
        s.restart = Some(Restart::after(attempt, delay));
    });
    sleep(slot, delay).await
}

fn forget_catalog(state: &mut SlotState) {
    state.catalog = None;
    state.restart = None;
    state.status.tools = 0;
    state.status.prompts = 0;
    state.status.resources = 0;
    state.status.resource_templates = 0;
}

/// False when the server was stopped first.
async fn sleep(slot: &Slot, delay: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = slot.stop.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Config {
        portico_config::parse("test", toml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn stdio(name: &str, extra: &str) -> String {
        format!(
            "[[mcp_servers]]\nname = {name:?}\n{extra}\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"true\"\n\n"
        )
    }

    #[test]
    fn completion_references_are_routed_in_the_upstreams_own_names() {
        let object = |value: serde_json::Value| value.as_object().cloned().unwrap();
        let catalog = Catalog::build(&[ServerCatalog {
            server: "gh".into(),
            prompts: vec![portico_core::PromptDef {
                name: "review".into(),
                definition: object(serde_json::json!({"name": "review"})),
            }],
            resource_templates: vec![portico_core::ResourceTemplateDef {
                uri_template: "file:///{path}".into(),
                definition: object(serde_json::json!({})),
            }],
            ..ServerCatalog::default()
        }]);
        let prompt = CompletionRef::Prompt {
            name: catalog.prompts()[0].name.clone(),
            title: Some("Review".into()),
        };
        assert_eq!(
            upstream_completion_ref(&catalog, &prompt).unwrap(),
            (
                "gh".to_string(),
                CompletionRef::Prompt {
                    name: "review".into(),
                    title: Some("Review".into()),
                }
            )
        );
        let template = CompletionRef::Resource {
            uri: catalog.resource_templates()[0].uri_template.clone(),
        };
        assert_eq!(
            upstream_completion_ref(&catalog, &template).unwrap(),
            (
                "gh".to_string(),
                CompletionRef::Resource {
                    uri: "file:///{path}".into(),
                }
            )
        );
        let unknown = CompletionRef::Prompt {
            name: "mcp_gh_nope".into(),
            title: None,
        };
        assert!(matches!(
            upstream_completion_ref(&catalog, &unknown),
            Err(HubError::UnknownPrompt { name }) if name == "mcp_gh_nope"
        ));
    }

    #[test]
    fn a_tool_name_needs_the_servers_that_may_serve_it() {
        let hub = Hub::idle(
            &config(&(stdio("a", "") + &stdio("a_b", "") + &stdio("github", ""))),
            HubSettings::default(),
        );
        assert_eq!(hub.servers_for_tool("mcp_github_create_issue"), ["github"]);
        assert_eq!(hub.servers_for_tool("mcp_a_x"), ["a"]);
        assert_eq!(hub.servers_for_tool("mcp_a_b_x"), ["a", "a_b"]);
        // No prefix fits: every server, so that an unknown name still gets suggestions.
        assert_eq!(hub.servers_for_tool("create_issue"), ["a", "a_b", "github"]);

        // An unprefixed server's tools keep their own names: it may serve anything.
        let hub = Hub::idle(
            &config(&(stdio("a", "") + &stdio("plain", "prefix = false"))),
            HubSettings::default(),
        );
        assert_eq!(hub.servers_for_tool("mcp_a_x"), ["a", "plain"]);
        assert_eq!(hub.servers_for_tool("create_issue"), ["plain"]);
    }

    #[test]
    fn servers_connecting_at_once_all_reach_the_catalog() {
        // Each supervisor records its catalog and rebuilds the aggregate; two rebuilds interleaving
        // must not swap in one made before the other server's catalog was recorded. The race needs
        // luck to show, so it gets many chances.
        const SERVERS: usize = 4;
        let toml: String = (0..SERVERS).map(|i| stdio(&format!("s{i}"), "")).collect();
        let config = config(&toml);
        for round in 0..300 {
            let hub = Hub::idle(&config, HubSettings::default());
            let start = std::sync::Barrier::new(SERVERS);
            std::thread::scope(|threads| {
                for index in 0..SERVERS {
                    let (shared, start) = (&hub.shared, &start);
                    let slot = shared.slots()[index].clone();
                    threads.spawn(move || {
                        let catalog = ServerCatalog {
                            server: format!("s{index}"),
                            tools: vec![portico_core::ToolDef {
                                name: "t".into(),
                                definition: serde_json::json!({"name": "t"})
                                    .as_object()
                                    .cloned()
                                    .unwrap_or_default(),
                            }],
                            ..ServerCatalog::default()
                        };
                        start.wait();
                        shared.update_catalog(&slot, |s| record_catalog(s, catalog, true));
                    });
                }
            });
            let tools: Vec<String> = hub
                .catalog()
                .tools()
                .iter()
                .map(|t| t.name.clone())
                .collect();
            assert_eq!(tools.len(), SERVERS, "round {round}: {tools:?}");
        }
    }

    #[tokio::test]
    async fn a_reload_keeps_the_same_servers_and_replaces_only_what_changed() {
        // Disabled servers: nothing is spawned, and the diff is all that is looked at.
        let off = "enabled = false";
        let hub = Hub::idle(
            &config(&(stdio("same", off) + &stdio("edited", off) + &stdio("gone", off))),
            HubSettings::default(),
        );
        let before = hub.shared.slots().clone();
        let changes = hub
            .reload(&config(
                &(stdio("new", off)
                    + &stdio("same", off)
                    + &stdio("edited", "enabled = false\ntimeout_secs = 5")),
            ))
            .await;
        assert_eq!(
            changes,
            ServerChanges {
                added: vec!["new".into()],
                removed: vec!["gone".into()],
                restarted: vec!["edited".into()],
                unchanged: vec!["same".into()],
            }
        );
        assert_eq!(hub.server_names(), ["new", "same", "edited"]);
        let after = hub.shared.slots().clone();
        assert!(Arc::ptr_eq(&before[0], &after[1]), "`same` keeps its slot");
        assert!(
            !Arc::ptr_eq(&before[1], &after[2]),
            "`edited` gets a new one"
        );
        assert!(before[1].stop.is_cancelled() && before[2].stop.is_cancelled());
        assert!(!after.iter().any(|slot| slot.stop.is_cancelled()));
        // Nothing changed: nothing touched.
        let same_again = config(
            &(stdio("new", off)
                + &stdio("same", off)
                + &stdio("edited", "enabled = false\ntimeout_secs = 5")),
        );
        assert!(!hub.reload(&same_again).await.any());
        assert!(Arc::ptr_eq(&after[2], &hub.shared.slots()[2]));
        // After shutdown a reload starts nothing.
        hub.shutdown().await;
        assert_eq!(hub.reload(&config("")).await, ServerChanges::default());
    }

    #[tokio::test]
    async fn a_server_disabled_at_run_time_stays_so_across_reloads_until_enabled() {
        let toml = stdio("a", "") + &stdio("off", "enabled = false");
        let hub = Hub::idle(&config(&toml), HubSettings::default());
        let state = |hub: &Hub, name: &str| {
            let status = hub.servers().into_iter().find(|s| s.name == name).unwrap();
            (status.state, status.enabled)
        };
        assert_eq!(state(&hub, "a"), (ServerState::Idle, true));
        assert_eq!(state(&hub, "off"), (ServerState::Disabled, false));
        assert!(matches!(
            hub.disable_server("nope").await,
            Err(HubError::UnknownServer { name }) if name == "nope"
        ));
        assert!(matches!(
            hub.enable_server("off").await,
            Err(HubError::DisabledInConfig { .. })
        ));

        hub.disable_server("a").await.unwrap();
        assert_eq!(state(&hub, "a"), (ServerState::Disabled, false));
        assert!(matches!(
            hub.restart_server("a").await,
            Err(HubError::Disabled { .. })
        ));
        // Disabling again changes nothing; a reload, changed entry or not, keeps it disabled.
        let slot = hub.slot("a").unwrap();
        hub.disable_server("a").await.unwrap();
        assert!(Arc::ptr_eq(&slot, &hub.slot("a").unwrap()));
        hub.reload(&config(
            &(stdio("a", "timeout_secs = 5") + &stdio("off", "enabled = false")),
        ))
        .await;
        assert_eq!(state(&hub, "a"), (ServerState::Disabled, false));
        assert!(hub.slot("a").unwrap().supervisor.lock().unwrap().is_none());

        // Enabled, it starts connecting (its command is `true`, which never answers a handshake).
        hub.enable_server("a").await.unwrap();
        assert!(hub.servers()[0].enabled);
        assert_ne!(state(&hub, "a").0, ServerState::Disabled);
        assert!(hub.slot("a").unwrap().supervisor.lock().unwrap().is_some());
        hub.shutdown().await;
    }

    #[test]
    fn an_idle_hub_connects_nothing_and_is_settled() {
        let hub = Hub::idle(
            &config(&(stdio("a", "") + &stdio("off", "enabled = false"))),
            HubSettings::default(),
        );
        let states: Vec<ServerState> = hub.servers().iter().map(|s| s.state).collect();
        assert_eq!(states, [ServerState::Idle, ServerState::Disabled]);
        assert!(hub.settled());
        // Neither an unknown nor a disabled server is started (no runtime needed: nothing spawns).
        hub.connect(&["nope".to_string(), "off".to_string()]);
        assert!(
            hub.shared
                .slots()
                .iter()
                .all(|slot| slot.supervisor.lock().unwrap().is_none())
        );
        assert_eq!(hub.servers()[1].state, ServerState::Disabled);
    }

    /// `/metrics`: every connect attempt is timed with how it ended, and each failure that
    /// schedules a restart is counted, before the state says `restarting`.
    #[tokio::test]
    async fn failed_connects_are_timed_and_their_restarts_counted() {
        let metrics = Metrics::new();
        let hub = Hub::start_with(
            &config(&stdio("quits", "")),
            HubSettings {
                metrics: metrics.clone(),
                ..HubSettings::default()
            },
        );
        hub.wait_settled().await;
        assert_eq!(hub.servers()[0].state, ServerState::Restarting);
        hub.shutdown().await;
        let text = metrics.encode(&portico_metrics::State::default());
        let count = |prefix: &str| -> u64 {
            let line = text
                .lines()
                .find(|line| line.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let failed = count(
            r#"portico_upstream_connect_duration_seconds_count{server="quits",outcome="failed"}"#,
        );
        assert!(failed >= 1, "{text}");
        // Each failed attempt scheduled the next (the last one's wait was cut by the shutdown).
        assert_eq!(
            count(r#"portico_upstream_restarts_total{server="quits"}"#),
            failed,
            "{text}"
        );
        assert!(!text.contains(r#"outcome="ok""#), "{text}");
    }
}
