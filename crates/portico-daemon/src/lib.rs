//! Portico's HTTP door: one axum [`app`] with the REST API (`/api/health`, `/api/mcp/servers`,
//! `/api/servers`, `/api/tools`, `/api/agents`, `/api/conversations`, `/api/audit`; for the
//! dashboard also `/api/events` (live changes as server-sent events), server restart, disable and
//! enable; for `portico stop` and `portico logs`, `/api/shutdown` and a server's stderr at
//! `/api/mcp/servers/{name}/logs`, trying a tool through the pipeline, `/api/approvals/decisions` and the A2A task and
//! remote agent lists), MCP over Streamable HTTP (`/mcp`) and over the
//! legacy HTTP+SSE transport (`/sse`, `/message`), Prometheus metrics (`/metrics`, the engine's
//! `portico-metrics` handle with this moment's state), and, when `[a2a]` is enabled, `portico-a2a`'s
//! routes, all behind the door's checks; the approval page (`/approvals`), a static shell served
//! without a token, whose script calls its API (`/api/approvals`) with the token from the link's
//! fragment; the dashboard's login (`POST /ui/login`, `/ui/logout`, `GET /ui/session`), whose
//! `portico_ui` session cookie stands for the token on `/api/*`, `/metrics` and `/ui/*` only, from
//! the dashboard's own page only (never on `/mcp`, `/sse`, `/message` or A2A routes); plus the
//! daemon info file that lets `portico mcp` find a running daemon and check its identity.
//!
//! Security is on by default: the door binds loopback unless told otherwise, refuses to start off
//! loopback without a bearer token, checks `Host` (DNS rebinding) and `Origin` (browsers) on every
//! request, and requires a token, when any is set (`[server] token`, `[[server.clients]]`, each naming
//! the client a request calls as, or `[server.oauth]`'s JWT access tokens, each `client:{sub}` within
//! its scopes' tools; the door then publishes its RFC 9728 protected resource metadata and answers
//! with `Bearer` challenges naming it), everywhere but the health check and that metadata. Every resource a
//! client can make it hold is bounded: connections (its own accept loop, with head deadlines), request
//! bodies (`max_message_bytes`), MCP sessions in all and per client, and GCRA rate limits per client
//! identity, where a request that runs an agent costs more, as the door that understands it (its
//! `pricing` module) says.
//!
//! It knows MCP only as far as transports go (mounting `portico-mcp-server`'s handler, the legacy SSE
//! framing, and a JSON-RPC method name where a transport needs one: `initialize` opens a session,
//! `subscriptions/listen` is a stream shutdown does not wait for); it does not connect upstreams or
//! run tools itself: every call goes to the engine's pipeline.

mod api;
mod approval_page;
mod approvals_api;
mod body_limit;
mod catalog_api;
mod content_api;
mod dashboard;
mod dashboard_api;
mod door_span;
mod events_api;
mod in_flight;
mod info;
mod legacy_sse;
mod lifecycle_api;
mod listener;
mod metrics;
mod oauth;
mod panics;
mod rate_limit;
mod reload;
mod security;
mod session_end;
mod sessions;
#[cfg(test)]
mod test_messages;
mod ui_login;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use portico_config::Config;
use portico_engine::Engine;
use portico_mcp_server::{Backend, PorticoServer, ServerOptions};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::Digest;
use tokio_util::sync::CancellationToken;

pub use catalog_api::{conversation_list, tool_catalog};
use in_flight::InFlight;
pub use info::{
    ConfigIdentity, DaemonInfo, IdentityError, IdentityKey, InfoFile, MAX_CHALLENGE_CHARS,
    new_challenge,
};
pub use lifecycle_api::{
    LOG_LINE_EVENT, LOG_MISSED_EVENT, LOG_REMOVED_EVENT, LogRecord, ServerLogs, Stopping,
};
pub use oauth::{OAuthConfigError, OAuthResource};
pub use reload::{ConfigLoad, ConfigStatus, LiveConfig};
pub use security::{DEFAULT_CLIENT, DoorClient, DoorPolicy};

