//! The binary's contract with scripts: the readiness line, loopback-only HTTP with Host checking,
//! a clean exit on SIGTERM, and stdio framing. The conformance suite itself runs from
//! `scripts/conformance --fixture`, which needs Node; these checks need nothing but the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_portico-conformance-fixture");
const READY_PREFIX: &str = "conformance-fixture: listening on ";

/// Kills the child if a test fails before stopping it itself.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn initialize_body() -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "binary-test", "version": "1"}
        }
    })
    .to_string()
}

/// One HTTP/1.1 POST with the given Host header; returns the raw response head and body.
fn post_initialize(port: u16, host: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = initialize_body();
    // One write: a server that rejects on the headers alone may close before a second write lands,
    // and the reset would then swallow its answer.
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // Read until the server closes (the SSE body of a successful initialize ends with the stream).
    // A reset after the answer still leaves the answer in `response`.
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(read @ 1..) = stream.read(&mut chunk) {
        response.extend_from_slice(&chunk[..read]);
    }
    String::from_utf8_lossy(&response).into_owned()
}

#[test]
fn http_mode_announces_itself_checks_host_and_stops_on_sigterm() {
    let mut child = Command::new(BIN)
        .args(["http", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut fixture = Guard(child);

    // Only the readiness line is read; the pipe is then closed on purpose, as a launcher that has
    // what it needs may do, and the fixture must keep answering (its later log lines are lost).
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .trim_end()
        .strip_prefix(READY_PREFIX)
        .unwrap_or_else(|| panic!("unexpected first stderr line: {line:?}"));
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("readiness line does not name a 127.0.0.1 URL: {url}"));

    let rebound = post_initialize(port, "evil.example.com");
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");

    let local = post_initialize(port, &format!("127.0.0.1:{port}"));
    assert!(local.starts_with("HTTP/1.1 200"), "{local}");
    assert!(
        local.to_ascii_lowercase().contains("mcp-session-id:"),
        "{local}"
    );
    assert!(local.contains("\"serverInfo\""), "{local}");

    let pid = fixture.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let status = fixture.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn stdio_mode_serves_newline_delimited_json_until_eof() {
    let child = Command::new(BIN)
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut fixture = Guard(child);
    let mut stdin = fixture.0.stdin.take().unwrap();
    let mut stdout = BufReader::new(fixture.0.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };

    writeln!(stdin, "{}", initialize_body()).unwrap();
    let initialized = next();
    assert_eq!(initialized["result"]["protocolVersion"], "2025-11-25");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    let listed = next();
    assert_eq!(listed["id"], 2);
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 28);

    drop(stdin);
    let status = fixture.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
