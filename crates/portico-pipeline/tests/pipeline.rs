//! The call pipeline's stages, each shown to act: capability, input schema, policies, timeout, output
//! schema, truncation, taint and audit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_core::relay::BoxFuture;
use portico_core::{CallError, JsonObject, ToolResult};
use portico_pipeline::{
    AuditSink, ConditionSpec, DefaultAction, LocalTool, LocalTools, MarkedAction, Outcome,
    Pipeline, PipelineError, PipelineSettings, Principal, RefusalCode, RuleAction, RuleSpec,
    TaintMode, TaintPolicy, ToolContext, ToolEntry, ToolPatterns, ToolRules, ToolSource, Trust,
    TurnState, model_text,
};
use portico_store::AuditRecord;
use serde_json::{Value, json};

#[derive(Default)]
struct Collected(Mutex<Vec<AuditRecord>>);

impl AuditSink for Collected {
    fn record(&self, record: AuditRecord) {
        self.0.lock().unwrap().push(record);
    }
}

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

/// A tool with a hand-written schema that counts how often it really ran.
fn counting_tool(name: &str, schema: Value, output: Value, runs: Arc<AtomicUsize>) -> LocalTool {
    let mut definition =
        object(json!({"name": name, "description": "test", "inputSchema": schema}));
    if let Some(output_schema) = output.get("schema") {
        definition.insert("outputSchema".into(), output_schema.clone());
    }
    let mut result = ToolResult::text(output.get("text").and_then(Value::as_str).unwrap_or("ran"));
    result.structured_content = output.get("structured").cloned();
    LocalTool::raw(definition, move |_arguments, _context| {
        runs.fetch_add(1, Ordering::SeqCst);
        let result = result.clone();
        Box::pin(async move { result })
    })
}

fn pipeline_with(tools: Vec<LocalTool>, settings: PipelineSettings) -> (Pipeline, Arc<Collected>) {
    let pipeline = Pipeline::new(settings);
    let local = LocalTools::default();
    for tool in tools {
        local.register(tool);
    }
    pipeline.add_source(Arc::new(local));
    let audit = Arc::new(Collected::default());
    pipeline.set_audit(audit.clone());
    pipeline.add_policy(Arc::new(TaintPolicy::new(
        TaintMode::Refuse,
        ToolPatterns::new(&["danger_*"]).unwrap(),
    )));
    (pipeline, audit)
}

fn agent(patterns: &[&str]) -> ToolContext {
    ToolContext {
        principal: Principal::agent("a", ToolPatterns::new(patterns).unwrap()),
        turn: Some(Arc::new(TurnState::default())),
        ..ToolContext::client("test")
    }
}

