//! The dashboard behind a balancer that terminates TLS: nginx with a self-signed certificate the
//! test makes (openssl) in front of two replicas on one PostgreSQL store, and Chromium logging in
//! over https and pressing a button that POSTs (the Tools page's "Call"). The browser's page is
//! `https://127.0.0.1:PORT` while each replica sees plain HTTP from nginx: replica A knows its
//! page by `[server] public_url`, replica B believes nginx's `X-Forwarded-Proto`/`-Host` because
//! nginx reaches it from 127.0.0.2, its one `[server] trusted_proxies` entry. A third nginx port in
//! front of B, reached from 127.0.0.1 (not trusted), is what a deployment without either setting
//! gets: the login is refused with 403. Forged forwarded headers sent straight to a replica by a
//! client it does not trust change nothing.

use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::browser::{browser_script, chromium};
use crate::cluster::{Nginx, Replicas, TOKEN, free_port};
use crate::support::{Signal, everything_js, node, signal, stdio_entry};

/// The everything server's tool the dashboard calls, and what its answer says.
const TOOL: &str = "mcp_everything_get_sum";
const SUM_TEXT: &str = "The sum of 2 and 3 is 5";

/// nginx terminating TLS on three loopback ports: `to_a` (replica A, which has `public_url`),
/// `to_b` (replica B, reached from 127.0.0.2, which B trusts), `untrusted` (replica B, reached
/// from 127.0.0.1, which B does not trust).
struct TlsBalancer {
    child: Child,
    dir: tempfile::TempDir,
}

