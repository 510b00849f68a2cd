//! The door's accept loop: a bounded number of connections, each with `TCP_NODELAY` and a deadline
//! for every request head, and the peer address as the connect info routes see.
//!
//! Without `TCP_NODELAY` the last small write of a response (the end of a chunked or SSE body) waits
//! in Nagle's buffer for the client's delayed ACK: about 40 ms per call on a kept-alive connection,
//! which is how Node's `fetch`, httpx and wrk connect.
//!
//! Without a head deadline a client that sends half a request head (or nothing) holds its connection,
//! and a file descriptor, forever: a few hundred of them locked everyone out. hyper's
//! `header_read_timeout` bounds each head and also the wait for the next one on a kept-alive
//! connection, so an idle connection is closed after the same time. At `max_connections` (lowered to
//! fit the process's file limit) a few more connections are still taken, but they are served only
//! the health check, once each, and every other request on them gets 503: monitoring keeps working
//! longest. Past those, new connections wait in the kernel's backlog until a connection ends.
//!
//! The door speaks HTTP/1.1 only: HTTP/2 without TLS (prior knowledge) is not something MCP or A2A
//! clients use, and its connection preface has no read deadline in hyper.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

/// How long a client has to send a request head, and how long a kept-alive connection may sit idle
/// between requests.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections taken past the cap, for the health check only.
const HEALTH_RESERVE: usize = 8;

/// File descriptors left for everything but connections (stdio upstreams, the store, logs).
const FDS_FOR_THE_REST: u64 = 64;

/// The address a request's connection comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub SocketAddr);

/// How many connections the door serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// Connections served fully.
    pub(crate) max: usize,
    /// Connections past `max` served only the health check.
    pub(crate) reserve: usize,
    pub(crate) header_read_timeout: Duration,
}

impl ConnectionLimits {
    /// `[server] max_connections`, lowered so that connections cannot exhaust the file limit.
    pub(crate) fn from_config(section: &portico_config::ServerSection) -> Self {
        let configured = section.max_connections.max(1);
        let max = match open_file_limit() {
            Some(limit) => {
                let fits = limit.saturating_sub(FDS_FOR_THE_REST) / 2;
                let fits = usize::try_from(fits)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(HEALTH_RESERVE)
                    .max(1);
                if fits < configured {
                    tracing::warn!(
                        "[server] max_connections is {configured}, but the open-file limit is {limit}: serving at most {fits} connections (raise `ulimit -n` to allow more)"
                    );
                }
                configured.min(fits)
            }
            None => configured,
        };
        ConnectionLimits {
            max,
            reserve: HEALTH_RESERVE,
            header_read_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

/// The soft `RLIMIT_NOFILE`; `None` when it is unlimited.
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// A place for one connection: a full one, or one from the health-only reserve. Given back when
/// dropped.
struct Slot {
    _permit: OwnedSemaphorePermit,
    health_only: bool,
}

impl Slot {
    fn full(permit: OwnedSemaphorePermit) -> Self {
        Slot {
            _permit: permit,
            health_only: false,
        }
    }

    fn health_only(permit: OwnedSemaphorePermit) -> Self {
        Slot {
            _permit: permit,
            health_only: true,
        }
    }
}

struct Slots {
    full: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
}

impl Slots {
    /// A full place when there is one, else a reserve one, else the first that frees up.
    async fn next(&self) -> Slot {
        if let Some(slot) = self.try_next() {
            return slot;
        }
        tokio::select! {
            permit = self.full.clone().acquire_owned() => Slot::full(permit.expect("never closed")),
            permit = self.reserve.clone().acquire_owned() => Slot::health_only(permit.expect("never closed")),
        }
    }

    fn try_next(&self) -> Option<Slot> {
        if let Ok(permit) = self.full.clone().try_acquire_owned() {
            return Some(Slot::full(permit));
        }
        self.reserve
            .clone()
            .try_acquire_owned()
            .ok()
            .map(Slot::health_only)
    }

    /// A reserve place taken while the door was full becomes a full one if one has freed since.
    fn upgrade(&self, slot: Slot) -> Slot {
        if !slot.health_only {
            return slot;
        }
        match self.full.clone().try_acquire_owned() {
            Ok(permit) => Slot::full(permit),
            Err(_) => slot,
        }
    }
}

/// Serves `router` on `listener` until `signal` resolves, then lets open connections finish (they are
/// told to close once their current request is answered) and returns when all have.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    signal: impl Future<Output = ()>,
) {
    let slots = Slots {
        full: Arc::new(Semaphore::new(limits.max)),
        reserve: Arc::new(Semaphore::new(limits.reserve)),
    };
    // Dropping `stop` tells every connection to shut down gracefully; each holds a `closed` receiver
    // until it has, so `wait_closed` resolves when the last one is gone.
    let (stop, stopping) = watch::channel(());
    let (closed, wait_closed) = watch::channel(());
    tokio::pin!(signal);
    loop {
        let slot = tokio::select! {
            _ = &mut signal => break,
            slot = slots.next() => slot,
        };
        let (stream, peer) = tokio::select! {
            _ = &mut signal => break,
            accepted = accept(&listener) => accepted,
        };
        let slot = slots.upgrade(slot);
        let connection = Connection {
            stream,
            peer,
            router: router.clone(),
            header_read_timeout: limits.header_read_timeout,
            max: limits.max,
        };
        let stopping = stopping.clone();
        let closed = wait_closed.clone();
        tokio::spawn(async move {
            connection.run(slot, stopping).await;
            drop(closed);
        });
    }
    drop(listener);
    drop(stop);
    drop(wait_closed);
    closed.closed().await;
}

/// The next connection, with `TCP_NODELAY` set. Accept errors are the kernel's (a connection reset
/// before it was taken, or no file descriptor left): the first kind is skipped, the second waited out.
async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((stream, address)) => {
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!("cannot set TCP_NODELAY on the connection from {address}: {e}");
                }
                return (stream, address);
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::error!("cannot accept a connection: {e}; retrying in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    header_read_timeout: Duration,
    max: usize,
}

impl Connection {
    async fn run(self, slot: Slot, mut stopping: watch::Receiver<()>) {
        let health_only = slot.health_only;
        let Connection {
            stream,
            peer,
            router,
            header_read_timeout,
            max,
        } = self;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let router = router.clone();
            async move {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(PeerAddr(peer)));
                if health_only && request.uri().path() != "/api/health" {
                    return Ok::<_, Infallible>(door_full(max));
                }
                router.oneshot(request).await
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            // A reserve place is given back after one answer.
            .keep_alive(!health_only);
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        tokio::pin!(connection);
        let mut told = false;
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection from {peer} ended: {e}");
                    }
                    break;
                }
                _ = stopping.changed(), if !told => {
                    told = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
        drop(slot);
    }
}

/// The answer to anything but the health check on a connection taken past the cap.
fn door_full(max: usize) -> Response {
    let message = format!(
        "Portico is serving {max} connections, the most it takes ([server] max_connections); retry in a moment"
    );
    tracing::warn!("{message}");
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({"error": message})),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
