//! Resource subscriptions are bounded per session and per upstream session, and what a session or a
//! listen stream holds upstream is given back when it ends. The conformance fixture is Portico's one
//! unprefixed upstream over stdio (a 2026-07-28 session, so each subscribed URI is one of its 256
//! `subscriptions/listen` streams); its `test://template/{id}/data` template gives as many URIs as
//! a test needs.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::bounds::{HttpSession, http};
use crate::client::*;

/// Update streams one upstream session may have (`portico_mcp`'s `MAX_RESOURCE_STREAMS`).
const UPSTREAM_STREAMS: usize = 256;
const PER_SESSION: usize = portico_mcp_server::MAX_SUBSCRIPTIONS_PER_SESSION;

fn start() -> (Home, Daemon) {
    let entry =
        crate::support::stdio_entry("fixture", &crate::tasks::fixture_bin(), &["stdio"], "");
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nrate_limit = {{ enabled = false }}\n\n[expose]\nprefix = false\n\n{entry}"
    ));
    let daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    (home, daemon)
}

fn uri(owner: &str, n: usize) -> String {
    format!("test://template/{owner}-{n}/data")
}

async fn subscribe(session: &mut HttpSession, uri: &str) -> Value {
    session
        .request("resources/subscribe", json!({ "uri": uri }))
        .await
}

/// Subscribes `session` to `count` URIs of `owner`, each taken upstream.
async fn fill(session: &mut HttpSession, owner: &str, count: usize) {
    for n in 0..count {
        let answer = subscribe(session, &uri(owner, n)).await;
        assert_eq!(answer["result"], json!({}), "{owner} #{n}: {answer}");
    }
}

/// Asserts that the upstream session has all its streams: a fresh URI is refused there.
fn assert_upstream_full(answer: &Value) {
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "Portico already follows {UPSTREAM_STREAMS} resources of this server"
        )),
        "{answer}"
    );
}

/// Subscribes `session` to `uri` until the upstream takes it: a place is given back by the end of
/// a session or a stream, which the door sees after its client has gone.
async fn subscribe_once_free(session: &mut HttpSession, uri: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = subscribe(session, uri).await;
        if answer["result"] == json!({}) {
            return;
        }
        assert_upstream_full(&answer);
        assert!(
            Instant::now() < deadline,
            "no place was given back upstream: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A session holds at most `MAX_SUBSCRIPTIONS_PER_SESSION` URIs; past that it is told the bound and
/// what to do, and nothing is asked of the upstream. Subscribing again to a held URI costs nothing,
/// and an unsubscribe makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_subscribed_to_at_most_its_bound_of_resources() {
    let (_home, mut daemon) = start();
    let mut session = HttpSession::open(&daemon.base, &[]).await.unwrap();
    fill(&mut session, "a", PER_SESSION).await;
    let again = subscribe(&mut session, &uri("a", 0)).await;
    assert_eq!(again["result"], json!({}), "{again}");

    let refused = subscribe(&mut session, &uri("a", PER_SESSION)).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        format!(
            "this session is subscribed to {PER_SESSION} resources, the most one session may be (Portico's MAX_SUBSCRIPTIONS_PER_SESSION); unsubscribe from one (resources/unsubscribe) before subscribing to `{}`",
            uri("a", PER_SESSION)
        ),
        "{refused}"
    );
    // Another session has its own bound.
    let mut other = HttpSession::open(&daemon.base, &[]).await.unwrap();
    let answer = subscribe(&mut other, &uri("b", 0)).await;
    assert_eq!(answer["result"], json!({}), "{answer}");

    let left = session
        .request("resources/unsubscribe", json!({ "uri": uri("a", 3) }))
        .await;
    assert_eq!(left["result"], json!({}), "{left}");
    let taken = subscribe(&mut session, &uri("a", PER_SESSION)).await;
    assert_eq!(taken["result"], json!({}), "{taken}");
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}

/// Regression test: a handshake-era session's subscriptions were never given back upstream when
/// the session ended, so ended sessions held the upstream session's 256 streams for good. Eight
/// sessions fill them; once one is deleted, its 32 are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_gives_its_upstream_streams_back() {
    let (_home, mut daemon) = start();
    let mut sessions = Vec::new();
    for s in 0..UPSTREAM_STREAMS / PER_SESSION {
        let mut session = HttpSession::open(&daemon.base, &[]).await.unwrap();
        fill(&mut session, &format!("s{s}"), PER_SESSION).await;
        sessions.push(session);
    }
    let mut late = HttpSession::open(&daemon.base, &[]).await.unwrap();
    assert_upstream_full(&subscribe(&mut late, &uri("late", 0)).await);

    let deleted = sessions.remove(0);
    let mut delete = http().delete(format!("{}/mcp", daemon.base));
    for (k, v) in deleted.session_headers() {
        delete = delete.header(k, v);
    }
    assert_eq!(delete.send().await.unwrap().status(), 202);
    subscribe_once_free(&mut late, &uri("late", 0)).await;
    // All 32 places came back, not one.
    fill(&mut late, "late", PER_SESSION).await;
    let mut probe = HttpSession::open(&daemon.base, &[]).await.unwrap();
    assert_upstream_full(&subscribe(&mut probe, &uri("probe", 0)).await);
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}