/// A `null` for an optional parameter is the parameter not provided (MCP, SEP-2243): the call is
/// made without it, not refused because `null` is not a boolean. A required one stays refused.
#[tokio::test]
async fn a_null_optional_argument_is_omitted_not_refused() {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string"}, "verbose": {"type": "boolean"}},
        "required": ["region"], "additionalProperties": false});
    let seen = Arc::new(Mutex::new(Vec::new()));
    let definition =
        object(json!({"name": "headers", "description": "test", "inputSchema": schema}));
    let tool = {
        let seen = seen.clone();
        LocalTool::raw(definition, move |arguments, _context| {
            seen.lock().unwrap().push(Value::Object(arguments));
            Box::pin(async { ToolResult::text("ran") })
        })
    };
    let (pipeline, _audit) = pipeline_with(vec![tool], PipelineSettings::default());
    let context = ToolContext::client("test");
    let call = |arguments: Value| {
        let pipeline = &pipeline;
        let context = &context;
        async move {
            pipeline
                .call("headers", Some(object(arguments)), context)
                .await
                .unwrap()
                .outcome
        }
    };
    assert_eq!(
        call(json!({"region": "eu", "verbose": null})).await,
        Outcome::Ok
    );
    assert_eq!(*seen.lock().unwrap(), [json!({"region": "eu"})]);
    for refused in [
        json!({"region": null}),
        json!({"region": "eu", "verbose": "yes"}),
        json!({"region": "eu", "verbose": null, "other": 1}),
    ] {
        assert_eq!(
            call(refused.clone()).await,
            Outcome::InvalidArguments,
            "{refused}"
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_tool() {
    let runs = Arc::new(AtomicUsize::new(0));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"], "additionalProperties": false});
    let (pipeline, audit) = pipeline_with(
        vec![counting_tool("count", schema, json!({}), runs.clone())],
        PipelineSettings::default(),
    );
    let context = ToolContext::client("test");
    for bad in [
        json!({}),
        json!({"n": "1"}),
        json!({"n": 0}),
        json!({"n": 1, "extra": true}),
    ] {
        let outcome = pipeline
            .call("count", Some(object(bad.clone())), &context)
            .await
            .unwrap();
        assert_eq!(outcome.outcome, Outcome::InvalidArguments, "{bad}");
        assert!(outcome.is_error());
        assert!(
            model_text(&outcome.result).starts_with("invalid arguments for `count`: "),
            "{bad}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "no invalid call ran");
    let ok = pipeline
        .call("count", Some(object(json!({"n": 2}))), &context)
        .await
        .unwrap();
    assert_eq!(ok.outcome, Outcome::Ok);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let outcomes: Vec<String> = audit
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.outcome.clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            "invalid_arguments",
            "invalid_arguments",
            "invalid_arguments",
            "invalid_arguments",
            "ok"
        ]
    );
    assert!(
        audit
            .0
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.caller == "client:test" && r.tool == "count")
    );
}

#[tokio::test]
async fn structured_content_is_checked_against_the_output_schema() {
    let runs = Arc::new(AtomicUsize::new(0));
    let output = json!({
        "schema": {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
        "text": "{\"sum\":\"x\"}",
        "structured": {"sum": "x"},
    });
    let (pipeline, _) = pipeline_with(
        vec![counting_tool(
            "add",
            json!({"type": "object"}),
            output,
            runs,
        )],
        PipelineSettings::default(),
    );
    let outcome = pipeline
        .call("add", None, &ToolContext::client("t"))
        .await
        .unwrap();
    assert_eq!(outcome.outcome, Outcome::InvalidOutput);
    assert!(
        model_text(&outcome.result).contains("does not match its outputSchema"),
        "{:?}",
        outcome.result
    );
}

#[tokio::test]
async fn agents_neither_see_nor_call_tools_outside_their_patterns() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tools = vec![
        counting_tool(
            "file_read",
            json!({"type": "object"}),
            json!({}),
            runs.clone(),
        ),
        counting_tool(
            "secret_tool",
            json!({"type": "object"}),
            json!({}),
            runs.clone(),
        ),
    ];
    let (pipeline, _) = pipeline_with(tools, PipelineSettings::default());
    let context = agent(&["file_*"]);
    let visible: Vec<String> = pipeline
        .list(&context.principal)
        .await
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(visible, ["file_read"]);
    let outcome = pipeline.call("secret_tool", None, &context).await.unwrap();
    assert_eq!(outcome.outcome, Outcome::Denied);
    assert!(model_text(&outcome.result).contains("not available to agent `a`"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // A client sees both.
    assert_eq!(pipeline.list(&Principal::client("x")).await.len(), 2);
    // Unknown names are a protocol-level error with a suggestion.
    let Err(PipelineError::UnknownTool { hint, .. }) = pipeline.call("read", None, &context).await
    else {
        panic!("expected unknown tool");
    };
    assert_eq!(hint, "; did you mean `file_read`?");
}

#[tokio::test]
async fn slow_tools_time_out_and_are_cancelled() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let flag = dropped.clone();
    let slow = LocalTool::raw(
        object(json!({"name": "slow", "inputSchema": {"type": "object"}})),
        move |_, _| {
            let guard = Guard(flag.clone());
            Box::pin(async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                ToolResult::default()
            })
        },
    );
    let (pipeline, audit) = pipeline_with(
        vec![slow],
        PipelineSettings {
            tool_timeout: Duration::from_millis(50),
            ..PipelineSettings::default()
        },
    );
    let outcome = pipeline
        .call("slow", None, &ToolContext::client("t"))
        .await
        .unwrap();
    assert_eq!(outcome.outcome, Outcome::Timeout);
    assert_eq!(
        model_text(&outcome.result),
        "tool `slow` did not finish within 0.05s and was cancelled"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the tool's work was dropped, not left running"
    );
    assert_eq!(audit.0.lock().unwrap()[0].outcome, "timeout");

    // A caller that goes away mid-call: the work is dropped and the audit log says so.
    let call = tokio::spawn({
        let pipeline = pipeline.clone();
        async move {
            pipeline
                .call("slow", None, &ToolContext::client("gone"))
                .await
        }
    });
    tokio::task::yield_now().await;
    call.abort();
    let _ = call.await;
    let records = audit.0.lock().unwrap().clone();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[1].outcome, "cancelled");
    assert_eq!(records[1].caller, "client:gone");
}

