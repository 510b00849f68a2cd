//! The dashboard's backend against the real daemon: the login cookie (its exact attributes, where it
//! counts and where it does not, the same-origin rule for requests that change something, logout),
//! `/ui/session`, and the API routes the page uses.

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::client::*;

const TOKEN: &str = "dashboard-door-token";
const LAPTOP: &str = "dashboard-laptop-token";

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn token_config(extra: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
token = "{TOKEN}"

[[server.clients]]
name = "laptop"
token = "{LAPTOP}"
tools = ["system_time"]
{extra}
"#
    )
}

fn start(config: &str) -> (Home, Daemon) {
    let home = Home::new(config);
    let daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    (home, daemon)
}

/// `POST /ui/login` with `token`, as the page sends it (JSON, from its own origin).
async fn login(base: &str, token: &str) -> reqwest::Response {
    http()
        .post(format!("{base}/ui/login"))
        .header("origin", base)
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap()
}

/// A dashboard session as the page holds it: the cookie pair (`portico_ui=...`) of the login's
/// `Set-Cookie`, after checking its attributes, and the page key of its body.
struct Session {
    cookie: String,
    page_key: String,
}

async fn session_of(response: reqwest::Response) -> Session {
    assert_eq!(response.status(), 200);
    let set: Vec<String> = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(set.len(), 1, "{set:?}");
    let (pair, attributes) = set[0].split_once("; ").unwrap();
    assert_eq!(
        attributes, "HttpOnly; SameSite=Strict; Path=/; Max-Age=43200",
        "{set:?}"
    );
    let body: Value = response.json().await.unwrap();
    let page_key = body["pageKey"].as_str().unwrap().to_string();
    let id = pair.strip_prefix("portico_ui=").unwrap();
    for secret in [id, page_key.as_str()] {
        assert_eq!(secret.len(), 43, "256 bits in unpadded base64url: {secret}");
        assert!(
            secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{secret}"
        );
    }
    assert_ne!(id, page_key, "two secrets");
    assert_eq!(
        body,
        json!({"pageKey": page_key}),
        "nothing else in the body"
    );
    Session {
        cookie: pair.to_string(),
        page_key,
    }
}

/// The cookie and the page key, as the page sends them.
fn with_cookie(session: &Session) -> HeaderMap {
    let mut headers = with_cookie_alone(&session.cookie);
    headers.insert(
        "x-portico-page-key",
        HeaderValue::from_str(&session.page_key).unwrap(),
    );
    headers
}

/// The cookie without its page key, as a server on another port that received it would replay it.
fn with_cookie_alone(cookie: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("cookie", HeaderValue::from_str(cookie).unwrap());
    headers
}

