//! The A2A routes over a real socket: what a subscribe may hold, and what bad bodies get.

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::*;
use crate::tasks::StreamLimits;

const AGENT: &str = r#"
[[agents]]
name = "echo"
tools = []
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^hang" }, steps = [ { wait_ms = 600000 }, { reply = "never" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]
"#;

struct Door {
    base: String,
    tasks: Tasks,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Door {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn door(streams: StreamLimits) -> Door {
    let dir = tempfile::tempdir().unwrap();
    let config = portico_config::parse("test config", AGENT).unwrap();
    let engine = Engine::start(&config, portico_engine::EngineOptions::in_dir(dir.path())).unwrap();
    let (router, tasks) = routes_and_tasks(
        engine,
        A2aOptions {
            listen_path: "/a2a".into(),
            public_url: "http://127.0.0.1".into(),
            primary_agent: None,
            max_tasks: 100,
            push_allow_private_network: false,
            streams,
            unversioned_card: portico_config::CardVersion::V1,
        },
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Door {
        base,
        tasks,
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
        server,
        _dir: dir,
    }
}

impl Door {
    fn request(&self, method: reqwest::Method, path: &str, who: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match who {
            "anonymous" => request,
            who => request.header("Authorization", format!("Bearer {who}")),
        }
    }

    async fn rpc(
        &self,
        who: &str,
        version: &str,
        method: &str,
        params: Value,
    ) -> reqwest::Response {
        self.request(reqwest::Method::POST, "/a2a/echo", who)
            .header("A2A-Version", version)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap()
    }

    /// A task of `who`'s whose agent never answers.
    async fn hanging_task(&self, who: &str) -> String {
        let answer: Value = self
            .rpc(
                who,
                "1.0",
                "SendMessage",
                json!({
                    "message": {"messageId": format!("m-{who}"), "role": "ROLE_USER", "parts": [{"text": "hang on"}]},
                    "configuration": {"returnImmediately": true},
                }),
            )
            .await
            .json()
            .await
            .unwrap();
        answer["result"]["task"]["id"].as_str().unwrap().to_string()
    }

    /// Subscribes to `id` on one of the four subscribe routes; `n` picks the route.
    async fn subscribe(&self, who: &str, id: &str, n: usize) -> reqwest::Response {
        let get = reqwest::Method::GET;
        let post = reqwest::Method::POST;
        match n % 5 {
            0 => {
                self.rpc(who, "1.0", "SubscribeToTask", json!({"id": id}))
                    .await
            }
            1 => {
                self.rpc(who, "0.3", "tasks/resubscribe", json!({"id": id}))
                    .await
            }
            2 => {
                let path = format!("/a2a/echo/tasks/{id}:subscribe");
                self.request(get, &path, who).send().await.unwrap()
            }
            3 => {
                let path = format!("/a2a/echo/v1/tasks/{id}:subscribe");
                self.request(get, &path, who).send().await.unwrap()
            }
            _ => {
                let path = format!("/a2a/echo/v1/tasks/{id}:subscribe");
                self.request(post, &path, who).send().await.unwrap()
            }
        }
    }
}

/// The error a refused subscribe carries, whichever binding it came by.
async fn refusal(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let error = if body["error"].is_object() {
        body["error"].clone()
    } else {
        body
    };
    let reason = error["data"][0]["reason"]
        .as_str()
        .or(error["details"][0]["reason"].as_str())
        .unwrap_or_default()
        .to_string();
    (
        status,
        reason,
        error["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn subscribes_to_unknown_and_foreign_tasks_hold_nothing() {
    let door = door(StreamLimits::default()).await;
    let alices = door.hanging_task("alice").await;
    assert_eq!(door.tasks.live_counts(), (1, 0), "alice's running task");
    for n in 0..300 {
        let unknown = format!("no-such-task-{n}");
        let (id, who) = match n % 3 {
            0 => (unknown.as_str(), "mallory"),
            1 => (alices.as_str(), "mallory"),
            _ => (alices.as_str(), "anonymous"),
        };
        let (status, reason, message) = refusal(door.subscribe(who, id, n).await).await;
        assert_eq!(reason, "TASK_NOT_FOUND", "{n}: {message}");
        assert!(message.contains(id), "{message}");
        assert!(status == 200 || status == 404, "{n}: {status}");
    }
    assert_eq!(
        door.tasks.live_counts(),
        (1, 0),
        "no channel, stream or live entry for a task the caller may not see"
    );
}

#[tokio::test]
async fn event_streams_are_bounded_per_client_and_in_all() {
    let door = door(StreamLimits {
        max_streams: 3,
        max_streams_per_client: 2,
    })
    .await;
    let alices = door.hanging_task("alice").await;
    let bobs = door.hanging_task("bob").await;
    let first = door.subscribe("alice", &alices, 0).await;
    let second = door.subscribe("alice", &alices, 2).await;
    assert_eq!(first.status(), 200);
    assert_eq!(second.status(), 200);
    assert_eq!(door.tasks.live_counts(), (2, 2));
    let (status, reason, message) = refusal(door.subscribe("alice", &alices, 3).await).await;
    assert_eq!((status, reason.as_str()), (503, "TOO_MANY_STREAMS"));
    assert!(
        message.contains("this client has 2 A2A event streams open")
            && message.contains("max_streams_per_client"),
        "{message}"
    );
    let bobs_stream = door.subscribe("bob", &bobs, 1).await;
    assert_eq!(bobs_stream.status(), 200);
    let (_, reason, message) = refusal(door.subscribe("bob", &bobs, 4).await).await;
    assert_eq!(reason, "TOO_MANY_STREAMS");
    assert!(
        message.contains("Portico has 3 A2A event streams open")
            && message.contains("max_streams`"),
        "{message}"
    );
    // A streamed send needs room as well, and is refused before anything is stored.
    let (_, reason, _) = refusal(
        door.rpc(
            "carol",
            "1.0",
            "SendStreamingMessage",
            json!({"message": {"messageId": "c", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        )
        .await,
    )
    .await;
    assert_eq!(reason, "TOO_MANY_STREAMS");
    assert_eq!(door.tasks.live_counts(), (2, 3));

    // A client that goes away gives its room back: the server drops the stream with the connection.
    drop((first, second, bobs_stream));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while door.tasks.live_counts() != (2, 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "streams still open: {:?}",
            door.tasks.live_counts()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(door.subscribe("alice", &alices, 0).await.status(), 200);
}
