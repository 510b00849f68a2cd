//! The door's accept loop: a bounded number of connections, a bound per peer address, `TCP_NODELAY`
//! and a deadline for every request head, and the peer address as the connect info routes see.
//!
//! Without `TCP_NODELAY` the last small write of a response (the end of a chunked or SSE body) waits
//! in Nagle's buffer for the client's delayed ACK: about 40 ms per call on a kept-alive connection,
//! which is how Node's `fetch`, httpx and wrk connect.
//!
//! Without a head deadline a client that sends half a request head (or nothing) holds its connection,
//! and a file descriptor, forever: a few hundred of them locked everyone out. hyper's
//! `header_read_timeout` bounds each head and also the wait for the next one on a kept-alive
//! connection, so an idle connection is closed after the same time; a connection taken while the door
//! is nearly full gets a much shorter deadline, so half-sent heads are shed fast under pressure.
//!
//! One peer address cannot take the door: past its bound its new connections are closed at once, so
//! a thousand half-sent heads from one machine leave every other client served. At `max_connections`
//! (lowered to fit the process's file limit) a few more connections are still taken to read their
//! head, with the short deadline; one whose head asks for the health check then takes one of the
//! places kept for it, and every other request gets 503 unless a full place has freed meanwhile:
//! monitoring keeps working longest. Past those, new connections wait in the kernel's backlog until a
//! connection ends.
//!
//! The door speaks HTTP/1.1 only: HTTP/2 without TLS (prior knowledge) is not something MCP or A2A
//! clients use, and its connection preface has no read deadline in hyper.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// The same deadlines for a connection taken while the door is nearly full: long enough for any
/// client that is actually sending its request, short enough that half-sent heads free their places
/// before a health check times out.
pub(crate) const PRESSED_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections past the cap whose head was the health check, answered once each.
const HEALTH_RESERVE: usize = 8;

/// Connections taken past the cap to read their head (with the short deadline): whether it is the
/// health check is known only once it has come.
const WAITING: usize = 8;

/// The fewest connections one peer address may hold, whatever `max_connections` is.
const MIN_PER_PEER: usize = 16;

/// The path served on a reserved place.
const HEALTH: &str = "/api/health";

/// How often the WARN that a peer hit its bound may be logged.
const PEER_WARN_EVERY: Duration = Duration::from_secs(10);

/// File descriptors left for everything but connections (stdio upstreams, the store, logs).
const FDS_FOR_THE_REST: u64 = 64;

/// The address a request's connection comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub SocketAddr);

/// How many connections the door serves.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionLimits {
    /// Connections served fully.
    pub(crate) max: usize,
    /// Connections past `max` whose head asked for the health check.
    pub(crate) reserve: usize,
    /// Connections past `max` still sending their head.
    pub(crate) waiting: usize,
    /// Connections one peer address (an IPv6 peer's /64) may hold.
    pub(crate) per_peer: usize,
    /// Peers the per-peer bound does not apply to: `[server] trusted_proxies`, each of which
    /// carries the connections of many clients.
    pub(crate) unbounded_peers: Vec<portico_config::IpRange>,
    pub(crate) header_read_timeout: Duration,
    /// The head deadline of a connection taken while full places are nearly gone.
    pub(crate) pressed_header_read_timeout: Duration,
}

