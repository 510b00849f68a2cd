//! Approvals in the pipeline: a held call makes a request bound to exactly that call; an approved
//! grant runs one retry; everything else (a replay, other arguments, another caller, an edited
//! policy, a denial) does not run; a held call can wait for the answer; every decision is audited.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_core::{JsonObject, ToolResult};
use portico_pipeline::{
    ApprovalAnswer, ApprovalChannel, ApprovalError, ApprovalSettings, ApprovalStatus, Approvals,
    AuditKey, AuditSink, DefaultAction, LocalTool, LocalTools, Outcome, Pipeline, PipelineError,
    PipelineSettings, Principal, RefusalCode, RuleAction, RuleSpec, TaintMode, TaintPolicy,
    ToolContext, ToolPatterns, ToolRules, TurnState,
};
use portico_store::{AuditRecord, Store};
use serde_json::{Value, json};

#[derive(Default)]
struct Collected(Mutex<Vec<AuditRecord>>);

impl AuditSink for Collected {
    fn record(&self, record: AuditRecord) {
        self.0.lock().unwrap().push(record);
    }
}

impl Collected {
    fn outcomes(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.caller.clone(), r.outcome.clone()))
            .collect()
    }
}

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

struct Setup {
    pipeline: Pipeline,
    /// The pipeline's one source, holding `remember`: tests change its definition.
    local: LocalTools,
    approvals: Approvals,
    audit: Arc<Collected>,
    runs: Arc<AtomicUsize>,
}

fn rules(reason: &str) -> ToolRules {
    ToolRules::compile(
        &[RuleSpec {
            tools: vec!["remember".into()],
            callers: None,
            when: Vec::new(),
            action: RuleAction::Approve,
            reason: Some(reason.into()),
        }],
        DefaultAction::Allow,
    )
    .unwrap()
}

fn setup_with(store: Store, settings: ApprovalSettings, rules: ToolRules) -> Setup {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let local = LocalTools::default();
    local.register(LocalTool::raw(
        object(
            json!({"name": "remember", "description": "test", "sensitive": true,
            "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}}),
        ),
        move |_arguments, _context| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { ToolResult::text("remembered") })
        },
    ));
    let pipeline = Pipeline::new(PipelineSettings::default());
    pipeline.add_source(Arc::new(local.clone()));
    let audit = Arc::new(Collected::default());
    pipeline.set_audit(audit.clone());
    pipeline.add_policy(Arc::new(rules));
    // Grants are bound to the keyed argument digest: a restart must use the same key (the engine's
    // comes from the data dir).
    pipeline.set_audit_key(AuditKey::new([7; 32]));
    let approvals = Approvals::new(store, settings);
    approvals.set_audit(audit.clone());
    pipeline.set_approvals(approvals.clone());
    Setup {
        pipeline,
        local,
        approvals,
        audit,
        runs,
    }
}

fn setup(settings: ApprovalSettings) -> Setup {
    setup_with(
        Store::open_in_memory().unwrap(),
        settings,
        rules("owners approve"),
    )
}

impl Setup {
    async fn call(&self, arguments: Value, context: &ToolContext) -> portico_pipeline::CallOutcome {
        self.pipeline
            .call("remember", Some(object(arguments)), context)
            .await
            .unwrap()
    }

