//! Door benchmark: how much Portico adds between an MCP client and a tool.
//!
//! Measures, in one run and reported as ratios against baselines from the same run:
//! 1. `portico mcp` start-up: spawn to `initialize` answer, against a minimal rmcp stdio server (this
//!    binary in its upstream role) doing the same.
//! 2. `tools/call` through Portico's `/mcp` (Streamable HTTP, in-process hub and door) to an in-process
//!    host tool, and to a stdio upstream, against the same calls made directly to that upstream over
//!    stdio: sequential latency (p50, p99) and throughput with concurrent callers.
//!
//! Run: `cargo bench -p portico --bench door` (release build). Knobs: BENCH_CALLS (sequential calls,
//! default 2000), BENCH_SECS (seconds per throughput run, default 3), BENCH_CONCURRENCY (default 16),
//! BENCH_STARTS (start-up samples, default 30).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use portico_mcp_server::{Backend, HostTool, PorticoServer, ServerOptions};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The upstream: the benchmark suite's bare rmcp echo server, this binary started with
/// BENCH_ROLE=upstream, so the benchmark needs nothing installed.
use portico_bench::EchoServer;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoIn {
    message: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct EchoOut {
    message: String,
}

struct Stats {
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Spawns `command`, sends `initialize`, and returns the time until the answer arrives.
fn time_to_initialize(mut command: Command) -> Duration {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let elapsed = started.elapsed();
    assert!(line.contains("\"result\""), "no initialize answer: {line}");
    drop(stdin);
    let _ = child.wait();
    elapsed
}

async fn call_echo(client: &rmcp::Peer<rmcp::RoleClient>, tool: &str) {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = serde_json::json!({"message": "ping"}).as_object().cloned();
    let result = client.call_tool(params).await.expect("call");
    assert_ne!(result.is_error, Some(true));
}

/// Sequential latency over `calls` calls, then throughput with `concurrency` callers for `secs`.
async fn measure(
    client: &rmcp::Peer<rmcp::RoleClient>,
    tool: &str,
    calls: u64,
    secs: u64,
    concurrency: u64,
) -> (Stats, f64) {
    for _ in 0..50 {
        call_echo(client, tool).await;
    }
    let mut samples = Vec::with_capacity(calls as usize);
    for _ in 0..calls {
        let started = Instant::now();
        call_echo(client, tool).await;
        samples.push(started.elapsed());
    }
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        let done = done.clone();
        let tool = tool.to_string();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                call_echo(&client, &tool).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let throughput = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    (stats(samples), throughput)
}

fn main() {
    if std::env::var("BENCH_ROLE").as_deref() == Ok("upstream") {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let running = EchoServer.serve(rmcp::transport::stdio()).await.unwrap();
            let _ = running.waiting().await;
        });
        return;
    }
    let calls = env_or("BENCH_CALLS", 2000);
    let secs = env_or("BENCH_SECS", 3);
    let concurrency = env_or("BENCH_CONCURRENCY", 16);
    let starts = env_or("BENCH_STARTS", 30);
    let me = std::env::current_exe().unwrap();

    // 1. Start-up.
    let home = tempfile::tempdir().unwrap();
    let config_path = home.path().join("config.toml");
    std::fs::write(&config_path, "[server]\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let portico_start: Vec<Duration> = (0..starts)
        .map(|_| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
            command
                .args(["mcp", "--standalone", "--config"])
                .arg(&config_path)
                .env("PORTICO_HOME", home.path());
            time_to_initialize(command)
        })
        .collect();
    let baseline_start: Vec<Duration> = (0..starts)
        .map(|_| {
            let mut command = Command::new(&me);
            command.env("BENCH_ROLE", "upstream");
            time_to_initialize(command)
        })
        .collect();
    let (portico_start, baseline_start) = (stats(portico_start), stats(baseline_start));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        // 2. The door, in process: a hub with the stdio upstream, a host tool, the /mcp router.
        let config_text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrate_limit = {{ enabled = false }}\n[[mcp_servers]]\nname = \"up\"\nenv = [\"BENCH_ROLE=upstream\"]\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {:?}\n",
            me.display().to_string()
        );
        let config = portico_config::parse("bench", &config_text).unwrap();
        let data = tempfile::tempdir().unwrap();
        let engine = portico_engine::Engine::start(&config, portico_engine::EngineOptions::in_dir(data.path())).unwrap();
        let hub = engine.upstreams().clone();
        hub.wait_settled().await;
        let door = portico_daemon::DoorConfig::from_config(&config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let door = door.with_listen(address);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let server = PorticoServer::new(Backend::Local(engine.clone()), ServerOptions::from_config(&config));
        server.host_tools().register(HostTool::typed("echo", "Echoes its message", |input: EchoIn| async move {
            Ok::<_, std::convert::Infallible>(EchoOut { message: input.message })
        }));
        let router = portico_daemon::app_with_server(engine.clone(), &config, &door, server, shutdown.clone());
        let serving = tokio::spawn(async move { axum::serve(listener, router).await });

        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
        let via_portico = ().serve(transport).await.unwrap();
        let (host, host_tput) = measure(via_portico.peer(), "echo", calls, secs, concurrency).await;
        let (upstream, upstream_tput) = measure(via_portico.peer(), "mcp_up_echo", calls, secs, concurrency).await;

        let mut direct_command = tokio::process::Command::new(&me);
        direct_command.env("BENCH_ROLE", "upstream");
        let child = rmcp::transport::TokioChildProcess::new(direct_command).unwrap();
        let direct = ().serve(child).await.unwrap();
        let (direct_stats, direct_tput) = measure(direct.peer(), "echo", calls, secs, concurrency).await;

        println!("Portico door benchmark ({calls} sequential calls, {concurrency} callers for {secs}s, {starts} start-ups)");
        println!();
        println!("start-up to initialize answer      p50 {:>8.1} ms   p99 {:>8.1} ms", micros(portico_start.p50) / 1e3, micros(portico_start.p99) / 1e3);
        println!("  baseline: bare rmcp stdio server p50 {:>8.1} ms   p99 {:>8.1} ms   ratio {:.2}x", micros(baseline_start.p50) / 1e3, micros(baseline_start.p99) / 1e3, micros(portico_start.p50) / micros(baseline_start.p50));
        println!();
        println!("tools/call                          p50 (us)  p99 (us)  calls/s");
        println!("  direct to stdio upstream         {:>8.0}  {:>8.0}  {:>8.0}", micros(direct_stats.p50), micros(direct_stats.p99), direct_tput);
        println!("  /mcp -> stdio upstream           {:>8.0}  {:>8.0}  {:>8.0}", micros(upstream.p50), micros(upstream.p99), upstream_tput);
        println!("  /mcp -> in-process host tool     {:>8.0}  {:>8.0}  {:>8.0}", micros(host.p50), micros(host.p99), host_tput);
        println!();
        println!("ratios against direct: /mcp->upstream latency {:.2}x, throughput {:.2}x; /mcp->host tool latency {:.2}x, throughput {:.2}x",
            micros(upstream.p50) / micros(direct_stats.p50), upstream_tput / direct_tput,
            micros(host.p50) / micros(direct_stats.p50), host_tput / direct_tput);
        println!("gateway overhead per call (p50, /mcp->upstream minus direct): {:.0} us", micros(upstream.p50) - micros(direct_stats.p50));

        via_portico.cancel().await.ok();
        direct.cancel().await.ok();
        shutdown.cancel();
        serving.abort();
        engine.shutdown().await;
    });
}