/// The same over the legacy HTTP+SSE door: a 2024-11-05 session's subscriptions are given back
/// when its client closes the event stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_sse_session_gives_its_upstream_streams_back_when_its_client_goes() {
    use crate::legacy_sse::{SseStream, send};

    let (_home, mut daemon) = start();
    let base = daemon.base.clone();
    let mut stream = SseStream::new(SseStream::open(&base, &[]).await);
    let endpoint = stream.endpoint().await;
    send(&base, &endpoint, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "bounds", "version": "1"}}}))
    .await;
    assert_eq!(
        stream.response_to(0).await["result"]["serverInfo"]["name"],
        "portico"
    );
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    for n in 0..PER_SESSION {
        let id = n as u64 + 1;
        send(
            &base,
            &endpoint,
            json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe",
            "params": {"uri": uri("sse", n)}}),
        )
        .await;
        let answer = stream.response_to(id).await;
        assert_eq!(answer["result"], json!({}), "#{n}: {answer}");
    }
    let mut sessions = Vec::new();
    for s in 1..UPSTREAM_STREAMS / PER_SESSION {
        let mut session = HttpSession::open(&base, &[]).await.unwrap();
        fill(&mut session, &format!("s{s}"), PER_SESSION).await;
        sessions.push(session);
    }
    let mut late = HttpSession::open(&base, &[]).await.unwrap();
    assert_upstream_full(&subscribe(&mut late, &uri("late", 0)).await);

    drop(stream);
    subscribe_once_free(&mut late, &uri("late", 0)).await;
    fill(&mut late, "late", PER_SESSION).await;
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}

/// A 2026-07-28 listen stream naming `uris`, read until an update of each has arrived (the fixture
/// sends one per URI as its stream opens, so each arrived update is an upstream stream held).
async fn listen(base: &str, uris: &[String]) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"resourceSubscriptions": uris},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    http()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Reads `stream` until it has carried an update of every one of `uris`; gives the rest back.
async fn updates_of_all(
    stream: reqwest::Response,
    uris: &[String],
) -> impl futures::Stream + use<> {
    assert_eq!(stream.status(), 200);
    let mut events = stream.bytes_stream();
    let mut seen = String::new();
    let mut missing: std::collections::BTreeSet<String> = uris.iter().cloned().collect();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !missing.is_empty() {
            let chunk = events
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended: {seen}"))
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = seen.find('\n') {
                let line: String = seen.drain(..=end).collect();
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let Ok(message) = serde_json::from_str::<Value>(data.trim()) else {
                    continue;
                };
                if message["method"] == "notifications/resources/updated" {
                    missing.remove(message["params"]["uri"].as_str().unwrap_or_default());
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no update of {missing:?}: {seen}"));
    events
}

/// A listen stream follows at most `MAX_SUBSCRIPTIONS_PER_SESSION` resources, and gives back what
/// it followed when its client hangs up: eight streams fill the upstream session's 256, a
/// handshake-era session is then refused, and it is served once one stream's client has gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_whose_client_hangs_up_gives_its_upstream_streams_back() {
    let (_home, mut daemon) = start();
    // Asked for one more than its bound: the acknowledgment honours the first 32.
    let asked: Vec<String> = (0..=PER_SESSION).map(|n| uri("l0", n)).collect();
    let first = listen(&daemon.base, &asked).await;
    let mut streams = vec![updates_of_all(first, &asked[..PER_SESSION]).await];
    for s in 1..UPSTREAM_STREAMS / PER_SESSION {
        let uris: Vec<String> = (0..PER_SESSION).map(|n| uri(&format!("l{s}"), n)).collect();
        streams.push(updates_of_all(listen(&daemon.base, &uris).await, &uris).await);
    }
    let mut session = HttpSession::open(&daemon.base, &[]).await.unwrap();
    // The 33rd URI of the first stream was not followed: it holds no place either.
    assert_upstream_full(&subscribe(&mut session, &uri("l0", PER_SESSION)).await);

    drop(streams.remove(0));
    subscribe_once_free(&mut session, &uri("late", 0)).await;
    fill(&mut session, "late", PER_SESSION).await;
    drop(streams);
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}