impl ConnectionLimits {
    /// `[server] max_connections`, lowered so that connections cannot exhaust the file limit, and
    /// `max_connections_per_peer` (by default a quarter of that, at least [`MIN_PER_PEER`]).
    pub(crate) fn from_config(section: &portico_config::ServerSection) -> Self {
        let configured = section.max_connections.max(1);
        let max = match open_file_limit() {
            Some(limit) => {
                let fits = limit.saturating_sub(FDS_FOR_THE_REST) / 2;
                let fits = usize::try_from(fits)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(HEALTH_RESERVE + WAITING)
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
        let per_peer = section
            .max_connections_per_peer
            .unwrap_or_else(|| (max / 4).max(MIN_PER_PEER))
            .max(1);
        ConnectionLimits {
            max,
            reserve: HEALTH_RESERVE,
            waiting: WAITING,
            per_peer,
            // Checked when the door's policy was built; a range that does not parse bounds nothing.
            unbounded_peers: section
                .trusted_proxies
                .iter()
                .filter_map(|proxy| portico_config::IpRange::parse(proxy))
                .collect(),
            header_read_timeout: HEADER_READ_TIMEOUT,
            pressed_header_read_timeout: PRESSED_HEADER_READ_TIMEOUT,
        }
    }

    /// Whether a door with `free` full places left is nearly full: an eighth of them or fewer.
    fn pressed(&self, free: usize) -> bool {
        free <= self.max / 8
    }
}

/// The soft `RLIMIT_NOFILE`; `None` when it is unlimited.
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// A connection's place. Given back when dropped.
struct Place {
    _permit: OwnedSemaphorePermit,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Served fully.
    Full,
    /// Taken past the cap; its head has not come yet.
    Waiting,
    /// Taken past the cap; its head asked for the health check.
    Health,
}

impl Place {
    fn new(kind: Kind) -> impl FnOnce(OwnedSemaphorePermit) -> Place {
        move |permit| Place {
            _permit: permit,
            kind,
        }
    }
}

#[derive(Clone)]
struct Slots {
    full: Arc<Semaphore>,
    waiting: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
}

impl Slots {
    fn new(limits: &ConnectionLimits) -> Self {
        Slots {
            full: Arc::new(Semaphore::new(limits.max)),
            waiting: Arc::new(Semaphore::new(limits.waiting)),
            reserve: Arc::new(Semaphore::new(limits.reserve)),
        }
    }

    /// A full place when there is one, else a waiting one, else the first that frees up.
    async fn next(&self) -> Place {
        if let Some(place) = self.try_next() {
            return place;
        }
        tokio::select! {
            permit = self.full.clone().acquire_owned() => Place::new(Kind::Full)(permit.expect("never closed")),
            permit = self.waiting.clone().acquire_owned() => Place::new(Kind::Waiting)(permit.expect("never closed")),
        }
    }

    fn try_next(&self) -> Option<Place> {
        if let Some(full) = self.try_full() {
            return Some(full);
        }
        self.waiting
            .clone()
            .try_acquire_owned()
            .ok()
            .map(Place::new(Kind::Waiting))
    }

    fn try_full(&self) -> Option<Place> {
        self.full
            .clone()
            .try_acquire_owned()
            .ok()
            .map(Place::new(Kind::Full))
    }

    /// A waiting place taken while the door was full becomes a full one if one has freed since.
    fn upgrade(&self, place: Place) -> Place {
        match place.kind {
            Kind::Waiting => self.try_full().unwrap_or(place),
            _ => place,
        }
    }

    /// The place a waiting connection moves to once its head has come: a full one if one is free,
    /// else a reserved one for the health check; `None` when neither is.
    fn for_head(&self, path: &str) -> Option<Place> {
        if let Some(full) = self.try_full() {
            return Some(full);
        }
        if path != HEALTH {
            return None;
        }
        self.reserve
            .clone()
            .try_acquire_owned()
            .ok()
            .map(Place::new(Kind::Health))
    }
}

/// What a peer address is counted under: an IPv4 address, or an IPv6 address's /64. One host is
/// usually given a whole /64 and picks addresses in it freely (privacy addresses), so counting full
/// IPv6 addresses would bound nothing. An IPv4-mapped IPv6 address counts as its IPv4 address.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
        v4 => v4,
    }
}

/// Connections held per peer address.
struct Peers {
    bound: usize,
    /// Counted, never refused (trusted proxies).
    unbounded: Vec<portico_config::IpRange>,
    held: Mutex<HashMap<IpAddr, usize>>,
    /// When the last WARN about a peer over its bound was logged, and the refusals since.
    warned: Mutex<Option<Instant>>,
    refused: AtomicUsize,
}

/// One connection's count in its peer's; given back when dropped.
struct PeerHold {
    peers: Arc<Peers>,
    key: IpAddr,
}

