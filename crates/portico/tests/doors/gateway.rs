//! Portico as a faithful gateway: with `[expose] prefix = false` and one upstream, what the upstream
//! defines reaches the client as the upstream said it, and a handshake-era client's resource
//! subscriptions work against a 2026-07-28 upstream, which has no `resources/subscribe`.

use serde_json::{Value, json};

use crate::client::*;

/// The Python SDK's modern fixture (2026-07-28 on stdio) as Portico's only upstream, unprefixed.
fn passthrough_home() -> Home {
    let server = crate::support::python_peer("modern_server.py");
    let entry = crate::support::stdio_entry(
        "modern",
        &crate::support::venv_python(),
        &[server.to_str().unwrap()],
        "",
    );
    Home::new(&format!("[expose]\nprefix = false\n\n{entry}"))
}

/// The 2025-11-25 SDK client over `portico mcp --standalone`, with `actions` in order.
fn legacy_client(home: &Home, actions: &[&str]) -> Value {
    let config = home.config().display().to_string();
    let mut args: Vec<String> = vec![
        "--era".into(),
        "legacy".into(),
        "--timeout".into(),
        "20".into(),
    ];
    args.extend(actions.iter().map(|s| s.to_string()));
    args.extend([
        "--stdio".into(),
        "--".into(),
        env!("CARGO_BIN_EXE_portico").into(),
        "mcp".into(),
        "--standalone".into(),
        "--config".into(),
        config,
    ]);
    sdk_report(|command| {
        command.args(&args).env("PORTICO_HOME", home.dir.path());
    })
}

fn touch(uri: &str) -> [String; 4] {
    [
        "--call".into(),
        "touch".into(),
        "--args".into(),
        json!({ "uri": uri }).to_string(),
    ]
}

/// `resources/subscribe` is gone from 2026-07-28: Portico follows the URI on a
/// `subscriptions/listen` stream of its own, and the client gets exactly the updates it
/// subscribed to, one each, also for a URI the upstream does not list.
#[test]
fn a_handshake_era_client_subscribes_through_portico_to_a_2026_upstream() {
    let home = passthrough_home();
    let mut actions: Vec<String> = vec!["--subscribe".into(), "fixture://greeting".into()];
    actions.extend(touch("fixture://greeting"));
    actions.extend(["--unsubscribe".into(), "fixture://greeting".into()]);
    // After the unsubscribe: must not arrive.
    actions.extend(touch("fixture://greeting"));
    // Not listed by the upstream: the subscription still goes to it.
    actions.extend(["--subscribe".into(), "fixture://later/1".into()]);
    actions.extend(touch("fixture://later/1"));
    // Never subscribed: must not arrive.
    actions.extend(touch("fixture://other"));
    actions.extend(["--wait-updates".into(), "2".into()]);
    let actions: Vec<&str> = actions.iter().map(String::as_str).collect();
    let report = legacy_client(&home, &actions);
    assert_eq!(report["protocol_version"], "2025-11-25", "{report:#}");
    assert_eq!(
        report["subscriptions"],
        json!([
            {"kind": "subscribe", "uri": "fixture://greeting", "result": "ok"},
            {"kind": "unsubscribe", "uri": "fixture://greeting", "result": "ok"},
            {"kind": "subscribe", "uri": "fixture://later/1", "result": "ok"},
        ]),
        "{report:#}"
    );
    let touched: Vec<&Value> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| &call["result"]["content"][0]["text"])
        .collect();
    assert_eq!(
        touched,
        [
            "touched fixture://greeting",
            "touched fixture://greeting",
            "touched fixture://later/1",
            "touched fixture://other"
        ],
        "{report:#}"
    );
    assert_eq!(
        report["resource_updates"],
        json!(["fixture://greeting", "fixture://later/1"]),
        "{report:#}"
    );
}

/// An unknown tool, prompt or resource goes to the one unprefixed upstream, whose own answer the
/// client gets: here the Python SDK's (an `isError` result, JSON-RPC errors with their code and
/// `data`), not Portico's "no tool named".
#[test]
fn unknown_names_go_to_the_single_unprefixed_upstream_and_its_answer_passes_through() {
    let home = passthrough_home();
    let report = legacy_client(
        &home,
        &[
            "--call",
            "no_such_tool",
            "--args",
            "{}",
            "--read",
            "fixture://nowhere",
            "--prompt",
            "no_such_prompt",
        ],
    );
    let call = &report["calls"][0];
    assert_eq!(call["result"]["isError"], true, "{report:#}");
    assert_eq!(
        call["result"]["content"][0]["text"], "Unknown tool: no_such_tool",
        "{report:#}"
    );
    let read = &report["reads"][0]["error"];
    assert_eq!(read["code"], -32602, "{report:#}");
    assert_eq!(
        read["message"], "Unknown resource: fixture://nowhere",
        "{report:#}"
    );
    assert_eq!(
        read["data"],
        json!({"uri": "fixture://nowhere"}),
        "{report:#}"
    );
    // The SDK's server fails an unknown prompt this way itself (asked directly, it says the same).
    let prompt = &report["prompt_results"][0]["error"];
    assert_eq!(
        prompt,
        &json!({"code": -32603, "message": "Internal server error"}),
        "{report:#}"
    );
}

