//! `portico-conformance-fixture http --port 0` | `portico-conformance-fixture stdio`
//!
//! See the library docs: a test fixture for the MCP conformance suite, not part of Portico.

use std::io::IsTerminal;

use clap::{Parser, Subcommand};
use portico_conformance_fixture::http;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    version,
    about = "MCP server exposing the conformance suite's expected surface (test fixture)"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Streamable HTTP at http://127.0.0.1:PORT/mcp. Prints
    /// `conformance-fixture: listening on http://127.0.0.1:PORT/mcp` to stderr once bound.
    Http {
        /// TCP port on 127.0.0.1; 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// One session over stdin/stdout (newline-delimited JSON-RPC); exits at stdin EOF.
    Stdio,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // stderr only: in stdio mode stdout carries the protocol. Quiet by default; RUST_LOG overrides.
    // No colour codes when stderr is a log file or a pipe (scripts keep it in fixture.log).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        // A launcher may close our stderr once it has read the readiness line. Reporting the failed
        // write would go to that same stderr through `eprintln!`, which panics the task that logged,
        // dropping a request mid-answer; losing the log line is the better outcome for a fixture.
        .log_internal_errors(false)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .init();

    match Cli::parse().mode {
        Mode::Stdio => portico_conformance_fixture::serve_stdio().await,
        Mode::Http { port } => {
            let listener = http::bind(port).await?;
            let addr = listener.local_addr()?;
            // The readiness line scripts wait for; printed only once the socket accepts connections.
            eprintln!(
                "conformance-fixture: listening on http://{addr}{}",
                http::MCP_PATH
            );
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            http::serve(listener, shutdown).await?;
            Ok(())
        }
    }
}

/// SIGINT or SIGTERM starts a graceful shutdown, so the process exits 0 when a script stops it.
async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGTERM; only SIGINT stops the fixture gracefully");
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
            return;
        }
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    shutdown.cancel();
}
