//! Shared fixtures: a real HTTP server on 127.0.0.1 and a table resolver.
//! Nothing here ever talks to a non-loopback address.

// Each test crate includes this file and uses a different subset of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use portico_net::{BoxFuture, HostResolver, NetPolicy, SafeClient, SystemResolver};
use tokio::net::TcpListener;

/// A local upstream. `/ok` answers `body`, `/redirect?to=URL` answers 302
/// to URL, `/loop` redirects to itself; anything else also answers `body`
/// (so it can stand in for a proxy, which receives absolute-form targets).
pub struct Upstream {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Upstream {
    pub async fn start(body: &'static str) -> Self {
        // Explicitly loopback: never listen on a routable interface in tests.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let count = |hits: &Arc<AtomicUsize>| {
            hits.fetch_add(1, Ordering::SeqCst);
        };
        let app = Router::new()
            .route(
                "/redirect",
                get(
                    move |State(hits): State<Arc<AtomicUsize>>,
                          Query(q): Query<HashMap<String, String>>| async move {
                        count(&hits);
                        (StatusCode::FOUND, [(header::LOCATION, q["to"].clone())])
                    },
                ),
            )
            .route(
                "/loop",
                get(move |State(hits): State<Arc<AtomicUsize>>| async move {
                    count(&hits);
                    (StatusCode::FOUND, [(header::LOCATION, "/loop")])
                }),
            )
            .fallback(move |State(hits): State<Arc<AtomicUsize>>| async move {
                count(&hits);
                body.into_response()
            })
            .with_state(Arc::clone(&hits));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, hits }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A URL on this server that redirects to `target`.
    pub fn redirect_to(&self, target: &str) -> String {
        self.url(&format!("/redirect?to={}", percent_encode(target)))
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Answers from a fixed table and remembers every name it was asked.
/// `localhost` goes to the real system resolver (it is answered from the
/// hosts file); any other unknown name fails, so no test can reach real DNS.
#[derive(Default)]
pub struct MapResolver {
    map: HashMap<String, Vec<IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl MapResolver {
    pub fn new(entries: &[(&str, &str)]) -> Arc<Self> {
        let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (name, ip) in entries {
            map.entry((*name).to_owned())
                .or_default()
                .push(ip.parse().unwrap());
        }
        Arc::new(Self {
            map,
            asked: Mutex::default(),
        })
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl HostResolver for MapResolver {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
        self.asked.lock().unwrap().push(host.to_owned());
        Box::pin(async move {
            if host == "localhost" {
                return SystemResolver.resolve(host, port).await;
            }
            self.map
                .get(host)
                .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("{host}: not in table"))
                })
        })
    }
}

/// A client with a table resolver. The timeout only bounds a broken test;
/// nothing waits on it.
pub fn client(allow_private: bool, resolver: Arc<MapResolver>) -> SafeClient {
    SafeClient::builder()
        .policy(NetPolicy::private_network(allow_private))
        .resolver(resolver)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}
