use super::*;

use prometheus_parse::{Sample, Scrape, Value};

fn scrape(metrics: &Metrics, state: &State) -> Scrape {
    let text = metrics.encode(state);
    Scrape::parse(text.lines().map(|line| Ok(line.to_string()))).unwrap()
}

/// The value of the one sample of `metric` whose labels include all of `labels`.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert!(matching.len() <= 1, "{metric} {labels:?}: {matching:#?}");
    matching.first().map(|sample| match &sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets
            .iter()
            .find(|b| b.less_than.is_infinite())
            .map(|b| b.count)
            .unwrap(),
        Value::Summary(_) => panic!("no summaries here"),
    })
}

fn call<'a>(tool: &'a str, server: &'a str, outcome: &'static str) -> CallRecord<'a> {
    CallRecord {
        tool,
        server: Cow::Borrowed(server),
        principal: PrincipalClass::Client,
        outcome,
    }
}

#[test]
fn calls_are_counted_by_tool_server_principal_class_and_outcome() {
    let metrics = Metrics::new();
    for _ in 0..3 {
        metrics.count_call(call("system_time", "(local)", "ok"));
    }
    metrics.count_call(call("mcp_cat_t1", "cat", "denied"));
    metrics.count_call(CallRecord {
        principal: PrincipalClass::Agent,
        ..call("mcp_cat_t1", "cat", "denied")
    });
    let scrape = scrape(&metrics, &State::default());
    let calls = |tool, principal, outcome| {
        value(
            &scrape,
            "portico_calls_total",
            &[
                ("tool", tool),
                ("principal", principal),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(calls("system_time", "client", "ok"), Some(3.0));
    assert_eq!(calls("mcp_cat_t1", "client", "denied"), Some(1.0));
    assert_eq!(calls("mcp_cat_t1", "agent", "denied"), Some(1.0));
    assert_eq!(calls("mcp_cat_t1", "client", "ok"), None);
    assert_eq!(
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == "portico_calls_total")
            .count(),
        3
    );
}

#[test]
fn each_stage_indexes_its_own_histogram() {
    for (index, stage) in Stage::ALL.into_iter().enumerate() {
        assert_eq!(stage as usize, index, "{stage:?}");
    }
    let metrics = Metrics::new();
    metrics.time_stage(Stage::Approval, Duration::from_secs(3));
    let scrape = scrape(&metrics, &State::default());
    for stage in Stage::ALL {
        let expected = if stage == Stage::Approval { 1.0 } else { 0.0 };
        assert_eq!(
            value(
                &scrape,
                "portico_call_stage_duration_seconds_count",
                &[("stage", stage.as_str())]
            ),
            Some(expected),
            "{stage:?}"
        );
    }
}

#[test]
fn portico_s_own_tools_are_labelled_by_their_source_and_unlisted_names_never_by_name() {
    assert_eq!(
        CallRecord::own_labels("local", "system_time"),
        ("system_time", "(local)")
    );
    assert_eq!(
        CallRecord::own_labels("agents", "portico_agent_x"),
        ("portico_agent_x", "(agents)")
    );
    assert_eq!(CallRecord::own_labels("a2a", "a2a_y"), ("a2a_y", "(a2a)"));
    // A passed-through server takes any name a client sends.
    assert_eq!(
        CallRecord::own_labels("hub", "anything-a-client-made-up"),
        (UNLISTED, "(hub)")
    );
}

#[test]
fn a_principal_is_counted_by_its_class_never_its_name() {
    let patterns = portico_core::context::ToolPatterns::new(&["*"]).unwrap();
    assert_eq!(
        PrincipalClass::of(&Principal::client("laptop")),
        PrincipalClass::Client
    );
    assert_eq!(
        PrincipalClass::of(&Principal::client("a2a")),
        PrincipalClass::A2a
    );
    assert_eq!(
        PrincipalClass::of(&Principal::agent("reviewer", patterns)),
        PrincipalClass::Agent
    );
}

#[test]
fn past_max_series_new_tools_share_the_other_series() {
    let metrics = Metrics::new();
    let names: Vec<String> = (0..MAX_SERIES + 10).map(|i| format!("tool_{i}")).collect();
    for name in &names {
        metrics.count_call(call(name, "s", "ok"));
    }
    // A tool already counted keeps its own series.
    metrics.count_call(call("tool_0", "s", "ok"));
    let scrape = scrape(&metrics, &State::default());
    let series = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "portico_calls_total")
        .count();
    assert_eq!(series, MAX_SERIES + 1);
    assert_eq!(
        value(&scrape, "portico_calls_total", &[("tool", OTHER)]),
        Some(10.0)
    );
    assert_eq!(
        value(&scrape, "portico_calls_total", &[("tool", "tool_0")]),
        Some(2.0)
    );
}

#[test]
fn stages_upstream_calls_connects_and_commits_are_histograms_that_count_each_observation() {
    let metrics = Metrics::new();
    metrics.time_stage(Stage::Door, Duration::from_millis(3));
    metrics.time_stage(Stage::Policy, Duration::from_micros(40));
    metrics.time_stage(Stage::Policy, Duration::from_micros(60));
    metrics.time_upstream_call("cat", Duration::from_millis(12));
    metrics.time_connect("cat", ConnectOutcome::Ok, Duration::from_millis(200));
    metrics.time_connect("cat", ConnectOutcome::Failed, Duration::from_secs(2));
    metrics.count_restart("cat");
    metrics.time_store_commit(5, Duration::from_millis(1));
    metrics.count_rate_limited(RateLimited::Agent);
    let scrape = scrape(&metrics, &State::default());
    let stage = |name| {
        value(
            &scrape,
            "portico_call_stage_duration_seconds",
            &[("stage", name)],
        )
    };
    assert_eq!(stage("door"), Some(1.0));
    assert_eq!(stage("policy"), Some(2.0));
    // Every stage is there from the start, counting nothing until a call reaches it.
    assert_eq!(stage("execute"), Some(0.0));
    assert_eq!(
        value(
            &scrape,
            "portico_call_stage_duration_seconds_count",
            &[("stage", "policy")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &scrape,
            "portico_upstream_call_duration_seconds",
            &[("server", "cat")]
        ),
        Some(1.0)
    );
    for outcome in ["ok", "failed"] {
        assert_eq!(
            value(
                &scrape,
                "portico_upstream_connect_duration_seconds",
                &[("server", "cat"), ("outcome", outcome)]
            ),
            Some(1.0)
        );
    }
    assert_eq!(
        value(
            &scrape,
            "portico_upstream_restarts_total",
            &[("server", "cat")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&scrape, "portico_store_commit_duration_seconds", &[]),
        Some(1.0)
    );
    assert_eq!(value(&scrape, "portico_store_writes_total", &[]), Some(5.0));
    assert_eq!(
        value(
            &scrape,
            "portico_rate_limit_refusals_total",
            &[("kind", "agent")]
        ),
        Some(1.0)
    );
}

#[test]
fn state_is_written_as_gauges_one_series_per_upstream_state() {
    let metrics = Metrics::new();
    let state = State {
        upstreams: vec![
            UpstreamState {
                server: "cat".into(),
                state: ServerState::Ready,
                connects: 2,
            },
            UpstreamState {
                server: "dog".into(),
                state: ServerState::NeedsLogin,
                connects: 0,
            },
        ],
        sessions: vec![("mcp", 3), ("sse", 0)],
        a2a_tasks: Some(vec![(TaskState::Working, 2), (TaskState::Completed, 7)]),
        approvals_pending: Some(4),
    };
    let scrape = scrape(&metrics, &state);
    let upstream = |server, state| {
        value(
            &scrape,
            "portico_upstream_state",
            &[("server", server), ("state", state)],
        )
    };
    assert_eq!(upstream("cat", "ready"), Some(1.0));
    assert_eq!(upstream("cat", "restarting"), Some(0.0));
    assert_eq!(upstream("dog", "needs_login"), Some(1.0));
    assert_eq!(upstream("dog", "ready"), Some(0.0));
    assert_eq!(
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == "portico_upstream_state")
            .count(),
        2 * SERVER_STATES.len()
    );
    assert_eq!(
        value(
            &scrape,
            "portico_upstream_connects_total",
            &[("server", "cat")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(&scrape, "portico_sessions", &[("door", "mcp")]),
        Some(3.0)
    );
    assert_eq!(
        value(&scrape, "portico_sessions", &[("door", "sse")]),
        Some(0.0)
    );
    let tasks = |state| value(&scrape, "portico_a2a_tasks", &[("state", state)]);
    assert_eq!(tasks("working"), Some(2.0));
    assert_eq!(tasks("completed"), Some(7.0));
    assert_eq!(tasks("failed"), Some(0.0));
    assert_eq!(value(&scrape, "portico_approvals_pending", &[]), Some(4.0));

    // What could not be read is left out rather than reported as zero.
    let scrape = self::scrape(&metrics, &State::default());
    assert_eq!(value(&scrape, "portico_approvals_pending", &[]), None);
    assert_eq!(
        value(&scrape, "portico_a2a_tasks", &[("state", "working")]),
        None
    );
}

/// (A family with no series yet, such as the sessions of no door, is left out whole.)
#[test]
fn the_text_is_prometheus_0_0_4_with_help_and_type_for_every_family() {
    let metrics = Metrics::new();
    metrics.count_call(call("system_time", "(local)", "ok"));
    let text = metrics.encode(&State {
        sessions: vec![("mcp", 1)],
        ..State::default()
    });
    assert_eq!(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        text.contains("# TYPE portico_calls_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE portico_call_stage_duration_seconds histogram\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE portico_sessions gauge\n"), "{text}");
    // OpenMetrics' end marker and unit lines are not part of the 0.0.4 format.
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("# UNIT"), "{text}");
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    for sample in &scrape.samples {
        let family = ["_total", "_sum", "_count"]
            .iter()
            .find_map(|suffix| sample.metric.strip_suffix(suffix))
            .unwrap_or(&sample.metric);
        assert!(
            scrape.docs.contains_key(family) || scrape.docs.contains_key(&sample.metric),
            "{} has no HELP",
            sample.metric
        );
    }
}
