//! End-to-end behaviour against a real local server: what is refused, with
//! which rule, and that refused destinations are never connected to.

#[path = "support/local.rs"]
mod local;

use std::net::Ipv4Addr;

use local::{MapResolver, Upstream, client};
use portico_net::{
    BlockRule, BlockedAddress, NetError, NetPolicy, SafeClient, blocked_in_error_chain,
};
use tokio::net::{TcpListener, TcpStream};

fn expect_blocked(result: Result<reqwest::Response, NetError>) -> BlockedAddress {
    match result {
        Err(NetError::Blocked(blocked)) => blocked,
        Err(other) => panic!("expected a policy refusal, got: {other}"),
        Ok(resp) => panic!("expected a policy refusal, got HTTP {}", resp.status()),
    }
}

fn expect_blocked_in(err: &reqwest::Error) -> &BlockedAddress {
    blocked_in_error_chain(err)
        .unwrap_or_else(|| panic!("no BlockedAddress in the error chain of: {err:?}"))
}

#[tokio::test]
async fn loopback_server_is_refused_by_default_naming_the_rule() {
    let upstream = Upstream::start("direct").await;
    let client = SafeClient::new(NetPolicy::default()).unwrap();
    let url = upstream.url("/ok");

    let blocked = expect_blocked(client.get(&url).await);

    assert_eq!(blocked.rule(), BlockRule::Loopback);
    assert_eq!(blocked.addr(), Some(Ipv4Addr::LOCALHOST.into()));
    assert_eq!(
        blocked.to_string(),
        format!(
            "refused {url}: 127.0.0.1 is a loopback address; \
             set allow_private_network = true on this server entry to allow it"
        )
    );
    assert_eq!(upstream.hits(), 0);
}

#[tokio::test]
async fn loopback_server_is_reachable_with_allow_private() {
    let upstream = Upstream::start("direct").await;
    let client = SafeClient::new(NetPolicy::allow_private_network()).unwrap();

    let resp = client.get(&upstream.url("/ok")).await.unwrap();

    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "direct");
    assert_eq!(upstream.hits(), 1);
}

/// `http()` skips `check_url`, so an IP literal is caught by the connector
/// guard. It must refuse before connecting: if it only refused after the
/// handshake, that connection would be first in the listener's accept queue.
#[tokio::test]
async fn raw_http_client_refuses_ip_literal_before_connecting() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = SafeClient::new(NetPolicy::default()).unwrap();

    let err = client
        .http()
        .get(format!("http://{addr}/ok"))
        .send()
        .await
        .unwrap_err();
    let blocked = expect_blocked_in(&err);
    assert_eq!(blocked.rule(), BlockRule::Loopback);
    assert!(
        blocked
            .to_string()
            .contains("127.0.0.1 is a loopback address"),
        "{blocked}"
    );
    assert!(matches!(NetError::from(err), NetError::Blocked(b) if b.rule() == BlockRule::Loopback));

    let sentinel = TcpStream::connect(addr).await.unwrap();
    let (_, first_peer) = listener.accept().await.unwrap();
    assert_eq!(
        first_peer,
        sentinel.local_addr().unwrap(),
        "the refused request opened a connection before being refused"
    );
}

#[tokio::test]
async fn host_name_resolving_to_metadata_is_refused_naming_the_rule() {
    let resolver = MapResolver::new(&[("metadata-alias.test", "169.254.169.254")]);
    // The opt-in must not matter: metadata is always blocked.
    let client = client(true, resolver.clone());

    let url = "http://metadata-alias.test/latest/meta-data";
    let blocked = expect_blocked(client.get(url).await);

    assert_eq!(blocked.rule(), BlockRule::CloudMetadata);
    assert_eq!(blocked.host(), "metadata-alias.test");
    assert_eq!(
        blocked.to_string(),
        "refused http://metadata-alias.test/latest/meta-data: metadata-alias.test resolves to \
         169.254.169.254, which is a cloud metadata address (always blocked)"
    );
    assert_eq!(resolver.asked(), ["metadata-alias.test"]);

    // Same refusal when driving reqwest directly, recovered from the chain.
    let err = client.http().get(url).send().await.unwrap_err();
    assert_eq!(expect_blocked_in(&err).rule(), BlockRule::CloudMetadata);
}

