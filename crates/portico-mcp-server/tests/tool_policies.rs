//! The `ToolPolicy` library API as an embedder uses it, driven by a real rmcp client over an
//! in-memory pipe: an unknown tool name fails construction; proceed runs the tool exactly once
//! with the original arguments; a failure reaches the client as the embedder's own envelope and
//! the tool does not run; a failure outside the declared schema, an `Err`, a panic and a failure
//! over the budget each stop the call with `policy_error`; invalid arguments never reach the
//! policy; and the listing advertises the failure branch while the tool's own results are still
//! checked against its own schema.

use std::sync::{Arc, Mutex};

use portico_engine::{Engine, EngineOptions};
use portico_mcp_server::{
    Backend, BeforeCall, HostTool, PolicyCall, PorticoServer, ServerOptions, ToolPolicies,
    ToolPolicy, ToolPolicyError,
};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Save {
    path: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Saved {
    saved: String,
}

/// The embedder's failure: an approval it must grant first.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
struct NeedsApproval {
    ok: bool,
    error: ApprovalError,
}

#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
struct ApprovalError {
    code: String,
    #[schemars(length(min = 1))]
    approval_request_id: String,
}

fn needs_approval(id: &str) -> NeedsApproval {
    NeedsApproval {
        ok: false,
        error: ApprovalError {
            code: "save_approval_required".into(),
            approval_request_id: id.into(),
        },
    }
}

/// What the policy does; every call is counted and its copy of the arguments kept.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Host-owned grants: proceeds once per grant, else fails asking for one.
    Grants,
    /// Fails with a value its schema does not admit (an empty request id).
    OffSchema,
    Errs,
    Panics,
    /// Fails with a value of about this many bytes.
    Huge(usize),
}

#[derive(Clone)]
struct Policy {
    behaviour: Behaviour,
    grants: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<PolicyCall>>>,
}

impl ToolPolicy for Policy {
    type Failure = NeedsApproval;
    type Error = String;

    async fn before_call(&self, mut call: PolicyCall) -> Result<BeforeCall<NeedsApproval>, String> {
        self.seen.lock().unwrap().push(call.clone());
        // The copy is the policy's own: changing it must not change what the tool gets.
        call.arguments.insert("path".into(), json!("/etc/passwd"));
        tokio::task::yield_now().await;
        match self.behaviour {
            Behaviour::Grants => {
                let path = call.caller.clone();
                let mut grants = self.grants.lock().unwrap();
                match grants.iter().position(|granted| granted == &path) {
                    Some(at) => {
                        grants.remove(at);
                        Ok(BeforeCall::Proceed)
                    }
                    None => Ok(BeforeCall::Fail(needs_approval("req-1"))),
                }
            }
            Behaviour::OffSchema => Ok(BeforeCall::Fail(needs_approval(""))),
            Behaviour::Errs => Err("the grant store is unreachable".into()),
            Behaviour::Panics => panic!("policy bug"),
            Behaviour::Huge(bytes) => Ok(BeforeCall::Fail(needs_approval(&"x".repeat(bytes)))),
        }
    }
}

struct Served {
    client: RunningService<RoleClient, ()>,
    engine: Engine,
    runs: Arc<Mutex<Vec<String>>>,
    policy: Policy,
    _data: tempfile::TempDir,
}

impl Served {
    async fn start(behaviour: Behaviour, options: ServerOptions) -> Served {
        let (served, result) = Self::try_start(behaviour, options, &["save", "liar"]).await;
        result.unwrap();
        served.unwrap()
    }