/// How long shutdown waits for calls in progress.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the door stays open after the last call in progress at a stop was answered.
const FOLLOW_UP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "[server] listen `{0}` is not an address and port such as 127.0.0.1:4200 or localhost:4200"
    )]
    BadListen(String),
    #[error(
        "[server] listen is {0}, which is not a loopback address, and no token is set; anyone who can reach it could use every tool. Set [server] token = \"${{PORTICO_TOKEN}}\" (and export PORTICO_TOKEN), add [[server.clients]] or [server.oauth], or listen on 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    #[error("[server] token: {0}")]
    Token(String),
    #[error(
        "[server] public_url `{url}` is not usable: {why}; write the address browsers use, such as https://portico.example.com"
    )]
    PublicUrl { url: String, why: String },
    #[error(
        "[server] trusted_proxies: `{0}` is not an IP address or CIDR range; list the balancers' addresses, such as \"10.0.0.0/8\""
    )]
    TrustedProxy(String),
    #[error("[[server.clients]] `{client}`: {problem}")]
    Client { client: String, problem: String },
    #[error(transparent)]
    OAuth(#[from] OAuthConfigError),
    /// The OS's error is in the message, not a source: a chain would print it twice.
    #[error("cannot listen on {addr}: {}", bind_words(.error))]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("cannot write the daemon info file {path}: {source}")]
    InfoFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// Everything the HTTP door needs, resolved from config.
#[derive(Clone)]
pub struct DoorConfig {
    pub listen: SocketAddr,
    pub policy: Arc<DoorPolicy>,
    pub server: ServerOptions,
    /// Made fresh for every start; `/api/health` proves the daemon's identity with it.
    pub identity: IdentityKey,
    /// The config followed for changes while the daemon serves; without it, the config given to
    /// [`serve`] is the one for good.
    pub live: Option<LiveConfig>,
    /// Which config this daemon runs, published in `daemon.json` (set by the caller that read it).
    pub config: Option<ConfigIdentity>,
}

impl DoorConfig {
    /// Resolves the `[server]` section: expands the token, and refuses a non-loopback listen address
    /// without one.
    pub fn from_config(config: &Config) -> Result<Self, DaemonError> {
        let section = &config.server;
        // Tokens may be kept in the secret store, like every other `${VAR}`.
        let vars =
            portico_secrets::Vars::with_store(portico_secrets::SecretStore::for_config(config));
        let listen = portico_config::listen_address(&section.listen)
            .ok_or_else(|| DaemonError::BadListen(section.listen.clone()))?;
        let token = match &section.token {
            Some(raw) => {
                let token = portico_config::expand_vars(raw, |v| vars.get(v))
                    .map_err(|e| DaemonError::Token(e.to_string()))?;
                if token.trim().is_empty() {
                    return Err(DaemonError::Token("expands to an empty value".into()));
                }
                Some(token)
            }
            None => None,
        };
        let clients = section
            .clients
            .iter()
            .map(|client| door_client(client, &vars))
            .collect::<Result<Vec<_>, _>>()?;
        if !listen.ip().is_loopback()
            && token.is_none()
            && clients.is_empty()
            && section.oauth.is_none()
        {
            return Err(DaemonError::TokenRequired(listen));
        }
        let public_origin = section
            .public_url
            .as_deref()
            .map(|url| {
                portico_config::public_origin(url).map_err(|why| DaemonError::PublicUrl {
                    url: url.to_string(),
                    why,
                })
            })
            .transpose()?;
        let trusted_proxies = section
            .trusted_proxies
            .iter()
            .map(|proxy| {
                portico_config::IpRange::parse(proxy)
                    .ok_or_else(|| DaemonError::TrustedProxy(proxy.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut policy = DoorPolicy::new(
            listen,
            token,
            section.allowed_origins.clone(),
            section.allowed_hosts.clone(),
        )
        .with_clients(clients)
        .with_balancer(public_origin, trusted_proxies);
        if let Some(oauth) = &section.oauth {
            let resource = OAuthResource::from_config(oauth)?;
            tracing::info!(
                "[server.oauth]: the door takes access tokens from {} for {}; its resource metadata is {}",
                oauth.issuer,
                oauth.audience,
                resource.metadata_url()
            );
            policy = policy.with_oauth(resource);
        }
        Ok(DoorConfig {
            listen,
            policy: Arc::new(policy),
            server: ServerOptions {
                door: "http".into(),
                ..ServerOptions::from_config(config)
            },
            identity: IdentityKey::generate(),
            live: None,
            config: None,
        })
    }

    /// The same door, reloading its config when the files change or on [`LiveConfig::request_reload`].
    pub fn with_live_config(mut self, live: LiveConfig) -> Self {
        self.live = Some(live);
        self
    }

    /// The same door bound to another address (tests bind port 0 and learn the real port after).
    pub fn with_listen(mut self, listen: SocketAddr) -> Self {
        let policy = (*self.policy).clone().with_listen(listen);
        self.listen = listen;
        self.policy = Arc::new(policy);
        self
    }
}

/// One `[[server.clients]]` entry as the door knows it: its token's digest (a `token` expanded from
/// the environment and hashed at once) and its compiled scope.
fn door_client(
    client: &portico_config::ClientConfig,
    vars: &portico_secrets::Vars,
) -> Result<DoorClient, DaemonError> {
    let problem = |problem: String| DaemonError::Client {
        client: client.name.clone(),
        problem,
    };
    let digest = match (&client.token, &client.token_sha256) {
        (Some(raw), None) => {
            let token = portico_config::expand_vars(raw, |v| vars.get(v))
                .map_err(|e| problem(format!("token: {e}")))?;
            if token.trim().is_empty() {
                return Err(problem("token expands to an empty value".into()));
            }
            sha2::Sha256::digest(token.trim().as_bytes()).into()
        }
        (None, Some(hex)) => portico_config::parse_sha256_hex(hex)
            .ok_or_else(|| problem("token_sha256 is not 64 hex digits".into()))?,
        _ => {
            return Err(problem(
                "give exactly one of `token` and `token_sha256` (`portico clients add NAME` prints both)"
                    .into(),
            ));
        }
    };
    let scope = match &client.tools {
        Some(patterns) => Some(
            portico_pipeline::ToolPatterns::new(patterns).map_err(|e| problem(e.to_string()))?,
        ),
        None => None,
    };
    Ok(DoorClient::new(client.name.clone(), digest, scope))
}

/// The router: `/api/*` and `/mcp`, behind the door policy. `shutdown` ends open MCP streams.
pub fn app(
    engine: Engine,
    config: &Config,
    door: &DoorConfig,
    shutdown: CancellationToken,
) -> Router {
    let server = PorticoServer::new(Backend::Local(engine.clone()), door.server.clone());
    app_with_server(engine, config, door, server, shutdown)
}

/// [`app`] with a server the caller built, for embedders that register host tools on it.
pub fn app_with_server(
    engine: Engine,
    config: &Config,
    door: &DoorConfig,
    server: PorticoServer,
    shutdown: CancellationToken,
) -> Router {
    router(engine, config, door, server, shutdown, None, None)
}

/// The router, counting calls in `in_flight` when given (`serve` lets them finish on shutdown),
/// with `POST /api/shutdown` cancelling `stop` when given (`serve` stops on it).
fn router(
    engine: Engine,
    config: &Config,
    door: &DoorConfig,
    server: PorticoServer,
    shutdown: CancellationToken,
    in_flight: Option<InFlight>,
    stop: Option<CancellationToken>,
) -> Router {
    // Host and Origin are enforced by the door policy for every route, so rmcp's own checks are
    // configured to agree with it rather than to second-guess it.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(door.policy.allowed_hosts().iter().cloned())
        // A plain answer to a stateless (2026-07-28) request goes out as one `application/json`
        // body instead of an SSE stream of it: one write instead of several per call. rmcp falls
        // back to SSE when the call sends progress or a request first, so nothing is lost.
        .with_json_response(true)
        .with_cancellation_token(shutdown.clone());
    // The legacy HTTP+SSE door for 2024-11-05 clients; inside the router so the same layer checks it.
    let events = events_api::routes(&engine, shutdown.clone());
    let dashboard_api = dashboard_api::routes(&engine, config, shutdown.clone());
    let (lifecycle_engine, shutdown_streams) = (engine.clone(), shutdown.clone());
    let replica = engine.replica();
    let (legacy, legacy_sessions) = legacy_sse::routes(
        server.clone(),
        shutdown,
        config.server.max_message_bytes,
        replica.serving().then(|| replica.name()),
        in_flight.clone(),
    );
    let sessions = sessions::Sessions::new(
        sessions::SessionLimits::from_config(&config.server),
        replica.serving().then(|| replica.name()),
    );
    let session_stats = sessions::routes(sessions.clone(), server.clone());
    let metrics = metrics::routes(engine.clone(), sessions.clone(), legacy_sessions);
    let recorded = engine.metrics().clone();
    let mcp = StreamableHttpService::new(
        move || Ok(server.for_session()),
        sessions.clone(),
        mcp_config,
    );
    let mcp = tower::Layer::layer(
        &axum::middleware::from_fn_with_state(sessions, sessions::admit),
        mcp,
    );
    let mcp = tower::Layer::layer(
        &axum::middleware::from_fn(session_end::no_content_for_delete),
        mcp,
    );
    let mut router = Router::new();
    if config.a2a.enabled {
        router = router.merge(portico_a2a::routes(
            engine.clone(),
            a2a_options(config, door),
        ));
    }
    let live = door
        .live
        .clone()
        .unwrap_or_else(|| reload::LiveConfig::fixed(config.clone()));
    let mut router = router
        .merge(catalog_api::routes(&engine, config.expose.tools))
        .merge(content_api::routes(&engine, config))
        .merge(approvals_api::routes(&engine))
        .merge(dashboard_api)
        .merge(api::routes(engine, live, door.identity.clone()))
        .merge(approval_page::routes())
        .merge(ui_login::routes(door.policy.clone()))
        .merge(events)
        .merge(
            door.policy
                .oauth()
                .map(oauth::OAuthResource::routes)
                .unwrap_or_default(),
        )
        .merge(session_stats)
        .merge(lifecycle_api::routes(
            &lifecycle_engine,
            stop,
            shutdown_streams,
        ))
        .merge(metrics)
        .merge(legacy)
        .merge(dashboard::routes())
        .nest_service("/mcp", mcp);
    // Inside the security layer: a request refused for its Host, Origin or token is not read, costs
    // nothing and is no call to wait for.
    if let Some(in_flight) = in_flight {
        router = router.layer(axum::middleware::from_fn_with_state(
            in_flight,
            in_flight::count_calls,
        ));
    }
    if let Some(limits) = rate_limit::Limits::new(
        &config.server.rate_limit,
        config.store.replicas(),
        config.server.max_message_bytes,
        recorded,
    ) {
        router = router.layer(axum::middleware::from_fn_with_state(
            limits,
            rate_limit::check,
        ));
    }
    // Inside the security layer (a refused request is not read), outside everything that reads.
    let router = body_limit::layer(router, config.server.max_message_bytes);
    // Inside the security layer too: a refused request starts no trace.
    let router = router.layer(axum::middleware::from_fn(door_span::door_span));
    router
        .layer(axum::middleware::from_fn_with_state(
            door.policy.clone(),
            security::check,
        ))
        .layer(panics::layer())
}

/// The A2A door's settings: card URLs come from `[a2a] public_url`, else `[server] public_url`, else
/// the address the door is bound to; a wildcard bind address is never put in a card.
fn a2a_options(config: &Config, door: &DoorConfig) -> portico_a2a::A2aOptions {
    let public_url = match (&config.a2a.public_url, door.policy.public_origin()) {
        (Some(url), _) => url.trim_end_matches('/').to_string(),
        (None, Some(origin)) => origin.to_string(),
        (None, None) if door.listen.ip().is_unspecified() => {
            tracing::warn!(
                "[a2a] public_url is not set and the door listens on {}: agent cards will say http://127.0.0.1:{}; set public_url to the address other agents reach",
                door.listen,
                door.listen.port()
            );
            format!("http://127.0.0.1:{}", door.listen.port())
        }
        (None, None) => format!("http://{}", door.listen),
    };
    portico_a2a::A2aOptions {
        listen_path: config.a2a.listen_path.clone(),
        public_url,
        primary_agent: config.a2a.primary_agent.clone(),
        max_tasks: config.a2a.max_tasks,
        push_allow_private_network: config.a2a.push_allow_private_network,
        streams: portico_a2a::StreamLimits {
            max_streams: config.a2a.max_streams,
            max_streams_per_client: config.a2a.max_streams_per_client,
        },
        unversioned_card: config.a2a.unversioned_card,
    }
}

/// Binds, writes the daemon info file, serves until `shutdown` resolves, then removes the file.
/// `on_bound` is called with the real address once listening (useful with port 0).
pub async fn serve(
    engine: Engine,
    config: &Config,
    door: DoorConfig,
    info_file: InfoFile,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), DaemonError> {
    let server = PorticoServer::new(Backend::Local(engine.clone()), door.server.clone());
    serve_with_server(engine, config, door, server, info_file, shutdown, on_bound).await
}

/// [`serve`] with a server the caller built, for embedders that register host tools on it.
/// Why the door's address cannot be listened on, and what to do.
fn bind_words(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => "another program (or another Portico) is listening there; stop it, or set another address in [server] listen (or `portico serve --listen`)".into(),
        std::io::ErrorKind::AddrNotAvailable => format!("{error}: the address is not one of this machine's; set another in [server] listen"),
        std::io::ErrorKind::PermissionDenied => format!("{error}: ports below 1024 need privileges; set a higher port in [server] listen"),
        _ => format!("{error}; set another address in [server] listen"),
    }
}

pub async fn serve_with_server(
    engine: Engine,
    config: &Config,
    door: DoorConfig,
    server: PorticoServer,
    info_file: InfoFile,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), DaemonError> {
    let listener = tokio::net::TcpListener::bind(door.listen)
        .await
        .map_err(|error| DaemonError::Bind {
            addr: door.listen,
            error,
        })?;
    let bound = listener.local_addr().map_err(DaemonError::Serve)?;
    let door = door.with_listen(bound);
    let info = DaemonInfo {
        config: door.config.clone(),
        ..DaemonInfo::new(
            bound,
            door.policy.token().map(str::to_string),
            door.identity.clone(),
        )
    };
    info_file
        .write(&info)
        .map_err(|source| DaemonError::InfoFile {
            path: info_file.path().display().to_string(),
            source,
        })?;
    if let Some(live) = &door.live {
        live.publish(info_file.clone(), info.clone());
    }
    // Approval links go where the person approving reaches Portico.
    let approval_base = match door.policy.public_origin() {
        Some(origin) => origin.to_string(),
        None => format!("http://{bound}"),
    };
    portico_pipeline::set_approval_base_url(&approval_base);
    on_bound(bound);
    if config.a2a.enabled {
        portico_a2a::recover_interrupted(&engine).await;
    }
    let streams = CancellationToken::new();
    if let Some(live) = door.live.clone() {
        tokio::spawn(reload::follow(live, engine.clone(), streams.clone()));
    }
    let in_flight = InFlight::new(config.server.max_message_bytes);
    // `POST /api/shutdown` (`portico stop`): the same graceful stop as the first signal.
    let stop = CancellationToken::new();
    let router = router(
        engine,
        config,
        &door,
        server,
        streams.clone(),
        Some(in_flight.clone()),
        Some(stop.clone()),
    );
    let limits = listener::ConnectionLimits::from_config(&config.server);
    listener::serve(listener, router, limits, async move {
        tokio::select! {
            () = shutdown => {}
            () = stop.cancelled() => {}
        }
        in_flight.begin_stop();
        let calls = in_flight.count();
        if calls > 0 {
            tracing::info!(
                "shutting down: waiting for {calls} call(s) in progress (at most {}s; a second Ctrl-C stops now)",
                SHUTDOWN_GRACE.as_secs()
            );
        }
        // Calls in progress (each bounded by its server's timeout) get to finish and send their
        // answers; then the long-lived MCP streams, which would otherwise hold graceful shutdown
        // open forever, are ended. New connections are still taken meanwhile (new calls on them
        // get 503).
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        if tokio::time::timeout_at(deadline, in_flight.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                "calls still running after {}s; closing them",
                SHUTDOWN_GRACE.as_secs()
            );
        } else if calls > 0 {
            // A client often follows an answer with a request of its own (the Python SDK lists
            // the tools after a call whose output schema it has not seen yet): the door stays open
            // a moment for it, or the refused connection fails the call it just got the answer to.
            tokio::time::sleep(FOLLOW_UP_GRACE).await;
            let _ = tokio::time::timeout_at(deadline, in_flight.idle()).await;
        }
        streams.cancel();
    })
    .await;
    let info = door
        .live
        .as_ref()
        .and_then(LiveConfig::published)
        .unwrap_or(info);
    info_file.remove_if_ours(&info);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(
        token: Option<&str>,
        sha: Option<&str>,
        tools: Option<&[&str]>,
    ) -> portico_config::ClientConfig {
        portico_config::ClientConfig {
            name: "laptop".into(),
            token: token.map(str::to_string),
            token_sha256: sha.map(str::to_string),
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_client_entry_is_its_tokens_digest_and_its_compiled_scope() {
        let vars = portico_secrets::Vars::environment();
        let sha = portico_config::token_sha256_hex("s3cret");
        let literal = door_client(&client(Some("s3cret"), None, Some(&["time_*"])), &vars).unwrap();
        let hashed = door_client(&client(None, Some(&sha.to_uppercase()), None), &vars).unwrap();
        assert!(format!("{literal:?}").contains("time_*"));
        // The same secret, written either way, is the same digest.
        assert_eq!(
            DoorClient::with_token("laptop", "s3cret", None).digest_for_test(),
            hashed.digest_for_test()
        );
        assert_eq!(literal.digest_for_test(), hashed.digest_for_test());
        let problem = |entry| door_client(&entry, &vars).unwrap_err().to_string();
        assert_eq!(
            problem(client(Some("a"), Some(&sha), None)),
            "[[server.clients]] `laptop`: give exactly one of `token` and `token_sha256` (`portico clients add NAME` prints both)"
        );
        assert_eq!(
            problem(client(None, Some("abc"), None)),
            "[[server.clients]] `laptop`: token_sha256 is not 64 hex digits"
        );
        assert_eq!(
            problem(client(Some("  "), None, None)),
            "[[server.clients]] `laptop`: token expands to an empty value"
        );
        assert!(
            problem(client(Some("x"), None, Some(&["time_[now"]))).starts_with(
                "[[server.clients]] `laptop`: tool pattern `time_[now` is not a valid glob"
            )
        );
        assert!(
            problem(client(
                Some("${PORTICO_TEST_SURELY_UNSET_VARIABLE}"),
                None,
                None
            ))
            .starts_with("[[server.clients]] `laptop`: token: ")
        );
    }

    #[test]
    fn agent_cards_use_server_public_url_unless_a2a_names_its_own() {
        let mut config = Config::default();
        config.server.public_url = Some("https://Portico.example.com/".into());
        let door = DoorConfig::from_config(&config).unwrap();
        assert_eq!(
            a2a_options(&config, &door).public_url,
            "https://portico.example.com"
        );
        config.a2a.public_url = Some("https://agents.example.com/".into());
        assert_eq!(
            a2a_options(&config, &door).public_url,
            "https://agents.example.com"
        );
        config.server.public_url = None;
        config.a2a.public_url = None;
        let door = DoorConfig::from_config(&config).unwrap();
        assert_eq!(
            a2a_options(&config, &door).public_url,
            "http://127.0.0.1:4200"
        );
    }

    #[test]
    fn a_bad_public_url_or_proxy_stops_the_door_in_words() {
        let mut config = Config::default();
        config.server.public_url = Some("https://portico.example.com/gw".into());
        let error = DoorConfig::from_config(&config).err().unwrap().to_string();
        assert!(
            error.starts_with(
                "[server] public_url `https://portico.example.com/gw` is not usable: it has a path"
            ),
            "{error}"
        );
        config.server.public_url = None;
        config.server.trusted_proxies = vec!["lb.internal".into()];
        let error = DoorConfig::from_config(&config).err().unwrap().to_string();
        assert!(
            error.contains("`lb.internal` is not an IP address or CIDR range"),
            "{error}"
        );
    }
}