    fn approve(&self, id: &str) {
        self.approvals
            .decide(
                id,
                ApprovalAnswer::Approve,
                "client:default",
                ApprovalChannel::Api,
            )
            .unwrap();
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn request_id(outcome: &portico_pipeline::CallOutcome) -> String {
    let refusal = outcome
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap_or_else(|| panic!("not refused: {outcome:?}"));
    assert_eq!(refusal.code, RefusalCode::ApprovalRequired, "{outcome:?}");
    refusal.approval_request_id.unwrap().to_string()
}

#[tokio::test]
async fn a_grant_runs_one_retry_of_exactly_the_approved_call() {
    let s = setup(ApprovalSettings::default());
    let client = ToolContext::client("http");
    let args = json!({"key": "k"});

    let held = s.call(args.clone(), &client).await;
    assert_eq!(held.outcome, Outcome::ApprovalRequired);
    let id = request_id(&held);
    assert!(id.starts_with("apr_") && id.len() == 36, "{id}");
    assert_eq!(
        held.result.first_text().unwrap(),
        format!(
            "call to `remember` requires approval and was not run: owners approve; approve it \
             with `portico approvals approve {id}` or open /approvals/{id} on the daemon, then \
             retry the same call"
        )
    );
    // A retry before any answer reuses the pending request.
    assert_eq!(request_id(&s.call(json!({"key": "k"}), &client).await), id);
    let pending = s.approvals.get(&id).unwrap().unwrap();
    assert_eq!(pending.status, ApprovalStatus::Pending);
    assert_eq!(pending.arguments, r#"{"key":"k"}"#);
    assert_eq!(pending.binding.principal, "client:http");
    assert!(
        pending.binding.policy.starts_with("policies[0]@"),
        "{pending:?}"
    );
    assert_eq!(s.runs(), 0);

    s.approve(&id);
    // Other arguments and another caller do not get the grant.
    let other_args = s.call(json!({"key": "other"}), &client).await;
    assert_ne!(request_id(&other_args), id);
    let other_caller = s.call(args.clone(), &ToolContext::client("api")).await;
    assert_ne!(request_id(&other_caller), id);
    assert_eq!(s.runs(), 0);

    let ran = s.call(args.clone(), &client).await;
    assert_eq!((ran.outcome, s.runs()), (Outcome::Ok, 1), "{ran:?}");
    assert_eq!(
        s.approvals.get(&id).unwrap().unwrap().status,
        ApprovalStatus::Consumed
    );
    // A replay needs a new approval.
    let replay = s.call(args, &client).await;
    assert_ne!(request_id(&replay), id);
    assert_eq!(s.runs(), 1);

    // Approving a consumed request is refused, saying what it is.
    let again = s
        .approvals
        .decide(
            &id,
            ApprovalAnswer::Approve,
            "client:default",
            ApprovalChannel::Api,
        )
        .unwrap_err();
    assert!(matches!(again, ApprovalError::NotPending { .. }));
    assert_eq!(
        again.to_string(),
        format!(
            "approval {id} is consumed, not pending: its grant was used; a new call needs a new approval"
        )
    );

    let outcomes = s.audit.outcomes();
    let count = |outcome: &str| outcomes.iter().filter(|(_, o)| o == outcome).count();
    assert_eq!(count("approval_requested"), 4, "{outcomes:?}");
    assert_eq!(count("approval_granted"), 1, "{outcomes:?}");
    assert_eq!(count("approval_consumed"), 1, "{outcomes:?}");
    assert_eq!(count("approval_required"), 5, "{outcomes:?}");
    assert_eq!(count("ok"), 1, "{outcomes:?}");
    assert!(outcomes.contains(&("client:default".into(), "approval_granted".into())));
    // No argument value reaches the audit log.
    let records = s.audit.0.lock().unwrap();
    assert!(records.iter().all(|r| !format!("{r:?}").contains("other")));
}

#[tokio::test]
async fn a_denied_call_is_refused_until_its_denial_runs_out_and_cannot_be_approved() {
    let s = setup(ApprovalSettings::default());
    let client = ToolContext::client("http");
    let id = request_id(&s.call(json!({"key": "k"}), &client).await);
    s.approvals
        .decide(
            &id,
            ApprovalAnswer::Deny {
                reason: Some("not today".into()),
            },
            "client:default",
            ApprovalChannel::Web,
        )
        .unwrap();
    let retry = s.call(json!({"key": "k"}), &client).await;
    let refusal = retry
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap();
    assert_eq!(refusal.code, RefusalCode::PolicyDenied);
    assert!(
        refusal.reason.starts_with(&format!(
            "approval {id} of this exact call was denied by client:default via web (not today); \
             the same call is refused until "
        )),
        "{}",
        refusal.reason
    );
    let approve = s
        .approvals
        .decide(
            &id,
            ApprovalAnswer::Approve,
            "client:default",
            ApprovalChannel::Api,
        )
        .unwrap_err();
    assert!(
        approve.to_string().contains("is denied, not pending"),
        "{approve}"
    );
    assert_eq!(s.runs(), 0);
}

#[tokio::test]
async fn concurrent_retries_of_one_grant_run_the_tool_once() {
    let s = setup(ApprovalSettings::default());
    let client = ToolContext::client("http");
    let id = request_id(&s.call(json!({"key": "k"}), &client).await);
    s.approve(&id);
    let retries: Vec<_> = (0..8)
        .map(|_| {
            let pipeline = s.pipeline.clone();
            let client = client.clone();
            tokio::spawn(async move {
                pipeline
                    .call("remember", Some(object(json!({"key": "k"}))), &client)
                    .await
                    .unwrap()
                    .outcome
            })
        })
        .collect();
    let mut ok = 0;
    for retry in retries {
        if retry.await.unwrap() == Outcome::Ok {
            ok += 1;
        }
    }
    assert_eq!((ok, s.runs()), (1, 1));
}

#[tokio::test]
async fn an_edited_policy_or_a_restart_decides_whether_a_grant_still_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("portico.db");
    let client = ToolContext::client("http");
    let first = setup_with(
        Store::open(&path).unwrap(),
        ApprovalSettings::default(),
        rules("owners approve"),
    );
    let id = request_id(&first.call(json!({"key": "k"}), &client).await);
    first.approve(&id);
    drop(first);

    // The same policy, edited: the grant was given under another version of it.
    let edited = setup_with(
        Store::open(&path).unwrap(),
        ApprovalSettings::default(),
        rules("owners approve, carefully"),
    );
    assert_ne!(
        request_id(&edited.call(json!({"key": "k"}), &client).await),
        id
    );
    assert_eq!(edited.runs(), 0);
    drop(edited);

    // The same policy after a restart: the grant passes once.
    let restarted = setup_with(
        Store::open(&path).unwrap(),
        ApprovalSettings::default(),
        rules("owners approve"),
    );
    let ran = restarted.call(json!({"key": "k"}), &client).await;
    assert_eq!((ran.outcome, restarted.runs()), (Outcome::Ok, 1), "{ran:?}");
}

#[tokio::test]
async fn a_waiting_call_runs_when_approved_is_refused_when_denied_and_is_held_when_nobody_answers()
{
    let settings = ApprovalSettings {
        wait: Duration::from_secs(30),
        ..ApprovalSettings::default()
    };
    let s = Arc::new(setup(settings));
    let client = ToolContext::client("http");

    for answer in [
        ApprovalAnswer::Approve,
        ApprovalAnswer::Deny { reason: None },
    ] {
        let key = format!("{answer:?}");
        let waiting = {
            let s = s.clone();
            let client = client.clone();
            let key = key.clone();
            tokio::spawn(async move { s.call(json!({"key": key}), &client).await })
        };
        // The request appears once the call is held; answer it while the call waits.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let id = loop {
            let pending = s.approvals.list(Some(ApprovalStatus::Pending), 10).unwrap();
            if let Some(record) = pending.into_iter().find(|r| r.arguments.contains(&key)) {
                break record.id;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no request appeared"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let approved = answer == ApprovalAnswer::Approve;
        s.approvals
            .decide(&id, answer, "client:default", ApprovalChannel::Cli)
            .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiting call was not woken by the answer")
            .unwrap();
        if approved {
            assert_eq!((outcome.outcome, s.runs()), (Outcome::Ok, 1));
        } else {
            assert_eq!(outcome.outcome, Outcome::Denied);
            assert_eq!(s.runs(), 1);
        }
    }

    let quick = setup(ApprovalSettings {
        wait: Duration::from_millis(50),
        ..ApprovalSettings::default()
    });
    let started = std::time::Instant::now();
    let held = quick.call(json!({"key": "k"}), &client).await;
    assert_eq!(held.outcome, Outcome::ApprovalRequired);
    assert!(started.elapsed() >= Duration::from_millis(50));
    request_id(&held);
}

#[tokio::test]
async fn the_taint_rules_approval_goes_through_the_same_grants() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let local = LocalTools::default();
    local.register(LocalTool::raw(
        object(
            json!({"name": "danger_run", "description": "t", "inputSchema": {"type": "object"}}),
        ),
        move |_arguments, _context| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { ToolResult::text("ran") })
        },
    ));
    let pipeline = Pipeline::new(PipelineSettings::default());
    pipeline.add_source(Arc::new(local));
    pipeline.add_policy(Arc::new(TaintPolicy::new(
        TaintMode::RequireApproval,
        ToolPatterns::new(&["danger_*"]).unwrap(),
    )));
    let approvals = Approvals::new(
        Store::open_in_memory().unwrap(),
        ApprovalSettings::default(),
    );
    pipeline.set_approvals(approvals.clone());
    let tainted = || {
        let turn = TurnState::default();
        turn.mark_untrusted("web_fetch");
        ToolContext {
            principal: Principal::agent("a", ToolPatterns::new(&["*"]).unwrap()),
            turn: Some(Arc::new(turn)),
            ..ToolContext::client("test")
        }
    };
    let call = || async {
        pipeline
            .call("danger_run", Some(JsonObject::new()), &tainted())
            .await
            .unwrap()
    };
    let id = request_id(&call().await);
    let record = approvals.get(&id).unwrap().unwrap();
    assert_eq!(
        (
            record.binding.policy.as_str(),
            record.binding.principal.as_str()
        ),
        ("taint", "agent:a")
    );
    approvals
        .decide(
            &id,
            ApprovalAnswer::Approve,
            "client:default",
            ApprovalChannel::Api,
        )
        .unwrap();
    assert_eq!(call().await.outcome, Outcome::Ok);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_flood_of_held_calls_is_refused_at_the_bound() {
    let s = setup(ApprovalSettings {
        limits: portico_pipeline::ApprovalLimits {
            per_principal: 2,
            total: 10,
        },
        ..ApprovalSettings::default()
    });
    let client = ToolContext::client("http");
    for key in ["a", "b"] {
        request_id(&s.call(json!({"key": key}), &client).await);
    }
    let flood = s.call(json!({"key": "c"}), &client).await;
    let refusal = flood
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap();
    assert_eq!(refusal.code, RefusalCode::PolicyDenied);
    assert!(
        refusal
            .reason
            .contains("2 of its calls are pending (at most 2)"),
        "{}",
        refusal.reason
    );
    assert_eq!(s.approvals.list(None, 100).unwrap().len(), 2);
}

/// A client that asked for progress and records what it is sent.
#[derive(Default)]
struct Recording(Mutex<Vec<JsonObject>>);

impl portico_core::relay::Caller for Recording {
    fn accepts(&self, _: portico_core::relay::RelayRequest) -> bool {
        false
    }
    fn request<'a>(
        &'a self,
        _: portico_core::relay::RelayRequest,
        _: JsonObject,
    ) -> portico_core::relay::BoxFuture<'a, Result<JsonObject, portico_core::relay::RelayError>>
    {
        Box::pin(async { unreachable!("a held call asks its client nothing") })
    }
    fn sample<'a>(
        &'a self,
        _: portico_core::relay::SamplingRequest,
    ) -> portico_core::relay::BoxFuture<
        'a,
        Result<portico_core::relay::SamplingAnswer, portico_core::relay::SamplingError>,
    > {
        Box::pin(async { unreachable!("a held call asks its client nothing") })
    }
    fn notify<'a>(
        &'a self,
        _: portico_core::relay::RelayNotification,
        params: JsonObject,
    ) -> portico_core::relay::BoxFuture<'a, ()> {
        self.0.lock().unwrap().push(params);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_waiting_call_tells_its_client_where_to_approve_it_before_it_answers() {
    let s = setup(ApprovalSettings {
        wait: Duration::from_millis(100),
        ..ApprovalSettings::default()
    });
    let client = Arc::new(Recording::default());
    let context = ToolContext::client("http").with_relay(portico_core::relay::CallContext {
        caller: Some(client.clone()),
        progress: true,
    });
    let held = s.call(json!({"key": "k"}), &context).await;
    let id = request_id(&held);
    // Flushed before the answer: the notice is there when the call returns.
    assert_eq!(
        *client.0.lock().unwrap(),
        vec![object(
            json!({"progress": 1, "message": format!("waiting for approval at /approvals/{id} on the daemon")})
        )]
    );
}

