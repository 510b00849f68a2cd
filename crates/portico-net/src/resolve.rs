//! Name resolution that only ever hands reqwest addresses it has checked.
//!
//! reqwest connects to exactly the addresses its resolver returns, so doing
//! the check here (rather than resolving once to check and letting reqwest
//! resolve again to connect) leaves no window for DNS rebinding.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::BlockedAddress;
use crate::policy::{NetPolicy, classify, host_name_class, parse_ipv4_lenient};

/// A boxed, sendable future (same shape as `futures::future::BoxFuture`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Turns a host name into socket addresses. Injectable so tests can map
/// names to chosen addresses without touching real DNS.
pub trait HostResolver: Send + Sync {
    /// Resolve `host`. `port` is what the caller asks for; reqwest passes 0
    /// and substitutes the URL's port into whatever comes back.
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>>;
}

/// The operating system's resolver, via `tokio::net::lookup_host`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl HostResolver for SystemResolver {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
    }
}

/// Resolve `host` and check every address; refuse the whole host if any
/// address is blocked.
///
/// Refusing outright (rather than dropping the bad records and connecting to
/// the rest) keeps behaviour deterministic and makes a rebinding attempt
/// visible in the error instead of a silent partial success.
pub(crate) async fn resolve_checked(
    resolver: &dyn HostResolver,
    policy: &NetPolicy,
    host: &str,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    if let Some(rule) = host_name_class(host) {
        return Err(BlockedAddress::name(host, rule).under(policy).into());
    }
    // The system resolver happily turns "0x7f.1" or "2130706433" into an
    // address without DNS; classify those spellings ourselves first.
    let literal = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok()
        .or_else(|| parse_ipv4_lenient(host).map(IpAddr::V4));
    if let Some(addr) = literal {
        classify(addr, policy)
            .map_err(|rule| BlockedAddress::literal(host, addr, rule).under(policy))?;
        return Ok(vec![SocketAddr::new(addr, 0)]);
    }

    let addrs = resolver.resolve(host, 0).await?;
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{host} resolved to no addresses"),
        )
        .into());
    }
    for addr in &addrs {
        classify(addr.ip(), policy)
            .map_err(|rule| BlockedAddress::resolved(host, addr.ip(), rule).under(policy))?;
    }
    tracing::trace!(host, ?addrs, "resolved and checked");
    Ok(addrs)
}

/// The `reqwest::dns::Resolve` installed in every `SafeClient`.
pub(crate) struct CheckingResolver {
    pub(crate) inner: Arc<dyn HostResolver>,
    pub(crate) policy: NetPolicy,
    pub(crate) refusals: crate::error::RefusalLog,
}

impl Resolve for CheckingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let inner = Arc::clone(&self.inner);
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        let refusals = self.refusals.clone();
        Box::pin(async move {
            let addrs = resolve_checked(&*inner, &policy, &host)
                .await
                .inspect_err(|e| {
                    if let Some(blocked) = e.downcast_ref::<BlockedAddress>() {
                        refusals.record(blocked);
                    }
                })?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::policy::BlockRule;

    /// Answers from a table and records what it was asked.
    #[derive(Default)]
    struct Table {
        map: HashMap<&'static str, Vec<IpAddr>>,
        asked: Mutex<Vec<String>>,
    }

    impl HostResolver for Table {
        fn resolve<'a>(
            &'a self,
            host: &'a str,
            port: u16,
        ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
            self.asked.lock().unwrap().push(host.to_owned());
            let found = self
                .map
                .get(host)
                .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
            Box::pin(async move {
                found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"))
            })
        }
    }

    fn table(entries: &[(&'static str, &[&str])]) -> Table {
        Table {
            map: entries
                .iter()
                .map(|(name, ips)| (*name, ips.iter().map(|s| s.parse().unwrap()).collect()))
                .collect(),
            ..Table::default()
        }
    }

    fn rule_of(err: &(dyn std::error::Error + 'static)) -> BlockRule {
        err.downcast_ref::<BlockedAddress>()
            .unwrap_or_else(|| panic!("not a refusal: {err}"))
            .rule()
    }

    #[tokio::test]
    async fn one_bad_record_refuses_the_host() {
        let t = table(&[("mixed.test", &["93.184.216.34", "10.0.0.5"])]);
        let err = resolve_checked(&t, &NetPolicy::default(), "mixed.test")
            .await
            .unwrap_err();
        assert_eq!(rule_of(&*err), BlockRule::PrivateNetwork);
        assert!(
            err.to_string().contains("mixed.test resolves to 10.0.0.5"),
            "{err}"
        );

        let ok = resolve_checked(&t, &NetPolicy::allow_private_network(), "mixed.test")
            .await
            .unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[tokio::test]
    async fn metadata_names_and_numeric_spellings_never_reach_dns() {
        let t = table(&[]);
        let policy = NetPolicy::allow_private_network();
        let err = resolve_checked(&t, &policy, "metadata.google.internal")
            .await
            .unwrap_err();
        assert_eq!(rule_of(&*err), BlockRule::MetadataHostName);
        for spelling in [
            "0xa9fea9fe",
            "2852039166",
            "0251.0376.0251.0376",
            "169.254.43518",
        ] {
            let err = resolve_checked(&t, &policy, spelling).await.unwrap_err();
            assert_eq!(rule_of(&*err), BlockRule::CloudMetadata, "{spelling}");
        }
        let err = resolve_checked(&t, &NetPolicy::default(), "0x7f.1")
            .await
            .unwrap_err();
        assert_eq!(rule_of(&*err), BlockRule::Loopback);
        assert!(t.asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn public_answers_pass_through_and_empty_answers_fail() {
        let t = table(&[("ok.test", &["93.184.216.34"]), ("empty.test", &[])]);
        let addrs = resolve_checked(&t, &NetPolicy::default(), "ok.test")
            .await
            .unwrap();
        assert_eq!(addrs, vec!["93.184.216.34:0".parse().unwrap()]);
        let err = resolve_checked(&t, &NetPolicy::default(), "empty.test")
            .await
            .unwrap_err();
        assert!(err.downcast_ref::<io::Error>().is_some(), "{err}");
    }
}
