//! The client must never use a proxy, including the ones reqwest would pick
//! up from HTTP_PROXY / HTTPS_PROXY / ALL_PROXY: a proxy resolves and
//! connects on our behalf, beyond the reach of every check.
//!
//! Setting those variables in this process would race with other tests (and
//! is `unsafe` in edition 2024), so the probe runs in a child process of
//! this same test binary with the variables set only there.

#[path = "support/local.rs"]
mod local;

use local::Upstream;
use portico_net::{NetPolicy, SafeClient};

const PROBE_TARGET: &str = "PORTICO_NET_PROXY_PROBE_TARGET";

#[tokio::test]
async fn environment_proxies_are_ignored() {
    let target = Upstream::start("direct").await;
    let proxy = Upstream::start("via-proxy").await;
    let proxy_url = format!("http://{}", proxy.addr);

    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "proxy_probe_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE_TARGET, target.url("/ok"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        child.env(var, &proxy_url);
    }
    let out = child.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The control shows the variables are live in the child: a default
    // reqwest client obeys them. Without this the test could pass vacuously.
    assert!(stdout.contains("CONTROL=via-proxy"), "{stdout}");
    assert!(stdout.contains("SAFE=direct"), "{stdout}");
    assert_eq!(
        proxy.hits(),
        1,
        "only the control request may reach the proxy"
    );
    assert_eq!(
        target.hits(),
        1,
        "only the SafeClient request reaches the target"
    );
}

/// Runs only as the child of `environment_proxies_are_ignored`.
#[tokio::test]
async fn proxy_probe_child() {
    let Ok(target) = std::env::var(PROBE_TARGET) else {
        return;
    };
    let control = reqwest::Client::new().get(&target).send().await.unwrap();
    println!("CONTROL={}", control.text().await.unwrap());

    let safe = SafeClient::new(NetPolicy::allow_private_network()).unwrap();
    let resp = safe.get(&target).await.unwrap();
    println!("SAFE={}", resp.text().await.unwrap());
}
