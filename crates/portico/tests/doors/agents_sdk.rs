//! Agents served as MCP tools (`portico_agent_{name}`), driven by the official Python `mcp` SDK client
//! (`agent_client.py`) and by a hand-written `Content-Length` client: scripted agents, the capability
//! check (an agent neither sees nor can call a tool outside its patterns), and agents whose model is
//! the calling client's (`sampling/createMessage`).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::client::*;
use crate::support::*;

const HELPER: &str = "portico_agent_helper_bot";
const SNOOPER: &str = "portico_agent_snooper";
const SAMPLER: &str = "portico_agent_sampler";
const SAMPLER_PROMPT: &str = "You are the sampling agent. Use system_time when asked the time.";
/// What `x` in the workspace holds: an agent allowed `file_read` would see it.
const SECRET: &str = "SECRET-CONTENT-7f3a";

/// The agents under test. `helper-bot` is the brief's scripted agent; `snooper` (allowed only
/// `system_time`) tries `file_read`; `sampler` runs on the calling client's model.
const AGENTS: &str = r#"
[[agents]]
name = "helper-bot"
description = "A scripted helper for the door tests."
tools = ["system_time", "mcp_cat_*"]
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "time" }, steps = [ { call_tool = { name = "system_time", arguments = {} } }, { reply = "it is {{last_tool_result}}" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}} / tools: {{tools}}" } ] },
]

[[agents]]
name = "snooper"
description = "Tries a tool outside its patterns."
tools = ["system_time"]
[agents.model]
provider = "scripted"
rules = [
  { when = {}, steps = [ { call_tool = { name = "file_read", arguments = { path = "x" } } }, { reply = "result: {{last_tool_result}}" } ] },
]

[[agents]]
name = "sampler"
description = "Thinks with the calling client's model."
system_prompt = "You are the sampling agent. Use system_time when asked the time."
tools = ["system_time"]
[agents.model]
provider = "sampling"
"#;

/// A home whose config has the built-ins (confined to `ws`, holding `x`), the agents, `extra`
/// (e.g. a `[server]` table) and the `cat` upstream offering `t1` and `t2`.
fn agent_home(extra: &str) -> Home {
    let home = Home::new("");
    let workspace = home.dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("x"), SECRET).unwrap();
    let builtins = format!(
        "{extra}\n[builtins]\nenabled = true\nworkspace = {:?}\n{AGENTS}",
        workspace.display().to_string()
    );
    std::fs::write(home.config(), config_with(&builtins, &["--tools", "t1,t2"])).unwrap();
    home
}

