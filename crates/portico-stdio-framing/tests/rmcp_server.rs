//! A real rmcp server over [`DualFramingTransport`], driven byte by byte
//! through in-memory pipes playing the MCP client.

use std::time::Duration;

use portico_stdio_framing::{DualFramingTransport, FramingConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

/// Safety net against hangs; never used to wait for something to happen.
const TIMEOUT: Duration = Duration::from_secs(30);
const MIB: usize = 1024 * 1024;

/// One tool, `echo`, returning its `text` argument; and `notify`, which
/// sends a server-initiated notification before answering.
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Returns its text.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match request.name.as_ref() {
            "echo" => {}
            "notify" => context
                .peer
                .notify_tool_list_changed()
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Frame {
    Newline(String),
    ContentLength(String),
}

impl Frame {
    fn json(&self) -> Value {
        let (Self::Newline(body) | Self::ContentLength(body)) = self;
        serde_json::from_str(body).expect("server wrote invalid JSON")
    }
}

fn nl(message: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap();
    bytes.push(b'\n');
    bytes
}

fn cl(message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap();
    let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    bytes.extend(body);
    bytes
}

fn ping(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

fn pong(id: i64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
}

fn echo(id: i64, text: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    })
}

fn error_reply(id: Option<i64>, code: i32, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

fn assert_error(frame: &Frame, id: Option<i64>, code: i32, message_starts: &str) {
    let value = frame.json();
    assert_eq!(value["id"], json!(id), "{frame:?}");
    assert_eq!(value["error"]["code"], json!(code), "{frame:?}");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(message_starts), "{frame:?}");
    assert_eq!(
        value.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["jsonrpc", "id", "error"]
    );
}

struct Client {
    input: Option<DuplexStream>,
    output: BufReader<DuplexStream>,
    server: JoinHandle<()>,
}

impl Client {
    fn start() -> Self {
        Self::start_with(FramingConfig::default())
    }

    fn start_with(config: FramingConfig) -> Self {
        let (input, server_input) = tokio::io::duplex(64 * 1024);
        let (server_output, output) = tokio::io::duplex(64 * 1024);
        let transport = DualFramingTransport::new(server_input, server_output, config);
        let server = tokio::spawn(async move {
            if let Ok(running) = Echo.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        Self {
            input: Some(input),
            output: BufReader::new(output),
            server,
        }
    }

    async fn write(&mut self, bytes: impl AsRef<[u8]>) {
        let input = self.input.as_mut().expect("input closed");
        tokio::time::timeout(TIMEOUT, async {
            input.write_all(bytes.as_ref()).await.unwrap();
            input.flush().await.unwrap();
        })
        .await
        .expect("write timed out");
    }

    /// Read exactly one frame, checking its framing bytes strictly.
    async fn read(&mut self) -> Frame {
        tokio::time::timeout(TIMEOUT, self.read_inner())
            .await
            .expect("timed out waiting for a frame")
    }

    async fn read_inner(&mut self) -> Frame {
        let mut line = Vec::new();
        self.output.read_until(b'\n', &mut line).await.unwrap();
        assert!(line.ends_with(b"\n"), "stream ended mid-frame: {line:?}");
        let text = String::from_utf8(line).unwrap();
        if let Some(rest) = text.strip_prefix("Content-Length: ") {
            let len: usize = rest.strip_suffix("\r\n").unwrap().parse().unwrap();
            let mut blank = Vec::new();
            self.output.read_until(b'\n', &mut blank).await.unwrap();
            assert_eq!(blank, b"\r\n");
            let mut body = vec![0; len];
            self.output.read_exact(&mut body).await.unwrap();
            Frame::ContentLength(String::from_utf8(body).unwrap())
        } else {
            let body = text.strip_suffix('\n').unwrap();
            assert!(!body.ends_with('\r'), "newline frames end in a bare \\n");
            Frame::Newline(body.to_owned())
        }
    }

    async fn initialize(&mut self, content_length: bool) -> Frame {
        let request = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "framing-test", "version": "0.0.0"},
            },
        });
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        if content_length {
            self.write(cl(&request)).await;
        } else {
            self.write(nl(&request)).await;
        }
        let response = self.read().await;
        if content_length {
            self.write(cl(&initialized)).await;
        } else {
            self.write(nl(&initialized)).await;
        }
        response
    }

    /// Close the client's side; the server must then end its output without
    /// writing anything more.
    async fn finish(mut self) {
        self.input = None;
        let mut rest = Vec::new();
        tokio::time::timeout(TIMEOUT, self.output.read_to_end(&mut rest))
            .await
            .expect("server did not close its output")
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&rest), "", "unexpected output");
        tokio::time::timeout(TIMEOUT, self.server)
            .await
            .expect("server did not stop")
            .unwrap();
    }
}

