//! `portico mcp` over stdio: the handshake, the catalog, JSON-RPC edge cases.

use serde_json::json;

use crate::client::*;

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

    let names = session.tool_names(2);
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
        session.tool_names(1),
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
