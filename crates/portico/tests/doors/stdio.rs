//! `portico mcp` over stdio: the handshake, the catalog, JSON-RPC edge cases.

use serde_json::json;

use crate::client::*;
use crate::support::{python_peer, python3, stdio_entry};

#[test]
fn serves_the_catalog_in_process_over_newline_json() {
    let home = Home::new(&config_with(
        "[server]\ninstructions = \"Ask Portico.\"",
        &["--tools", "t1,t2", "--prompts", "1", "--resources", "1"],
    ));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let init = session.initialize("2025-06-18");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "portico");
    assert_eq!(init["result"]["instructions"], "Ask Portico.");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);

    let (pong, _) = session.request(1, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));

    let names = session.upstream_tool_names(2);
    assert_eq!(names, vec!["mcp_cat_t1", "mcp_cat_t2"]);

    let (call, _) = session.request(
        3,
        "tools/call",
        json!({"name": "mcp_cat_t2", "arguments": {}}),
    );
    assert_eq!(call["result"]["content"][0]["text"], "t2 called");

    let (unknown_tool, _) =
        session.request(4, "tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(unknown_tool["error"]["code"], -32602, "{unknown_tool}");
    assert!(
        unknown_tool["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool named `nope`")
    );

    let (unknown_method, _) = session.request(5, "does/not/exist", json!({}));
    assert_eq!(unknown_method["error"]["code"], -32601, "{unknown_method}");

    let (resources, _) = session.request(6, "resources/list", json!({}));
    assert_eq!(
        resources["result"]["resources"][0]["uri"],
        "portico://cat/mem://r/0"
    );
    let (read, _) = session.request(
        7,
        "resources/read",
        json!({"uri": "portico://cat/mem://r/0"}),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "resource 0");
    let (prompts, _) = session.request(8, "prompts/list", json!({}));
    assert_eq!(prompts["result"]["prompts"][0]["name"], "mcp_cat_prompt_0");

    // A notification gets no answer: the next line is the answer to the request after it.
    session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}),
    );
    let (after, notes) = session.request(9, "ping", json!({}));
    assert_eq!(after["result"], json!({}));
    assert!(notes.is_empty(), "{notes:?}");

    assert!(session.finish().success());
}

#[test]
fn catalog_changes_reach_the_client_as_list_changed() {
    let home = Home::new(&config_with("", &["--tools", "t1", "--dynamic"]));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-11-25");
    assert_eq!(
        session.upstream_tool_names(1),
        vec!["mcp_cat_t1", "mcp_cat_add_tool"]
    );
    let (added, mut notes) = session.request(
        2,
        "tools/call",
        json!({"name": "mcp_cat_add_tool", "arguments": {"name": "fresh"}}),
    );
    assert_eq!(added["result"]["content"][0]["text"], "added fresh");
    while !notes
        .iter()
        .any(|n| n["method"] == "notifications/tools/list_changed")
    {
        notes.push(session.next());
    }
    assert!(session.tool_names(3).contains(&"mcp_cat_fresh".to_string()));
    assert!(session.finish().success());
}

#[test]
fn content_length_clients_are_answered_in_their_framing() {
    let home = Home::new(&config_with("", &["--tools", "t1"]));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.send_framed(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "reference-client", "version": "1"}}}));
    let frame = session.next_frame();
    assert_eq!(frame.content_length, Some(frame.body.len()));
    let init: serde_json::Value = serde_json::from_slice(&frame.body).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    session.send_framed(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // Non-ASCII payload: the declared length counts bytes, not characters.
    session.send_framed(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_cat_t1", "arguments": {"note": "héllo ✓"}}}));
    let frame = session.next_frame();
    assert_eq!(frame.content_length, Some(frame.body.len()));
    let call: serde_json::Value = serde_json::from_slice(&frame.body).unwrap();
    assert_eq!(call["id"], 2);
    assert_eq!(call["result"]["content"][0]["text"], "t1 called");
    // The same session may switch to newline JSON; the answer follows.
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let frame = session.next_frame();
    assert_eq!(frame.content_length, None);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&frame.body).unwrap()["id"],
        3
    );
    assert!(session.finish().success());
}