#[tokio::test]
async fn initialize_over_newline_framing() {
    let mut client = Client::start();
    let Frame::Newline(body) = client.initialize(false).await else {
        panic!("initialize answered in the wrong framing")
    };
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["id"], 0);
    assert_eq!(response["result"]["protocolVersion"], "2025-06-18");
    assert!(response["result"]["capabilities"]["tools"].is_object());
    client.write(nl(&ping(1))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(1)));
    client.finish().await;
}

#[tokio::test]
async fn initialize_over_content_length_framing() {
    let mut client = Client::start();
    let Frame::ContentLength(body) = client.initialize(true).await else {
        panic!("initialize answered in the wrong framing")
    };
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["id"], 0);
    assert_eq!(response["result"]["protocolVersion"], "2025-06-18");
    client
        .write(cl(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ))
        .await;
    let Frame::ContentLength(body) = client.read().await else {
        panic!("tools/list answered in the wrong framing")
    };
    let tools: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(tools["result"]["tools"][0]["name"], "echo");
    client.finish().await;
}

#[tokio::test]
async fn ping_works_before_and_after_initialize() {
    let mut client = Client::start();
    client.write(nl(&ping(7))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(7)));
    client.write(cl(&ping(8))).await;
    assert_eq!(client.read().await, Frame::ContentLength(pong(8)));
    client.initialize(false).await;
    client.write(nl(&ping(9))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(9)));
    client.finish().await;
}

#[tokio::test]
async fn newline_request_gets_newline_response() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(nl(&echo(1, "héllo → 😀"))).await;
    let frame = client.read().await;
    let Frame::Newline(_) = &frame else {
        panic!("{frame:?}")
    };
    assert_eq!(frame.json()["result"]["content"][0]["text"], "héllo → 😀");
    client.finish().await;
}

#[tokio::test]
async fn content_length_response_counts_bytes_not_chars() {
    let mut client = Client::start();
    client.initialize(true).await;
    let text = "ünïcödé → 😀 ✓";
    assert_ne!(text.len(), text.chars().count());
    client.write(cl(&echo(2, text))).await;

    // Read the raw bytes: the header must announce the body's byte length.
    let mut header = String::new();
    client.output.read_line(&mut header).await.unwrap();
    let mut blank = String::new();
    client.output.read_line(&mut blank).await.unwrap();
    assert_eq!(blank, "\r\n");
    let len: usize = header
        .strip_prefix("Content-Length: ")
        .and_then(|rest| rest.strip_suffix("\r\n"))
        .unwrap()
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    client.output.read_exact(&mut body).await.unwrap();
    let body = String::from_utf8(body).unwrap();
    assert!(body.chars().count() < len);
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["id"], 2);
    assert_eq!(response["result"]["content"][0]["text"], text);
    client.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_switches_between_messages() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(cl(&ping(1))).await;
    assert_eq!(client.read().await, Frame::ContentLength(pong(1)));
    client.write(nl(&ping(2))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(2)));
    // Several at once, alternating, in one write: each answered in its own
    // framing, whatever order rmcp finishes them in.
    let mut batch = Vec::new();
    for id in 10..20 {
        batch.extend(if id % 2 == 0 {
            cl(&ping(id))
        } else {
            nl(&ping(id))
        });
    }
    client.write(batch).await;
    let mut seen = Vec::new();
    for _ in 10..20 {
        let frame = client.read().await;
        let id = frame.json()["id"].as_i64().unwrap();
        let expected = if id % 2 == 0 {
            Frame::ContentLength(pong(id))
        } else {
            Frame::Newline(pong(id))
        };
        assert_eq!(frame, expected);
        seen.push(id);
    }
    seen.sort_unstable();
    assert_eq!(seen, (10..20).collect::<Vec<_>>());
    client.finish().await;
}