    /// The server with a `save` tool and a policy registered under `policy_for`.
    async fn try_start(
        behaviour: Behaviour,
        options: ServerOptions,
        policies_for: &[&str],
    ) -> (Option<Served>, Result<(), ToolPolicyError>) {
        let mut config = portico_config::Config::default();
        config.builtins.enabled = false;
        let data = tempfile::tempdir().unwrap();
        let engine = Engine::start(&config, EngineOptions::in_dir(data.path())).unwrap();
        let server = PorticoServer::new(Backend::Local(engine.clone()), options);
        let runs = Arc::new(Mutex::new(Vec::new()));
        server
            .host_tools()
            .register(HostTool::typed("save", "Saves a file", {
                let runs = runs.clone();
                move |input: Save| {
                    runs.lock().unwrap().push(input.path.clone());
                    async move { Ok::<_, std::convert::Infallible>(Saved { saved: input.path }) }
                }
            }));
        // A tool whose answers are shaped like the failure but not like its own declared
        // outputSchema: the widened listing would admit them; the pipeline must not.
        server.host_tools().register(
            HostTool::typed("liar", "Answers off its schema", |_: Save| async move {
                Ok::<_, std::convert::Infallible>(needs_approval("forged"))
            })
            .with(
                "outputSchema",
                json!({"type": "object", "properties": {"saved": {"type": "string"}}, "required": ["saved"]}),
            ),
        );
        let policy = Policy {
            behaviour,
            grants: Arc::default(),
            seen: Arc::default(),
        };
        let policies = policies_for
            .iter()
            .fold(ToolPolicies::new(), |policies, name| {
                policies.with(*name, policy.clone())
            });
        let server = match server.with_tool_policies(policies).await {
            Ok(server) => server,
            Err(error) => {
                engine.shutdown().await;
                return (None, Err(error));
            }
        };
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let running = server.serve(server_io).await.unwrap();
            let _ = running.waiting().await;
        });
        let client = ().serve(client_io).await.unwrap();
        let served = Served {
            client,
            engine,
            runs,
            policy,
            _data: data,
        };
        (Some(served), Ok(()))
    }

    async fn call(&self, arguments: Value) -> Value {
        self.call_tool("save", arguments).await
    }

    async fn call_tool(&self, name: &'static str, arguments: Value) -> Value {
        let mut params = CallToolRequestParams::new(name);
        params.arguments = arguments.as_object().cloned();
        serde_json::to_value(self.client.call_tool(params).await.unwrap()).unwrap()
    }

    fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }

    fn policy_calls(&self) -> usize {
        self.policy.seen.lock().unwrap().len()
    }

    async fn stop(self) {
        self.client.cancel().await.unwrap();
        self.engine.shutdown().await;
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

fn policy_error(result: &Value, reason: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"ok": false, "error": {"code": "policy_error", "tool": "save", "reason": reason}}),
    );
    assert_eq!(
        text(result),
        format!("call to `save` was stopped before it ran: its host policy {reason}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_for_an_unknown_tool_fails_construction_naming_it() {
    let (served, result) = Served::try_start(
        Behaviour::Grants,
        ServerOptions::default(),
        &["save", "sav"],
    )
    .await;
    assert!(served.is_none());
    let error = result.unwrap_err();
    assert_eq!(
        error,
        ToolPolicyError::UnknownTool {
            name: "sav".into(),
            hint: "; did you mean `save`?".into()
        }
    );
    assert!(error.to_string().starts_with(
        "a tool policy is registered for `sav`, but no tool has that name; did you mean `save`?"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_stops_the_call_and_a_grant_lets_it_run_once_with_the_original_arguments() {
    let served = Served::start(Behaviour::Grants, ServerOptions::default()).await;

    let refused = served.call(json!({"path": "a.txt"})).await;
    let envelope = json!({"ok": false, "error": {
        "code": "save_approval_required", "approval_request_id": "req-1"}});
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["structuredContent"], envelope);
    assert_eq!(text(&refused), serde_json::to_string(&envelope).unwrap());
    assert_eq!(served.runs(), Vec::<String>::new(), "the tool did not run");

    // The host grants it: the next call runs exactly once, with the arguments the client sent
    // (the policy changed only its own copy).
    served
        .policy
        .grants
        .lock()
        .unwrap()
        .push("client:mcp".into());
    let ran = served.call(json!({"path": "a.txt"})).await;
    assert_eq!(ran.get("isError"), None, "{ran}");
    assert_eq!(ran["structuredContent"], json!({"saved": "a.txt"}));
    assert_eq!(served.runs(), ["a.txt"]);
    let seen = served.policy.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1],
        PolicyCall {
            tool: "save".into(),
            caller: "client:mcp".into(),
            arguments: json!({"path": "a.txt"}).as_object().cloned().unwrap(),
        }
    );

    // The grant was used up.
    let again = served.call(json!({"path": "a.txt"})).await;
    assert_eq!(again["structuredContent"], envelope);
    assert_eq!(served.runs(), ["a.txt"]);

    // The audit log says what happened to each.
    served.engine.flush_audit().await;
    let outcomes: Vec<String> = served
        .engine
        .store()
        .audit(&Default::default())
        .unwrap()
        .into_iter()
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, ["policy_failed", "ok", "policy_failed"]);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_never_reach_the_policy() {
    let served = Served::start(Behaviour::Grants, ServerOptions::default()).await;
    let invalid = served.call(json!({"path": 7})).await;
    assert_eq!(invalid["isError"], true);
    assert!(
        text(&invalid).starts_with("invalid arguments for `save`: /path: "),
        "{invalid}"
    );
    assert_eq!(served.policy_calls(), 0);
    assert_eq!(served.runs(), Vec::<String>::new());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_outside_its_schema_an_error_and_a_panic_stop_the_call_with_policy_error() {
    let served = Served::start(Behaviour::OffSchema, ServerOptions::default()).await;
    let result = served.call(json!({"path": "a.txt"})).await;
    let reason = text(&result)
        .strip_prefix("call to `save` was stopped before it ran: its host policy ")
        .unwrap()
        .to_string();
    assert!(
        reason.starts_with(
            "returned a failure that does not match its declared failure schema: /error/approval_request_id: "
        ),
        "{reason}"
    );
    policy_error(&result, &reason);
    assert_eq!(served.runs(), Vec::<String>::new());
    served.stop().await;

    let served = Served::start(Behaviour::Errs, ServerOptions::default()).await;
    let result = served.call(json!({"path": "a.txt"})).await;
    policy_error(&result, "failed: the grant store is unreachable");
    assert_eq!(served.runs(), Vec::<String>::new());
    served.stop().await;

    let served = Served::start(Behaviour::Panics, ServerOptions::default()).await;
    for _ in 0..2 {
        // The session survives the panic and the next call is answered the same way.
        let result = served.call(json!({"path": "a.txt"})).await;
        policy_error(&result, "panicked");
    }
    assert_eq!(served.policy_calls(), 2);
    assert_eq!(served.runs(), Vec::<String>::new());
    served.engine.flush_audit().await;
    let records = served.engine.store().audit(&Default::default()).unwrap();
    assert_eq!(
        records
            .iter()
            .map(|r| (r.outcome.as_str(), r.detail.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("policy_error", Some("panicked")),
            ("policy_error", Some("panicked"))
        ]
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_apply_to_policy_failures() {
    // Over the policies' own bound: stopped with policy_error, the value never sent.
    let served = Served::start(Behaviour::Huge(100_000), ServerOptions::default()).await;
    let result = served.call(json!({"path": "a.txt"})).await;
    let size = serde_json::to_string(&needs_approval(&"x".repeat(100_000)))
        .unwrap()
        .len();
    policy_error(
        &result,
        &format!("returned a failure of {size} bytes, over the 65536 bytes a failure may take"),
    );
    assert!(serde_json::to_string(&result).unwrap().len() < 1000);
    served.stop().await;

    // Within it, but over the door's response budget: the budget's refusal, not the value.
    let options = ServerOptions {
        max_response_bytes: 4096,
        ..ServerOptions::default()
    };
    let served = Served::start(Behaviour::Huge(10_000), options).await;
    let result = served.call(json!({"path": "a.txt"})).await;
    assert_eq!(result["isError"], true);
    assert!(
        text(&result).starts_with("the result of `save` is "),
        "{result}"
    );
    assert!(
        text(&result).ends_with(
            "bytes, over Portico's response limit of 4096 bytes; ask for less (e.g. a narrower query), or raise [server] max_response_bytes"
        ),
        "{result}"
    );
    assert!(serde_json::to_string(&result).unwrap().len() < 1000);
    assert_eq!(served.runs(), Vec::<String>::new());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_advertises_the_failure_branch_and_marks_the_tool() {
    let served = Served::start(Behaviour::Grants, ServerOptions::default()).await;
    let tools = served.client.list_all_tools().await.unwrap();
    let save = tools.iter().find(|t| t.name == "save").unwrap();
    let save = serde_json::to_value(save).unwrap();
    assert_eq!(
        save["_meta"]["portico/hostPolicy"],
        json!({"action": "host", "reason": "the host's policy decides each call before the tool runs", "conditional": true})
    );
    let schema = &save["outputSchema"];
    assert_eq!(schema["type"], "object");
    let branches = schema["anyOf"].as_array().unwrap();
    assert_eq!(branches.len(), 3, "{schema:#}");
    assert_eq!(branches[0]["properties"]["saved"]["type"], "string");
    assert_eq!(
        branches[1]["properties"]["error"]["properties"]["code"]["enum"],
        json!(["policy_denied", "approval_required", "policy_error"])
    );
    // The declared failure's references point into its own branch.
    assert_eq!(
        branches[2]["properties"]["error"]["$ref"],
        "#/anyOf/2/$defs/ApprovalError"
    );
    assert_eq!(
        branches[2]["$defs"]["ApprovalError"]["properties"]["approval_request_id"]["minLength"],
        1
    );
    assert_eq!(branches[2].get("$schema"), None);

    // The widened schema admits the tool's answers and every failure, and nothing else.
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(validator.is_valid(&json!({"saved": "a.txt"})));
    assert!(validator.is_valid(&serde_json::to_value(needs_approval("req-1")).unwrap()));
    assert!(validator.is_valid(&json!({"ok": false, "error": {
        "code": "policy_error", "tool": "save", "reason": "panicked"}})));
    assert!(!validator.is_valid(&json!({"saved": 1})));
    assert!(
        !validator.is_valid(&serde_json::to_value(needs_approval("")).unwrap()),
        "the declared failure's own constraints hold through its references"
    );

    // The tool's own answer is checked against its own schema, not the widened one, even though
    // the widened one would admit it.
    let liar = tools.iter().find(|t| t.name == "liar").unwrap();
    let liar = serde_json::to_value(liar).unwrap();
    let widened = jsonschema::validator_for(&liar["outputSchema"]).unwrap();
    let forged = serde_json::to_value(needs_approval("forged")).unwrap();
    assert!(widened.is_valid(&forged));
    served
        .policy
        .grants
        .lock()
        .unwrap()
        .push("client:mcp".into());
    let result = served.call_tool("liar", json!({"path": "a.txt"})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).starts_with(
            "tool `liar` returned structuredContent that does not match its outputSchema: "
        ),
        "{result}"
    );
    assert_eq!(result.get("structuredContent"), None, "{result}");
    served.stop().await;
}