/// Runs `agent_client.py` with `args` and returns its JSON report (it exits non-zero on any error).
fn agent_client(home: &Home, args: &[&str]) -> Value {
    let output = Command::new(venv_python())
        .arg(python_peer("agent_client.py"))
        .args(args)
        .env("PORTICO_HOME", home.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "agent_client failed ({}): {stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The door arguments of `agent_client.py` for `portico mcp --standalone` with this home's config.
fn stdio_door(home: &Home) -> Vec<String> {
    vec![
        "--stdio".into(),
        env!("CARGO_BIN_EXE_portico").into(),
        "--config".into(),
        home.config().display().to_string(),
    ]
}

/// `agent_client.py` against `door` (from [`stdio_door`] or `--http URL`), with more arguments.
fn run_client(home: &Home, door: &[String], more: &[&str]) -> Value {
    let mut args: Vec<&str> = door.iter().map(String::as_str).collect();
    args.extend_from_slice(more);
    agent_client(home, &args)
}

/// A daemon (`portico serve`) on a loopback port, ready, and its `/mcp` door as client arguments.
fn http_door(home: &Home) -> (Daemon, Vec<String>) {
    let mut daemon = Daemon::start(home);
    daemon.wait_for_line("portico: ready");
    let url = format!("{}/mcp", daemon.base);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (daemon, vec!["--http".into(), url])
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The proleptic Gregorian year of a Unix time in milliseconds (UTC).
fn year_of(unix_ms: u64) -> i64 {
    let days = (unix_ms / 86_400_000) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + i64::from(month <= 2)
}

#[test]
fn year_of_knows_the_calendar() {
    assert_eq!(year_of(0), 1970);
    assert_eq!(year_of(951_782_400_000), 2000); // 2000-02-29
    assert_eq!(year_of(1_735_689_599_999), 2024); // 2024-12-31T23:59:59.999Z
    assert_eq!(year_of(1_735_689_600_000), 2025);
}

/// Checks that `text` is a `system_time` result taken between `before` and `after` (Unix ms), and
/// that it names the current year.
fn assert_system_time_between(text: &str, before: u64, after: u64) {
    let years: BTreeSet<String> = [year_of(before), year_of(after)]
        .iter()
        .map(i64::to_string)
        .collect();
    assert!(
        years.iter().any(|year| text.contains(year.as_str())),
        "{text:?} names none of the years {years:?}"
    );
    let time: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("system_time result is not JSON ({e}): {text:?}"));
    let unix_ms = time["unix_ms"].as_u64().unwrap_or_else(|| panic!("{time}"));
    assert!(
        (before.saturating_sub(2_000)..=after + 2_000).contains(&unix_ms),
        "system_time said {unix_ms}, the client ran from {before} to {after}: {time}"
    );
    let utc = time["utc_rfc3339"].as_str().unwrap_or_default();
    assert!(
        years.iter().any(|year| utc.starts_with(year.as_str())),
        "{time}"
    );
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// The text content of a tool result (all text blocks, joined).
fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {result}"))
        .iter()
        .filter(|block| block["type"] == "text")
        .map(|block| block["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A successful agent result: text content is the reply, structuredContent agrees. Returns the
/// reply.
fn agent_reply(call: &Value) -> String {
    let result = &call["result"];
    assert_ne!(result["isError"], true, "{call:#}");
    let reply = result_text(result);
    assert_eq!(result["structuredContent"]["reply"], reply, "{call:#}");
    reply
}

/// The tools an agent says it was offered, from the echo rule's reply.
fn offered_tools(reply: &str) -> BTreeSet<String> {
    let (_, tools) = reply
        .rsplit_once(" / tools: ")
        .unwrap_or_else(|| panic!("not an echo reply: {reply:?}"));
    tools
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The brief's session: the time rule (a tool call inside the agent), then the echo rule in the same
/// conversation, which names the tools the agent was offered.
fn assert_helper_bot_session(home: &Home, door: &[String]) {
    let before = now_ms();
    let report = run_client(
        home,
        door,
        &[
            "--call",
            HELPER,
            "--args",
            r#"{"message": "what time is it"}"#,
            "--call",
            HELPER,
            "--args",
            r#"{"message": "hello there", "conversation_id": "$CONV"}"#,
        ],
    );
    let after = now_ms();
    assert_eq!(report["protocol_version"], "2025-11-25", "{report:#}");
    let listed = names(&report["tools"]);
    for tool in [
        HELPER,
        "system_time",
        "file_read",
        "mcp_cat_t1",
        "mcp_cat_t2",
    ] {
        assert!(listed.iter().any(|t| t == tool), "{tool} not in {listed:?}");
    }

    // The time rule: the agent called system_time and replied with its result.
    let first = &report["calls"][0];
    let reply = agent_reply(first);
    let time = reply
        .strip_prefix("it is ")
        .unwrap_or_else(|| panic!("{reply:?}"));
    assert_system_time_between(time, before, after);
    let structured = &first["result"]["structuredContent"];
    assert_eq!(structured["iterations"], 2, "{structured:#}");
    let conversation = structured["conversation_id"].as_str().unwrap_or_default();
    assert!(!conversation.is_empty(), "{structured:#}");

    // The echo rule, continuing that conversation.
    let second = &report["calls"][1];
    assert_eq!(
        second["args"]["conversation_id"], conversation,
        "{second:#}"
    );
    let reply = agent_reply(second);
    assert!(
        reply.starts_with("echo: hello there / tools: "),
        "{reply:?}"
    );
    let structured2 = &second["result"]["structuredContent"];
    assert_eq!(
        structured2["conversation_id"], conversation,
        "{structured2:#}"
    );
    assert_eq!(structured2["iterations"], 1, "{structured2:#}");
    for counter in ["input_tokens", "output_tokens"] {
        let total = structured["usage"][counter].as_u64().unwrap()
            + structured2["usage"][counter].as_u64().unwrap();
        assert_eq!(
            structured2["conversation_usage"][counter], total,
            "{counter}: {structured:#} then {structured2:#}"
        );
    }

    // The capability check: the agent is offered exactly what its patterns match among the tools
    // the client sees: no other built-in, no agent (itself included).
    let offered = offered_tools(&reply);
    let expected: BTreeSet<String> = ["system_time", "mcp_cat_t1", "mcp_cat_t2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(offered, expected, "{reply:?}");
    assert!(
        !offered
            .iter()
            .any(|t| t == "file_read" || t.starts_with("portico_agent_")),
        "{reply:?}"
    );
    let by_pattern: BTreeSet<String> = listed
        .iter()
        .filter(|t| *t == "system_time" || t.starts_with("mcp_cat_"))
        .cloned()
        .collect();
    assert_eq!(offered, by_pattern, "listed: {listed:?}");
}

#[test]
fn python_sdk_calls_a_scripted_agent_over_portico_mcp() {
    let home = agent_home("");
    assert_helper_bot_session(&home, &stdio_door(&home));
}

#[test]
fn python_sdk_calls_a_scripted_agent_over_http() {
    let home = agent_home("[server]\nlisten = \"127.0.0.1:0\"");
    let (mut daemon, door) = http_door(&home);
    assert_helper_bot_session(&home, &door);
    assert!(daemon.stop().success());
}

/// Sends `message` `Content-Length` framed and returns the framed answer with `id`; every frame
/// the server writes meanwhile must be `Content-Length` framed too.
fn framed_request(session: &mut StdioSession, id: u64, method: &str, params: Value) -> Value {
    session.send_framed(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    loop {
        let frame = session.next_frame();
        assert_eq!(
            frame.content_length,
            Some(frame.body.len()),
            "answered out of the client's framing: {}",
            String::from_utf8_lossy(&frame.body)
        );
        let message: Value = serde_json::from_slice(&frame.body).unwrap();
        if message["id"] == json!(id) && message.get("method").is_none() {
            return message;
        }
    }
}

#[test]
fn content_length_client_calls_an_agent_over_portico_mcp() {
    let home = agent_home("");
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let init = framed_request(
        &mut session,
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "framed-agent-client", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    session.send_framed(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = framed_request(&mut session, 2, "tools/list", json!({}));
    let listed: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&HELPER), "{listed:?}");
    assert!(listed.contains(&"mcp_cat_t2"), "{listed:?}");

    // Non-ASCII both ways: the declared lengths count bytes.
    let call = framed_request(
        &mut session,
        3,
        "tools/call",
        json!({"name": HELPER, "arguments": {"message": "héllo ✓ framed"}}),
    );
    let expected = "echo: héllo ✓ framed / tools: system_time,mcp_cat_t1,mcp_cat_t2";
    assert_ne!(call["result"]["isError"], true, "{call}");
    assert_eq!(call["result"]["content"][0]["text"], expected, "{call}");
    assert_eq!(
        call["result"]["structuredContent"]["reply"], expected,
        "{call}"
    );
    assert_eq!(
        call["result"]["content"].as_array().unwrap().len(),
        1,
        "{call}"
    );

    // The tool-calling rule works in this framing too.
    let before = now_ms();
    let call = framed_request(
        &mut session,
        4,
        "tools/call",
        json!({"name": HELPER, "arguments": {"message": "what time is it"}}),
    );
    let after = now_ms();
    let reply = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{call}"));
    let time = reply
        .strip_prefix("it is ")
        .unwrap_or_else(|| panic!("{reply:?}"));
    assert_system_time_between(time, before, after);
    assert!(session.finish().success());
}

/// The snooper agent asks for `file_read`, outside its patterns: the pipeline refuses it, so the
/// agent's reply carries the refusal and not the file. The client itself may call `file_read` (the
/// control: the file is there and readable).
fn assert_snooper_is_refused(home: &Home, door: &[String]) {
    let report = run_client(
        home,
        door,
        &[
            "--call",
            SNOOPER,
            "--args",
            r#"{"message": "read x for me"}"#,
            "--call",
            "file_read",
            "--args",
            r#"{"path": "x"}"#,
        ],
    );
    let reply = agent_reply(&report["calls"][0]);
    assert!(reply.starts_with("result: "), "{reply:?}");
    assert!(reply.contains("not available to agent"), "{reply:?}");
    assert!(reply.contains("file_read"), "{reply:?}");
    assert!(
        !reply.contains(SECRET),
        "the agent read the file: {reply:?}"
    );

    let control = &report["calls"][1]["result"];
    assert_ne!(control["isError"], true, "{control:#}");
    assert!(result_text(control).contains(SECRET), "{control:#}");
}

#[test]
fn an_agent_cannot_call_a_tool_outside_its_patterns_over_portico_mcp() {
    let home = agent_home("");
    assert_snooper_is_refused(&home, &stdio_door(&home));
}

#[test]
fn an_agent_cannot_call_a_tool_outside_its_patterns_over_http() {
    let home = agent_home("[server]\nlisten = \"127.0.0.1:0\"");
    let (mut daemon, door) = http_door(&home);
    assert_snooper_is_refused(&home, &door);
    assert!(daemon.stop().success());
}

/// The sampler agent thinks with the client's model: model (tool_use system_time) → Portico runs the
/// tool → model (text from the tool result). A client without sampling gets a clear isError.
///
/// `era` is the client's: `legacy` (2025-11-25: Portico sends `sampling/createMessage` requests) or
/// `auto` (2026-07-28: Portico answers the call with `input_required` rounds the SDK fulfils and
/// retries).
fn assert_sampling_agent(home: &Home, door: &[String], era: &str) {
    let message = "what time is it, sampler?";
    let call_args = json!({"message": message}).to_string();
    let before = now_ms();
    let report = run_client(
        home,
        door,
        &[
            "--era",
            era,
            "--sampling",
            "--call",
            SAMPLER,
            "--args",
            &call_args,
        ],
    );
    let after = now_ms();
    let expected_version = if era == "auto" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(report["protocol_version"], expected_version, "{report:#}");
    let reply = agent_reply(&report["calls"][0]);
    let time = reply
        .strip_prefix("sampled: ")
        .unwrap_or_else(|| panic!("{reply:?}"));
    assert_system_time_between(time, before, after);
    let structured = &report["calls"][0]["result"]["structuredContent"];
    assert_eq!(structured["iterations"], 2, "{structured:#}");
    assert!(
        !structured["conversation_id"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{structured:#}"
    );

    let requests = report["sampling_requests"]
        .as_array()
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for request in requests {
        assert_eq!(request["system_prompt"], SAMPLER_PROMPT, "{request:#}");
        assert_eq!(request["tools"], json!(["system_time"]), "{request:#}");
        assert!(request["max_tokens"].as_u64().unwrap() > 0, "{request:#}");
    }
    // First: just the user's message; the client's model asked for system_time.
    assert_eq!(
        requests[0]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": message}}]),
        "{:#}",
        requests[0]
    );
    assert_eq!(requests[0]["answer"], json!({"tool_use": "system_time"}));
    // Second: the same conversation plus the tool call and Portico's run of it; the text the model
    // then gave is the agent's reply.
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[0], requests[0]["messages"][0]);
    assert_eq!(messages[1]["role"], "assistant", "{messages:#?}");
    assert_eq!(
        messages[1]["content"],
        json!([{"type": "tool_use", "id": "use_1", "name": "system_time", "input": {}}]),
        "{messages:#?}"
    );
    assert_eq!(messages[2]["role"], "user", "{messages:#?}");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{messages:#?}");
    assert_eq!(result["toolUseId"], "use_1", "{messages:#?}");
    assert_ne!(result["isError"], true, "{messages:#?}");
    assert_eq!(result["content"][0]["text"], time, "{messages:#?}");
    assert_eq!(requests[1]["answer"], json!({"text": reply}));

    // The same call from a client that did not declare sampling.
    let report = run_client(
        home,
        door,
        &["--era", era, "--call", SAMPLER, "--args", &call_args],
    );
    assert_eq!(report["sampling_requests"], json!([]), "{report:#}");
    let refused = &report["calls"][0]["result"];
    assert_eq!(refused["isError"], true, "{refused:#}");
    let text = result_text(refused);
    assert!(text.contains("sampling"), "{text:?}");
    assert!(
        text.contains("did not declare the sampling capability"),
        "{text:?}"
    );
}

#[test]
fn a_sampling_agent_thinks_with_the_calling_clients_model_over_portico_mcp() {
    let home = agent_home("");
    assert_sampling_agent(&home, &stdio_door(&home), "legacy");
}

#[test]
fn a_sampling_agent_asks_a_2026_client_through_input_rounds_over_portico_mcp() {
    let home = agent_home("");
    assert_sampling_agent(&home, &stdio_door(&home), "auto");
}

#[test]
fn a_sampling_agent_thinks_with_the_calling_clients_model_over_http() {
    let home = agent_home("[server]\nlisten = \"127.0.0.1:0\"");
    let (mut daemon, door) = http_door(&home);
    assert_sampling_agent(&home, &door, "legacy");
    assert!(daemon.stop().success());
}

#[test]
fn a_sampling_agent_asks_a_2026_client_through_input_rounds_over_http() {
    let home = agent_home("[server]\nlisten = \"127.0.0.1:0\"");
    let (mut daemon, door) = http_door(&home);
    assert_sampling_agent(&home, &door, "auto");
    assert!(daemon.stop().success());
}

/// The progress of one call through `portico mcp` proxying to a daemon: every notification, in the
/// order the daemon sent it, before the result. (Proxied progress used to be relayed on one task per
/// notification and arrived shuffled: 1, 2, 4, 5, 3, ...)
#[test]
fn an_agent_call_through_the_daemon_proxy_relays_all_progress_in_order() {
    let home = agent_home("[server]\nlisten = \"127.0.0.1:0\"");
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let mut session = StdioSession::start(&home, &[]);
    session.initialize("2025-11-25");
    // The scripted model streams its reply a word at a time: one progress notification per word.
    let message: Vec<String> = (1..=120).map(|i| format!("w{i}")).collect();
    let message = message.join(" ");
    for round in 0..3 {
        let (result, notes) = session.request(
            2 + round,
            "tools/call",
            json!({"name": HELPER, "arguments": {"message": message}, "_meta": {"progressToken": round}}),
        );
        let reply = agent_reply(&result);
        let progress: Vec<&Value> = notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .collect();
        let values: Vec<f64> = progress
            .iter()
            .map(|n| n["params"]["progress"].as_f64().unwrap())
            .collect();
        let expected: Vec<f64> = (1..=values.len()).map(|i| i as f64).collect();
        assert_eq!(values, expected, "round {round}: in order, none missing");
        assert!(values.len() > 120, "round {round}: {} notes", values.len());
        assert!(
            progress
                .iter()
                .all(|n| n["params"]["progressToken"] == round)
        );
        let streamed: String = progress
            .iter()
            .map(|n| n["params"]["message"].as_str().unwrap())
            .collect();
        assert_eq!(
            streamed, reply,
            "round {round}: the streamed text is the answer"
        );
    }
    let stderr = session.stderr.clone();
    assert!(session.finish().success());
    assert!(
        stderr
            .lock()
            .unwrap()
            .contains("proxying to the running daemon")
    );
    assert!(daemon.stop().success());
}

/// An MCP client that asks for progress hears the agent write its answer, in order, before the result.
#[test]
fn an_agent_call_streams_progress_to_an_mcp_client_that_asked() {
    let home = agent_home("");
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-11-25");
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let (result, notes) = session.request(
        2,
        "tools/call",
        json!({"name": "portico_agent_helper_bot", "arguments": {"message": "stream me"}, "_meta": {"progressToken": "p-1"}}),
    );
    let reply = result["result"]["structuredContent"]["reply"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
        .to_string();
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{notes:#?}");
    for (i, note) in progress.iter().enumerate() {
        assert_eq!(note["params"]["progressToken"], "p-1");
        assert_eq!(
            note["params"]["progress"].as_f64(),
            Some((i + 1) as f64),
            "in order: {notes:#?}"
        );
    }
    let streamed: String = progress
        .iter()
        .map(|n| n["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, reply, "the streamed text is the answer");
    // Without a progress token, no progress.
    let (_, quiet) = session.request(
        3,
        "tools/call",
        json!({"name": "portico_agent_helper_bot", "arguments": {"message": "quietly"}}),
    );
    assert!(
        quiet
            .iter()
            .all(|n| n["method"] != "notifications/progress"),
        "{quiet:#?}"
    );
    assert!(session.finish().success());
}
