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

/// A server URL whose every answer is a 307 to another origin (127.0.0.1 on another port): the
/// configured header must not reach that origin, on either transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_headers_do_not_follow_a_redirect_to_another_origin() {
    use std::sync::{Arc, Mutex};

    use axum::http::HeaderMap;
    use axum::response::Redirect;

    // The second origin records the credentials it is sent.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let second = axum::Router::new().fallback(move |headers: HeaderMap| {
        let record = record.clone();
        async move {
            for name in ["x-api-key", "authorization"] {
                if let Some(value) = headers.get(name) {
                    record
                        .lock()
                        .unwrap()
                        .push(format!("{name}: {}", value.to_str().unwrap_or_default()));
                }
            }
            axum::http::StatusCode::NOT_FOUND
        }
    });
    let second_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second_base = format!("http://{}", second_listener.local_addr().unwrap());
    let second_server = tokio::spawn(async move { axum::serve(second_listener, second).await });

    let target = format!("{second_base}/mcp");
    let first = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { Redirect::temporary(&target) }
    });
    let first_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let first_base = format!("http://{}", first_listener.local_addr().unwrap());
    let first_server = tokio::spawn(async move { axum::serve(first_listener, first).await });

    let mut statuses = Vec::new();
    for kind in ["http", "sse"] {
        let toml = url_entry(
            "remote",
            kind,
            &format!("{first_base}/mcp"),
            "allow_private_network = true",
        ) + "headers = { X-Api-Key = \"s3cret\", Authorization = \"Bearer t0ken\" }\n";
        let hub = settled_hub(&toml).await;
        statuses.push((kind, hub.servers().remove(0)));
        hub.shutdown().await;
    }
    first_server.abort();
    second_server.abort();
    assert_eq!(
        *seen.lock().unwrap(),
        Vec::<String>::new(),
        "the second origin got the credentials"
    );
    for (kind, status) in statuses {
        assert_ne!(status.state, ServerState::Ready, "{kind}");
        let error = status.last_error.unwrap();
        assert!(
            error.contains(&format!(
                "the request carries configured headers meant only for {first_base}"
            )),
            "{kind}: {error}"
        );
    }
}
