//! The client against small axum fakes: card reading and interface choice, the polling path
//! (a card without streaming), 0.3 answers, streamed chunks, timeouts with cancel, and refusals.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::*;

#[derive(Default)]
struct Seen {
    /// (JSON-RPC method, A2A-Version header, Authorization header, params)
    calls: Vec<(String, String, String, Value)>,
    polls: usize,
}

#[derive(Clone)]
struct Fake {
    base: String,
    card: Value,
    /// `hang`: GetTask never finishes; `v03`: 0.3 answers; `stream`: SSE answers.
    mode: &'static str,
    seen: Arc<Mutex<Seen>>,
}

fn header_of(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

async fn card(State(fake): State<Fake>, headers: HeaderMap) -> Response {
    assert_eq!(header_of(&headers, "a2a-version"), "1.0");
    axum::Json(fake.card.clone()).into_response()
}

fn task(id: &str, state: &str, text: Option<&str>) -> Value {
    let mut task = json!({"id": id, "contextId": "c1", "status": {"state": state}});
    if let Some(text) = text {
        task["status"]["message"] =
            json!({"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": text}]});
    }
    task
}

async fn rpc(State(fake): State<Fake>, headers: HeaderMap, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap();
    let method = request["method"].as_str().unwrap().to_string();
    let params = request["params"].clone();
    let polls = {
        let mut seen = fake.seen.lock().unwrap();
        seen.calls.push((
            method.clone(),
            header_of(&headers, "a2a-version"),
            header_of(&headers, "authorization"),
            params.clone(),
        ));
        if method == "GetTask" || method == "tasks/get" {
            seen.polls += 1;
        }
        seen.polls
    };
    let text = params["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let reply = |result: Value| {
        axum::Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": result})).into_response()
    };
    match (fake.mode, method.as_str()) {
        ("error", _) => axum::Json(json!({"jsonrpc": "2.0", "id": request["id"],
            "error": {"code": -32001, "message": "task `nope` not found",
                      "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}]}}))
        .into_response(),
        (_, "SendMessage") => {
            assert_eq!(params["configuration"]["returnImmediately"], true);
            reply(json!({"task": task("t1", "TASK_STATE_SUBMITTED", None)}))
        }
        ("hang", "GetTask") => reply(task("t1", "TASK_STATE_WORKING", Some("still"))),
        (_, "GetTask") if polls < 3 => reply(task(
            "t1",
            "TASK_STATE_WORKING",
            Some(&format!("step {polls}")),
        )),
        (_, "GetTask") => {
            let mut done = task("t1", "TASK_STATE_COMPLETED", None);
            done["artifacts"] = json!([{"artifactId": "a1", "name": "answer",
                "parts": [{"text": "done: hello"}]}]);
            reply(done)
        }
        (_, "CancelTask") => reply(task("t1", "TASK_STATE_CANCELED", Some("canceled"))),
        // 0.3: kind-tagged objects, lower-case states.
        (_, "message/send") => {
            assert_eq!(params["configuration"]["blocking"], false);
            assert_eq!(params["message"]["kind"], "message");
            assert_eq!(params["message"]["role"], "user");
            assert_eq!(params["message"]["parts"][0]["kind"], "text");
            reply(
                json!({"kind": "task", "id": "t3", "contextId": "c3", "status": {"state": "submitted"}}),
            )
        }
        (_, "tasks/get") => reply(json!({"kind": "task", "id": "t3", "contextId": "c3",
            "status": {"state": "input-required", "message": {"kind": "message", "messageId": "q",
                "role": "agent", "parts": [{"kind": "text", "text": "which one?"}]}}})),
        (_, "SendStreamingMessage") => {
            let id = request["id"].clone();
            let events = [
                json!({"task": task("t2", "TASK_STATE_SUBMITTED", None)}),
                json!({"statusUpdate": {"taskId": "t2", "contextId": "c1",
                    "status": {"state": "TASK_STATE_WORKING", "message": {"messageId": "w", "role": "ROLE_AGENT", "parts": [{"text": format!("working on: {text}")}]}}}}),
                json!({"artifactUpdate": {"taskId": "t2", "contextId": "c1", "append": false, "lastChunk": false,
                    "artifact": {"artifactId": "r", "name": "report", "parts": [{"text": "part 1, "}]}}}),
                json!({"artifactUpdate": {"taskId": "t2", "contextId": "c1", "append": true, "lastChunk": true,
                    "artifact": {"artifactId": "r", "name": "report", "parts": [{"text": "part 2"}]}}}),
                // The artifact again, whole (as Portico's server closes its streamed response).
                json!({"artifactUpdate": {"taskId": "t2", "contextId": "c1", "append": false, "lastChunk": true,
                    "artifact": {"artifactId": "r", "name": "report", "parts": [{"text": "part 1, part 2!"}]}}}),
                json!({"statusUpdate": {"taskId": "t2", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}}),
                // Anything after the terminal state is not read.
                json!({"statusUpdate": {"taskId": "t2", "contextId": "c1", "status": {"state": "TASK_STATE_FAILED"}}}),
            ];
            let mut body = String::from(": hello\n\n");
            for event in events {
                body.push_str(&format!(
                    "data: {}\r\n\r\n",
                    json!({"jsonrpc": "2.0", "id": id, "result": event})
                ));
            }
            ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
        _ => (StatusCode::BAD_REQUEST, "unexpected").into_response(),
    }
}

async fn serve(mode: &'static str, card_of: impl Fn(&str) -> Value) -> Fake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let fake = Fake {
        card: card_of(&base),
        base,
        mode,
        seen: Arc::default(),
    };
    let router = Router::new()
        .route(CARD_PATH, get(card))
        .route("/rpc", post(rpc))
        .route("/legacy/.well-known/agent.json", get(card))
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    fake
}

fn v1_card(base: &str, streaming: bool) -> Value {
    json!({
        "name": "fake", "description": "A fake agent", "version": "1",
        "supportedInterfaces": [
            {"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ],
        "capabilities": {"streaming": streaming},
        "skills": [{"id": "s", "name": "Skill", "description": "does things"}],
    })
}

fn client(headers: &[(&str, &str)]) -> A2aClient {
    A2aClient::new(ClientOptions {
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        timeout: Duration::from_secs(20),
        network: NetPolicy::allow_private_network(),
    })
    .unwrap()
    .with_poll_interval(Duration::from_millis(10), Duration::from_millis(40))
}

type Events = Arc<Mutex<Vec<A2aEvent>>>;

fn recorder() -> (Events, impl Fn(A2aEvent) + Send + Sync) {
    let events: Events = Arc::default();
    let sink = events.clone();
    (events, move |event| sink.lock().unwrap().push(event))
}

fn status(state: &str, text: Option<&str>, task: &str) -> A2aEvent {
    A2aEvent::Status {
        task_id: Some(task.into()),
        state: state.into(),
        text: text.map(str::to_string),
    }
}

#[tokio::test]
async fn without_streaming_it_polls_get_task_until_the_task_finishes() {
    let fake = serve("poll", |base| v1_card(base, false)).await;
    let client = client(&[("Authorization", "Bearer s3cret")]);
    let card = client.discover(&fake.base).await.unwrap();
    assert_eq!(card.card_url, format!("{}{CARD_PATH}", fake.base));
    assert!(!card.streaming);
    assert_eq!(card.endpoint.binding, Binding::JsonRpc);
    assert_eq!(card.endpoint.version, Version::V1);

    let (events, on_event) = recorder();
    let outcome = client
        .send(&card, &SendRequest::new("hello"), &on_event)
        .await
        .unwrap();
    assert_eq!(outcome.state, "TASK_STATE_COMPLETED");
    assert_eq!(outcome.state_label(), "completed");
    assert_eq!(outcome.text, "done: hello");
    assert_eq!(outcome.task_id.as_deref(), Some("t1"));
    assert_eq!(outcome.context_id.as_deref(), Some("c1"));
    assert_eq!(outcome.task["artifacts"][0]["artifactId"], "a1");

    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.polls, 3, "GetTask until completed");
    let methods: Vec<&str> = seen.calls.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(methods, ["SendMessage", "GetTask", "GetTask", "GetTask"]);
    for (method, version, auth, _) in &seen.calls {
        assert_eq!(version, "1.0", "{method}");
        assert_eq!(auth, "Bearer s3cret", "{method}");
    }
    assert_eq!(seen.calls[1].3, json!({"id": "t1"}));
    assert_eq!(
        *events.lock().unwrap(),
        [
            status("TASK_STATE_SUBMITTED", None, "t1"),
            status("TASK_STATE_WORKING", Some("step 1"), "t1"),
            status("TASK_STATE_WORKING", Some("step 2"), "t1"),
            status("TASK_STATE_COMPLETED", None, "t1"),
            A2aEvent::Artifact {
                task_id: Some("t1".into()),
                artifact_id: "a1".into(),
                name: "answer".into(),
                text: "done: hello".into(),
                append: false,
                last_chunk: true,
            },
        ]
    );
}

#[tokio::test]
async fn a_task_that_outlives_the_timeout_is_canceled() {
    let fake = serve("hang", |base| v1_card(base, false)).await;
    let client = client(&[]);
    let card = client.discover(&fake.base).await.unwrap();
    let request = SendRequest {
        timeout: Some(Duration::from_millis(300)),
        ..SendRequest::new("hello")
    };
    let error = client.send(&card, &request, &|_| {}).await.unwrap_err();
    match &error {
        ClientError::Timeout {
            task_id, cancel, ..
        } => {
            assert_eq!(task_id.as_deref(), Some("t1"));
            assert_eq!(cancel, &Some(Ok(())));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error.to_string(),
        format!(
            "the A2A agent at {}/rpc did not finish within 300ms; task t1 was canceled",
            fake.base
        )
    );
    let seen = fake.seen.lock().unwrap();
    let last = seen.calls.last().unwrap();
    assert_eq!(
        (last.0.as_str(), &last.3),
        ("CancelTask", &json!({"id": "t1"}))
    );
    assert!(seen.polls >= 2, "polled meanwhile: {}", seen.polls);
}

#[tokio::test]
async fn a_0_3_agent_is_spoken_to_in_0_3_and_answers_in_the_1_0_form() {
    let fake = serve("v03", |base| {
        json!({"name": "old", "description": "0.3 agent", "url": format!("{base}/rpc"),
               "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0",
               "capabilities": {"streaming": false}, "skills": []})
    })
    .await;
    let client = client(&[]);
    let card = client.discover(&fake.base).await.unwrap();
    assert_eq!(card.endpoint.version, Version::V03);
    assert_eq!(
        card.interfaces,
        [CardInterface {
            url: format!("{}/rpc", fake.base),
            binding: "JSONRPC".into(),
            version: "0.3".into(),
            tenant: None,
        }]
    );
    let request = SendRequest {
        task_id: Some("t3".into()),
        context_id: Some("c3".into()),
        ..SendRequest::new("again")
    };
    let outcome = client.send(&card, &request, &|_| {}).await.unwrap();
    assert_eq!(outcome.state, "TASK_STATE_INPUT_REQUIRED");
    assert!(outcome.is_interrupted());
    assert_eq!(outcome.text, "which one?");
    assert_eq!(outcome.task["status"]["message"]["role"], "ROLE_AGENT");
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.calls[0].0, "message/send");
    assert_eq!(seen.calls[0].1, "0.3");
    assert_eq!(seen.calls[0].3["message"]["taskId"], "t3");
    assert_eq!(seen.calls[0].3["message"]["contextId"], "c3");
    assert_eq!(seen.calls[1].0, "tasks/get");
}

#[tokio::test]
async fn streamed_events_are_reported_and_chunks_joined() {
    let fake = serve("stream", |base| v1_card(base, true)).await;
    let client = client(&[]);
    let card = client.discover(&fake.base).await.unwrap();
    let (events, on_event) = recorder();
    let outcome = client
        .send(&card, &SendRequest::new("go"), &on_event)
        .await
        .unwrap();
    assert_eq!(outcome.state, "TASK_STATE_COMPLETED");
    assert_eq!(outcome.text, "part 1, part 2!");
    let events = events.lock().unwrap();
    assert_eq!(events[0], status("TASK_STATE_SUBMITTED", None, "t2"));
    assert_eq!(
        events[1],
        status("TASK_STATE_WORKING", Some("working on: go"), "t2")
    );
    let chunks: Vec<(&str, bool, bool)> = events
        .iter()
        .filter_map(|e| match e {
            A2aEvent::Artifact {
                text,
                append,
                last_chunk,
                ..
            } => Some((text.as_str(), *append, *last_chunk)),
            _ => None,
        })
        .collect();
    assert_eq!(
        chunks,
        [
            ("part 1, ", false, false),
            ("part 2", true, true),
            ("!", true, true)
        ],
        "only what was not reported yet"
    );
    assert_eq!(
        events.last().unwrap(),
        &status("TASK_STATE_COMPLETED", None, "t2")
    );
    assert_eq!(fake.seen.lock().unwrap().calls.len(), 1, "no polling");
}

#[tokio::test]
async fn a2a_errors_name_the_code_and_reason() {
    let fake = serve("error", |base| v1_card(base, false)).await;
    let client = client(&[]);
    let card = client.discover(&fake.base).await.unwrap();
    let error = client
        .send(&card, &SendRequest::new("x"), &|_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}/rpc answered SendMessage with error -32001: task `nope` not found (TASK_NOT_FOUND)",
            fake.base
        )
    );
}

#[tokio::test]
async fn discovery_falls_back_and_says_what_it_tried() {
    let fake = serve("poll", |base| v1_card(base, false)).await;
    let client = client(&[]);
    // The legacy path under a base URL with a path.
    let card = client
        .discover(&format!("{}/legacy", fake.base))
        .await
        .unwrap();
    assert_eq!(
        card.card_url,
        format!("{}/legacy/.well-known/agent.json", fake.base)
    );
    // The card's own URL.
    let card = client
        .discover(&format!("{}{CARD_PATH}", fake.base))
        .await
        .unwrap();
    assert_eq!(card.name, "fake");
    // Nothing there.
    let error = client
        .discover(&format!("{}/nobody", fake.base))
        .await
        .unwrap_err();
    let base = &fake.base;
    assert_eq!(
        error.to_string(),
        format!(
            "no A2A agent card found for {base}/nobody; tried {base}/nobody/.well-known/agent-card.json (HTTP 404); \
             {base}/nobody/.well-known/agent.json (HTTP 404); {base}/nobody (HTTP 404)"
        )
    );
}

#[tokio::test]
async fn refusals_name_the_rule() {
    let strict = A2aClient::new(ClientOptions {
        headers: vec![],
        timeout: Duration::from_secs(5),
        network: NetPolicy::public_only(),
    })
    .unwrap();
    let error = strict.discover("http://127.0.0.1:9/").await.unwrap_err();
    assert!(matches!(error, ClientError::Refused(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "refused http://127.0.0.1:9/: 127.0.0.1 is a loopback address; set allow_private_network = true on this server entry to allow it"
    );
    let open = client(&[]);
    let error = open
        .discover("http://169.254.169.254/latest")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "refused http://169.254.169.254/latest: 169.254.169.254 is a cloud metadata address (always blocked)"
    );
    let error = open.discover("ftp://example.com/").await.unwrap_err();
    assert!(error.to_string().contains("only http and https"), "{error}");
}

#[tokio::test]
async fn unreachable_agents_say_why() {
    // A port nothing listens on: bind, note it, close.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let error = client(&[])
        .discover(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach http://127.0.0.1:{port}/.well-known/agent-card.json: "
        )) && text.to_lowercase().contains("refused"),
        "{text}"
    );
}

#[test]
fn cards_of_both_versions_and_the_interface_chosen() {
    let url = "https://agent.example/.well-known/agent-card.json";
    // 1.0, JSON-RPC 1.0 listed after HTTP+JSON: JSON-RPC still wins.
    let card = AgentCard::parse(
        url,
        &json!({"name": "a", "supportedInterfaces": [
            {"url": "https://agent.example/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "https://agent.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t"},
            {"url": "https://agent.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ], "capabilities": {"streaming": true}}),
    )
    .unwrap();
    assert_eq!(
        card.endpoint,
        Endpoint {
            url: "https://agent.example/rpc".into(),
            binding: Binding::JsonRpc,
            version: Version::V1,
            tenant: Some("t".into()),
        }
    );
    assert!(card.streaming);
    // HTTP+JSON 1.0 before JSON-RPC 0.3; relative URLs resolve against the card's.
    let card = AgentCard::parse(
        url,
        &json!({"name": "a", "supportedInterfaces": [
            {"url": "/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ]}),
    )
    .unwrap();
    assert_eq!(card.endpoint.url, "https://agent.example/rest");
    assert_eq!(card.endpoint.binding, Binding::HttpJson);
    // The hybrid form (1.0 list plus 0.3 fields): the 0.3 duplicates are folded.
    let card = AgentCard::parse(
        url,
        &json!({"name": "h", "url": "https://agent.example/rpc", "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
            "additionalInterfaces": [{"url": "https://agent.example/rpc", "transport": "JSONRPC"},
                                     {"url": "https://agent.example/rest", "transport": "HTTP+JSON"}],
            "supportedInterfaces": [
                {"url": "https://agent.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://agent.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]}),
    )
    .unwrap();
    let listed: Vec<String> = card
        .interfaces
        .iter()
        .map(|i| format!("{} {} {}", i.binding, i.version, i.url))
        .collect();
    assert_eq!(
        listed,
        [
            "JSONRPC 1.0 https://agent.example/rpc",
            "JSONRPC 0.3 https://agent.example/rpc",
            "HTTP+JSON 0.3 https://agent.example/rest",
        ]
    );
    assert_eq!(card.endpoint.version, Version::V1);

    for (card, reason) in [
        (json!([1]), "it is not a JSON object"),
        (json!({"description": "x"}), "it has no `name`"),
        (
            json!({"name": "x"}),
            "it lists no interfaces: neither `supportedInterfaces` (A2A 1.0) nor a top-level `url` (A2A 0.3)",
        ),
        (
            json!({"name": "x", "supportedInterfaces": [{"url": "grpc.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]}),
            "none of its interfaces is one Portico speaks (JSONRPC or HTTP+JSON at A2A 1.0, JSONRPC at 0.3); \
             it offers GRPC 1.0 at grpc.example:443",
        ),
        (
            json!({"name": "x", "supportedInterfaces": [{"protocolBinding": "JSONRPC"}]}),
            "supportedInterfaces[0] has no `url`",
        ),
    ] {
        assert_eq!(AgentCard::parse(url, &card).unwrap_err(), reason, "{card}");
    }
}

#[test]
fn outcomes_prefer_artifacts_but_a_waiting_task_asks_its_question() {
    let task = json!({"status": {"state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"parts": [{"text": "which?"}]}}, "artifacts": [{"parts": [{"text": "draft"}]}]});
    assert_eq!(answer_text(&task, "TASK_STATE_INPUT_REQUIRED"), "which?");
    assert_eq!(answer_text(&task, "TASK_STATE_COMPLETED"), "draft");
    let bare = json!({"status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "ok"}]}}});
    assert_eq!(answer_text(&bare, "TASK_STATE_COMPLETED"), "ok");
}

#[test]
fn a_continuation_stream_opening_with_the_task_as_it_was_is_read_on() {
    let (events, on_event) = recorder();
    let mut tracker = Tracker::new(&on_event);
    tracker.continuing = true;
    tracker
        .absorb_streamed(&json!({"task": task("t", "TASK_STATE_INPUT_REQUIRED", Some("which?"))}));
    assert!(!tracker.settled(), "the task as it was before the answer");
    assert!(events.lock().unwrap().is_empty(), "and not reported again");
    tracker.absorb_streamed(&json!({"statusUpdate": {"taskId": "t", "contextId": "c1",
        "status": {"state": "TASK_STATE_WORKING"}}}));
    assert!(!tracker.settled());
    tracker.absorb_streamed(&json!({"statusUpdate": {"taskId": "t", "contextId": "c1",
        "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "answered"}]}}}}));
    assert!(tracker.settled());
    assert_eq!(tracker.outcome().text, "answered");
    assert_eq!(events.lock().unwrap().len(), 2);
    // A new task that asks at once is settled.
    let mut tracker = Tracker::new(&on_event);
    tracker
        .absorb_streamed(&json!({"task": task("t", "TASK_STATE_INPUT_REQUIRED", Some("which?"))}));
    assert!(tracker.settled());
}

#[tokio::test]
async fn credentials_go_only_to_the_configured_origin() {
    // A card on one server listing its interface on another.
    let elsewhere = serve("poll", |base| v1_card(base, false)).await;
    let rpc = format!("{}/rpc", elsewhere.base);
    let home = serve("poll", move |_| {
        json!({"name": "x", "supportedInterfaces": [
            {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
    })
    .await;
    let client = client(&[("Authorization", "Bearer s3cret")])
        .headers_only_for(&home.base)
        .unwrap();
    let card = client.discover(&home.base).await.unwrap();
    client
        .send(&card, &SendRequest::new("hello"), &|_| {})
        .await
        .unwrap();
    let seen = elsewhere.seen.lock().unwrap();
    assert!(!seen.calls.is_empty());
    for (method, _, auth, _) in &seen.calls {
        assert_eq!(
            auth, "",
            "{method} went to another origin without the credentials"
        );
    }
}

#[tokio::test]
async fn configured_headers_are_expanded_and_sent() {
    let fake = serve("poll", |base| v1_card(base, false)).await;
    let config = ExternalAgentConfig {
        name: "fake".into(),
        url: fake.base.clone(),
        headers: [(
            "Authorization".to_string(),
            "Bearer ${FAKE_TOKEN}".to_string(),
        )]
        .into_iter()
        .collect(),
        timeout_secs: 20,
        allow_private_network: true,
    };
    let env = |name: &str| (name == "FAKE_TOKEN").then(|| "abc".to_string());
    let client = A2aClient::for_agent(&config, &env)
        .unwrap()
        .with_poll_interval(Duration::from_millis(10), Duration::from_millis(20));
    let card = client.discover(&fake.base).await.unwrap();
    client
        .send(&card, &SendRequest::new("hello"), &|_| {})
        .await
        .unwrap();
    let seen = fake.seen.lock().unwrap();
    assert!(seen.calls.iter().all(|c| c.2 == "Bearer abc"));

    let missing = A2aClient::for_agent(&config, &|_| None).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "header `Authorization`: `${FAKE_TOKEN}` is set neither in Portico's environment nor in \
         its secret store; run `portico secret set FAKE_TOKEN` (or export FAKE_TOKEN before \
         starting Portico)"
    );
}

#[tokio::test]
async fn a_card_redirected_to_another_origin_gets_no_configured_headers() {
    // The second origin (127.0.0.1 on another port) serves a card and records the credentials.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let second = Router::new().fallback(move |headers: HeaderMap| {
        let record = record.clone();
        async move {
            for name in ["x-api-key", "authorization"] {
                if let Some(value) = headers.get(name) {
                    record
                        .lock()
                        .unwrap()
                        .push(format!("{name}: {}", value.to_str().unwrap_or_default()));
                }
            }
            axum::Json(v1_card("http://127.0.0.1:9", false)).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second_base = format!("http://{}", listener.local_addr().unwrap());
    let second_server = tokio::spawn(async move { axum::serve(listener, second).await.unwrap() });
    // The configured origin sends every request there with a 307.
    let target = second_base.clone();
    let first = Router::new().fallback(move |uri: axum::http::Uri| {
        let location = format!("{target}{}", uri.path());
        async move {
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, location)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let first_base = format!("http://{}", listener.local_addr().unwrap());
    let first_server = tokio::spawn(async move { axum::serve(listener, first).await.unwrap() });

    let config = ExternalAgentConfig {
        name: "moved".into(),
        url: first_base.clone(),
        headers: [
            ("X-Api-Key".to_string(), "s3cret".to_string()),
            ("Authorization".to_string(), "Bearer t0ken".to_string()),
        ]
        .into_iter()
        .collect(),
        timeout_secs: 20,
        allow_private_network: true,
    };
    let client = A2aClient::for_agent(&config, &|_| None).unwrap();
    let discovered = client.discover(&first_base).await;
    first_server.abort();
    second_server.abort();
    assert_eq!(*seen.lock().unwrap(), Vec::<String>::new());
    let error = discovered.unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "the request carries configured headers meant only for {first_base}"
        )),
        "{error}"
    );
}

/// When each GetTask reached the server, by the server's own clock.
type Arrivals = Arc<Mutex<Vec<std::time::Instant>>>;

/// An agent without streaming whose first GetTask is refused with `status` and `Retry-After: 1`;
/// the next one finds the task completed.
async fn refusing_the_first_poll(status: StatusCode) -> (String, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card = v1_card(&base, false);
    let seen = arrivals.clone();
    let rpc = move |body: String| {
        let seen = seen.clone();
        async move {
            let request: Value = serde_json::from_str(&body).unwrap();
            let reply = |result: Value| {
                axum::Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
                    .into_response()
            };
            match request["method"].as_str().unwrap() {
                "SendMessage" => reply(json!({"task": task("t1", "TASK_STATE_SUBMITTED", None)})),
                "GetTask" => {
                    let polls = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(std::time::Instant::now());
                        seen.len()
                    };
                    if polls == 1 {
                        (status, [(header::RETRY_AFTER, "1")], "slow down").into_response()
                    } else {
                        reply(task("t1", "TASK_STATE_COMPLETED", Some("done")))
                    }
                }
                other => panic!("unexpected {other}"),
            }
        }
    };
    let router = Router::new()
        .route(CARD_PATH, get(move || async move { axum::Json(card) }))
        .route("/rpc", post(rpc));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (base, arrivals)
}

async fn a_poll_refused_with_retry_after_is_retried_after_it(status: StatusCode) {
    let (base, arrivals) = refusing_the_first_poll(status).await;
    let client = client(&[]);
    let card = client.discover(&base).await.unwrap();

    let outcome = client
        .send(&card, &SendRequest::new("hello"), &|_| {})
        .await
        .unwrap();

    assert_eq!(outcome.state, "TASK_STATE_COMPLETED");
    assert_eq!(outcome.text, "done");
    let arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 2, "the refused poll, then one retry");
    let gap = arrivals[1] - arrivals[0];
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
}

#[tokio::test]
async fn a_poll_answered_429_waits_for_retry_after_and_goes_on() {
    a_poll_refused_with_retry_after_is_retried_after_it(StatusCode::TOO_MANY_REQUESTS).await;
}

#[tokio::test]
async fn a_poll_answered_503_waits_for_retry_after_and_goes_on() {
    a_poll_refused_with_retry_after_is_retried_after_it(StatusCode::SERVICE_UNAVAILABLE).await;
}

#[tokio::test]
async fn a_poll_failing_for_good_ends_the_send_with_the_status() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card = v1_card(&base, false);
    let rpc = |body: String| async move {
        let request: Value = serde_json::from_str(&body).unwrap();
        match request["method"].as_str().unwrap() {
            "SendMessage" => axum::Json(json!({"jsonrpc": "2.0", "id": request["id"],
                "result": {"task": task("t1", "TASK_STATE_SUBMITTED", None)}}))
            .into_response(),
            _ => (StatusCode::FORBIDDEN, "no").into_response(),
        }
    };
    let router = Router::new()
        .route(CARD_PATH, get(move || async move { axum::Json(card) }))
        .route("/rpc", post(rpc));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let client = client(&[]);
    let card = client.discover(&base).await.unwrap();

    let error = client
        .send(&card, &SendRequest::new("hello"), &|_| {})
        .await
        .unwrap_err();

    assert!(
        matches!(&error, ClientError::Status { status: 403, .. }),
        "a 403 is not retried: {error:?}"
    );
}