#[test]
fn bad_input_is_answered_and_the_server_keeps_serving() {
    let home = Home::new(&config_with(
        "[server]\nmax_message_bytes = 1048576",
        &["--tools", "t1"],
    ));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    // Garbage before the handshake does not stop the handshake.
    session.send_raw(b"this is not json\n");
    let parse_error = session.next();
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], serde_json::Value::Null);
    session.initialize("2025-06-18");

    let mut id = 10;
    let mut assert_still_serving = |session: &mut StdioSession| {
        id += 1;
        let (pong, _) = session.request(id, "ping", json!({}));
        assert_eq!(pong["result"], json!({}), "{pong}");
    };

    // Oversized (newline framing): drained, refused, and the next request is answered.
    let mut big = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp_cat_t1","arguments":{"blob":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    big.extend_from_slice(b"\"}}}\n");
    session.send_raw(&big);
    let refused = session.next();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1048576"),
        "{refused}"
    );
    assert_still_serving(&mut session);

    // Oversized (Content-Length framing).
    session.send_raw(format!("Content-Length: {}\r\n\r\n", 3 * 1024 * 1024).as_bytes());
    session.send_raw(&vec![b' '; 3 * 1024 * 1024]);
    let refused = session.next();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_still_serving(&mut session);

    // Malformed JSON, binary garbage, truncated JSON.
    for bad in [
        &b"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \n"[..],
        b"\xff\xfe\x00\x01garbage\x80\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"meth\n",
    ] {
        session.send_raw(bad);
        let error = session.next();
        assert_eq!(error["error"]["code"], -32700, "{error}");
        assert_still_serving(&mut session);
    }
    // Valid JSON that is not a request.
    session.send_raw(b"42\n");
    assert_eq!(session.next()["error"]["code"], -32600);
    assert_still_serving(&mut session);
    assert!(session.finish().success());
}

#[test]
fn tool_search_mode_serves_meta_tools_that_find_describe_and_call() {
    let tools: Vec<String> = (0..150).map(|i| format!("tool_{i}")).collect();
    let mut tools = tools.join(",");
    tools.push_str(",create_github_issue");
    // Above the threshold of 100 tools, `auto` switches to search.
    let home = Home::new(&config_with(
        "[expose]\ntool_search = \"auto\"",
        &["--tools", &tools],
    ));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-11-25");
    assert_eq!(
        session.tool_names(1),
        vec![
            "portico_search_tools",
            "portico_describe_tool",
            "portico_call_tool"
        ]
    );
    let (found, _) = session.request(
        2,
        "tools/call",
        json!({"name": "portico_search_tools", "arguments": {"query": "github issue"}}),
    );
    assert_eq!(
        found["result"]["structuredContent"]["tools"][0]["name"], "mcp_cat_create_github_issue",
        "{found}"
    );
    let (described, _) = session.request(3, "tools/call", json!({"name": "portico_describe_tool", "arguments": {"name": "mcp_cat_create_github_issue"}}));
    assert_eq!(
        described["result"]["structuredContent"]["tool"]["inputSchema"]["type"], "object",
        "{described}"
    );
    let (called, _) = session.request(4, "tools/call", json!({"name": "portico_call_tool", "arguments": {"name": "mcp_cat_create_github_issue", "arguments": {}}}));
    assert_eq!(
        called["result"]["content"][0]["text"], "create_github_issue called",
        "{called}"
    );
    // Real names still work when called directly.
    let (direct, _) = session.request(
        5,
        "tools/call",
        json!({"name": "mcp_cat_tool_7", "arguments": {}}),
    );
    assert_eq!(direct["result"]["content"][0]["text"], "tool_7 called");
    let (unknown, _) = session.request(
        6,
        "tools/call",
        json!({"name": "portico_call_tool", "arguments": {"name": "nope"}}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(session.finish().success());
}

#[test]
fn results_over_the_response_budget_become_clear_errors() {
    let home = Home::new(&config_with(
        "[server]\nmax_response_bytes = 4096",
        &["--big-tool"],
    ));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-11-25");
    let (small, _) = session.request(
        1,
        "tools/call",
        json!({"name": "mcp_cat_big", "arguments": {"bytes": 100}}),
    );
    assert_eq!(
        small["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        100
    );
    let (large, _) = session.request(
        2,
        "tools/call",
        json!({"name": "mcp_cat_big", "arguments": {"bytes": 10000}}),
    );
    assert_eq!(large["result"]["isError"], true, "{large}");
    let message = large["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("over Portico's response limit of 4096 bytes"),
        "{message}"
    );
    let (after, _) = session.request(3, "ping", json!({}));
    assert_eq!(after["result"], json!({}));
    assert!(session.finish().success());
}

#[test]
fn a_cancelled_call_is_cancelled_upstream_too() {
    let home = Home::new(&config_with("", &["--sleep-tool"]));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-11-25");
    assert!(session.tool_names(1).contains(&"mcp_cat_sleep".to_string()));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_cat_sleep", "arguments": {"seconds": 1}}}));
    // Wait until the call has reached the upstream (its stderr is logged by portico), then cancel it.
    session.wait_for_stderr("sleep started");
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user pressed stop"}}));
    // The upstream hears of it (with its own request id), and the client gets no answer for id 2.
    session.wait_for_stderr("cancelled request");
    let (pong, notes) = session.request(3, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert!(
        notes.iter().all(|n| n.get("id") != Some(&json!(2))),
        "{notes:?}"
    );
    assert!(session.finish().success());
}

/// A 2026-07-28 upstream asks for input with `input_required`; a 2025-11-25 client of Portico is asked
/// the same question as an `elicitation/create` request, and its answer completes the upstream's call.
#[test]
fn input_required_from_a_2026_upstream_reaches_a_handshake_era_client() {
    let server = crate::support::python_peer("modern_server.py");
    let config = crate::support::stdio_entry(
        "modern",
        &crate::support::venv_python(),
        &[server.to_str().unwrap()],
        "",
    );
    let home = Home::new(&config);
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let (init, _) = session.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "asker", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_modern_favourite_colour", "arguments": {}}}));
    let question = loop {
        let message = session.next();
        if message["method"] == "elicitation/create" {
            break message;
        }
        assert_ne!(
            message["id"],
            json!(2),
            "answered without asking: {message}"
        );
    };
    assert_eq!(
        question["params"]["message"],
        "What is your favourite colour?"
    );
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["colour"]["type"],
        "string"
    );
    session.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"colour": "teal"}}}));
    let answer = loop {
        let message = session.next();
        if message["id"] == json!(2) {
            break message;
        }
    };
    assert_eq!(
        answer["result"]["content"][0]["text"], "you like teal",
        "{answer}"
    );
    // The upstream session really is in the era that uses input_required.
    session.wait_for_stderr("server=\"modern\" protocol=\"2026-07-28\"");
    assert!(session.finish().success());

    // A client that cannot answer gets a clear failure, not a hang: the call declares the
    // client's own capabilities upstream, so the upstream refuses it itself.
    let mut mute = StdioSession::start(&home, &["--standalone"]);
    mute.initialize("2025-11-25");
    let (refused, _) = mute.request(
        2,
        "tools/call",
        json!({"name": "mcp_modern_favourite_colour", "arguments": {}}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Client did not declare the form elicitation capability"),
        "{text}"
    );
    assert!(mute.finish().success());
}