#[tokio::test]
async fn content_length_message_split_across_tiny_writes() {
    let mut client = Client::start();
    client.initialize(true).await;
    let message = cl(&echo(3, "split → ✂"));
    for piece in message.chunks(3) {
        client.write(piece).await;
    }
    let frame = client.read().await;
    assert!(matches!(frame, Frame::ContentLength(_)), "{frame:?}");
    assert_eq!(frame.json()["result"]["content"][0]["text"], "split → ✂");
    // Byte by byte, newline framing too.
    for byte in nl(&ping(4)) {
        client.write([byte]).await;
    }
    assert_eq!(client.read().await, Frame::Newline(pong(4)));
    client.finish().await;
}

#[tokio::test]
async fn extra_headers_and_lowercase_content_length() {
    let mut client = Client::start();
    client.initialize(false).await;
    let body = serde_json::to_string(&ping(5)).unwrap();
    client
        .write(format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))
        .await;
    assert_eq!(client.read().await, Frame::ContentLength(pong(5)));
    client
        .write(format!(
            "CONTENT-LENGTH:{}\nContent-Type: application/json\n\n{body}",
            body.len()
        ))
        .await;
    assert_eq!(client.read().await, Frame::ContentLength(pong(5)));
    client.finish().await;
}

/// An 11 MiB `tools/call` whose id is near the start.
fn huge_call(id: i64) -> Value {
    echo(id, &"a".repeat(11 * MIB))
}

fn too_large(size: usize) -> String {
    format!(
        "Invalid Request: message of {size} bytes exceeds the maximum message size of {} bytes \
         and was discarded",
        10 * MIB
    )
}

#[tokio::test]
async fn oversized_newline_message_is_drained_and_answered() {
    let mut client = Client::start();
    client.initialize(false).await;
    let message = nl(&huge_call(6));
    let size = message.len() - 1;
    // The server only answers once the whole line is drained, so write and
    // read concurrently through the 64 KiB pipe.
    let input = client.input.as_mut().unwrap();
    let output = &mut client.output;
    let (written, frame) = tokio::join!(
        async {
            input.write_all(&message).await.unwrap();
            input.write_all(&nl(&ping(7))).await.unwrap();
        },
        async {
            let mut line = String::new();
            output.read_line(&mut line).await.unwrap();
            line
        }
    );
    let () = written;
    assert_eq!(
        frame,
        format!("{}\n", error_reply(Some(6), -32600, &too_large(size)))
    );
    assert_eq!(client.read().await, Frame::Newline(pong(7)));
    client.finish().await;
}

#[tokio::test]
async fn oversized_content_length_message_is_drained_and_answered() {
    let mut client = Client::start();
    client.initialize(true).await;
    let message = cl(&huge_call(8));
    let size = serde_json::to_vec(&huge_call(8)).unwrap().len();
    let mut next = cl(&ping(9));
    next.extend(nl(&ping(10)));
    let input = client.input.as_mut().unwrap();
    let output = &mut client.output;
    let (frames, ()) = tokio::join!(
        async {
            let refused = client_read_split(output).await;
            (refused, client_read_split(output).await)
        },
        async {
            input.write_all(&message).await.unwrap();
            input.write_all(&next).await.unwrap();
        }
    );
    // Refused when its header block ends, then again with its id once its body is drained.
    assert_eq!(
        frames,
        (
            Frame::ContentLength(error_reply(None, -32600, &too_large(size))),
            Frame::ContentLength(error_reply(Some(8), -32600, &too_large(size)))
        )
    );
    // The bytes right after the drained body are read as the next messages.
    assert_eq!(client.read().await, Frame::ContentLength(pong(9)));
    assert_eq!(client.read().await, Frame::Newline(pong(10)));
    client.finish().await;
}

