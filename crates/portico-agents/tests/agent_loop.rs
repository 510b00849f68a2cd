//! The agent loop over a real pipeline and store, with the scripted driver: parallel tool calls, the
//! loop guard, max iterations, depth limits and conversations.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use portico_agents::{
    Agent, AgentError, AgentRuntime, AgentTools, DriverChoice, RuntimeSettings, agent_tools,
};
use portico_config::{AgentConfig, ModelConfig, agent_tool_name};
use portico_core::{JsonObject, ToolResult};
use portico_llm::Scripted;
use portico_pipeline::{
    LocalTool, LocalTools, Pipeline, PipelineSettings, ToolContext, ToolPatterns,
};
use portico_store::Store;
use serde_json::{Value, json};

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

fn agent(name: &str, tools: &[&str], rules: Value, max_iterations: u32) -> Agent {
    let config = AgentConfig {
        name: name.into(),
        description: String::new(),
        system_prompt: None,
        model: ModelConfig::default(),
        tools: tools.iter().map(|s| s.to_string()).collect(),
        max_iterations,
        timeout_secs: 30,
        enabled: true,
    };
    Agent {
        tool_name: agent_tool_name(name),
        patterns: ToolPatterns::new(&config.tools).unwrap(),
        driver: DriverChoice::Ready(Arc::new(Scripted::from_json(&rules).unwrap())),
        config,
    }
}

struct World {
    pipeline: Pipeline,
    runtime: Arc<AgentRuntime>,
    store: Store,
}

fn world(tools: Vec<LocalTool>, agents: Vec<Agent>, settings: RuntimeSettings) -> World {
    let pipeline = Pipeline::new(PipelineSettings::default());
    let store = Store::open_in_memory().unwrap();
    let local = LocalTools::default();
    for tool in tools {
        local.register(tool);
    }
    let runtime = Arc::new(AgentRuntime::new(
        agents,
        pipeline.downgrade(),
        store.clone(),
        settings,
    ));
    for tool in agent_tools(&runtime) {
        local.register(tool);
    }
    pipeline.add_source(Arc::new(local));
    pipeline.add_source(Arc::new(AgentTools::new(runtime.clone())));
    World {
        pipeline,
        runtime,
        store,
    }
}

fn counter(name: &str, runs: Arc<AtomicUsize>) -> LocalTool {
    LocalTool::raw(
        object(json!({"name": name, "inputSchema": {"type": "object"}})),
        move |_, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { ToolResult::text("same") })
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turns_tool_calls_run_in_parallel() {
    // Each call waits for the other: run one after the other, they would never finish.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet = LocalTool::raw(
        object(json!({"name": "meet", "inputSchema": {"type": "object"}})),
        move |args, _| {
            let barrier = barrier.clone();
            Box::pin(async move {
                barrier.wait().await;
                ToolResult::text(format!("met {}", args["who"]))
            })
        },
    );
    let rules = json!([{ "when": {}, "steps": [
        {"call_tool": {"name": "meet", "arguments": {"who": "a"}}},
        {"call_tool": {"name": "meet", "arguments": {"who": "b"}}},
        {"reply": "done: {{last_tool_result}}"}
    ]}]);
    let w = world(
        vec![meet],
        vec![agent("par", &["meet"], rules, 5)],
        RuntimeSettings::default(),
    );
    let reply = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        w.runtime
            .send("par", "go", None, None, &ToolContext::client("t")),
    )
    .await
    .expect("parallel calls finished (test guard)")
    .unwrap();
    assert_eq!(reply.reply, "done: met \"b\"");
    assert_eq!(reply.iterations, 2);
    let roles: Vec<String> = w
        .store
        .messages(&reply.conversation_id)
        .unwrap()
        .into_iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "assistant"]);
}

#[tokio::test]
async fn the_loop_guard_warns_then_blocks_a_repeated_call() {
    let runs = Arc::new(AtomicUsize::new(0));
    let same = json!({"call_tool": {"name": "poll", "arguments": {"q": 1}}});
    let rules = json!([{ "when": {}, "steps": [same, same, same, same, {"reply": "gave up: {{last_tool_result}}"}]}]);
    let w = world(
        vec![counter("poll", runs.clone())],
        vec![agent("loopy", &["poll"], rules, 10)],
        RuntimeSettings::default(),
    );
    let reply = w
        .runtime
        .send("loopy", "go", None, None, &ToolContext::client("t"))
        .await
        .unwrap();
    // Same call, same result: the third run carries a warning, the fourth is not run at all.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert!(
        reply
            .reply
            .starts_with("gave up: loop guard: `poll` was called 3 times"),
        "{}",
        reply.reply
    );
    let tool_texts: Vec<String> = w
        .store
        .messages(&reply.conversation_id)
        .unwrap()
        .into_iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tool_texts[0], "same");
    assert_eq!(tool_texts[1], "same");
    assert!(
        tool_texts[2].starts_with("same\n\n[portico: loop guard: `poll` gave the same result"),
        "{}",
        tool_texts[2]
    );
    assert!(
        tool_texts[3].starts_with("loop guard:"),
        "{}",
        tool_texts[3]
    );
}