#[tokio::test]
async fn agents_read_long_results_cut_with_a_marker_and_clients_get_them_whole() {
    let long = "x".repeat(120);
    let result = json!({"text": long});
    let (pipeline, _) = pipeline_with(
        vec![counting_tool(
            "big",
            json!({"type": "object"}),
            result,
            Arc::default(),
        )],
        PipelineSettings {
            max_result_chars: 100,
            ..PipelineSettings::default()
        },
    );
    let for_agent = pipeline.call("big", None, &agent(&["*"])).await.unwrap();
    assert!(for_agent.truncated);
    let text = model_text(&for_agent.result);
    assert!(text.starts_with(&"x".repeat(100)));
    assert!(!text.starts_with(&"x".repeat(101)));
    assert!(text.ends_with("[portico: result truncated: showing the first 100 of 120 characters; ask for less (a narrower query, a range, a page) to see the rest]"), "{text}");
    let for_client = pipeline
        .call("big", None, &ToolContext::client("t"))
        .await
        .unwrap();
    assert!(!for_client.truncated);
    assert_eq!(model_text(&for_client.result), long);
}

/// A source whose one tool fails the way it is told to, as the hub does when an upstream times out,
/// hangs up or refuses.
struct Failing(CallError);

impl ToolSource for Failing {
    fn kind(&self) -> &'static str {
        "failing"
    }

    fn entries(&self) -> Vec<ToolEntry> {
        vec![ToolEntry {
            name: "remote".into(),
            definition: Arc::new(object(json!({"name": "remote"}))),
            trust: Trust::Untrusted,
            sensitive: false,
            timeout: None,
            generation: 0,
        }]
    }

    fn find(&self, name: &str) -> Option<ToolEntry> {
        self.entries().into_iter().find(|e| e.name == name)
    }

    fn call<'a>(
        &'a self,
        _entry: &'a ToolEntry,
        _arguments: JsonObject,
        _context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>> {
        Box::pin(async move { Err(self.0.clone()) })
    }
}

