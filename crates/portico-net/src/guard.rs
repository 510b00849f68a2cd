//! Last line of defence at the socket: a reqwest connector layer.
//!
//! The resolver never sees URLs whose host is an IP literal, and callers of
//! [`crate::SafeClient::http`] (the MCP transports) bypass `check_url`. So
//! every connection is checked here too: before connecting when the target
//! is an IP literal, and after connecting against the peer address the
//! socket actually reached, before a single request byte is written.

use std::fmt::Debug;
use std::net::IpAddr;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use tower_layer::Layer;
use tower_service::Service;

use crate::cause::ConnectFailures;
use crate::error::BlockedAddress;
use crate::policy::{NetPolicy, classify};
use crate::resolve::BoxFuture;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone)]
pub(crate) struct PeerGuardLayer {
    pub(crate) policy: NetPolicy,
    pub(crate) failures: ConnectFailures,
}

impl<S> Layer<S> for PeerGuardLayer {
    type Service = PeerGuard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PeerGuard {
            inner,
            policy: self.policy.clone(),
            failures: self.failures.clone(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct PeerGuard<S> {
    inner: S,
    policy: NetPolicy,
    failures: ConnectFailures,
}

impl<S, R> Service<R> for PeerGuard<S>
where
    R: Debug,
    S: Service<R>,
    S::Response: Connection + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let host = host_of(&req);
        if let Some(host) = &host
            && let Some(addr) = literal_host(host)
            && let Err(rule) = classify(addr, &self.policy)
        {
            let refusal = BlockedAddress::literal(host, addr, rule).under(&self.policy);
            return Box::pin(async move { Err(refusal.into()) });
        }
        let policy = self.policy.clone();
        let failures = self.failures.clone();
        let connecting = self.inner.call(req);
        Box::pin(async move {
            let conn = connecting.await.map_err(|error| {
                let error: BoxError = error.into();
                failures.record(&*error);
                error
            })?;
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            // Every TCP-based connector reports the peer; if one ever does
            // not, fail closed rather than trust an unchecked socket.
            let Some(peer) = extras.get::<HttpInfo>().map(HttpInfo::remote_addr) else {
                return Err("portico-net: connection has no peer address to check".into());
            };
            classify(peer.ip(), &policy).map_err(|rule| {
                match host {
                    Some(host) => BlockedAddress::connected(&host, peer.ip(), rule),
                    None => BlockedAddress::literal(&peer.ip().to_string(), peer.ip(), rule),
                }
                .under(&policy)
            })?;
            Ok(conn)
        })
    }
}

/// reqwest hands connector layers its request as an opaque type whose only
/// window is `Debug` (`Unnameable(<uri>)`). Reading the URI from it lets IP
/// literals be refused before any packet is sent; if the format ever
/// changes this yields `None` and the post-connect check still applies
/// (a test pins the pre-connect behaviour so such a change is noticed).
fn host_of(req: &dyn Debug) -> Option<String> {
    let text = format!("{req:?}");
    let inner = text.get(text.find('(')? + 1..text.rfind(')')?)?;
    let url = url::Url::parse(inner).ok()?;
    url.host_str().map(str::to_owned)
}

fn literal_host(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::policy::BlockRule;

    /// Connects to a fixed address whatever it is asked for, standing in for
    /// a connector whose resolver was somehow bypassed.
    #[derive(Clone)]
    struct Dial {
        to: SocketAddr,
        calls: Arc<AtomicUsize>,
    }

    impl<R> Service<R> for Dial {
        type Response = TcpStream;
        type Error = std::io::Error;
        type Future = BoxFuture<'static, std::io::Result<TcpStream>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: R) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(TcpStream::connect(self.to))
        }
    }

    /// Same `Debug` shape as reqwest's request type for connector layers.
    #[derive(Debug)]
    struct Unnameable(#[expect(dead_code, reason = "read only through Debug")] http::Uri);

    async fn setup(allow_private: bool) -> (TcpListener, Dial, PeerGuard<Dial>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let dial = Dial {
            to: listener.local_addr().unwrap(),
            calls: Arc::default(),
        };
        let guard = PeerGuardLayer {
            policy: NetPolicy::private_network(allow_private),
            failures: ConnectFailures::default(),
        }
        .layer(dial.clone());
        (listener, dial, guard)
    }

    fn rule_of(err: &BoxError) -> BlockRule {
        err.downcast_ref::<BlockedAddress>()
            .unwrap_or_else(|| panic!("not a refusal: {err}"))
            .rule()
    }

    #[tokio::test]
    async fn connected_peer_is_checked_when_the_target_is_opaque() {
        let (_listener, dial, mut guard) = setup(false).await;
        let err = guard.call("opaque").await.expect_err("refused");
        assert_eq!(rule_of(&err), BlockRule::Loopback);
        assert_eq!(dial.calls.load(Ordering::SeqCst), 1);

        let (_listener, _, mut open) = setup(true).await;
        assert!(open.call("opaque").await.is_ok());
    }

    #[tokio::test]
    async fn named_target_reports_where_it_connected() {
        let (_listener, _, mut guard) = setup(false).await;
        let err = guard
            .call(Unnameable("http://rebound.test/".parse().unwrap()))
            .await
            .expect_err("refused");
        assert_eq!(rule_of(&err), BlockRule::Loopback);
        assert!(
            err.to_string()
                .contains("rebound.test connected to 127.0.0.1, which is a loopback address"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn ip_literal_target_is_refused_without_dialling() {
        let (_listener, dial, mut guard) = setup(true).await;
        for uri in [
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:169.254.169.254]:80/",
            "https://[fd00:ec2::254]/",
        ] {
            let err = guard
                .call(Unnameable(uri.parse().unwrap()))
                .await
                .expect_err("refused");
            assert_eq!(rule_of(&err), BlockRule::CloudMetadata, "{uri}");
        }
        assert_eq!(dial.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn host_is_read_from_the_request_debug_form() {
        let host = |uri: &str| host_of(&Unnameable(uri.parse().unwrap()));
        assert_eq!(
            host("http://127.0.0.1:8080/x").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host("https://[::1]/").as_deref(), Some("[::1]"));
        assert_eq!(
            host("http://example.test/").as_deref(),
            Some("example.test")
        );
        assert_eq!(host_of(&"no uri here"), None);
    }
}