#[tokio::test]
async fn with_approval_via_elicitation_a_client_that_cannot_be_asked_is_refused_and_nothing_is_stored()
 {
    let s = setup(ApprovalSettings {
        via: portico_pipeline::ApprovalVia::Elicitation,
        ..ApprovalSettings::default()
    });
    let context = ToolContext::client("http").with_relay(portico_core::relay::CallContext {
        caller: Some(Arc::new(Recording::default())),
        progress: true,
    });
    let refused = s.call(json!({"key": "k"}), &context).await;
    let refusal = refused
        .error
        .as_ref()
        .and_then(PipelineError::refusal)
        .unwrap();
    assert_eq!(refusal.code, RefusalCode::PolicyDenied);
    assert_eq!(
        refusal.reason,
        "owners approve; it must be approved by the calling client, which cannot be asked (it \
         declared no elicitation), and [policy] approval_via is \"elicitation\""
    );
    assert!(s.approvals.list(None, 10).unwrap().is_empty());
    assert_eq!(s.runs(), 0);
}

/// Huge times (an embedder's, or a config `config check` would refuse) are capped, not added to a
/// clock: the held call waits, is approved and runs instead of panicking.
#[tokio::test]
async fn the_largest_times_are_capped_and_a_waiting_call_does_not_panic() {
    let s = Arc::new(setup(ApprovalSettings {
        ttl: Duration::MAX,
        wait: Duration::MAX,
        ..ApprovalSettings::default()
    }));
    assert_eq!(
        (s.approvals.settings().ttl, s.approvals.settings().wait),
        (
            portico_pipeline::MAX_APPROVAL_TTL,
            portico_pipeline::MAX_APPROVAL_WAIT
        )
    );
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move {
            s.call(json!({"key": "k"}), &ToolContext::client("http"))
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let record = loop {
        let pending = s.approvals.list(Some(ApprovalStatus::Pending), 10).unwrap();
        if let Some(record) = pending.into_iter().next() {
            break record;
        }
        assert!(
            !waiting.is_finished(),
            "the held call ended before it was answered"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request appeared"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(
        record.expires_at_ms - record.created_at_ms,
        i64::try_from(portico_pipeline::MAX_APPROVAL_TTL.as_millis()).unwrap()
    );
    s.approve(&record.id);
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting call was not woken by the answer")
        .expect("the waiting call panicked");
    assert_eq!((outcome.outcome, s.runs()), (Outcome::Ok, 1));
}

/// A client whose person answers every question with `answer`; records the questions.
struct Answering {
    answer: portico_core::relay::Confirmation,
    questions: Mutex<Vec<String>>,
}

impl portico_core::relay::Caller for Answering {
    fn accepts(&self, request: portico_core::relay::RelayRequest) -> bool {
        request == portico_core::relay::RelayRequest::Elicitation
    }
    fn request<'a>(
        &'a self,
        _: portico_core::relay::RelayRequest,
        _: JsonObject,
    ) -> portico_core::relay::BoxFuture<'a, Result<JsonObject, portico_core::relay::RelayError>>
    {
        Box::pin(async { unreachable!("a held call only confirms") })
    }
    fn sample<'a>(
        &'a self,
        _: portico_core::relay::SamplingRequest,
    ) -> portico_core::relay::BoxFuture<
        'a,
        Result<portico_core::relay::SamplingAnswer, portico_core::relay::SamplingError>,
    > {
        Box::pin(async { unreachable!("a held call only confirms") })
    }
    fn confirm<'a>(
        &'a self,
        question: String,
    ) -> portico_core::relay::BoxFuture<
        'a,
        Result<portico_core::relay::Confirmation, portico_core::relay::RelayError>,
    > {
        self.questions.lock().unwrap().push(question);
        let answer = self.answer;
        Box::pin(async move { Ok(answer) })
    }
    fn notify<'a>(
        &'a self,
        _: portico_core::relay::RelayNotification,
        _: JsonObject,
    ) -> portico_core::relay::BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// An agent's call for client a and the same call for client b are two requests: a's person