/// `Client::read` on just the output half, for use beside a borrowed input.
async fn client_read_split(output: &mut BufReader<DuplexStream>) -> Frame {
    let mut header = String::new();
    output.read_line(&mut header).await.unwrap();
    let len: usize = header
        .strip_prefix("Content-Length: ")
        .and_then(|rest| rest.strip_suffix("\r\n"))
        .expect("a Content-Length frame")
        .parse()
        .unwrap();
    let mut blank = String::new();
    output.read_line(&mut blank).await.unwrap();
    assert_eq!(blank, "\r\n");
    let mut body = vec![0; len];
    output.read_exact(&mut body).await.unwrap();
    Frame::ContentLength(String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn large_content_length_declared_then_body_streamed() {
    let mut client = Client::start();
    client.initialize(false).await;
    // Declare 11 MiB up front, then stream the body in pieces; every write
    // completing through the 64 KiB pipe shows the server drains as it goes.
    let size = 11 * MIB;
    client
        .write(format!("Content-Length: {size}\r\n\r\n"))
        .await;
    assert_eq!(
        client.read().await,
        Frame::ContentLength(error_reply(None, -32600, &too_large(size))),
        "refused before the body comes"
    );
    let head = br#"{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"x":""#;
    client.write(head).await;
    let tail = b"\"}}";
    let filler = vec![b'z'; 256 * 1024];
    let mut remaining = size - head.len() - tail.len();
    while remaining > 0 {
        let n = remaining.min(filler.len());
        client.write(&filler[..n]).await;
        remaining -= n;
    }
    client.write(tail).await;
    client.write(nl(&ping(11))).await;
    let frame = client.read().await;
    let expected = json!({
        "jsonrpc": "2.0", "id": "big",
        "error": {"code": -32600, "message": too_large(size)},
    });
    assert_eq!(frame, Frame::ContentLength(expected.to_string()));
    assert_eq!(client.read().await, Frame::Newline(pong(11)));
    client.finish().await;
}

#[tokio::test]
async fn smaller_configured_cap() {
    let mut client = Client::start_with(FramingConfig {
        max_message_bytes: 1024,
    });
    client.initialize(false).await;
    client.write(nl(&echo(1, &"b".repeat(2000)))).await;
    let frame = client.read().await;
    assert!(matches!(frame, Frame::Newline(_)));
    assert_error(&frame, Some(1), -32600, "Invalid Request: message of ");
    assert!(
        frame.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum message size of 1024 bytes")
    );
    client.write(nl(&echo(2, "fits"))).await;
    assert_eq!(
        client.read().await.json()["result"]["content"][0]["text"],
        "fits"
    );
    client.finish().await;
}

#[tokio::test]
async fn invalid_json_gets_parse_error_with_null_id() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(b"{this is not json}\n").await;
    let frame = client.read().await;
    assert!(matches!(frame, Frame::Newline(_)), "{frame:?}");
    assert_error(&frame, None, -32700, "Parse error");
    assert!(frame.json().as_object().unwrap().contains_key("id"));
    client.write(b"Content-Length: 5\r\n\r\nnope!").await;
    let frame = client.read().await;
    assert!(matches!(frame, Frame::ContentLength(_)), "{frame:?}");
    assert_error(&frame, None, -32700, "Parse error");
    client.write(nl(&ping(1))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(1)));
    client.finish().await;
}

#[tokio::test]
async fn binary_garbage_gets_parse_error() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(b"\x00\x01\xfe\xff\x80garbage\x7f\n").await;
    assert_error(&client.read().await, None, -32700, "Parse error");
    // Invalid UTF-8 inside otherwise well-formed JSON.
    client
        .write(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"p\xffing\"}\n")
        .await;
    assert_error(&client.read().await, None, -32700, "Parse error");
    client.write(nl(&ping(3))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(3)));
    client.finish().await;
}

#[tokio::test]
async fn truncated_json_then_valid_request() {
    let mut client = Client::start();
    client.initialize(false).await;
    let mut bytes = br#"{"jsonrpc":"2.0","id":4,"method":"to"#.to_vec();
    bytes.push(b'\n');
    bytes.extend(nl(&echo(5, "after")));
    client.write(bytes).await;
    assert_error(&client.read().await, None, -32700, "Parse error");
    let frame = client.read().await;
    assert_eq!(frame.json()["id"], 5);
    assert_eq!(frame.json()["result"]["content"][0]["text"], "after");
    client.finish().await;
}

#[tokio::test]
async fn valid_json_that_is_not_a_request_gets_invalid_request() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(b"42\n").await;
    assert_error(&client.read().await, None, -32600, "Invalid Request");
    client.write(cl(&json!({"foo": 1}))).await;
    let frame = client.read().await;
    assert!(matches!(frame, Frame::ContentLength(_)));
    assert_error(&frame, None, -32600, "Invalid Request");
    client.write(nl(&json!({"jsonrpc": "2.0", "id": 12}))).await;
    assert_error(&client.read().await, Some(12), -32600, "Invalid Request");
    client.write(b"\"just a string\"\n").await;
    assert_error(&client.read().await, None, -32600, "Invalid Request");
    client.write(nl(&ping(13))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(13)));
    client.finish().await;
}

