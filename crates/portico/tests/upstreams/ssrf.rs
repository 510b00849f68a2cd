//! Remote server URLs go through the SSRF-safe client: blocked addresses are refused, naming the rule.

use portico_core::ServerState;

use crate::support::*;

async fn refusal(url: &str, extra: &str) -> portico_core::ServerStatus {
    let hub = settled_hub(&url_entry("remote", "http", url, extra)).await;
    let status = hub.servers().remove(0);
    hub.shutdown().await;
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_addresses_are_refused_with_the_rule_named() {
    let cases = [
        ("http://169.254.169.254/mcp", "cloud metadata"),
        ("http://[fd00:ec2::254]/mcp", "cloud metadata"),
        ("http://100.100.100.200/mcp", "cloud metadata"),
        ("http://metadata.google.internal/mcp", "metadata"),
        ("http://[::ffff:169.254.169.254]/mcp", "cloud metadata"),
        ("http://0xa9fea9fe/mcp", "cloud metadata"),
        ("http://2852039166/mcp", "cloud metadata"),
        ("http://0251.0376.0251.0376/mcp", "cloud metadata"),
        ("http://169.254.1.1/mcp", "link-local"),
        ("http://0.0.0.0/mcp", "unspecified"),
        ("http://224.0.0.1/mcp", "multicast"),
        ("http://127.0.0.1:9/mcp", "loopback"),
        ("http://10.1.2.3/mcp", "private"),
        ("http://localhost:9/mcp", "loopback"),
    ];
    for (url, rule) in cases {
        let status = refusal(url, "").await;
        assert_eq!(status.state, ServerState::Failed, "{url}: {status:#?}");
        let error = status.last_error.unwrap();
        assert!(
            error.contains(rule),
            "{url}: expected rule {rule:?} in {error}"
        );
        assert!(error.starts_with("server `remote`"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_stays_blocked_even_with_private_network_allowed() {
    let status = refusal("http://169.254.169.254/mcp", "allow_private_network = true").await;
    assert_eq!(status.state, ServerState::Failed);
    assert!(status.last_error.unwrap().contains("cloud metadata"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_blocked_address_is_refused() {
    use axum::response::Redirect;
    let app = axum::Router::new()
        .fallback(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let status = refusal(
        &format!("http://127.0.0.1:{port}/mcp"),
        "allow_private_network = true",
    )
    .await;
    server.abort();
    assert_ne!(status.state, ServerState::Ready);
    let error = status.last_error.unwrap();
    assert!(
        error.contains("169.254.169.254") && error.contains("cloud metadata"),
        "{error}"
    );
}
