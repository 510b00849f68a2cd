//! Host tools before a daemon (`portico mcp` proxying to a running daemon's `/mcp`): they pass a
//! call pipeline like every other tool, so their schemas are checked and their calls audited.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use portico_config::{McpServerConfig, Transport};
use portico_engine::{Engine, EngineOptions};
use portico_mcp::{StopGrace, Upstream};
use portico_mcp_server::{Backend, DaemonLink, HostTool, PorticoServer, ServerOptions};
use portico_pipeline::AuditSink;
use portico_store::AuditRecord;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Pick {
    /// At most three: the schema says so, though any `u32` deserializes.
    #[schemars(range(max = 3))]
    count: u32,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Picked {
    count: u32,
}

#[derive(Default)]
struct Collected(Mutex<Vec<AuditRecord>>);

impl AuditSink for Collected {
    fn record(&self, record: AuditRecord) {
        self.0.lock().unwrap().push(record);
    }
}

/// A daemon stand-in: an in-process Portico served on Streamable HTTP, and a link to it.
async fn daemon_link(engine: &Engine) -> DaemonLink {
    let daemon = PorticoServer::new(Backend::Local(engine.clone()), ServerOptions::default());
    let service = StreamableHttpService::new(
        move || Ok(daemon.for_session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = McpServerConfig {
        name: "daemon".into(),
        timeout_secs: portico_config::DEFAULT_TIMEOUT_SECS,
        startup_timeout_secs: None,
        max_concurrent_calls: portico_config::DEFAULT_MAX_CONCURRENT_CALLS,
        env: Vec::new(),
        enabled: true,
        allow_private_network: true,
        prefix: Some(false),
        protocol_version: None,
        transport: Transport::Http {
            url: format!("http://{address}/mcp"),
            headers: Default::default(),
        },
        oauth: None,
    };
    let (events, _events) = tokio::sync::mpsc::unbounded_channel();
    let (upstream, _exit) = Upstream::connect(&config, events, StopGrace::PATIENT)
        .await
        .unwrap();
    DaemonLink {
        upstream,
        changes: tokio::sync::watch::channel(0).1,
        resource_updates: tokio::sync::broadcast::channel(16).0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_a_daemon_a_host_tool_call_against_its_schema_is_refused_and_audited() {
    let mut config = portico_config::Config::default();
    config.builtins.enabled = false;
    let data = tempfile::tempdir().unwrap();
    let engine = Engine::start(&config, EngineOptions::in_dir(data.path())).unwrap();
    let link = daemon_link(&engine).await;
    let server = PorticoServer::new(Backend::Daemon(Arc::new(link)), ServerOptions::default());
    let audit = Arc::new(Collected::default());
    server.host_pipeline().set_audit(audit.clone());
    let ran = Arc::new(AtomicUsize::new(0));
    server
        .host_tools()
        .register(HostTool::typed("pick", "Picks up to three", {
            let ran = ran.clone();
            move |input: Pick| {
                ran.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, std::convert::Infallible>(Picked { count: input.count }) }
            }
        }));

    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let server = server.clone();
        async move {
            let (read, write) = tokio::io::split(server_io);
            let running = server.serve((read, write)).await.unwrap();
            running.waiting().await.unwrap();
        }
    });
    let (read, write) = tokio::io::split(client_io);
    let client = ().serve((read, write)).await.unwrap();

    let mut params = CallToolRequestParams::new("pick");
    params.arguments = json!({"count": 7}).as_object().cloned();
    let result = serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the tool ran: {result}");

    let mut params = CallToolRequestParams::new("pick");
    params.arguments = json!({"count": 2}).as_object().cloned();
    let result = serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap();
    assert_eq!(result["structuredContent"], json!({"count": 2}), "{result}");

    let outcomes: Vec<(String, String, String)> = audit
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.caller.clone(), r.tool.clone(), r.outcome.clone()))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (
                "client:mcp".into(),
                "pick".into(),
                "invalid_arguments".into()
            ),
            ("client:mcp".into(), "pick".into(), "ok".into()),
        ]
    );

    client.cancel().await.unwrap();
    serving.await.unwrap();
    engine.shutdown().await;
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Held {
    ok: bool,
    held: String,
}

/// Fails every call of the tool it guards.
struct HoldAll;

impl portico_mcp_server::ToolPolicy for HoldAll {
    type Failure = Held;
    type Error = std::convert::Infallible;

    async fn before_call(
        &self,
        call: portico_mcp_server::PolicyCall,
    ) -> Result<portico_mcp_server::BeforeCall<Held>, Self::Error> {
        Ok(portico_mcp_server::BeforeCall::Fail(Held {
            ok: false,
            held: call.tool,
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_a_daemon_tool_policies_guard_host_tools_and_refuse_the_daemons() {
    let mut config = portico_config::Config::default();
    config.builtins.enabled = false;
    let data = tempfile::tempdir().unwrap();
    let engine = Engine::start(&config, EngineOptions::in_dir(data.path())).unwrap();
    engine.local_tools().register(HostTool::typed(
        "remote_pick",
        "A tool of the daemon",
        |input: Pick| async move { Ok::<_, std::convert::Infallible>(Picked { count: input.count }) },
    ));
    let link = Arc::new(daemon_link(&engine).await);
    let ran = Arc::new(AtomicUsize::new(0));
    let server = || {
        let server = PorticoServer::new(Backend::Daemon(link.clone()), ServerOptions::default());
        server
            .host_tools()
            .register(HostTool::typed("pick", "Picks up to three", {
                let ran = ran.clone();
                move |input: Pick| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    async move { Ok::<_, std::convert::Infallible>(Picked { count: input.count }) }
                }
            }));
        server
    };

    // The daemon's own tools are not this server's to guard.
    let refused = server()
        .with_tool_policies(portico_mcp_server::ToolPolicies::new().with("remote_pick", HoldAll))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&refused, portico_mcp_server::ToolPolicyError::UnknownTool { name, .. } if name == "remote_pick"),
        "{refused}"
    );

    let server = server()
        .with_tool_policies(portico_mcp_server::ToolPolicies::new().with("pick", HoldAll))
        .await
        .unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let running = server.serve(server_io).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let pick = serde_json::to_value(tools.iter().find(|t| t.name == "pick").unwrap()).unwrap();
    assert_eq!(
        pick["_meta"]["portico/hostPolicy"]["action"], "host",
        "{pick}"
    );
    assert_eq!(pick["outputSchema"]["anyOf"].as_array().unwrap().len(), 3);

    let mut params = CallToolRequestParams::new("pick");
    params.arguments = json!({"count": 2}).as_object().cloned();
    let result = serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"ok": false, "held": "pick"})
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    client.cancel().await.unwrap();
    engine.shutdown().await;
}
