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

/// The cookie pair (`portico_ui=...`) of a login's `Set-Cookie`, after checking its attributes.
fn session_cookie(response: &reqwest::Response) -> String {
    let set: Vec<&str> = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(set.len(), 1, "{set:?}");
    let (pair, attributes) = set[0].split_once("; ").unwrap();
    assert_eq!(
        attributes, "HttpOnly; SameSite=Strict; Path=/; Max-Age=43200",
        "{set:?}"
    );
    let id = pair.strip_prefix("portico_ui=").unwrap();
    assert_eq!(id.len(), 43, "256 bits in unpadded base64url: {id}");
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{id}"
    );
    pair.to_string()
}

fn with_cookie(cookie: &str) -> HeaderMap {
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

    let accepted = login(&base, TOKEN).await;
    assert_eq!(accepted.status(), 204);
    let cookie = session_cookie(&accepted);

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
    let laptop = session_cookie(&login(&base, LAPTOP).await);
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
        (
            200,
            json!({"principal": "client:dashboard", "auth": "open"})
        )
    );
    let refused = login(&base, "anything").await;
    assert_eq!(refused.status(), 400);
    assert!(refused.headers().get("set-cookie").is_none());
}