/// Arguments may hold secrets (the audit keeps only keyed digests of them): neither a call's
/// arguments nor its result reach the log, even at `PORTICO_LOG=trace`, where rmcp would print
/// every message it carries.
#[test]
fn arguments_and_results_never_reach_the_log_even_at_trace() {
    let secret = "s3cr3t-argument-7f2a91c4";
    let peer = python_peer("env_dump.py");
    let home = Home::new(&stdio_entry(
        "dump",
        &python3(),
        &[peer.to_str().unwrap()],
        "",
    ));
    let mut session =
        StdioSession::start_with_env(&home, &["--standalone"], &[("PORTICO_LOG", "trace")]);
    session.initialize("2025-06-18");
    let (call, _) = session.request(
        1,
        "tools/call",
        json!({"name": "mcp_dump_echo", "arguments": {"message": secret}}),
    );
    assert_eq!(
        call["result"]["content"][0]["text"],
        format!("echo: {secret}"),
        "{call}"
    );
    let stderr = session.stderr.clone();
    assert!(session.finish().success());
    let log = stderr.lock().unwrap().clone();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the log is at trace: {log}"
    );
    assert!(!log.contains(secret), "the secret was logged:\n{log}");
}

/// A `Content-Length` over the limit with no body: refused as soon as its header block ends (the
/// answer used to wait for the next message, and then took that message for the body), and the
/// next message is answered.
#[test]
fn a_lying_content_length_is_refused_at_once_and_the_next_message_answered() {
    let home = Home::new(&config_with("", &["--tools", "t1"]));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-06-18");
    session.send_raw(b"Content-Length: 9223372036854775808\r\n\r\n");
    let frame = session.next_frame();
    assert!(frame.content_length.is_some(), "answered in its framing");
    let refused: serde_json::Value = serde_json::from_slice(&frame.body).unwrap();
    assert_eq!(refused["id"], serde_json::Value::Null, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Invalid Request: message of 9223372036854775808 bytes exceeds the maximum message size"
        ),
        "{message}"
    );
    let (pong, _) = session.request(7, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    assert!(session.finish().success());
}
