//! `portico-bench`: the baseline servers and load generators `scripts/bench` runs. Not product.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use portico_bench::load::{self, Call, SseSession, StdioSession};
use portico_bench::{EchoServer, ProxyServer};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

/// The same allocator as the `portico` binary, so that the baselines and the embedded Portico differ
/// only in what they do, not in how they allocate.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "portico-bench",
    about = "Baselines and load generators for scripts/bench"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A bare rmcp server with one `echo` tool on stdin/stdout.
    ServeStdio,
    /// A bare rmcp Streamable HTTP server with one `echo` tool at /mcp, rmcp's default settings,
    /// TCP_NODELAY on. Prints `listening on ADDRESS` once bound.
    ServeHttp {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Answer plain stateless (2026-07-28) calls with one JSON body instead of an SSE stream, as
        /// Portico's /mcp does: the like-for-like baseline for that era.
        #[arg(long)]
        json_response: bool,
    },
    /// The thinnest gateway rmcp can build, for the "rmcp proxy, same upstream" baseline: a bare
    /// rmcp Streamable HTTP server (the settings of `serve-http`, TCP_NODELAY on) whose one `echo`
    /// tool forwards each call through one rmcp client to an upstream, over rmcp's Streamable HTTP
    /// client (`--upstream-url`) or its child-process transport (`--upstream-stdio -- CMD...`).
    /// Prints `upstream pid PID` for a stdio upstream, then `listening on ADDRESS` once bound.
    ServeProxy {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// As for `serve-http`: plain stateless calls answered with one JSON body.
        #[arg(long)]
        json_response: bool,
        /// The upstream's Streamable HTTP endpoint.
        #[arg(
            long,
            conflicts_with = "upstream_stdio",
            required_unless_present = "upstream_stdio"
        )]
        upstream_url: Option<String>,
        /// Start the upstream as a child and speak MCP over its stdio: the command follows `--`.
        #[arg(long, requires = "command")]
        upstream_stdio: bool,
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Portico's HTTP door exactly as `portico serve` runs it, with one embedded host tool, `echo`
    /// (the same trivial tool the bare server has), registered through the embedding API. Prints
    /// `listening on ADDRESS` once bound; serves until SIGTERM.
    ServePortico {
        #[arg(long)]
        config: std::path::PathBuf,
        /// Where the per-call cost goes, by taking parts away (never how Portico runs): calls are
        /// audited to a sink that drops the records, instead of the store.
        #[arg(long)]
        no_audit: bool,
        /// Where the per-call cost goes: the same handler, pipeline and tools served by rmcp's
        /// Streamable HTTP service on a plain router, as `serve-http` serves the bare server (its
        /// settings as Portico's /mcp has them), without Portico's door (Host/Origin/token checks,
        /// rate limit, in-flight counter, body limit, session bounds).
        #[arg(long)]
        bare_door: bool,
    },
    /// Calls a tool over a child's stdio; prints one JSON line of figures.
    LoadStdio {
        #[command(flatten)]
        load: LoadArgs,
        /// The server to start, and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Calls a tool over the legacy HTTP+SSE transport at BASE/sse; prints one JSON line of figures.
    LoadSse {
        #[command(flatten)]
        load: LoadArgs,
        #[arg(long)]
        base: String,
        /// Sessions the concurrent callers are spread over.
        #[arg(long, default_value_t = 16)]
        sessions: usize,
        /// The server's process id, to report its CPU time per call.
        #[arg(long)]
        server_pid: Option<u32>,
    },
    /// Opens COUNT idle Streamable HTTP sessions at URL (initialize + initialized, and a GET stream
    /// with --stream), prints `opened COUNT`, and holds them until stdin closes.
    OpenSessions {
        #[arg(long)]
        url: String,
        #[arg(long)]
        count: usize,
        #[arg(long)]
        stream: bool,
    },
}

