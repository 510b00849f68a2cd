//! The real `portico serve` with `[server.oauth]` pointing at the in-process issuer: the protected
//! resource metadata, the exact challenges, every bad token class refused, scopes deciding what a
//! token lists and calls, a `[[server.clients]]` token beside it, and the JWKS rotation.

use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Daemon, Home};
use crate::issuer::{Issuer, TestKey};
use crate::support::{python_peer, python3, stdio_entry};

const LAPTOP: &str = "laptop-secret-token";

/// A port that was free a moment ago: the audience must name the port before the door binds it.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `portico serve` with `[server.oauth]` for `issuer`, a `laptop` client scoped to `notes_*`, and one
/// upstream offering `time_now`, `time_zone` and `notes_list` under their own names.
pub struct Door {
    pub port: u16,
    pub base: String,
    pub audience: String,
    _home: Home,
    _daemon: Daemon,
}

impl Door {
    pub fn start(issuer: &str, extra_oauth: &str) -> Door {
        let port = free_port();
        let audience = format!("http://127.0.0.1:{port}/mcp");
        let script = python_peer("catalog_server.py");
        let upstream = stdio_entry(
            "cat",
            &python3(),
            &[
                script.to_str().unwrap(),
                "--tools",
                "time_now,time_zone,notes_list",
            ],
            "prefix = false",
        );
        let config = format!(
            r#"[server]
listen = "127.0.0.1:{port}"

[[server.clients]]
name = "laptop"
token = "{LAPTOP}"
tools = ["notes_*"]

[server.oauth]
issuer = "{issuer}"
audience = "{audience}"
scopes = {{ "mcp:time" = ["time_*"], "mcp:notes" = ["notes_*"] }}
allow_private_network = true
{extra_oauth}

{upstream}"#
        );
        let home = Home::new(&config);
        let daemon = tokio::task::block_in_place(|| {
            let mut daemon = Daemon::start(&home);
            daemon.wait_for_line("portico: ready");
            daemon
        });
        assert_eq!(daemon.base, format!("http://127.0.0.1:{port}"));
        Door {
            port,
            base: daemon.base.clone(),
            audience,
            _home: home,
            _daemon: daemon,
        }
    }

    pub fn metadata_url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
            self.port
        )
    }

    /// The `WWW-Authenticate` of a 401, with the refusal's description when a token was refused.
    pub fn challenge(&self, refused: Option<&str>) -> String {
        let mut challenge = format!(
            r#"Bearer resource_metadata="{}", scope="mcp:notes mcp:time""#,
            self.metadata_url()
        );
        if let Some(description) = refused {
            challenge.push_str(&format!(
                r#", error="invalid_token", error_description="{description}""#
            ));
        }
        challenge
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}})
}

/// `initialize` on `/mcp`, with `token` if given.
async fn initialize(base: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = http()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request.send().await.unwrap()
}

/// The status and `WWW-Authenticate` of a response.
fn refusal(response: &reqwest::Response) -> (u16, Option<String>) {
    (
        response.status().as_u16(),
        response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string()),
    )
}

/// One MCP session on `/mcp` (2025-06-18) with a bearer token.
struct Session {
    base: String,
    id: String,
    token: String,
}

impl Session {
    async fn open(base: &str, token: &str) -> Session {
        let init = initialize(base, Some(token)).await;
        assert_eq!(init.status(), 200);
        let id = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        drop(init.text().await.unwrap());
        let session = Session {
            base: base.to_string(),
            id,
            token: token.to_string(),
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        http()
            .post(format!("{}/mcp", self.base))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token))
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn request(&self, id: u64, method: &str, params: Value) -> Value {
        let body = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
            .text()
            .await
            .unwrap();
        if let Ok(message) = serde_json::from_str::<Value>(&body) {
            return message;
        }
        body.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|data| {
                let message: Value = serde_json::from_str(data).ok()?;
                (message["id"] == id).then_some(message)
            })
            .unwrap_or_else(|| panic!("no answer to request {id} in {body:?}"))
    }

    async fn tool_names(&self, id: u64) -> Vec<String> {
        let listed = self.request(id, "tools/list", json!({})).await;
        let mut names: Vec<String> = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    async fn call(&self, id: u64, name: &str) -> Value {
        self.request(id, "tools/call", json!({"name": name, "arguments": {}}))
            .await["result"]
            .clone()
    }
}

