//! A client's `[[server.clients]]` scope: what it lists and what the pipeline lets it call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use portico_core::ToolResult;
use portico_pipeline::{
    AuditSink, LocalTool, LocalTools, Outcome, Pipeline, PipelineError, PipelineSettings,
    Principal, ToolContext, ToolPatterns, model_text,
};
use portico_store::AuditRecord;
use serde_json::json;

#[derive(Default)]
struct Collected(Mutex<Vec<AuditRecord>>);

impl AuditSink for Collected {
    fn record(&self, record: AuditRecord) {
        self.0.lock().unwrap().push(record);
    }
}

fn tool(name: &str, runs: Arc<AtomicUsize>) -> LocalTool {
    let definition =
        json!({"name": name, "description": "test", "inputSchema": {"type": "object"}});
    LocalTool::raw(
        definition.as_object().cloned().unwrap(),
        move |_arguments, _context| {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { ToolResult::text("ran") })
        },
    )
}

#[tokio::test]
async fn a_scoped_client_lists_only_its_scope_and_a_call_outside_it_is_refused_and_audited() {
    let runs = Arc::new(AtomicUsize::new(0));
    let pipeline = Pipeline::new(PipelineSettings::default());
    let local = LocalTools::default();
    for name in ["time_now", "time_zone", "file_read"] {
        local.register(tool(name, runs.clone()));
    }
    pipeline.add_source(Arc::new(local));
    let audit = Arc::new(Collected::default());
    pipeline.set_audit(audit.clone());

    let scope = Arc::new(ToolPatterns::new(&["time_*"]).unwrap());
    let laptop = ToolContext {
        principal: Principal::scoped_client("laptop", Some(scope)),
        ..ToolContext::client("http")
    };
    let listed: Vec<String> = pipeline
        .list(&laptop.principal)
        .await
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(listed, ["time_now", "time_zone"]);

    let refused = pipeline.call("file_read", None, &laptop).await.unwrap();
    assert_eq!(refused.outcome, Outcome::Denied);
    let Some(PipelineError::OutsideClientScope {
        tool,
        client,
        scope,
    }) = &refused.error
    else {
        panic!("expected a scope refusal, got {:?}", refused.error);
    };
    assert_eq!(
        (tool.as_str(), client.as_str(), scope.as_str()),
        ("file_read", "laptop", "time_*")
    );
    assert_eq!(
        model_text(&refused.result),
        "tool `file_read` is not available to client `laptop`: it is outside the client's `tools` scope (time_*); widen that [[server.clients]] entry's `tools` (for an OAuth token: what its scopes grant in [server.oauth] scopes) to allow it"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let ran = pipeline.call("time_now", None, &laptop).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Ok);
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A named client without a scope sees everything, under its own name.
    let ci = ToolContext {
        principal: Principal::scoped_client("ci", None),
        ..ToolContext::client("http")
    };
    assert_eq!(pipeline.list(&ci.principal).await.len(), 3);
    assert_eq!(
        pipeline.call("file_read", None, &ci).await.unwrap().outcome,
        Outcome::Ok
    );

    let records: Vec<(String, String, String)> = audit
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.caller.clone(), r.tool.clone(), r.outcome.clone()))
        .collect();
    let expected = [
        ("client:laptop", "file_read", "denied"),
        ("client:laptop", "time_now", "ok"),
        ("client:ci", "file_read", "ok"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(records, expected);
}