#[tokio::test]
async fn a_source_that_timed_out_is_audited_as_a_timeout_and_its_message_reaches_the_caller() {
    let cases = [
        (
            CallError::Timeout("server `s`: tools/call `t` timed out after 1s".into()),
            Outcome::Timeout,
            "timeout",
        ),
        (
            CallError::UpstreamGone("server `s`: connection closed during tools/call `t`".into()),
            Outcome::Error,
            "error",
        ),
        (
            CallError::NotFound("tool `remote` was removed".into()),
            Outcome::UnknownTool,
            "unknown_tool",
        ),
    ];
    for (error, outcome, label) in cases {
        let pipeline = Pipeline::new(PipelineSettings::default());
        pipeline.add_source(Arc::new(Failing(error.clone())));
        let audit = Arc::new(Collected::default());
        pipeline.set_audit(audit.clone());
        let called = pipeline
            .call("remote", None, &ToolContext::client("t"))
            .await
            .unwrap();
        assert_eq!(called.outcome, outcome, "{error:?}");
        assert!(called.is_error());
        assert!(!called.untrusted, "a failure carries no upstream content");
        assert_eq!(model_text(&called.result), error.to_string());
        assert!(matches!(&called.error, Some(PipelineError::Source(e)) if *e == error));
        let records = audit.0.lock().unwrap().clone();
        assert_eq!(records[0].outcome, label, "{error:?}");
        assert_eq!(
            records[0].detail.as_deref(),
            Some(error.to_string().as_str())
        );
    }
}