#[tokio::test]
async fn host_name_resolving_to_mapped_or_nat64_metadata_is_refused() {
    let resolver = MapResolver::new(&[
        ("mapped.test", "::ffff:169.254.169.254"),
        ("nat64.test", "64:ff9b::a9fe:a9fe"),
        ("linklocal.test", "fe80::1"),
    ]);
    let client = client(true, resolver);

    for (host, rule) in [
        ("mapped.test", BlockRule::CloudMetadata),
        ("nat64.test", BlockRule::CloudMetadata),
        ("linklocal.test", BlockRule::LinkLocal),
    ] {
        let blocked = expect_blocked(client.get(&format!("http://{host}/")).await);
        assert_eq!(blocked.rule(), rule, "{host}");
    }
}

#[tokio::test]
async fn private_name_is_refused_by_default_and_allowed_with_opt_in() {
    let upstream = Upstream::start("direct").await;
    let resolver = MapResolver::new(&[("upstream.test", "127.0.0.1")]);
    let url = format!("http://upstream.test:{}/ok", upstream.addr.port());

    let blocked = expect_blocked(client(false, resolver.clone()).get(&url).await);
    assert_eq!(blocked.rule(), BlockRule::Loopback);
    assert!(
        blocked.to_string().contains(
            "upstream.test resolves to 127.0.0.1, which is a loopback address; \
             set allow_private_network = true on this server entry to allow it"
        ),
        "{blocked}"
    );
    assert_eq!(upstream.hits(), 0);

    let resp = client(true, resolver).get(&url).await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "direct");
    assert_eq!(upstream.hits(), 1);
}

#[tokio::test]
async fn localhost_via_the_system_resolver_is_refused_as_loopback() {
    let upstream = Upstream::start("direct").await;
    let client = SafeClient::new(NetPolicy::default()).unwrap();
    let url = format!("http://localhost:{}/ok", upstream.addr.port());

    let blocked = expect_blocked(client.get(&url).await);

    assert_eq!(blocked.rule(), BlockRule::Loopback);
    assert!(blocked.addr().is_some_and(|a| a.is_loopback()), "{blocked}");
    assert!(
        blocked.to_string().contains("localhost resolves to"),
        "{blocked}"
    );
    assert_eq!(upstream.hits(), 0);
}

#[tokio::test]
async fn redirect_to_metadata_ip_is_refused_at_the_hop() {
    let upstream = Upstream::start("direct").await;
    let client = client(true, MapResolver::new(&[]));

    for target in [
        "http://169.254.169.254/latest/meta-data",
        "http://0xa9fea9fe/latest/meta-data",
        "http://2852039166/latest/meta-data",
        "http://[::ffff:169.254.169.254]/latest/meta-data",
        "http://[fd00:ec2::254]/latest/meta-data",
    ] {
        let blocked = expect_blocked(client.get(&upstream.redirect_to(target)).await);
        assert_eq!(blocked.rule(), BlockRule::CloudMetadata, "{target}");
        assert!(blocked.is_redirect(), "{target}");
        assert!(
            blocked
                .to_string()
                .starts_with("refused redirect to http://"),
            "{blocked}"
        );

        // Raised by the redirect policy (not by a failed connection): reqwest
        // classifies it as a redirect error, which happens before connecting.
        let err = client
            .http()
            .get(upstream.redirect_to(target))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_redirect(), "{target}: {err:?}");
        assert_eq!(
            expect_blocked_in(&err).rule(),
            BlockRule::CloudMetadata,
            "{target}"
        );
    }

    let blocked = expect_blocked(
        client
            .get(&upstream.redirect_to("http://169.254.169.254/latest/meta-data"))
            .await,
    );
    assert_eq!(
        blocked.to_string(),
        "refused redirect to http://169.254.169.254/latest/meta-data: 169.254.169.254 is a cloud \
         metadata address (always blocked)"
    );
}

#[tokio::test]
async fn redirect_to_name_resolving_to_blocked_address_is_refused() {
    let upstream = Upstream::start("direct").await;
    let resolver = MapResolver::new(&[
        ("metadata-alias.test", "169.254.169.254"),
        ("printer.test", "169.254.10.20"),
    ]);
    let client = client(true, resolver.clone());

    let blocked = expect_blocked(
        client
            .get(&upstream.redirect_to("http://metadata-alias.test/latest/meta-data"))
            .await,
    );
    assert_eq!(blocked.rule(), BlockRule::CloudMetadata);
    assert_eq!(blocked.host(), "metadata-alias.test");
    assert!(blocked.is_redirect());
    let message = blocked.to_string();
    assert!(
        message.starts_with(&format!(
            "refused a redirect from {}",
            upstream.url("/redirect")
        )),
        "{message}"
    );
    assert!(
        message.ends_with(
            ": metadata-alias.test resolves to 169.254.169.254, which is a cloud metadata \
             address (always blocked)"
        ),
        "{message}"
    );

    let blocked = expect_blocked(
        client
            .get(&upstream.redirect_to("http://printer.test/"))
            .await,
    );
    assert_eq!(blocked.rule(), BlockRule::LinkLocal);

    // The resolver is where these were refused: it was asked, and it is the
    // only thing that could have handed reqwest an address to connect to.
    assert_eq!(resolver.asked(), ["metadata-alias.test", "printer.test"]);
}