impl TlsBalancer {
    fn start(nginx: &Path, ports: [u16; 3], a: u16, b: u16) -> TlsBalancer {
        let dir = tempfile::Builder::new()
            .prefix("portico-tls-nginx-")
            .tempdir()
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .arg("ec_paramgen_curve:prime256v1")
            .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .arg("-keyout")
            .arg(dir.path().join("key.pem"))
            .arg("-out")
            .arg(dir.path().join("cert.pem"))
            .stdin(Stdio::null())
            .output()
            .expect("run openssl (scripts/install-test-peers installs it)");
        assert!(
            made.status.success(),
            "openssl could not make a certificate: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let d = dir.path().display();
        let [to_a, to_b, untrusted] = ports;
        let server = |port: u16, upstream: u16, lines: &str| {
            format!(
                r#"    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        proxy_http_version 1.1;
        proxy_buffering off;
        proxy_read_timeout 300s;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
{lines}        location / {{ proxy_pass http://127.0.0.1:{upstream}; }}
    }}
"#
            )
        };
        let config = format!(
            r#"daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 128; }}
http {{
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    access_log {d}/access.log;
{}{}{}}}
"#,
            // A: the browser's Host passed on; A knows its page from public_url.
            server(to_a, a, "        proxy_set_header Host $http_host;\n"),
            // B: nginx's own Host for the upstream (`127.0.0.1:B`), the browser's in
            // X-Forwarded-Host, sent from the address B trusts.
            server(
                to_b,
                b,
                "        proxy_set_header X-Forwarded-Host $http_host;\n        proxy_bind 127.0.0.2;\n"
            ),
            // The same in front of B from an address B does not trust.
            server(
                untrusted,
                b,
                "        proxy_set_header X-Forwarded-Host $http_host;\n"
            ),
        );
        std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let mut balancer = TlsBalancer { child, dir };
        // Listening on every port is nginx's readiness: it binds them all before it serves.
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in ports {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(status)) = balancer.child.try_wait() {
                    panic!("nginx exited ({status}): {}", balancer.error_log());
                }
                assert!(
                    Instant::now() < deadline,
                    "nginx did not listen on 127.0.0.1:{port} within 20 s (test guard): {}",
                    balancer.error_log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        balancer
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for TlsBalancer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), Signal::TERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn dashboard(chromium: &Path, port: u16) -> Value {
    let url = format!("https://127.0.0.1:{port}");
    browser_script(
        chromium,
        "dashboard_balancer.mjs",
        &[
            "--url",
            &url,
            "--token",
            TOKEN,
            "--try",
            TOOL,
            "--try-args",
            r#"{"a": 2, "b": 3}"#,
        ],
        |event| panic!("dashboard_balancer.mjs sent an event it has none of: {event}"),
    )
}

/// `GET /api/tools` straight to a replica, from `from`, with `headers`: the status and the error.
async fn direct(base: &str, from: Ipv4Addr, headers: &[(&str, String)]) -> (u16, String) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .local_address(IpAddr::V4(from))
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut request = client.get(format!("{base}/api/tools")).bearer_auth(TOKEN);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body["error"].as_str().unwrap_or("").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_behind_nginx_terminating_tls_on_both_replicas() {
    let ports = [free_port(), free_port(), free_port()];
    let [to_a, to_b, untrusted] = ports;
    let everything = everything_js().display().to_string();
    let upstream = stdio_entry("everything", &node(), &[everything.as_str(), "stdio"], "");
    let Some(cluster) = Replicas::start_with(2, &upstream, |i| match i {
        0 => format!("public_url = \"https://127.0.0.1:{to_a}\"\n"),
        _ => "trusted_proxies = [\"127.0.0.2\"]\n".into(),
    }) else {
        return;
    };
    let Some(chromium) = chromium() else {
        return;
    };
    let nginx = Nginx::binary().expect("checked by Replicas::start");
    let balancer = TlsBalancer::start(&nginx, ports, cluster.a().port, cluster.b().port);

    for (port, replica) in [(to_a, "gw-a"), (to_b, "gw-b")] {
        let report = dashboard(&chromium, port);
        assert_eq!(report["ok"], true, "{replica}: {report:#}");
        assert_eq!(report["login"]["shown"], true, "{replica}: {report:#}");
        assert_eq!(report["login"]["status"], 200, "{replica}: {report:#}");
        // Only the page's question whether it is logged in yet (401 before the login) failed.
        for failed in report["failedRequests"].as_array().unwrap() {
            assert_eq!(
                (&failed["path"], &failed["status"]),
                (&serde_json::json!("/ui/session"), &serde_json::json!(401)),
                "{replica}: {report:#}"
            );
        }
        assert_eq!(report["login"]["loggedIn"], true, "{replica}: {report:#}");
        // Behind https the session cookie is never sent over plain HTTP.
        assert_eq!(
            report["cookie"],
            serde_json::json!({"secure": true, "httpOnly": true, "sameSite": "Strict"}),
            "{replica}: {report:#}"
        );
        assert_eq!(report["tryIt"]["status"], 200, "{replica}: {report:#}");
        assert_eq!(report["tryIt"]["outcome"], "ok", "{replica}: {report:#}");
        let text = report["tryIt"]["text"].as_str().unwrap_or("");
        assert!(text.contains(SUM_TEXT), "{replica}: {report:#}");
        assert_eq!(
            report["blocked"],
            serde_json::json!([]),
            "{replica}: {report:#}"
        );
    }

    // Without public_url, and with the balancer not among trusted_proxies: the page's https origin
    // is foreign to the replica. Its module scripts (fetched with an `Origin`) are refused, so no
    // form shows, and the login the form would POST is refused too.
    let report = dashboard(&chromium, untrusted);
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["login"]["shown"], false, "{report:#}");
    assert!(
        report["failedRequests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["status"] == 403 && r["path"].as_str().unwrap().starts_with("/ui/")),
        "{report:#}"
    );
    assert_eq!(report["login"]["status"], 403, "{report:#}");
    let refusal = format!("Origin `https://127.0.0.1:{untrusted}` is not allowed");
    assert!(
        report["login"]["error"]
            .as_str()
            .unwrap()
            .contains(&refusal),
        "{report:#}"
    );
    assert_eq!(report["login"]["loggedIn"], false, "{report:#}");
    assert_eq!(report["cookie"], Value::Null, "{report:#}");
    assert_eq!(report["tryIt"], Value::Null, "{report:#}");

    // Straight to B, forged headers from 127.0.0.1 (not trusted) make no origin its own.
    let b = &cluster.b().base;
    let page = format!("https://127.0.0.1:{to_b}");
    let forged = [
        ("origin", page.clone()),
        ("x-forwarded-proto", "https".to_string()),
        ("x-forwarded-host", format!("127.0.0.1:{to_b}")),
    ];
    let (status, error) = direct(b, Ipv4Addr::LOCALHOST, &forged).await;
    assert_eq!(status, 403, "{error}");
    assert!(
        error.contains(&format!("Origin `{page}` is not allowed")),
        "{error}"
    );
    let foreign = [
        ("origin", "https://evil.example".to_string()),
        ("x-forwarded-proto", "https".to_string()),
        ("x-forwarded-host", "evil.example".to_string()),
        ("forwarded", "proto=https;host=evil.example".to_string()),
    ];
    let (status, error) = direct(b, Ipv4Addr::LOCALHOST, &foreign).await;
    assert_eq!(status, 403, "{error}");
    assert!(
        error.contains("Origin `https://evil.example` is not allowed"),
        "{error}"
    );
    // From the trusted address the same headers count (the control), but a forwarded host the
    // door would refuse in `Host` is refused as well.
    let trusted = Ipv4Addr::new(127, 0, 0, 2);
    let (status, error) = direct(b, trusted, &forged).await;
    assert_eq!(status, 200, "{error}");
    let (status, error) = direct(b, trusted, &foreign).await;
    assert_eq!(status, 403, "{error}");
    assert!(
        error.contains("the balancer forwarded the host `evil.example`"),
        "{error}"
    );
    // A's public_url is its own origin only: another https page is foreign there too.
    let (status, error) = direct(
        &cluster.a().base,
        Ipv4Addr::LOCALHOST,
        &[("origin", format!("https://127.0.0.1:{untrusted}"))],
    )
    .await;
    assert_eq!(status, 403, "{error}");
    drop(balancer);
}