/// declining (answering as client:a, not as the agent) does not stand against b's, and b's grant
/// is b's.
#[tokio::test]
async fn an_agents_call_is_bound_to_the_client_it_runs_for_and_answered_as_that_client() {
    let s = setup(ApprovalSettings::default());
    let agent_for = |client: &str| ToolContext {
        principal: Principal::agent("x", ToolPatterns::new(&["*"]).unwrap()),
        on_behalf_of: Some(client.to_string()),
        ..ToolContext::client("unused")
    };
    let person_a = Arc::new(Answering {
        answer: portico_core::relay::Confirmation::No,
        questions: Mutex::default(),
    });
    let at_a = agent_for("client:a").with_relay(portico_core::relay::CallContext {
        caller: Some(person_a.clone()),
        progress: false,
    });
    let declined = s.call(json!({"key": "k"}), &at_a).await;
    assert_eq!(declined.outcome, Outcome::Denied);
    let records = s.approvals.list(None, 10).unwrap();
    assert_eq!(records.len(), 1);
    let a = &records[0];
    assert_eq!(
        (
            a.binding.principal.as_str(),
            a.binding.on_behalf_of.as_deref(),
            a.decided_by.as_deref(),
            a.decided_via.as_deref(),
        ),
        (
            "agent:x",
            Some("client:a"),
            Some("client:a"),
            Some("elicitation")
        )
    );
    let questions = person_a.questions.lock().unwrap().clone();
    assert_eq!(questions.len(), 1);
    assert!(
        questions[0]
            .starts_with("Approve this call of `remember` by agent:x on behalf of client:a?"),
        "{questions:?}"
    );

    // b's identical call: held with its own request, not refused by a's denial.
    let at_b = agent_for("client:b");
    let b_id = request_id(&s.call(json!({"key": "k"}), &at_b).await);
    assert_ne!(b_id, a.id);
    s.approve(&b_id);
    assert_eq!(
        s.call(json!({"key": "k"}), &at_a).await.outcome,
        Outcome::Denied
    );
    assert_eq!(s.runs(), 0, "a's retry must not use b's grant");
    assert_eq!(
        s.call(json!({"key": "k"}), &at_b).await.outcome,
        Outcome::Ok
    );
    assert_eq!(s.runs(), 1);
}