/// With two upstreams Portico decides: an unknown name is its own "no tool named", and its
/// resource-not-found carries the URI (SEP-2164).
#[test]
fn with_two_upstreams_portico_answers_unknown_names_itself() {
    let server = crate::support::python_peer("modern_server.py");
    let python = crate::support::venv_python();
    let config = format!(
        "[expose]\nprefix = false\n\n{}\n{}",
        crate::support::stdio_entry("one", &python, &[server.to_str().unwrap()], ""),
        config_with("", &["--tools", "t1"]),
    );
    let home = Home::new(&config);
    let report = legacy_client(
        &home,
        &[
            "--call",
            "no_such_tool",
            "--args",
            "{}",
            "--read",
            "fixture://nowhere",
        ],
    );
    let call = &report["calls"][0]["error"];
    assert_eq!(call["code"], -32602, "{report:#}");
    assert!(
        call["message"]
            .as_str()
            .unwrap()
            .starts_with("no tool named `no_such_tool`"),
        "{report:#}"
    );
    let read = &report["reads"][0]["error"];
    assert_eq!(
        read["data"],
        json!({"uri": "fixture://nowhere"}),
        "{report:#}"
    );
}

/// SEP-2243: Portico's HTTP door checks a call's `Mcp-Param-*` headers against the `x-mcp-header`
/// annotations of the upstream tool's input schema, as the upstream would over HTTP: a missing
/// or mismatched header is a 400 with HeaderMismatch (-32020), a matching one is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_door_checks_mcp_param_headers_against_upstream_tool_annotations() {
    let server = crate::support::python_peer("modern_server.py");
    let entry = crate::support::stdio_entry(
        "modern",
        &crate::support::venv_python(),
        &[server.to_str().unwrap()],
        "",
    );
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[expose]\nprefix = false\n\n{entry}"
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let call = |id: u64, region: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "in_region", "arguments": {"region": region},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
    };
    let standard = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "in_region"),
    ];
    for (id, param) in [(1, None), (2, Some("us"))] {
        let mut headers = standard.to_vec();
        headers.extend(param.map(|value| ("mcp-param-region", value)));
        let response = mcp_post(&daemon.base, call(id, "eu"), &headers).await;
        assert_eq!(response.status(), 400, "header {param:?}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
    }
    let mut headers = standard.to_vec();
    headers.push(("mcp-param-region", "eu"));
    let response = mcp_post(&daemon.base, call(3, "eu"), &headers).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "region eu",
        "{answer}"
    );
    assert!(daemon.stop().success());
}

async fn mcp_post(base: &str, body: Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A 2026-07-28 request through `portico mcp` with the envelope naming `capabilities`.
fn call_2026(capabilities: Value, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    params
}

/// A 2026-07-28 client calling through Portico to a 2026-07-28 upstream gets the upstream's input
/// round as the upstream made it: its key, not one of Portico's; its answer under that key
/// completes the call. A client that declares no elicitation is declared so upstream, which then
/// refuses the call itself (-32021 with its `data`), instead of asking what nobody can answer.
#[test]
fn input_rounds_keep_the_upstreams_keys_and_calls_declare_the_callers_capabilities() {
    let home = passthrough_home();
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let form = json!({"elicitation": {"form": {}}});
    let (round, _) = session.request(
        1,
        "tools/call",
        call_2026(
            form.clone(),
            json!({"name": "favourite_colour", "arguments": {}}),
        ),
    );
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["__main__:ask_colour"], "{round}");
    assert_eq!(
        result["inputRequests"]["__main__:ask_colour"]["method"], "elicitation/create",
        "{round}"
    );
    let state = result["requestState"].as_str().unwrap().to_string();
    let (done, _) = session.request(
        2,
        "tools/call",
        call_2026(
            form,
            json!({"name": "favourite_colour", "arguments": {}, "requestState": state,
                   "inputResponses": {"__main__:ask_colour":
                       {"action": "accept", "content": {"colour": "green"}}}}),
        ),
    );
    assert_eq!(
        done["result"]["content"][0]["text"], "you like green",
        "{done}"
    );
    let (refused, _) = session.request(
        3,
        "tools/call",
        call_2026(
            json!({}),
            json!({"name": "favourite_colour", "arguments": {}}),
        ),
    );
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"],
        json!({"requiredCapabilities": {"elicitation": {"form": {}}}}),
        "{refused}"
    );
    assert!(session.finish().success());
}

