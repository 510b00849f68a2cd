//! The Streamable HTTP front: `/mcp` on a loopback listener.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::reconnect::StreamControl;
use crate::server::{ConformanceServer, Shared};

/// Path the suite is pointed at (`--url http://127.0.0.1:PORT/mcp`).
pub const MCP_PATH: &str = "/mcp";

/// SSE `retry:` hint in priming events. rmcp's default is 3 s; a client that follows the hint after
/// `test_reconnection` ends its stream would otherwise idle that long, so keep it short for tests.
const SSE_RETRY: Duration = Duration::from_millis(500);

/// `Host` values accepted (any port). Anything else gets 403, which is the DNS-rebinding protection
/// the `dns-rebinding-protection` scenario checks: a page on evil.example.com that resolves to
/// 127.0.0.1 still sends `Host: evil.example.com`.
const ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// `Origin` values accepted when a request carries one (browsers do); requests without `Origin`
/// (ordinary MCP clients) pass. rmcp leaves Origin unchecked unless given a list.
const ALLOWED_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Binds `127.0.0.1:port` (0 picks a free port). Loopback only: this is a test fixture.
pub async fn bind(port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).await
}

/// Serves MCP at [`MCP_PATH`] on `listener` until `shutdown` is cancelled.
///
/// Sessions are stateful (`Mcp-Session-Id`), as the SSE scenarios require a session to resume in.
/// Cancelling `shutdown` also ends open SSE streams, so graceful shutdown does not wait for clients
/// that keep a GET stream open.
pub async fn serve(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    let sessions = Arc::new(StreamControl::new(SSE_RETRY));
    let handler_sessions = Arc::clone(&sessions);
    let shared = Arc::new(Shared::default());
    let config = StreamableHttpServerConfig::default()
        .with_sse_retry(Some(SSE_RETRY))
        .with_allowed_hosts(ALLOWED_HOSTS)
        .with_allowed_origins(ALLOWED_ORIGINS)
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || {
            Ok(ConformanceServer::with_stream_control(
                Arc::clone(&handler_sessions),
                Arc::clone(&shared),
            ))
        },
        sessions,
        config,
    );
    let app = axum::Router::new().route_service(MCP_PATH, service);
    // TCP_NODELAY as any real server should set it: without it kept-alive clients wait ~40 ms per answer.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