#[tokio::test]
async fn redirect_to_metadata_name_is_refused_without_dns() {
    let upstream = Upstream::start("direct").await;
    let resolver = MapResolver::new(&[]);
    let client = client(true, resolver.clone());

    let blocked = expect_blocked(
        client
            .get(&upstream.redirect_to("http://metadata.google.internal/computeMetadata/v1/"))
            .await,
    );
    assert_eq!(blocked.rule(), BlockRule::MetadataHostName);
    assert!(blocked.is_redirect());
    assert!(resolver.asked().is_empty());
}

#[tokio::test]
async fn redirect_to_other_schemes_is_refused() {
    let upstream = Upstream::start("direct").await;
    let client = client(true, MapResolver::new(&[]));

    for target in [
        "ftp://127.0.0.1/",
        "gopher://127.0.0.1:70/_",
        "ws://127.0.0.1/",
    ] {
        match client.get(&upstream.redirect_to(target)).await {
            Err(NetError::UnsupportedScheme { scheme, .. }) => {
                assert_eq!(scheme, target.split(':').next().unwrap());
            }
            other => panic!("{target}: expected an unsupported scheme refusal, got {other:?}"),
        }
    }

    // A location without an authority is not even a candidate hop for
    // reqwest: the 302 itself comes back, and nothing is fetched.
    let resp = client
        .get(&upstream.redirect_to("file:///etc/passwd"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 302);
    assert_eq!(resp.headers()["location"], "file:///etc/passwd");
}

#[tokio::test]
async fn redirects_within_policy_are_followed_and_capped() {
    let upstream = Upstream::start("direct").await;
    let client = client(true, MapResolver::new(&[]));

    let resp = client
        .get(&upstream.redirect_to(&upstream.url("/ok")))
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "direct");
    assert_eq!(upstream.hits(), 2);

    match client.get(&upstream.url("/loop")).await {
        Err(NetError::TooManyRedirects { max, .. }) => assert_eq!(max, portico_net::MAX_REDIRECTS),
        other => panic!("expected too many redirects, got {other:?}"),
    }
    // The original request plus ten followed hops.
    assert_eq!(upstream.hits(), 2 + 1 + portico_net::MAX_REDIRECTS);
}

#[tokio::test]
async fn non_http_schemes_are_refused() {
    let client = client(true, MapResolver::new(&[]));
    for url in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/pub",
        "gopher://127.0.0.1:70/_x",
    ] {
        match client.get(url).await {
            Err(NetError::UnsupportedScheme { scheme, .. }) => {
                assert_eq!(scheme, url.split(':').next().unwrap())
            }
            other => panic!("{url}: {other:?}"),
        }
        assert!(matches!(
            client.request(reqwest::Method::POST, url),
            Err(NetError::UnsupportedScheme { .. })
        ));
    }
}

#[tokio::test]
async fn metadata_google_internal_is_refused_by_name_without_dns() {
    let resolver = MapResolver::new(&[]);
    let client = client(true, resolver.clone());
    let url = "http://metadata.google.internal/computeMetadata/v1/instance/";

    let blocked = expect_blocked(client.get(url).await);
    assert_eq!(blocked.rule(), BlockRule::MetadataHostName);
    assert_eq!(
        blocked.to_string(),
        "refused http://metadata.google.internal/computeMetadata/v1/instance/: \
         metadata.google.internal is a cloud metadata host name (always blocked)"
    );

    // Skipping check_url does not help: the resolver refuses the name too,
    // before asking DNS.
    let err = client.http().get(url).send().await.unwrap_err();
    assert_eq!(expect_blocked_in(&err).rule(), BlockRule::MetadataHostName);
    assert!(resolver.asked().is_empty());
}

#[tokio::test]
async fn post_through_request_builder_is_checked() {
    let upstream = Upstream::start("direct").await;
    let strict = client(false, MapResolver::new(&[]));
    assert!(matches!(
        strict.request(reqwest::Method::POST, &upstream.url("/ok")),
        Err(NetError::Blocked(b)) if b.rule() == BlockRule::Loopback
    ));

    let open = client(true, MapResolver::new(&[]));
    let req = open
        .request(reqwest::Method::POST, &upstream.url("/ok"))
        .unwrap()
        .body("{}");
    let mut resp = open.send(req).await.unwrap();
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert_eq!(body, b"direct");
}