async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_cookie_stands_for_the_token_on_the_api_only_and_from_the_page_only() {
    let (_home, daemon) = start(&token_config(""));
    let base = daemon.base.clone();
    let http = http();

    // Without a token the page's shell is public, but who it is is not.
    let (status, body) =
        status_and_json(http.get(format!("{base}/ui/session")).send().await.unwrap()).await;
    assert_eq!(status, 401, "{body}");

    // A wrong token: 401 with a JSON error that does not repeat it, and no cookie.
    let refused = login(&base, "not-the-token").await;
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().get("set-cookie").is_none());
    let (_, body) = status_and_json(refused).await;
    let error = body["error"].as_str().unwrap();
    assert!(error.starts_with("the token was refused"), "{error}");
    assert!(!error.contains("not-the-token"), "{error}");
    // Not JSON: refused before the token is looked at.
    let form = http
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    assert!(form.headers().get("set-cookie").is_none());
    // From another page: refused whatever the token.
    let foreign = http
        .post(format!("{base}/ui/login"))
        .header("origin", "http://127.0.0.1:1")
        .json(&json!({"token": TOKEN}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(foreign.headers().get("set-cookie").is_none());

    let cookie = session_of(login(&base, TOKEN).await).await;

    // The cookie alone is nobody: a server on another port of this host receives it from the
    // browser, and a program could replay it with any Origin.
    let replayed = http
        .get(format!("{base}/api/tools"))
        .headers(with_cookie_alone(&cookie.cookie))
        .header("origin", &base)
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 401);
    // Nor with another session's page key.
    let other = session_of(login(&base, TOKEN).await).await;
    let mut mixed = with_cookie_alone(&cookie.cookie);
    mixed.insert(
        "x-portico-page-key",
        HeaderValue::from_str(&other.page_key).unwrap(),
    );
    let mixed = http
        .get(format!("{base}/api/tools"))
        .headers(mixed)
        .send()
        .await
        .unwrap();
    assert_eq!(mixed.status(), 401);

    // The cookie works where the page calls: the API, and who it is.
    let tools = http
        .get(format!("{base}/api/tools"))
        .headers(with_cookie(&cookie))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(tools).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "system_time"),
        "{body}"
    );
    let (status, body) = status_and_json(
        http.get(format!("{base}/ui/session"))
            .headers(with_cookie(&cookie))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"principal": "client:default", "auth": "cookie"})
        )
    );
    let (status, body) = status_and_json(
        http.get(format!("{base}/ui/session"))
            .bearer_auth(LAPTOP)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({"principal": "client:laptop", "auth": "bearer"}))
    );

    // Never on the MCP door: a cookie is no token there.
    let mcp = http
        .post(format!("{base}/mcp"))
        .headers(with_cookie(&cookie))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 401);
    let sse = http
        .get(format!("{base}/sse"))
        .headers(with_cookie(&cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 401);

    // A request that changes something needs the page's own origin: another one (even another
    // spelling of this host that the door otherwise allows) or none is refused before the route.
    let deny = |origin: Option<&str>| {
        let mut request = http
            .post(format!("{base}/api/approvals/apr_nosuch/deny"))
            .headers(with_cookie(&cookie));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let port = base.rsplit(':').next().unwrap();
    for origin in [
        Some(format!("http://localhost:{port}")),
        Some("http://127.0.0.1:1".to_string()),
        None,
    ] {
        let (status, body) = status_and_json(deny(origin.as_deref()).await.unwrap()).await;
        assert_eq!(status, 403, "{origin:?}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, body) = status_and_json(deny(Some(&base)).await.unwrap()).await;
    assert_eq!(
        status, 404,
        "the page's own origin reaches the route: {body}"
    );
    // Another page on this host is same-site, not same-origin.
    let cross = http
        .get(format!("{base}/api/tools"))
        .headers(with_cookie(&cookie))
        .header("sec-fetch-site", "same-site")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);

    // Logout forgets the session and clears the cookie; the old cookie is then worth nothing.
    let logout = http
        .post(format!("{base}/ui/logout"))
        .headers(with_cookie(&cookie))
        .header("origin", &base)
        .send()
        .await
        .unwrap();
    assert_eq!(logout.status(), 204);
    assert_eq!(
        logout.headers().get("set-cookie").unwrap(),
        "portico_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    );
    let after = http
        .get(format!("{base}/api/tools"))
        .headers(with_cookie(&cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);

    // A scoped client's login is that client, within its scope.
    let laptop = session_of(login(&base, LAPTOP).await).await;
    let (_, body) = status_and_json(
        http.get(format!("{base}/api/tools"))
            .headers(with_cookie(&laptop))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["system_time"], "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_door_needs_no_login() {
    let (_home, daemon) = start("[server]\nlisten = \"127.0.0.1:0\"\n");
    let base = daemon.base.clone();
    let (status, body) = status_and_json(
        http()
            .get(format!("{base}/ui/session"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({"principal": "client:api", "auth": "open"}))
    );
    let refused = login(&base, "anything").await;
    assert_eq!(refused.status(), 400);
    assert!(refused.headers().get("set-cookie").is_none());

    // Another page may not embed the API (an <img> or <script> sends no Origin): on an open door
    // it would otherwise hold event streams or read the audit log for nothing.
    let get = |path: &str, site: Option<&str>| {
        let mut request = http().get(format!("{base}{path}"));
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request.send()
    };
    for path in ["/api/events", "/api/audit", "/metrics", "/ui/session"] {
        for site in ["cross-site", "same-site"] {
            let (status, body) = status_and_json(get(path, Some(site)).await.unwrap()).await;
            assert_eq!(status, 403, "{path} {site}: {body}");
            assert!(
                body["error"].as_str().unwrap().contains("embedded request"),
                "{body}"
            );
        }
    }
    for site in [Some("same-origin"), Some("none"), None] {
        let answer = get("/api/audit", site).await.unwrap();
        assert_eq!(answer.status(), 200, "{site:?}");
    }
}

/// A `text/event-stream` response read one event at a time: (name, JSON data); comments skipped.
struct EventReader {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    buffer: String,
}

impl EventReader {
    async fn open(base: &str, token: &str) -> EventReader {
        let response = http()
            .get(format!("{base}/api/events"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        EventReader {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the stream ended.
    async fn next(&mut self) -> Option<(String, Value)> {
        use futures::StreamExt;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some((name, serde_json::from_str(&data).unwrap()));
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(60), self.body.next())
                .await
                .expect("no event within 60 s (test guard)");
            match chunk {
                Some(Ok(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Some(Err(_)) | None => return None,
            }
        }
    }

    async fn expect(&mut self) -> (String, Value) {
        self.next().await.expect("the event stream ended")
    }
}

const AGENTS: &str = r#"
[[policies]]
tools = ["portico_agent_guarded"]
action = "approve"
reason = "guarded runs need an owner"

[[agents]]
name = "echo"
description = "Echoes"
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "echo: {{message}}" } ] } ]

[[agents]]
name = "guarded"
description = "Held for approval"
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "ran" } ] } ]
"#;

async fn agent_message(base: &str, token: &str, agent: &str) -> u16 {
    http()
        .post(format!("{base}/api/agents/{agent}/message"))
        .bearer_auth(token)
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The fields of an audit event a test can know: (tool, caller, outcome).
fn audit_of(event: &(String, Value)) -> (&str, &str, &str) {
    assert_eq!(event.0, "audit", "{event:?}");
    let record = &event.1;
    assert!(record["time"].as_str().unwrap().ends_with('Z'), "{record}");
    (
        record["tool"].as_str().unwrap(),
        record["caller"].as_str().unwrap(),
        record["outcome"].as_str().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_carries_calls_and_approvals_as_they_happen_and_ends_on_shutdown() {
    let config = token_config(AGENTS).replace(
        "tools = [\"system_time\"]",
        "tools = [\"portico_agent_echo\"]",
    );
    let (_home, mut daemon) = start(&config);
    let base = daemon.base.clone();
    let mut events = EventReader::open(&base, TOKEN).await;
    let mut laptop_events = EventReader::open(&base, LAPTOP).await;
    for reader in [&mut events, &mut laptop_events] {
        let (name, hello) = reader.expect().await;
        assert_eq!(name, "hello");
        assert!(hello["time"].as_str().unwrap().ends_with('Z'), "{hello}");
    }

    // A call: its audit record.
    assert_eq!(agent_message(&base, TOKEN, "echo").await, 200);
    assert_eq!(
        audit_of(&events.expect().await),
        ("portico_agent_echo", "client:default", "ok")
    );

    // A held call: the request and its pending approval, then the call's own record.
    assert_eq!(agent_message(&base, TOKEN, "guarded").await, 502);
    assert_eq!(
        audit_of(&events.expect().await),
        (
            "portico_agent_guarded",
            "client:default",
            "approval_requested"
        )
    );
    let (name, pending) = events.expect().await;
    assert_eq!(name, "approval");
    let id = pending["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("apr_"), "{pending}");
    assert_eq!(
        pending,
        json!({"id": id, "tool": "portico_agent_guarded", "state": "pending"})
    );
    assert_eq!(
        audit_of(&events.expect().await),
        (
            "portico_agent_guarded",
            "client:default",
            "approval_required"
        )
    );
    let approved = http()
        .post(format!("{base}/api/approvals/{id}/approve"))
        .bearer_auth(TOKEN)
        .json(&json!({"via": "web"}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    assert_eq!(
        audit_of(&events.expect().await),
        (
            "portico_agent_guarded",
            "client:default",
            "approval_granted"
        )
    );
    assert_eq!(
        events.expect().await,
        (
            "approval".to_string(),
            json!({"id": id, "tool": "portico_agent_guarded", "state": "approved"})
        )
    );

    // The scoped client saw none of that: its next event is its own call.
    assert_eq!(agent_message(&base, LAPTOP, "echo").await, 200);
    assert_eq!(
        audit_of(&laptop_events.expect().await),
        ("portico_agent_echo", "client:laptop", "ok")
    );
    assert_eq!(
        audit_of(&events.expect().await),
        ("portico_agent_echo", "client:laptop", "ok")
    );

    // Shutdown ends the streams instead of waiting for them.
    let status = tokio::task::block_in_place(|| daemon.stop());
    assert!(status.success(), "{status:?}");
    assert_eq!(events.next().await, None);
    assert_eq!(laptop_events.next().await, None);
}

async fn get_json(base: &str, path: &str, token: &str) -> Value {
    let response = http()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

async fn post_json(base: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
    status_and_json(
        http()
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn tool_names(base: &str) -> Vec<String> {
    get_json(base, "/api/tools", TOKEN).await["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

async fn server_status(base: &str, name: &str) -> Value {
    let servers = get_json(base, "/api/servers", TOKEN).await;
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no server {name}: {servers}"))
}

/// Reads `server` events for `name` until one satisfies `done`; the states seen on the way.
async fn wait_for_server(
    events: &mut EventReader,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> (Vec<String>, Value) {
    let mut states = Vec::new();
    loop {
        let (event, data) = events.expect().await;
        if event != "server" || data["name"] != name {
            continue;
        }
        states.push(data["state"].as_str().unwrap().to_string());
        if done(&data) {
            return (states, data);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_restarted_disabled_and_enabled_from_the_api_and_their_tools_follow() {
    let config = config_with(&token_config(""), &["--tools", "t1"]);
    let (_home, daemon) = start(&config);
    let base = daemon.base.clone();

    let cat = server_status(&base, "cat").await;
    assert_eq!(
        (
            &cat["state"],
            &cat["enabled"],
            &cat["restarts"],
            &cat["connects"]
        ),
        (&json!("ready"), &json!(true), &json!(0), &json!(1)),
        "{cat}"
    );
    assert!(
        cat["connected_at"].as_str().unwrap().ends_with('Z'),
        "{cat}"
    );
    assert!(tool_names(&base).await.contains(&"mcp_cat_t1".to_string()));
    let mut events = EventReader::open(&base, TOKEN).await;
    assert_eq!(events.expect().await.0, "hello");

    // Restart: the session is dropped and made again; the tools stay listed.
    assert_eq!(
        post_json(&base, "/api/servers/cat/restart", TOKEN, json!({})).await,
        (202, json!({"server": "cat"}))
    );
    let (states, ready) = wait_for_server(&mut events, "cat", |s| {
        s["state"] == "ready" && s["restarts"] == 1
    })
    .await;
    assert!(
        states.iter().any(|s| s != "ready"),
        "the session was dropped first: {states:?}"
    );
    assert_eq!(ready["connects"], 2, "{ready}");
    assert_eq!(server_status(&base, "cat").await["restarts"], 1);
    assert!(tool_names(&base).await.contains(&"mcp_cat_t1".to_string()));

    // Disable: the tools leave, and it stays down.
    assert_eq!(
        post_json(&base, "/api/servers/cat/disable", TOKEN, json!({})).await,
        (202, json!({"server": "cat"}))
    );
    assert!(!tool_names(&base).await.contains(&"mcp_cat_t1".to_string()));
    let cat = server_status(&base, "cat").await;
    assert_eq!(
        (
            &cat["state"],
            &cat["enabled"],
            &cat["tools"],
            &cat["connected_at"]
        ),
        (&json!("disabled"), &json!(false), &json!(0), &Value::Null),
        "{cat}"
    );
    wait_for_server(&mut events, "cat", |s| s["enabled"] == false).await;
    let (status, body) = post_json(&base, "/api/servers/cat/restart", TOKEN, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("enable it"),
        "{body}"
    );

    // Enable: back, with its tools.
    assert_eq!(
        post_json(&base, "/api/servers/cat/enable", TOKEN, json!({})).await,
        (202, json!({"server": "cat"}))
    );
    let (_, ready) = wait_for_server(&mut events, "cat", |s| s["state"] == "ready").await;
    assert_eq!(
        (&ready["enabled"], &ready["restarts"]),
        (&json!(true), &json!(2))
    );
    assert!(tool_names(&base).await.contains(&"mcp_cat_t1".to_string()));

    // Unknown names, and scoped clients, are refused.
    let (status, body) = post_json(&base, "/api/servers/nope/disable", TOKEN, json!({})).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`nope`"), "{body}");
    let (status, body) = post_json(&base, "/api/servers/cat/restart", LAPTOP, json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(server_status(&base, "cat").await["restarts"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_is_tried_through_the_pipeline_as_the_callers_principal_and_waits_for_its_approval()
{
    let config = token_config(
        r#"
[[policies]]
tools = ["system_time"]
callers = ["client:laptop"]
action = "approve"
reason = "the laptop asks first"
"#,
    );
    let (_home, daemon) = start(&config);
    let base = daemon.base.clone();

    // A built-in tool: its result as MCP has it, and the time it took.
    let (status, body) = post_json(
        &base,
        "/api/tools/system_time/call",
        TOKEN,
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(body["result"]["content"][0]["type"], "text", "{body}");
    assert!(body["duration_ms"].is_u64(), "{body}");

    // Refusals: the schema, an unknown name, a tool outside the caller's scope.
    let (status, body) = post_json(
        &base,
        "/api/tools/file_read/call",
        TOKEN,
        json!({"arguments": {"path": 5}}),
    )
    .await;
    assert_eq!(
        (status, &body["kind"]),
        (400, &json!("invalid_arguments")),
        "{body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid arguments for `file_read`"),
        "{body}"
    );
    let (status, body) = post_json(&base, "/api/tools/nosuch/call", TOKEN, json!({})).await;
    assert_eq!(
        (status, &body["kind"]),
        (404, &json!("not_found")),
        "{body}"
    );
    let (status, body) = post_json(
        &base,
        "/api/tools/file_read/call",
        LAPTOP,
        json!({"arguments": {"path": "x"}}),
    )
    .await;
    assert_eq!((status, &body["kind"]), (403, &json!("denied")), "{body}");

    // Held for an approval: the request waits, the approval shows up, and once approved the call
    // runs once as the laptop.
    let mut events = EventReader::open(&base, TOKEN).await;
    assert_eq!(events.expect().await.0, "hello");
    let waiting = tokio::spawn({
        let base = base.clone();
        async move {
            post_json(
                &base,
                "/api/tools/system_time/call",
                LAPTOP,
                json!({"arguments": {}}),
            )
            .await
        }
    });
    assert_eq!(
        audit_of(&events.expect().await),
        ("system_time", "client:laptop", "approval_requested")
    );
    let (name, pending) = events.expect().await;
    assert_eq!(name, "approval");
    assert_eq!(pending["state"], "pending");
    let id = pending["id"].as_str().unwrap().to_string();
    assert_eq!(
        audit_of(&events.expect().await),
        ("system_time", "client:laptop", "approval_required")
    );
    let listed = get_json(&base, "/api/approvals", TOKEN).await;
    let request = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not listed: {listed}"));
    assert_eq!(
        (&request["tool"], &request["principal"], &request["status"]),
        (
            &json!("system_time"),
            &json!("client:laptop"),
            &json!("pending")
        )
    );
    assert!(!waiting.is_finished(), "the call waits for its approval");
    let (status, _) = post_json(
        &base,
        &format!("/api/approvals/{id}/approve"),
        TOKEN,
        json!({"via": "web"}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(
        audit_of(&events.expect().await),
        ("system_time", "client:default", "approval_granted")
    );
    assert_eq!(events.expect().await.1["state"], "approved");
    assert_eq!(
        audit_of(&events.expect().await),
        ("system_time", "client:laptop", "approval_consumed")
    );
    assert_eq!(
        audit_of(&events.expect().await),
        ("system_time", "client:laptop", "ok")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_decisions_and_a2a_tasks_read_as_the_dashboard_shows_them() {
    let config = token_config(&format!("\n[a2a]\nenabled = true\n{AGENTS}"));
    let (_home, daemon) = start(&config);
    let base = daemon.base.clone();
    let mut events = EventReader::open(&base, TOKEN).await;
    assert_eq!(events.expect().await.0, "hello");

    // An A2A task, answered: its states arrive on the stream, and the lists show it.
    let sent = http()
        .post(format!("{base}/a2a/echo"))
        .header("A2A-Version", "1.0")
        .bearer_auth(TOKEN)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}),
        )
        .send()
        .await
        .unwrap();
    let sent: Value = sent.json().await.unwrap();
    let id = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_string();
    let mut states = Vec::new();
    while states.last().map(String::as_str) != Some("TASK_STATE_COMPLETED") {
        let (name, data) = events.expect().await;
        if name == "task" {
            assert_eq!((&data["id"], &data["agent"]), (&json!(id), &json!("echo")));
            states.push(data["state"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(states, ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);
    let listed = get_json(&base, "/api/a2a/tasks", TOKEN).await;
    let task = &listed["tasks"][0];
    assert_eq!(
        (&task["id"], &task["agent"], &task["state"]),
        (&json!(id), &json!("echo"), &json!("TASK_STATE_COMPLETED")),
        "{listed}"
    );
    assert!(task["contextId"].is_string() && task["updatedAt"].as_str().unwrap().ends_with('Z'));
    for (query, count) in [
        ("?state=working", 0),
        ("?state=completed", 1),
        ("?agent=echo", 1),
    ] {
        let listed = get_json(&base, &format!("/api/a2a/tasks{query}"), TOKEN).await;
        assert_eq!(listed["tasks"].as_array().unwrap().len(), count, "{query}");
    }
    let (status, _) = status_and_json(
        http()
            .get(format!("{base}/api/a2a/tasks?state=bogus"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    let shown = get_json(&base, &format!("/api/a2a/tasks/{id}"), TOKEN).await;
    let task = &shown["task"];
    assert_eq!(task["id"], id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{shown}");
    assert_eq!(task["agent"], "echo");
    assert_eq!(task["history"][0]["parts"][0]["text"], "hello", "{shown}");
    assert!(task["artifacts"].is_array(), "{shown}");
    // Another client's task is not there for a scoped client.
    assert_eq!(
        get_json(&base, "/api/a2a/tasks", LAPTOP).await,
        json!({"tasks": []})
    );
    let foreign = http()
        .get(format!("{base}/api/a2a/tasks/{id}"))
        .bearer_auth(LAPTOP)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 404);
    assert_eq!(
        get_json(&base, "/api/a2a/agents", TOKEN).await,
        json!({"agents": []})
    );

    // A decision: a held call denied through the API.
    assert_eq!(agent_message(&base, TOKEN, "guarded").await, 502);
    let pending = get_json(&base, "/api/approvals", TOKEN).await;
    let approval = pending["approvals"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = post_json(
        &base,
        &format!("/api/approvals/{approval}/deny"),
        TOKEN,
        json!({"via": "api"}),
    )
    .await;
    assert_eq!(status, 200);
    let decisions = get_json(&base, "/api/approvals/decisions", TOKEN).await;
    let decision = &decisions["decisions"][0];
    assert_eq!(
        (
            &decision["id"],
            &decision["tool"],
            &decision["caller"],
            &decision["state"],
            &decision["via"]
        ),
        (
            &json!(approval),
            &json!("portico_agent_guarded"),
            &json!("client:default"),
            &json!("denied"),
            &json!("api")
        ),
        "{decisions}"
    );
    assert!(decision["decided_at"].as_str().unwrap().ends_with('Z'));
    let bad = http()
        .get(format!("{base}/api/approvals/decisions?limit=0"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    // One answer holds at most 10,000 records: a bigger page is refused, not built in memory.
    let (status, body) = status_and_json(
        http()
            .get(format!("{base}/api/audit?format=jsonl&limit=10001"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("`limit` 10001 is more than 10000 records a request"),
        "{body}"
    );

    // The audit log: readable times, the new filters, and the export.
    let all = get_json(&base, "/api/audit?limit=1000", TOKEN).await["records"]
        .as_array()
        .unwrap()
        .clone();
    assert!(all.len() >= 4, "{all:?}");
    for record in &all {
        let time = record["time"].as_str().unwrap();
        let at_ms = record["at_ms"].as_i64().unwrap();
        assert_eq!(
            portico_core::time::parse_rfc3339(time),
            Some(at_ms),
            "{record}"
        );
    }
    let denied = get_json(&base, "/api/audit?outcome=approval_denied", TOKEN).await["records"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["tool"], "portico_agent_guarded");
    let oldest = all.last().unwrap();
    let until = format!(
        "/api/audit?until={}&principal=client:default",
        oldest["time"].as_str().unwrap()
    );
    let early = get_json(&base, &until, TOKEN).await["records"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        early
            .iter()
            .all(|r| r["at_ms"].as_i64() <= oldest["at_ms"].as_i64()
                && r["caller"] == "client:default"),
        "{early:?}"
    );
    assert!(early.iter().any(|r| r["id"] == oldest["id"]), "{early:?}");
    let export = http()
        .get(format!("{base}/api/audit?format=jsonl&limit=1000"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(export.status(), 200);
    assert_eq!(export.headers()["content-type"], "application/x-ndjson");
    assert_eq!(
        export.headers()["content-disposition"],
        "attachment; filename=\"portico-audit.jsonl\""
    );
    let text = export.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(text.ends_with('\n'));
    assert_eq!(lines, all);
}
