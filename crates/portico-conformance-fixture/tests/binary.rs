//! The binary's contract with scripts: the readiness line, loopback-only HTTP with Host checking,
//! a clean exit on SIGTERM, and stdio framing; and its 2026-07-28 behaviour over HTTP (input rounds,
//! sealed requestState, capability refusals, resultType). The conformance suite itself runs from
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
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 35);
    // rmcp strips the 2026-07-28 `resultType` for a handshake-era session.
    assert_eq!(listed["result"].get("resultType"), None, "{listed}");

    drop(stdin);
    let status = fixture.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// A running `http --port 0` fixture, stopped when dropped.
struct HttpFixture {
    _guard: Guard,
    url: String,
}

fn start_http_fixture() -> HttpFixture {
    let mut child = Command::new(BIN)
        .args(["http", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .trim_end()
        .strip_prefix(READY_PREFIX)
        .unwrap_or_else(|| panic!("unexpected first stderr line: {line:?}"))
        .to_owned();
    HttpFixture {
        _guard: Guard(child),
        url,
    }
}

/// What a 2026-07-28 request got: the HTTP status and the JSON-RPC response with its id.
struct Answer {
    status: u16,
    response: serde_json::Value,
}

/// One stateless 2026-07-28 request (its own `_meta`, the SEP-2243 headers), answered as JSON or SSE.
async fn post_2026(
    url: &str,
    id: u64,
    method: &str,
    mut params: serde_json::Value,
    capabilities: serde_json::Value,
) -> Answer {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "binary-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("Mcp-Name", name);
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let answer = request.json(&body).send().await.unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap();
    // An SSE body carries the response on a `data:` line (possibly after notifications).
    let response = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no response with id {id} in: {text}"));
    Answer { status, response }
}

fn everything() -> serde_json::Value {
    serde_json::json!({"sampling": {}, "elicitation": {}, "roots": {}})
}

#[tokio::test]
async fn a_2026_elicitation_is_an_input_round_that_completes_with_the_answer() {
    let fixture = start_http_fixture();
    let call =
        serde_json::json!({"name": "test_elicitation", "arguments": {"message": "Who are you?"}});
    let first = post_2026(&fixture.url, 1, "tools/call", call.clone(), everything()).await;
    assert_eq!(first.status, 200, "{}", first.response);
    assert_eq!(
        first.response["result"],
        serde_json::json!({
            "resultType": "input_required",
            "inputRequests": {"elicitation": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Who are you?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}
                        },
                        "required": ["username", "email"]
                    }
                }
            }}
        })
    );

    let mut answered = call;
    answered["inputResponses"] = serde_json::json!({"elicitation": {
        "action": "accept", "content": {"username": "ada", "email": "ada@example.com"}
    }});
    let second = post_2026(&fixture.url, 2, "tools/call", answered, everything()).await;
    assert_eq!(
        second.response["result"],
        serde_json::json!({
            "resultType": "complete",
            "content": [{
                "type": "text",
                "text": "User response: action=accept, content={\"username\":\"ada\",\"email\":\"ada@example.com\"}"
            }]
        })
    );
}

#[tokio::test]
async fn a_tampered_request_state_is_refused_and_the_genuine_one_completes() {
    let fixture = start_http_fixture();
    let name = "test_input_required_result_request_state";
    let call = serde_json::json!({"name": name, "arguments": {}});
    let first = post_2026(&fixture.url, 1, "tools/call", call.clone(), everything()).await;
    let result = &first.response["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    let state = result["requestState"].as_str().unwrap().to_owned();

    let mut answered = call;
    answered["inputResponses"] =
        serde_json::json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let mut tampered = answered.clone();
    tampered["requestState"] = serde_json::json!(format!("{state}-TAMPERED"));
    let refused = post_2026(&fixture.url, 2, "tools/call", tampered, everything()).await;
    assert_eq!(
        refused.response["error"]["code"], -32602,
        "{}",
        refused.response
    );
    assert!(refused.response.get("result").is_none());

    answered["requestState"] = serde_json::json!(state);
    let done = post_2026(&fixture.url, 3, "tools/call", answered, everything()).await;
    assert_eq!(done.response["result"]["resultType"], "complete");
    assert_eq!(
        done.response["result"]["content"][0]["text"],
        "state-ok: confirmation true arrived with a verified requestState"
    );
}

#[tokio::test]
async fn an_undeclared_capability_is_refused_with_32021_and_http_400() {
    let fixture = start_http_fixture();
    let call = serde_json::json!({"name": "test_missing_capability", "arguments": {}});
    let refused = post_2026(
        &fixture.url,
        1,
        "tools/call",
        call.clone(),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.response["error"]["code"], -32021);
    assert_eq!(
        refused.response["error"]["data"]["requiredCapabilities"],
        serde_json::json!({"sampling": {}})
    );
    let allowed = post_2026(&fixture.url, 2, "tools/call", call, everything()).await;
    assert_eq!(
        allowed.response["result"]["content"][0]["text"],
        "The client declared sampling"
    );
}

#[tokio::test]
async fn lists_carry_result_type_and_caching_hints_at_2026() {
    let fixture = start_http_fixture();
    let listed = post_2026(
        &fixture.url,
        1,
        "tools/list",
        serde_json::json!({}),
        everything(),
    )
    .await;
    let result = &listed.response["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(result["tools"].as_array().unwrap().len(), 35);
}

/// Reads SSE `data:` messages from a streaming response until `wanted` of them arrived.
async fn read_messages(
    response: &mut reqwest::Response,
    buffer: &mut String,
    wanted: usize,
) -> Vec<serde_json::Value> {
    let mut messages = Vec::new();
    while messages.len() < wanted {
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<serde_json::Value>(data.trim())
            {
                messages.push(message);
            }
        }
        if messages.len() >= wanted {
            break;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("the listen stream went quiet")
            .unwrap()
            .expect("the listen stream ended");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
    messages
}

#[tokio::test]
async fn a_listen_stream_is_acknowledged_and_gets_resource_updates_and_list_changes() {
    let fixture = start_http_fixture();
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
        "params": {
            "notifications": {
                "toolsListChanged": true,
                "resourceSubscriptions": ["test://watched-resource", "test://no-such-resource"]
            },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "binary-test", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let mut stream = reqwest::Client::new()
        .post(&fixture.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "subscriptions/listen")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let mut buffer = String::new();

    // The acknowledgement, then the one update for the resource the fixture has.
    let first = read_messages(&mut stream, &mut buffer, 2).await;
    assert_eq!(
        first[0]["method"], "notifications/subscriptions/acknowledged",
        "{first:?}"
    );
    assert_eq!(
        first[1]["method"], "notifications/resources/updated",
        "{first:?}"
    );
    assert_eq!(first[1]["params"]["uri"], "test://watched-resource");
    assert_eq!(
        first[1]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );

    // A trigger on another connection reaches this stream.
    let call = serde_json::json!({"name": "test_trigger_tool_change", "arguments": {}});
    let triggered = post_2026(&fixture.url, 8, "tools/call", call, serde_json::json!({})).await;
    assert_eq!(
        triggered.response["result"]["content"][0]["text"],
        "Announced a tool list change to 1 listen stream(s)"
    );
    let changed = read_messages(&mut stream, &mut buffer, 1).await;
    assert_eq!(
        changed[0]["method"], "notifications/tools/list_changed",
        "{changed:?}"
    );
    assert_eq!(
        changed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
}