impl Drop for PeerHold {
    fn drop(&mut self) {
        let mut held = self.peers.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl Peers {
    fn new(bound: usize, unbounded: Vec<portico_config::IpRange>) -> Arc<Self> {
        Arc::new(Peers {
            bound,
            unbounded,
            held: Mutex::default(),
            warned: Mutex::new(None),
            refused: AtomicUsize::new(0),
        })
    }

    /// Counts a connection from `peer`, or `None` when its address already holds its bound.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<PeerHold> {
        let key = peer_key(peer);
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let count = held.entry(key).or_default();
            if *count < self.bound || self.unbounded.iter().any(|range| range.contains(peer)) {
                *count += 1;
                return Some(PeerHold {
                    peers: self.clone(),
                    key,
                });
            }
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.warn(peer);
        None
    }

    /// One WARN per [`PEER_WARN_EVERY`] at most: a peer over its bound makes connections by the
    /// thousand, and a line for each would flood the log.
    fn warn(&self, peer: IpAddr) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if warned.is_some_and(|at| now.duration_since(at) < PEER_WARN_EVERY) {
            return;
        }
        *warned = Some(now);
        let refused = self.refused.swap(0, Ordering::Relaxed);
        // The first refusal is logged at once; later ones are counted into the next line.
        let since = if refused > 1 {
            format!(" ({refused} closed since the last such warning)")
        } else {
            String::new()
        };
        tracing::warn!(
            "{peer} holds {} connections, the most one address may ([server] max_connections_per_peer): its new connections are closed at once{since}",
            self.bound
        );
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
    let slots = Slots::new(&limits);
    let peers = Peers::new(limits.per_peer, limits.unbounded_peers.clone());
    // Dropping `stop` tells every connection to shut down gracefully; each holds a `closed` receiver
    // until it has, so `wait_closed` resolves when the last one is gone.
    let (stop, stop_told) = watch::channel(());
    let (closed, wait_closed) = watch::channel(());
    tokio::pin!(signal);
    // A place taken but not used (its connection was over its peer's bound) serves the next one.
    let mut spare = None;
    loop {
        let place = match spare.take() {
            Some(place) => place,
            None => tokio::select! {
                _ = &mut signal => break,
                place = slots.next() => place,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut signal => break,
            accepted = accept(&listener) => accepted,
        };
        // Closed at once rather than answered 503: an answer needs the head, and waiting for the
        // head of a connection from a peer that holds its bound already is what the bound is for.
        let Some(hold) = peers.admit(peer.ip()) else {
            drop(stream);
            spare = Some(place);
            continue;
        };
        let place = slots.upgrade(place);
        let pressed = match place.kind {
            Kind::Full => limits.pressed(slots.full.available_permits()),
            _ => true,
        };
        let connection = Connection {
            stream,
            peer,
            router: router.clone(),
            header_read_timeout: if pressed {
                limits.pressed_header_read_timeout
            } else {
                limits.header_read_timeout
            },
            max: limits.max,
            slots: slots.clone(),
        };
        let stop_told = stop_told.clone();
        let closed = wait_closed.clone();
        tokio::spawn(async move {
            connection.run(place, stop_told).await;
            drop(hold);
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
    slots: Slots,
}

impl Connection {
    async fn run(self, place: Place, mut stop_told: watch::Receiver<()>) {
        let waiting = place.kind == Kind::Waiting;
        let Connection {
            stream,
            peer,
            router,
            header_read_timeout,
            max,
            slots,
        } = self;
        // Shared with the service: a waiting connection's place changes once its head has come.
        let place = Arc::new(Mutex::new(place));
        let service = {
            let place = place.clone();
            hyper::service::service_fn(move |request: Request<Incoming>| {
                let router = router.clone();
                let place = place.clone();
                let slots = slots.clone();
                async move {
                    let mut request = request.map(Body::new);
                    request.extensions_mut().insert(ConnectInfo(PeerAddr(peer)));
                    if waiting {
                        let moved = slots.for_head(request.uri().path());
                        let mut held = place.lock().unwrap_or_else(|e| e.into_inner());
                        match moved {
                            // The waiting place is given back for the next head to be read.
                            Some(moved) => *held = moved,
                            None => return Ok::<_, Infallible>(door_full(max)),
                        }
                    }
                    router.oneshot(request).await
                }
            })
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            // A place past the cap is given back after one answer.
            .keep_alive(!waiting);
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
                _ = stop_told.changed(), if !told => {
                    told = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
        drop(place);
    }
}

/// The answer to a request on a connection taken past the cap, when it is not the health check and
/// no full place has freed.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_counted_by_ipv4_address_and_ipv6_slash_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(peer_key(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(peer_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(
            peer_key(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_ne!(
            peer_key(ip("2001:db8:1:3::1")),
            peer_key(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn a_peer_over_its_bound_is_refused_until_one_of_its_connections_ends() {
        let peers = Peers::new(
            2,
            vec![portico_config::IpRange::parse("10.0.0.0/8").unwrap()],
        );
        let a = "2001:db8::1".parse().unwrap();
        let same_64 = "2001:db8::2".parse().unwrap();
        let other = "192.0.2.1".parse().unwrap();
        let first = peers.admit(a).unwrap();
        let _second = peers.admit(same_64).unwrap();
        assert!(peers.admit(a).is_none());
        assert!(peers.admit(same_64).is_none());
        // The first refusal was logged at once; the second waits for the next WARN.
        assert_eq!(peers.refused.load(Ordering::Relaxed), 1);
        let _other = peers.admit(other).unwrap();
        // A trusted proxy carries many clients' connections: never refused.
        let proxy = "10.1.2.3".parse().unwrap();
        let proxied: Vec<_> = (0..5).map(|_| peers.admit(proxy).unwrap()).collect();
        drop(proxied);
        drop(first);
        assert!(peers.admit(a).is_some());
        drop(_second);
        assert_eq!(
            peers.held.lock().unwrap().len(),
            1,
            "an address with none is forgotten"
        );
    }

    #[test]
    fn a_waiting_place_becomes_a_reserved_one_only_for_the_health_check() {
        let limits = ConnectionLimits {
            max: 1,
            reserve: 1,
            waiting: 1,
            per_peer: 16,
            unbounded_peers: Vec::new(),
            header_read_timeout: HEADER_READ_TIMEOUT,
            pressed_header_read_timeout: PRESSED_HEADER_READ_TIMEOUT,
        };
        let slots = Slots::new(&limits);
        let _full = slots.try_next().unwrap();
        let waiting = slots.try_next().unwrap();
        assert_eq!(waiting.kind, Kind::Waiting);
        assert!(slots.try_next().is_none(), "the waiting places are bounded");
        assert!(slots.for_head("/mcp").is_none());
        let health = slots.for_head(HEALTH).unwrap();
        assert_eq!(health.kind, Kind::Health);
        assert!(slots.for_head(HEALTH).is_none(), "the reserve is bounded");
        drop(waiting);
        assert_eq!(slots.try_next().map(|p| p.kind), Some(Kind::Waiting));
        assert!(limits.pressed(0));
    }
}
