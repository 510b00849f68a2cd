//! JSON-RPC dispatch on the MCP doors: `portico mcp`'s stdio session, Streamable HTTP `/mcp` and
//! the legacy `/sse` + `/message` transport.

use std::time::Duration;

use http::Method;
use http_body_util::BodyExt;
use portico_stdio_framing::{DualFramingTransport, FramingConfig};
use rmcp::ServiceExt;

use crate::door::{door, runtime};
use crate::framing::{ChunkedReader, Collect};
use crate::requests::{self, Memo};

/// Bound on one stdio session. A session whose input has ended but which still waits on the client
/// (a call asking for sampling or elicitation, say) is dropped here, as `portico mcp` exits at EOF.
const SESSION_WAIT: Duration = Duration::from_secs(1);

/// `data` is everything a client writes to `portico mcp`'s stdin (in either framing), then EOF.
pub fn mcp_stdio(data: &[u8]) {
    let door = door();
    runtime().block_on(async {
        let out = Collect::default();
        let transport = DualFramingTransport::new(
            ChunkedReader::whole(data),
            out.clone(),
            FramingConfig {
                max_message_bytes: door.config.server.max_message_bytes,
            },
        );
        // What `portico mcp` does: one server session over the transport until the input ends.
        let session = async {
            if let Ok(running) = door.server.for_session().serve(transport).await {
                let _ = running.waiting().await;
            }
        };
        let _ = tokio::time::timeout(SESSION_WAIT, session).await;
        if requests::trace() {
            eprintln!("stdio -> {}", String::from_utf8_lossy(&out.bytes()));
        }
    });
}

/// `data` is up to eight requests to `/mcp` (POST by default; GET and DELETE by request line). The
/// session id an `initialize` answer carries is sent with the requests after it, and the session is
/// deleted at the end, as a well-behaved client would.
pub fn mcp_http(data: &[u8]) {
    runtime().block_on(async {
        let mut memo = Memo::default();
        let mut sessions = Vec::new();
        for part in requests::split(data) {
            let mut req = requests::parse(part, Method::POST, "/mcp");
            if let Some(session) = &memo.session
                && !req.headers.iter().any(|(n, _)| n == "mcp-session-id")
            {
                req.headers
                    .push(("mcp-session-id".into(), session.clone().into_bytes()));
            }
            let Some(request) = requests::build(&req, &memo, "application/json, text/event-stream")
            else {
                continue;
            };
            let resp = requests::send(request).await;
            requests::check(&resp, "/mcp");
            let before = memo.session.clone();
            requests::remember(&resp, &mut memo);
            if memo.session != before
                && let Some(session) = &memo.session
            {
                sessions.push(session.clone());
            }
        }
        for session in sessions {
            let delete = requests::Req {
                method: Method::DELETE,
                path: "/mcp".into(),
                headers: vec![("mcp-session-id".into(), session.into_bytes())],
                body: Vec::new(),
            };
            if let Some(request) = requests::build(&delete, &Memo::default(), "application/json") {
                let _ = requests::send(request).await;
            }
        }
    });
}

/// `data` is up to eight messages POSTed to `/message` of a fresh legacy session (`GET /sse` first,
/// closed at the end); the session's SSE stream is read between posts so it never backs up.
pub fn legacy_message(data: &[u8]) {
    runtime().block_on(async {
        let open = requests::Req {
            method: Method::GET,
            path: "/sse".into(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        let Some(request) = requests::build(&open, &Memo::default(), "text/event-stream") else {
            return;
        };
        let response = {
            use tower::ServiceExt;
            door()
                .router
                .clone()
                .oneshot(request)
                .await
                .unwrap_or_else(|never| match never {})
        };
        assert_eq!(response.status(), 200, "GET /sse opens a session");
        let mut stream = response.into_body();
        let mut events = Vec::new();
        // The first event names the endpoint; it is sent before anything else happens.
        while !events.windows(2).any(|w| w == b"\n\n") {
            match stream.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        events.extend_from_slice(data);
                    }
                }
                _ => panic!("the legacy SSE stream ended before its endpoint event"),
            }
        }
        let text = String::from_utf8_lossy(&events).into_owned();
        let endpoint = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("the endpoint event has data")
            .to_string();
        let session = endpoint
            .split_once("sessionId=")
            .map(|(_, id)| id.to_string());
        let mut memo = Memo {
            session,
            ..Memo::default()
        };
        for part in requests::split(data) {
            let req = requests::parse(part, Method::POST, &endpoint);
            if let Some(request) = requests::build(&req, &memo, "application/json") {
                let resp = requests::send(request).await;
                requests::check(&resp, "/message");
                requests::remember(&resp, &mut memo);
            }
            events.clear();
            requests::drain_ready(&mut stream, &mut events).await;
        }
        drop(stream);
        // Let the session notice its stream is gone and end.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    });
}