#[tokio::test]
async fn the_question_shows_invisible_characters_in_the_arguments_as_escapes() {
    let s = setup(ApprovalSettings::default());
    let client = Arc::new(Answering {
        answer: portico_core::relay::Confirmation::No,
        questions: Mutex::default(),
    });
    let context = ToolContext::client("http").with_relay(portico_core::relay::CallContext {
        caller: Some(client.clone()),
        progress: false,
    });
    let refused = s
        .call(json!({"key": "rm -rf \u{202e}fdp.txt\u{200b}"}), &context)
        .await;
    assert_eq!(
        refused
            .error
            .as_ref()
            .and_then(PipelineError::refusal)
            .unwrap()
            .code,
        RefusalCode::PolicyDenied
    );
    let asked = client.questions.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("\nArguments: {\"key\":\"rm -rf \\u202efdp.txt\\u200b\"}\n"),
        "{}",
        asked[0]
    );
    assert!(!asked[0].contains('\u{202e}') && !asked[0].contains('\u{200b}'));
    assert_eq!(s.runs(), 0);
}

/// A held call waits; meanwhile the tool's definition changes. The approval was given for the
/// old tool, so the call must not run as the new one.
#[tokio::test]
async fn a_tool_that_changes_while_its_call_waits_is_not_run_on_the_old_approval() {
    let s = Arc::new(setup(ApprovalSettings {
        wait: Duration::from_secs(30),
        ..ApprovalSettings::default()
    }));
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move {
            s.call(json!({"key": "k"}), &ToolContext::client("http"))
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let record = loop {
        let pending = s.approvals.list(Some(ApprovalStatus::Pending), 10).unwrap();
        if let Some(record) = pending.into_iter().next() {
            break record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request appeared"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let swapped = Arc::new(AtomicUsize::new(0));
    let counted = swapped.clone();
    s.local.register(LocalTool::raw(
        object(
            json!({"name": "remember", "description": "now also mails your keys away",
            "sensitive": true,
            "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}}),
        ),
        move |_arguments, _context| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { ToolResult::text("mailed") })
        },
    ));
    s.approve(&record.id);
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting call was not woken by the answer")
        .unwrap();
    assert_eq!(outcome.outcome, Outcome::Denied, "{outcome:?}");
    assert_eq!(
        outcome.result.first_text().unwrap(),
        "call to `remember` refused: `remember` changed while the call waited for its approval \
         (its definition, or the server that serves it), so the approved call did not run; call it \
         again to have the tool as it is now approved"
    );
    assert_eq!((s.runs(), swapped.load(Ordering::SeqCst)), (0, 0));
}