fn text_result(text: &str, is_error: bool) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    if is_error {
        result["isError"] = json!(true);
    }
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn the_door_publishes_its_metadata_and_challenges_requests_without_a_token() {
    let key = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let door = Door::start(&issuer.url, "");
    let metadata = format!(
        r#"{{"resource":"http://127.0.0.1:{}/mcp","authorization_servers":["{}"],"scopes_supported":["mcp:notes","mcp:time"],"bearer_methods_supported":["header"]}}"#,
        door.port, issuer.url
    );
    // The metadata needs no token, at the path-based URL the challenge names and at the root one.
    for url in [
        door.metadata_url(),
        format!("{}/.well-known/oauth-protected-resource", door.base),
    ] {
        let response = http().get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.text().await.unwrap(), metadata, "{url}");
    }
    // Still behind the Host check.
    let rebound = http()
        .get(door.metadata_url())
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // Without a token, every door answers 401 with the challenge naming the metadata and scopes.
    let response = initialize(&door.base, None).await;
    assert_eq!(refusal(&response), (401, Some(door.challenge(None))));
    for path in ["/api/tools", "/sse", "/api/mcp/servers"] {
        let response = http()
            .get(format!("{}{path}", door.base))
            .send()
            .await
            .unwrap();
        assert_eq!(
            refusal(&response),
            (401, Some(door.challenge(None))),
            "{path}"
        );
    }
    // A token that is neither a client's nor a JWT.
    let response = initialize(&door.base, Some("not-a-jwt")).await;
    assert_eq!(
        refusal(&response),
        (
            401,
            Some(door.challenge(Some("the token is not a signed JWT")))
        )
    );
    // The health check stays public.
    let health = http()
        .get(format!("{}/api/health", door.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // Nothing so far needed the issuer's keys.
    assert_eq!(issuer.fetches(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_bad_token_is_refused_and_a_tokens_scopes_decide_what_it_lists_and_calls() {
    let key = TestKey::new("k1");
    let impostor = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let door = Door::start(&issuer.url, "");
    let good = issuer.claims(&door.audience, "openid mcp:time");

    // A token with `mcp:time` lists only the time tools and calls them as `client:alice`.
    let alice = Session::open(&door.base, &key.sign(&good)).await;
    assert_eq!(alice.tool_names(1).await, ["time_now", "time_zone"]);
    assert_eq!(
        alice.call(2, "time_now").await,
        text_result("time_now called", false)
    );
    // A call outside its scope is refused by the pipeline, as a static client's would be.
    assert_eq!(
        alice.call(3, "notes_list").await,
        text_result(
            "tool `notes_list` is not available to client `alice`: it is outside the client's `tools` scope (time_*); widen that [[server.clients]] entry's `tools` (for an OAuth token: what its scopes grant in [server.oauth] scopes) to allow it",
            true
        )
    );
    // Both scopes: the union.
    let both = Session::open(
        &door.base,
        &key.sign(&issuer.claims(&door.audience, "mcp:notes mcp:time")),
    )
    .await;
    assert_eq!(
        both.tool_names(4).await,
        ["notes_list", "time_now", "time_zone"]
    );
    // The static client keeps working beside OAuth, within its own scope.
    let laptop = Session::open(&door.base, LAPTOP).await;
    assert_eq!(laptop.tool_names(5).await, ["notes_list"]);
    assert_eq!(
        laptop.call(6, "notes_list").await,
        text_result("notes_list called", false)
    );

    // Every bad token class: 401 with its reason in the challenge.
    let now = jsonwebtoken::get_current_timestamp();
    let with = |changes: Value| {
        let mut claims = good.clone();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        claims
    };
    let payload = key.sign(&good).split('.').nth(1).unwrap().to_string();
    let hs256 = {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("k1".into());
        let secret = key.jwk()["x"].as_str().unwrap().to_string();
        jsonwebtoken::encode(
            &header,
            &good,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "bad signature",
            impostor.sign(&good),
            "the signature does not verify",
        ),
        (
            "wrong audience",
            key.sign(&with(json!({"aud": "http://127.0.0.1:1/mcp"}))),
            "the token is for another audience",
        ),
        (
            "expired",
            key.sign(&with(json!({"exp": now - 3600}))),
            "the token has expired",
        ),
        (
            "not valid yet",
            key.sign(&with(json!({"nbf": now + 3600}))),
            "the token is not valid yet (nbf)",
        ),
        (
            "wrong issuer",
            key.sign(&with(json!({"iss": "http://127.0.0.1:1"}))),
            "the token is from another issuer",
        ),
        (
            "alg none",
            format!("eyJhbGciOiJub25lIn0.{payload}."),
            "the token is not a signed JWT with an algorithm Portico accepts",
        ),
        ("HS256", hs256, "the token's algorithm is not accepted"),
        (
            "a static client's name as subject",
            key.sign(&with(json!({"sub": "laptop"}))),
            "the token's principal is the name of a configured client or a door",
        ),
        (
            "a door's name as subject",
            key.sign(&with(json!({"sub": "stdio"}))),
            "the token's principal is the name of a configured client or a door",
        ),
    ];
    for (what, token, description) in cases {
        let response = initialize(&door.base, Some(&token)).await;
        assert_eq!(
            refusal(&response),
            (401, Some(door.challenge(Some(description)))),
            "{what}"
        );
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap();
        assert!(error.starts_with("bearer token refused: "), "{error}");
        assert!(!error.contains(&token), "the token is never echoed");
    }
    // A valid token none of whose scopes is configured: 403 insufficient_scope.
    let response = initialize(
        &door.base,
        Some(&key.sign(&issuer.claims(&door.audience, "openid profile"))),
    )
    .await;
    assert_eq!(
        refusal(&response),
        (
            403,
            Some(format!(
                r#"Bearer error="insufficient_scope", scope="mcp:notes mcp:time", resource_metadata="{}", error_description="none of the token's scopes is one this door grants tools for""#,
                door.metadata_url()
            ))
        )
    );
    // One discovery and one key fetch served every token above: refusals fetched nothing.
    assert_eq!(issuer.fetches(), (1, 1));

    // The audit log names the token's principal.
    let records: Value = http()
        .get(format!("{}/api/audit?tool=time_now", door.base))
        .header("authorization", format!("Bearer {}", key.sign(&good)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let callers: Vec<&str> = records["records"]
        .as_array()
        .unwrap_or_else(|| panic!("{records}"))
        .iter()
        .map(|r| r["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["client:alice"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_issuer_key_is_fetched_once_and_made_up_keys_are_not_fetched_again() {
    let first = TestKey::new("first");
    let second = TestKey::new("second");
    let issuer = Issuer::start(&[&first]).await;
    let door = Door::start(&issuer.url, "jwks_min_refetch_secs = 2");
    let claims = issuer.claims(&door.audience, "mcp:time");
    assert_eq!(
        initialize(&door.base, Some(&first.sign(&claims)))
            .await
            .status(),
        200
    );
    assert_eq!(issuer.fetches(), (1, 1));
    // The issuer rotates to a new key; past the refetch interval, the first token with its key id
    // makes one fetch and is accepted.
    issuer.publish(&[&second]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(
        initialize(&door.base, Some(&second.sign(&claims)))
            .await
            .status(),
        200
    );
    assert_eq!(issuer.fetches(), (1, 2));
    assert_eq!(
        initialize(&door.base, Some(&second.sign(&claims)))
            .await
            .status(),
        200
    );
    // The retired key and made-up key ids right after: refused, and the issuer is not asked again.
    let retired = initialize(&door.base, Some(&first.sign(&claims))).await;
    assert_eq!(
        refusal(&retired),
        (
            401,
            Some(door.challenge(Some("the token's signing key is not one of the issuer's")))
        )
    );
    for i in 0..5 {
        let response = initialize(
            &door.base,
            Some(&TestKey::new(&format!("x{i}")).sign(&claims)),
        )
        .await;
        assert_eq!(
            refusal(&response),
            (
                401,
                Some(door.challenge(Some("the token's signing key is not one of the issuer's")))
            )
        );
    }
    assert_eq!(issuer.fetches(), (1, 2));
}