#[derive(Args)]
struct LoadArgs {
    #[arg(long, default_value = "echo")]
    tool: String,
    #[arg(long, default_value = r#"{"message":"ping"}"#)]
    arguments: String,
    /// Sequential calls for the latency figures.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Seconds of concurrent load for the rate figure.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Calls in flight during the concurrent run.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

impl LoadArgs {
    fn call(&self) -> anyhow::Result<Call> {
        Ok(Call {
            tool: self.tool.clone(),
            arguments: serde_json::from_str(&self.arguments).context("--arguments is not JSON")?,
        })
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(cli.command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::ServeStdio => {
            let running = EchoServer.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
        }
        Command::ServeHttp {
            listen,
            json_response,
        } => serve_http(listen, json_response).await?,
        Command::ServeProxy {
            listen,
            json_response,
            upstream_url,
            upstream_stdio: _,
            command,
        } => serve_proxy(listen, json_response, upstream_url, command).await?,
        Command::ServePortico {
            config,
            no_audit,
            bare_door,
        } => serve_portico(&config, no_audit, bare_door).await?,
        Command::LoadStdio { load, command } => {
            let mut child = tokio::process::Command::new(&command[0]);
            child.args(&command[1..]);
            let session = StdioSession::spawn(child).await?;
            let pid = session.pid();
            let measured = load::measure(
                vec![session],
                &load.call()?,
                load.calls,
                load.secs,
                load.concurrency,
                pid,
            )
            .await?;
            println!("{}", measured.json());
        }
        Command::LoadSse {
            load,
            base,
            sessions,
            server_pid,
        } => {
            let http = reqwest::Client::builder().no_proxy().build()?;
            let mut opened = Vec::new();
            for _ in 0..sessions.max(1) {
                opened.push(SseSession::open(http.clone(), &base).await?);
            }
            let measured = load::measure(
                opened,
                &load.call()?,
                load.calls,
                load.secs,
                load.concurrency,
                server_pid,
            )
            .await?;
            println!("{}", measured.json());
        }
        Command::OpenSessions { url, count, stream } => open_sessions(&url, count, stream).await?,
    }
    Ok(())
}

async fn serve_http(listen: SocketAddr, json_response: bool) -> anyhow::Result<()> {
    serve_streamable(listen, json_response, || Ok(EchoServer)).await
}

async fn serve_proxy(
    listen: SocketAddr,
    json_response: bool,
    upstream_url: Option<String>,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let client = match upstream_url {
        Some(url) => {
            let http = reqwest::Client::builder().no_proxy().build()?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            ProxyServer::connect(StreamableHttpClientTransport::with_client(http, config))
                .await
                .with_context(|| format!("connecting to {url}"))?
        }
        None => {
            let Some((program, args)) = command.split_first() else {
                bail!("--upstream-stdio needs the upstream's command after --");
            };
            let mut child = tokio::process::Command::new(program);
            child.args(args);
            let transport =
                TokioChildProcess::new(child).with_context(|| format!("starting {program}"))?;
            if let Some(pid) = transport.id() {
                println!("upstream pid {pid}");
            }
            ProxyServer::connect(transport)
                .await
                .with_context(|| format!("connecting to {program}"))?
        }
    };
    let proxy = ProxyServer::new(client.peer().clone());
    let served = serve_streamable(listen, json_response, move || Ok(proxy.clone()));
    tokio::select! {
        served = served => served,
        quit = client.waiting() => bail!("the upstream session ended: {quit:?}"),
    }
}

async fn serve_streamable<S: rmcp::ServerHandler + Send + 'static>(
    listen: SocketAddr,
    json_response: bool,
    make: impl Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let service = StreamableHttpService::new(
        make,
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_json_response(json_response),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on {}", listener.local_addr()?);
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}

/// Takes the audit records and drops them: `serve-portico --no-audit`.
struct DroppedAudit;

impl portico_pipeline::AuditSink for DroppedAudit {
    fn record(&self, _record: portico_store::AuditRecord) {}
}

async fn serve_portico(
    config_path: &std::path::Path,
    no_audit: bool,
    bare_door: bool,
) -> anyhow::Result<()> {
    let (config, _) = portico_config::load(Some(config_path))?;
    let data = tempfile::tempdir()?;
    let engine =
        portico_engine::Engine::start(&config, portico_engine::EngineOptions::in_dir(data.path()))?;
    let door = portico_daemon::DoorConfig::from_config(&config)?;
    let server = portico_mcp_server::PorticoServer::new(
        portico_mcp_server::Backend::Local(engine.clone()),
        door.server.clone(),
    );
    // The bare server's tool, answer for answer: one text block, no output schema.
    let definition = serde_json::json!({
        "name": "echo",
        "description": "Echoes its message",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
    });
    server
        .host_tools()
        .register(portico_mcp_server::HostTool::raw(
            definition.as_object().cloned().unwrap_or_default(),
            |arguments, _context| {
                let message = arguments
                    .get("message")
                    .and_then(|m| m.as_str())
                    .unwrap_or_default()
                    .to_string();
                Box::pin(async move { portico_mcp_server::ToolResult::text(message) })
            },
        ));
    if no_audit {
        engine.pipeline().set_audit(Arc::new(DroppedAudit));
        server.host_pipeline().set_audit(Arc::new(DroppedAudit));
    }
    engine.upstreams().wait_settled().await;
    if bare_door {
        let listen = door.listen;
        let bare = serve_streamable(listen, true, move || Ok(server.for_session()));
        tokio::select! {
            served = bare => served?,
            _ = tokio::signal::ctrl_c() => {}
        }
        engine.shutdown().await;
        return Ok(());
    }
    let terminated = async {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            term.recv().await;
        }
    };
    portico_daemon::serve_with_server(
        engine.clone(),
        &config,
        door,
        server,
        portico_daemon::InfoFile::in_dir(data.path()),
        terminated,
        |address| println!("listening on {address}"),
    )
    .await?;
    engine.shutdown().await;
    Ok(())
}

async fn open_sessions(url: &str, count: usize, stream: bool) -> anyhow::Result<()> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let mut held = Vec::new();
    for _ in 0..count {
        let response = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
                "clientInfo": {"name": "portico-bench", "version": "1"}}}),
            )
            .send()
            .await?;
        let Some(session) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
        else {
            bail!("initialize at {url} answered without a session id");
        };
        let _ = response.bytes().await?;
        http.post(url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await?
            .error_for_status()?;
        if stream {
            let response = http
                .get(url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-11-25")
                .send()
                .await?
                .error_for_status()?;
            held.push(response);
        }
    }
    println!("opened {count}");
    let mut line = String::new();
    let _ = tokio::io::AsyncBufReadExt::read_line(
        &mut tokio::io::BufReader::new(tokio::io::stdin()),
        &mut line,
    )
    .await;
    drop(held);
    Ok(())
}