#[tokio::test]
async fn sensitive_calls_after_untrusted_content_are_refused_in_that_turn_only() {
    let runs = Arc::new(AtomicUsize::new(0));
    let fetch = counting_tool(
        "fetch",
        json!({"type": "object"}),
        json!({}),
        Arc::default(),
    )
    .untrusted_output();
    let write =
        counting_tool("write", json!({"type": "object"}), json!({}), runs.clone()).sensitive();
    let marked = counting_tool(
        "danger_zone",
        json!({"type": "object"}),
        json!({}),
        runs.clone(),
    );
    let (pipeline, _) = pipeline_with(vec![fetch, write, marked], PipelineSettings::default());

    let turn = agent(&["*"]);
    assert_eq!(
        pipeline.call("write", None, &turn).await.unwrap().outcome,
        Outcome::Ok,
        "clean turn"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let fetched = pipeline.call("fetch", None, &turn).await.unwrap();
    assert!(fetched.untrusted);
    for sensitive in ["write", "danger_zone"] {
        let refused = pipeline.call(sensitive, None, &turn).await.unwrap();
        assert_eq!(refused.outcome, Outcome::Denied, "{sensitive}");
        assert!(model_text(&refused.result).contains("untrusted content from `fetch`"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "neither sensitive call ran");
    // A new turn starts clean; a client's own calls are not tracked.
    assert_eq!(
        pipeline
            .call("write", None, &agent(&["*"]))
            .await
            .unwrap()
            .outcome,
        Outcome::Ok
    );
    assert_eq!(
        pipeline
            .call("write", None, &ToolContext::client("t"))
            .await
            .unwrap()
            .outcome,
        Outcome::Ok
    );

    // In approval mode the same call is held for approval, with a structured reason.
    let approval = Pipeline::new(PipelineSettings::default());
    let local = LocalTools::default();
    local.register(
        counting_tool(
            "fetch",
            json!({"type": "object"}),
            json!({}),
            Arc::default(),
        )
        .untrusted_output(),
    );
    local.register(
        counting_tool(
            "write",
            json!({"type": "object"}),
            json!({}),
            Arc::default(),
        )
        .sensitive(),
    );
    approval.add_source(Arc::new(local));
    approval.add_policy(Arc::new(TaintPolicy::new(
        TaintMode::RequireApproval,
        ToolPatterns::new::<&str>(&[]).unwrap(),
    )));
    let turn = agent(&["*"]);
    approval.call("fetch", None, &turn).await.unwrap();
    let held = approval.call("write", None, &turn).await.unwrap();
    assert_eq!(held.outcome, Outcome::ApprovalRequired);
    let refusal = held
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap();
    assert_eq!(refusal.code, RefusalCode::ApprovalRequired);
    assert_eq!(refusal.tool, "write");
    assert!(
        refusal.reason.contains("untrusted content from `fetch`"),
        "{refusal:?}"
    );
}

fn rule(tools: &[&str], action: RuleAction, reason: &str) -> RuleSpec {
    RuleSpec {
        tools: tools.iter().map(|t| t.to_string()).collect(),
        callers: None,
        when: Vec::new(),
        action,
        reason: Some(reason.into()),
    }
}

#[tokio::test]
async fn config_rules_decide_after_the_schema_and_before_the_tool_for_every_caller() {
    let runs = Arc::new(AtomicUsize::new(0));
    let schema = json!({"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]});
    let (pipeline, audit) = pipeline_with(
        vec![
            counting_tool("push", schema, json!({}), runs.clone()),
            counting_tool(
                "status",
                json!({"type": "object"}),
                json!({}),
                Arc::default(),
            ),
            counting_tool("wipe", json!({"type": "object"}), json!({}), runs.clone()),
        ],
        PipelineSettings::default(),
    );
    let mut protected = rule(&["push"], RuleAction::Approve, "main needs an owner");
    protected.when.push(ConditionSpec {
        pointer: "/branch".into(),
        matches: "^main$".into(),
    });
    let mut agents_only = rule(&["push"], RuleAction::Deny, "agents do not push");
    agents_only.callers = Some(vec!["agent:*".into()]);
    let rules = ToolRules::compile(
        &[
            protected,
            agents_only,
            rule(&["push", "status"], RuleAction::Allow, ""),
        ],
        DefaultAction::Deny,
    )
    .unwrap();
    pipeline.add_policy(Arc::new(rules));
    let client = ToolContext::client("http");
    let call = |name: &'static str, arguments: Value, context: ToolContext| {
        let pipeline = pipeline.clone();
        async move {
            pipeline
                .call(name, Some(object(arguments)), &context)
                .await
                .unwrap()
        }
    };

    // Invalid arguments are refused by the schema; the rules (which would deny `wipe` and hold a
    // `main` push) never see them.
    let invalid = call("push", json!({"branch": 7}), client.clone()).await;
    assert_eq!(invalid.outcome, Outcome::InvalidArguments);

    let held = call("push", json!({"branch": "main"}), client.clone()).await;
    assert_eq!(held.outcome, Outcome::ApprovalRequired);
    assert_eq!(
        model_text(&held.result),
        "call to `push` requires approval and was not run: main needs an owner"
    );
    let refusal = held
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap();
    assert_eq!(
        (refusal.code, refusal.tool, refusal.reason),
        (RefusalCode::ApprovalRequired, "push", "main needs an owner")
    );
    assert_eq!(
        call("push", json!({"branch": "dev"}), client.clone())
            .await
            .outcome,
        Outcome::Ok
    );
    let by_agent = call("push", json!({"branch": "dev"}), agent(&["*"])).await;
    assert_eq!(by_agent.outcome, Outcome::Denied);
    assert_eq!(
        by_agent
            .error
            .as_ref()
            .and_then(PipelineError::refusal)
            .map(|r| r.code),
        Some(RefusalCode::PolicyDenied)
    );
    let wiped = call("wipe", json!({}), client.clone()).await;
    assert_eq!(wiped.outcome, Outcome::Denied);
    assert!(
        model_text(&wiped.result).contains("[policy] default is \"deny\""),
        "{wiped:?}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "only the `dev` push by a client ran"
    );

    let records: Vec<(String, String, Option<String>)> = audit
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.caller.clone(), r.outcome.clone(), r.detail.clone()))
        .collect();
    assert_eq!(
        records[1],
        (
            "client:http".into(),
            "approval_required".into(),
            Some("main needs an owner".into())
        )
    );
    assert_eq!(
        records[3],
        (
            "agent:a".into(),
            "denied".into(),
            Some("agents do not push".into())
        )
    );
    assert_eq!(records[4].1, "denied");

    // Listings carry the same rules' marks, per principal.
    let marks = |principal: Principal| {
        let pipeline = pipeline.clone();
        async move {
            pipeline
                .list_marked(&principal)
                .await
                .into_iter()
                .map(|(entry, mark)| (entry.name, mark.map(|m| (m.action, m.conditional))))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        marks(Principal::client("http")).await,
        [
            ("push".to_string(), Some((MarkedAction::Approve, true))),
            ("status".to_string(), None),
            ("wipe".to_string(), Some((MarkedAction::Deny, false))),
        ]
    );
    assert_eq!(
        marks(Principal::agent("a", ToolPatterns::new(&["*"]).unwrap())).await[0],
        ("push".to_string(), Some((MarkedAction::Approve, true)))
    );
}

/// `/metrics`: every call is counted once by tool, server, principal class and outcome (a name
/// nobody knows as `(unknown)`), and each stage it reached is timed once.
#[tokio::test]
async fn every_call_is_counted_by_its_outcome_and_each_stage_it_reached_is_timed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false});
    let (pipeline, _audit) = pipeline_with(
        vec![counting_tool("count", schema, json!({}), runs.clone())],
        PipelineSettings::default(),
    );
    let metrics = portico_metrics::Metrics::new();
    pipeline.set_metrics(metrics.clone());
    let client = ToolContext::client("laptop");
    for _ in 0..3 {
        let ok = pipeline
            .call("count", Some(object(json!({"n": 1}))), &client)
            .await
            .unwrap();
        assert_eq!(ok.outcome, Outcome::Ok);
    }
    let invalid = pipeline
        .call("count", Some(object(json!({"n": "x"}))), &client)
        .await
        .unwrap();
    assert_eq!(invalid.outcome, Outcome::InvalidArguments);
    let denied = pipeline
        .call("count", None, &agent(&["other_*"]))
        .await
        .unwrap();
    assert_eq!(denied.outcome, Outcome::Denied);
    assert!(matches!(
        pipeline.call("nothing_here", None, &client).await,
        Err(PipelineError::UnknownTool { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    let text = metrics.encode(&portico_metrics::State::default());
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| line.starts_with("portico_calls_total") || line.contains("_count{stage="))
        .collect();
    let mut expected = vec![
        r#"portico_calls_total{tool="count",server="(local)",principal="client",outcome="ok"} 3"#,
        r#"portico_calls_total{tool="count",server="(local)",principal="client",outcome="invalid_arguments"} 1"#,
        r#"portico_calls_total{tool="count",server="(local)",principal="agent",outcome="denied"} 1"#,
        r#"portico_calls_total{tool="(unknown)",server="(none)",principal="client",outcome="unknown_tool"} 1"#,
        r#"portico_call_stage_duration_seconds_count{stage="pipeline"} 6"#,
        // Only the calls that passed the schema met the policies and ran.
        r#"portico_call_stage_duration_seconds_count{stage="policy"} 3"#,
        r#"portico_call_stage_duration_seconds_count{stage="execute"} 3"#,
        // No door in this test, and nothing was held.
        r#"portico_call_stage_duration_seconds_count{stage="door"} 0"#,
        r#"portico_call_stage_duration_seconds_count{stage="approval"} 0"#,
    ];
    let mut lines = lines;
    lines.sort_unstable();
    expected.sort_unstable();
    assert_eq!(lines, expected, "{text}");
    // The arguments never reach the metrics.
    assert!(!text.contains("\"x\""), "{text}");
}

#[tokio::test]
async fn an_invented_tool_name_is_audited_cut_to_256_characters() {
    let pipeline = Pipeline::new(PipelineSettings::default());
    let audit = Arc::new(Collected::default());
    pipeline.set_audit(audit.clone());
    let long = "é".repeat(10_000);
    let refused = pipeline.call(&long, None, &ToolContext::client("t")).await;
    assert!(matches!(refused, Err(PipelineError::UnknownTool { .. })));
    let short = "x".repeat(256);
    assert!(
        pipeline
            .call(&short, None, &ToolContext::client("t"))
            .await
            .is_err()
    );
    let records = audit.0.lock().unwrap().clone();
    let tools: Vec<&str> = records.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, [format!("{}…", "é".repeat(256)), short]);
}