#[tokio::test]
async fn batches_are_rejected() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(nl(&json!([ping(1), ping(2)]))).await;
    assert_eq!(
        client.read().await,
        Frame::Newline(error_reply(
            None,
            -32600,
            "Invalid Request: JSON-RPC batches are not supported (MCP removed them in \
             2025-06-18); send each message on its own"
        ))
    );
    client.write(nl(&ping(3))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(3)));
    client.finish().await;
}

#[tokio::test]
async fn unknown_method_gets_method_not_found() {
    let mut client = Client::start();
    client.initialize(true).await;
    client
        .write(cl(
            &json!({"jsonrpc": "2.0", "id": 14, "method": "no/such/method"}),
        ))
        .await;
    let frame = client.read().await;
    assert!(matches!(frame, Frame::ContentLength(_)), "{frame:?}");
    let value = frame.json();
    assert_eq!(value["id"], 14);
    assert_eq!(value["error"]["code"], -32601);
    client.finish().await;
}

#[tokio::test]
async fn notifications_get_no_response() {
    let mut client = Client::start();
    client.initialize(false).await;
    let mut bytes = Vec::new();
    for method in [
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/made_up",
        "$/cancelRequest",
    ] {
        bytes.extend(nl(&json!({"jsonrpc": "2.0", "method": method})));
        bytes.extend(cl(
            &json!({"jsonrpc": "2.0", "method": method, "params": {"id": 1}}),
        ));
    }
    bytes.extend(nl(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}),
    ));
    // Not even a valid notification shape, but still a notification.
    bytes.extend(nl(
        &json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": 5}),
    ));
    bytes.extend(nl(&ping(15)));
    client.write(bytes).await;
    // The very next thing written is the ping's response.
    assert_eq!(client.read().await, Frame::Newline(pong(15)));
    client.finish().await;
}

#[tokio::test]
async fn malformed_content_length_headers_resynchronise() {
    let mut client = Client::start();
    client.initialize(false).await;
    let body = serde_json::to_string(&ping(16)).unwrap();
    for (header, reason) in [
        (
            "Content-Length: twelve",
            "invalid Content-Length value \\\"twelve\\\"",
        ),
        (
            "Content-Length: -3",
            "invalid Content-Length value \\\"-3\\\"",
        ),
        (
            "Content-Type: application/json",
            "missing Content-Length header",
        ),
    ] {
        client
            .write(format!(
                "{header}\r\n\r\n{body}{}",
                String::from_utf8(cl(&ping(17))).unwrap()
            ))
            .await;
        // The orphaned body is skipped and its id recovered for the reply.
        assert_eq!(
            client.read().await,
            Frame::ContentLength(format!(
                r#"{{"jsonrpc":"2.0","id":16,"error":{{"code":-32600,"message":"Invalid Request: malformed Content-Length header ({reason}); message discarded"}}}}"#
            )),
            "{header}"
        );
        assert_eq!(client.read().await, Frame::ContentLength(pong(17)));
    }
    // A body sent without the blank line ends the header block.
    client
        .write(format!("Content-Length: {}\r\n{body}\n", body.len()))
        .await;
    assert_error(
        &client.read().await,
        None,
        -32600,
        "Invalid Request: malformed Content-Length header (malformed header name ",
    );
    client.write(nl(&ping(18))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(18)));
    client.finish().await;
}

#[tokio::test]
async fn server_notifications_follow_the_latest_framing() {
    let mut client = Client::start();
    client.initialize(false).await;
    let notify = |id: i64| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "notify", "arguments": {"text": "done"}},
        })
    };
    for (id, content_length) in [(1, true), (2, false), (3, true)] {
        client
            .write(if content_length {
                cl(&notify(id))
            } else {
                nl(&notify(id))
            })
            .await;
        let notification = client.read().await;
        let response = client.read().await;
        assert_eq!(
            notification.json()["method"],
            "notifications/tools/list_changed"
        );
        assert_eq!(response.json()["id"], id);
        assert_eq!(
            matches!(notification, Frame::ContentLength(_)),
            content_length
        );
        assert_eq!(matches!(response, Frame::ContentLength(_)), content_length);
    }
    client.finish().await;
}

