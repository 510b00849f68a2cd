//! Interop: the Python SDK's own OAuth client (`OAuthClientProvider`) against the real door, with a
//! small authorization server written for the tests (`tests/peers/python/oauth_issuer.py`: RFC 8414
//! metadata, JWKS, dynamic registration, a code straight back from /authorize, PKCE S256, RS256
//! JWTs for the requested `resource`). The SDK discovers everything from Portico's 401 and its
//! protected resource metadata.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::door::Door;
use crate::support::{python_peer, terminate, venv_python};

/// `oauth_issuer.py`, stopped on drop.
pub struct PythonIssuer {
    child: Child,
    pub url: String,
}

impl PythonIssuer {
    pub fn start(args: &[&str]) -> PythonIssuer {
        let mut child = Command::new(venv_python())
            .arg(python_peer("oauth_issuer.py"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start oauth_issuer.py");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            if let Some(line) = lines.next() {
                let _ = tx.send(line);
            }
            lines.for_each(drop);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("oauth_issuer.py printed no ISSUER line within 60s (test guard)");
        let url = line
            .strip_prefix("ISSUER ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .trim()
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        PythonIssuer { child, url }
    }
}

impl Drop for PythonIssuer {
    fn drop(&mut self) {
        terminate(&self.child);
        let _ = self.child.wait();
    }
}

/// Runs `oauth_client.py` and returns its JSON report; a failed run fails the test with its output.
fn oauth_client(args: &[&str]) -> Value {
    let output = Command::new(venv_python())
        .arg(python_peer("oauth_client.py"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "oauth_client.py failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdks_oauth_client_discovers_a_token_and_calls_through_the_door() {
    // The issuer has a path (RFC 8414's path-insertion rule on both sides) and grants only
    // `mcp:time`, though the client asks for every scope the challenge names.
    let issuer = PythonIssuer::start(&["--grant", "mcp:time", "--sub", "sdk-user"]);
    let door = Door::start(&issuer.url, "");
    let audience = door.audience.clone();
    let report = tokio::task::spawn_blocking(move || {
        oauth_client(&["--url", &audience, "--call", "time_now"])
    })
    .await
    .unwrap();
    assert_eq!(
        report["tools"],
        json!(["time_now", "time_zone"]),
        "{report}"
    );
    assert_eq!(
        report["call"],
        json!({"name": "time_now", "result": {
            "content": [{"type": "text", "text": "time_now called"}],
            "isError": false,
            // The SDK's model default for a result without one.
            "resultType": "complete",
        }}),
        "{report}"
    );
    assert_eq!(report["token_scope"], "mcp:time", "{report}");
    // How the SDK got there: Portico's 401, the metadata URL its challenge named, the issuer's
    // metadata at the path-inserted URL, registration, the token (the authorization request went
    // through the test's redirect handler), then the retried request.
    let exchanges: Vec<&str> = report["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        exchanges[..6],
        [
            "POST /mcp 401",
            "GET /.well-known/oauth-protected-resource/mcp 200",
            "GET /.well-known/oauth-authorization-server/tenant 200",
            "POST /tenant/register 201",
            "POST /tenant/token 200",
            "POST /mcp 200",
        ],
        "{report}"
    );
    assert!(
        !exchanges
            .iter()
            .any(|e| e.ends_with(" 401") && e != &exchanges[0]),
        "one 401 only: {exchanges:?}"
    );
}