/// A retry that carries a parked call's `requestState` is that call's retry: with other arguments,
/// or with answers that are not an object of result objects (a number, `null`, a number under a
/// key), it is refused with -32602 at the door, and the call stays parked for its right retry.
#[test]
fn a_retry_is_bound_to_its_calls_arguments_and_malformed_answers_are_refused() {
    let home = passthrough_home();
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let form = json!({"elicitation": {"form": {}}});
    let (round, _) = session.request(
        1,
        "tools/call",
        call_2026(
            form.clone(),
            json!({"name": "favourite_colour", "arguments": {}}),
        ),
    );
    let state = round["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("{round}"))
        .to_string();
    let answers =
        json!({"__main__:ask_colour": {"action": "accept", "content": {"colour": "green"}}});
    let retry = |arguments: Value, responses: Value| {
        let mut params = json!({"name": "favourite_colour", "arguments": arguments,
                                "requestState": state});
        params["inputResponses"] = responses;
        call_2026(form.clone(), params)
    };
    let refusals = [
        (
            retry(json!({"favourite": {"colour": "red"}}), answers.clone()),
            "requestState belongs to a call of `favourite_colour` with other arguments; a retry carries the arguments of the call it continues, unchanged",
        ),
        (
            retry(json!({}), json!(5)),
            "inputResponses of `tools/call` is a number, not an object; send the answer to each input request under its key, or leave inputResponses out",
        ),
        (
            retry(json!({}), Value::Null),
            "a retry with requestState carries inputResponses: an object with the answer to each input request of the round, under its key",
        ),
        (
            retry(json!({}), json!({"__main__:ask_colour": 5})),
            "inputResponses `__main__:ask_colour` is a number, not the result object of the input request it answers; send each answer as an object under its request's key",
        ),
    ];
    for (id, (params, message)) in (2..).zip(refusals) {
        let (refused, _) = session.request(id, "tools/call", params);
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["message"], message, "{refused}");
    }
    let (done, _) = session.request(9, "tools/call", retry(json!({}), answers));
    assert_eq!(
        done["result"]["content"][0]["text"], "you like green",
        "{done}"
    );
    assert!(session.finish().success());
}

/// A 2026-07-28 client names resources on its `subscriptions/listen` stream: Portico follows them
/// upstream while the stream is open and sends their updates on it, and none for other URIs.
#[test]
fn a_2026_client_listens_for_resource_updates_through_portico() {
    let home = passthrough_home();
    let config = home.config().display().to_string();
    let mut args: Vec<String> = ["--era", "modern", "--timeout", "20"]
        .map(String::from)
        .to_vec();
    args.extend(["--listen-resource".into(), "fixture://greeting".into()]);
    args.extend(touch("fixture://other"));
    args.extend(touch("fixture://greeting"));
    args.extend(["--wait-updates".into(), "1".into()]);
    args.extend([
        "--stdio".into(),
        "--".into(),
        env!("CARGO_BIN_EXE_portico").into(),
        "mcp".into(),
        "--standalone".into(),
        "--config".into(),
        config,
    ]);
    let report = sdk_report(|command| {
        command.args(&args).env("PORTICO_HOME", home.dir.path());
    });
    assert_eq!(report["protocol_version"], "2026-07-28", "{report:#}");
    assert_eq!(
        report["resource_listen"]["honored"]["resourceSubscriptions"],
        json!(["fixture://greeting"]),
        "{report:#}"
    );
    assert_eq!(
        report["resource_updates"],
        json!(["fixture://greeting"]),
        "{report:#}"
    );
}

/// Two sessions share Portico's one upstream subscription to a URI (a 2026-07-28 upstream gets one
/// `subscriptions/listen` stream per URI, counted per subscriber). A session that never subscribed
/// to it, or gives it back twice, must not end the other's: regression test for a door that passed
/// every `resources/unsubscribe` upstream, so that session B's unsubscribe closed session A's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_unsubscribe_does_not_end_a_subscription() {
    use crate::bounds::{HttpSession, http};
    use futures::StreamExt;

    let home = passthrough_home();
    std::fs::write(
        home.config(),
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
            std::fs::read_to_string(home.config()).unwrap()
        ),
    )
    .unwrap();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let mut a = HttpSession::open(&daemon.base, &[]).await.unwrap();
    let mut b = HttpSession::open(&daemon.base, &[]).await.unwrap();
    // A's standalone stream, where its resource updates arrive.
    let mut stream = http().get(format!("{}/mcp", daemon.base));
    for (k, v) in a.session_headers() {
        stream = stream.header(k, v);
    }
    let stream = stream
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = stream.bytes_stream();

    let uri = "fixture://shared";
    let subscribed = a
        .request("resources/subscribe", json!({ "uri": uri }))
        .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    for _ in 0..2 {
        let refused = b
            .request("resources/unsubscribe", json!({ "uri": uri }))
            .await;
        assert_eq!(refused["result"], json!({}), "{refused}");
    }
    let touched = b
        .request(
            "tools/call",
            json!({"name": "touch", "arguments": {"uri": uri}}),
        )
        .await;
    assert_eq!(
        touched["result"]["content"][0]["text"],
        format!("touched {uri}"),
        "{touched}"
    );
    let mut seen = String::new();
    let update = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(chunk) = events.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if let Some(line) = seen
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|m| m["method"] == "notifications/resources/updated")
            {
                return line;
            }
        }
        panic!("A's stream ended without the update: {seen}");
    })
    .await
    .unwrap_or_else(|_| panic!("A got no update for {uri} after B's unsubscribes: {seen}"));
    assert_eq!(update["params"]["uri"], uri, "{update}");
    assert!(daemon.stop().success());
}