#[tokio::test]
async fn eof_mid_content_length_message() {
    let mut client = Client::start();
    client.initialize(false).await;
    client
        .write(b"Content-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"pi")
        .await;
    client.input = None;
    let frame = client.read().await;
    assert_eq!(
        frame,
        Frame::ContentLength(error_reply(
            Some(19),
            -32700,
            "Parse error: input ended in the middle of a message, after 37 of 100 body bytes"
        ))
    );
    client.finish().await;
}

#[tokio::test]
async fn eof_mid_header_block() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(b"Content-Length: 100\r\nContent-Ty").await;
    client.input = None;
    assert_eq!(
        client.read().await,
        Frame::ContentLength(error_reply(
            None,
            -32700,
            "Parse error: input ended in the middle of a message, inside a Content-Length \
             header block"
        ))
    );
    client.finish().await;
}

#[tokio::test]
async fn eof_mid_newline_message() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(br#"{"jsonrpc":"2.0","id":20,"meth"#).await;
    client.input = None;
    assert_error(&client.read().await, None, -32700, "Parse error");
    client.finish().await;
}

#[tokio::test]
async fn unterminated_last_line_is_still_answered() {
    let mut client = Client::start();
    client.initialize(false).await;
    client.write(serde_json::to_vec(&ping(21)).unwrap()).await;
    client.input = None;
    assert_eq!(client.read().await, Frame::Newline(pong(21)));
    client.finish().await;
}

#[tokio::test]
async fn eof_before_initialize_ends_quietly() {
    let client = Client::start();
    client.finish().await;
}

/// `Content-Length: 2^63` was drained byte by byte: forever, so every later message was swallowed;
/// then the refusal waited for the next message and took it for the body. It is refused as soon as
/// its header block ends, and the messages after it are answered.
#[tokio::test]
async fn lying_content_length_is_refused_and_later_messages_are_answered() {
    let mut client = Client::start();
    client.initialize(false).await;
    let size: u64 = 9_223_372_036_854_775_808;
    client
        .write(format!("Content-Length: {size}\r\n\r\n"))
        .await;
    let expected = format!(
        "Invalid Request: message of {size} bytes exceeds the maximum message size of {} bytes \
         and was discarded",
        10 * MIB
    );
    assert_eq!(
        client.read().await,
        Frame::ContentLength(error_reply(None, -32600, &expected)),
        "refused before any more input"
    );
    client.write(nl(&ping(21))).await;
    client.write(nl(&ping(22))).await;
    assert_eq!(client.read().await, Frame::Newline(pong(21)));
    assert_eq!(client.read().await, Frame::Newline(pong(22)));
    // With nothing JSON after it, the refusal comes before any more input.
    client
        .write(format!("Content-Length: {size}\r\n\r\n"))
        .await;
    client.write(b"Content-Length: 2\r\n").await;
    assert_eq!(
        client.read().await,
        Frame::ContentLength(error_reply(None, -32600, &expected))
    );
    client.write(b"\r\n{}").await;
    client.write(nl(&ping(23))).await;
    assert_error(&client.read().await, None, -32600, "Invalid Request: ");
    assert_eq!(client.read().await, Frame::Newline(pong(23)));
    client.finish().await;
}

/// A header block over 8 KiB was refused at the line that crossed the limit, and its remaining header
/// lines and its body were then read as messages of their own (the body's request was run).
#[tokio::test]
async fn over_long_header_block_is_discarded_with_its_body() {
    let mut client = Client::start();
    client.initialize(false).await;
    let body = serde_json::to_vec(&ping(24)).unwrap();
    client
        .write(format!(
            "Content-Length: {}\r\nX-Pad: {}\r\nX-After: 1\r\n\r\n",
            body.len(),
            "p".repeat(9 * 1024)
        ))
        .await;
    client.write(&body).await;
    client.write(nl(&ping(25))).await;
    assert_eq!(
        client.read().await,
        Frame::ContentLength(error_reply(
            Some(24),
            -32600,
            "Invalid Request: malformed Content-Length header (header block exceeds 8192 bytes); \
             message discarded"
        ))
    );
    assert_eq!(client.read().await, Frame::Newline(pong(25)));
    client.finish().await;
}