#[tokio::test]
async fn max_iterations_stops_a_model_that_never_answers() {
    let rules = json!([{ "when": {}, "steps": [
        {"call_tool": {"name": "poll", "arguments": {"q": 1}}},
        {"call_tool": {"name": "poll", "arguments": {"q": 2}}},
    ]}]);
    // Consecutive calls are one turn; make them separate turns with a status step in between.
    let rules = json!([{ "when": {}, "steps": [
        rules[0]["steps"][0], {"status": {"state": "working"}},
        rules[0]["steps"][1], {"status": {"state": "working"}},
        {"call_tool": {"name": "poll", "arguments": {"q": 3}}},
        {"reply": "never reached"}
    ]}]);
    let w = world(
        vec![counter("poll", Arc::default())],
        vec![agent("busy", &["poll"], rules, 2)],
        RuntimeSettings::default(),
    );
    let error = w
        .runtime
        .send("busy", "go", None, None, &ToolContext::client("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, AgentError::MaxIterations { iterations: 2, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("raise its `max_iterations`"));
}

#[tokio::test]
async fn agents_calling_agents_stop_at_the_depth_limit_and_need_the_pattern() {
    // `echo` calls itself through agent_send: the depth limit ends the recursion with a clear error.
    let rules = json!([{ "when": {}, "steps": [
        {"call_tool": {"name": "agent_send", "arguments": {"agent": "echo", "message": "again"}}},
        {"reply": "inner said: {{last_tool_result}}"}
    ]}]);
    let w = world(
        vec![],
        vec![
            agent(
                "echo",
                &["agent_send", "portico_agent_echo"],
                rules.clone(),
                5,
            ),
            agent("lonely", &["agent_send"], rules, 5),
        ],
        RuntimeSettings {
            max_depth: 3,
            ..RuntimeSettings::default()
        },
    );
    let reply = w
        .runtime
        .send("echo", "go", None, None, &ToolContext::client("t"))
        .await
        .unwrap();
    assert!(reply.reply.contains("depth limit of 3"), "{}", reply.reply);
    assert_eq!(
        reply.reply.matches("inner said").count(),
        3,
        "{}",
        reply.reply
    );
    // Without `portico_agent_echo` in its patterns, an agent cannot reach `echo` through agent_send.
    let reply = w
        .runtime
        .send("lonely", "go", None, None, &ToolContext::client("t"))
        .await
        .unwrap();
    assert!(
        reply
            .reply
            .contains("tool `portico_agent_echo` is not available to agent `lonely`"),
        "{}",
        reply.reply
    );
    // The agent's own tool goes through the pipeline like any other.
    let outcome = w
        .pipeline
        .call(
            "portico_agent_lonely",
            Some(object(json!({"message": 5}))),
            &ToolContext::client("t"),
        )
        .await
        .unwrap();
    assert!(
        portico_pipeline::model_text(&outcome.result)
            .starts_with("invalid arguments for `portico_agent_lonely`")
    );
}

/// A nested agent's calls are made for the client whose call started the outermost run, and every
/// conversation of the run is that client's.
#[tokio::test]
async fn a_nested_agents_calls_are_on_behalf_of_the_outermost_client() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = {
        let seen = seen.clone();
        LocalTool::raw(
            object(json!({"name": "who", "inputSchema": {"type": "object"}})),
            move |_, context| {
                seen.lock()
                    .unwrap()
                    .push((context.principal.label(), context.on_behalf_of.clone()));
                Box::pin(async { ToolResult::text("noted") })
            },
        )
    };
    let outer = json!([{ "when": {}, "steps": [
        {"call_tool": {"name": "portico_agent_inner", "arguments": {"message": "go on"}}},
        {"reply": "outer: {{last_tool_result}}"}
    ]}]);
    let inner = json!([{ "when": {}, "steps": [
        {"call_tool": {"name": "who", "arguments": {}}},
        {"reply": "inner: {{last_tool_result}}"}
    ]}]);
    let w = world(
        vec![record],
        vec![
            agent("outer", &["portico_agent_inner"], outer, 5),
            agent("inner", &["who"], inner, 5),
        ],
        RuntimeSettings::default(),
    );
    let reply = w
        .runtime
        .send("outer", "go", None, None, &ToolContext::client("a"))
        .await
        .unwrap();
    assert!(reply.reply.contains("inner: noted"), "{}", reply.reply);
    assert_eq!(
        *seen.lock().unwrap(),
        [("agent:inner".to_string(), Some("client:a".to_string()))]
    );
    let owners: Vec<Option<String>> = w
        .store
        .conversations(None, 10)
        .unwrap()
        .into_iter()
        .map(|c| c.owner)
        .collect();
    assert_eq!(
        owners,
        [Some("client:a".to_string()), Some("client:a".to_string())]
    );
}
