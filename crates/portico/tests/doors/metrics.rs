//! `GET /metrics` on the real daemon: protected like `/api`, in Prometheus text format 0.0.4 as a
//! Prometheus text parser reads it, and moving by exactly the calls made: built-in, upstream,
//! denied and unknown calls counted by tool, server, principal class and outcome, each stage's
//! histogram by the calls that reached it; upstream state and sessions per door as gauges; no
//! argument value or token anywhere in it.

use std::collections::HashMap;

use prometheus_parse::{Scrape, Value as Sampled};
use serde_json::{Value, json};

use crate::client::*;

const TOKEN: &str = "metrics-door-token";
/// An argument value that must never reach the metrics.
const SECRET_ARGUMENT: &str = "argument-value-never-a-label-7f3a";

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn config() -> String {
    config_with(
        &format!(
            r#"[server]
listen = "127.0.0.1:0"
token = "{TOKEN}"

[[policies]]
tools = ["file_read"]
action = "deny"
reason = "no files here"
"#
        ),
        &["--tools", "t1"],
    )
}

/// One Streamable HTTP session on `/mcp` with the door's token.
struct Session {
    base: String,
    id: String,
}

impl Session {
    async fn open(base: &str) -> Session {
        let init = Self::post(
            base,
            None,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "metrics-test", "version": "1"}}}),
        )
        .await;
        assert_eq!(init.status(), 200);
        let id = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        drop(init.text().await.unwrap());
        let initialized = Self::post(
            base,
            Some(&id),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert_eq!(initialized.status(), 202);
        Session {
            base: base.to_string(),
            id,
        }
    }

    async fn post(base: &str, session: Option<&str>, body: Value) -> reqwest::Response {
        let mut request = http()
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        request.json(&body).send().await.unwrap()
    }

    /// `tools/call`; the JSON-RPC answer.
    async fn call(&self, id: u64, name: &str, arguments: Value) -> Value {
        let body = Self::post(
            &self.base,
            Some(&self.id),
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}),
        )
        .await
        .text()
        .await
        .unwrap();
        let data = body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .chain(std::iter::once(body.as_str()));
        data.filter_map(|text| serde_json::from_str::<Value>(text).ok())
            .find(|message| message["id"] == id)
            .unwrap_or_else(|| panic!("no answer to call {id} in {body:?}"))
    }
}

async fn get_metrics(base: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = http().get(format!("{base}/metrics"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.unwrap()
}

/// One scrape, as the text and as a Prometheus text parser reads it.
struct Scraped {
    text: String,
    samples: Scrape,
}

impl Scraped {
    async fn take(base: &str) -> Scraped {
        let response = get_metrics(base, Some(&format!("Bearer {TOKEN}"))).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let text = response.text().await.unwrap();
        let samples = Scrape::parse(text.lines().map(|line| Ok(line.to_string())))
            .unwrap_or_else(|e| panic!("{e}: {text}"));
        Scraped { text, samples }
    }

    /// The value of the one sample of `metric` with at least `labels` (a histogram's count); 0 when
    /// there is none yet.
    fn value(&self, metric: &str, labels: &[(&str, &str)]) -> f64 {
        let matching: Vec<f64> = self
            .samples
            .samples
            .iter()
            .filter(|s| s.metric == metric)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                Sampled::Counter(v) | Sampled::Gauge(v) | Sampled::Untyped(v) => *v,
                Sampled::Histogram(buckets) => {
                    buckets
                        .iter()
                        .find(|b| b.less_than.is_infinite())
                        .expect("a +Inf bucket")
                        .count
                }
                Sampled::Summary(_) => panic!("{metric} is a summary"),
            })
            .collect();
        assert!(
            matching.len() <= 1,
            "{metric} {labels:?} matches {matching:?}: {}",
            self.text
        );
        matching.first().copied().unwrap_or(0.0)
    }

    fn calls(&self, tool: &str, server: &str, outcome: &str) -> f64 {
        self.value(
            "portico_calls_total",
            &[
                ("tool", tool),
                ("server", server),
                ("principal", "client"),
                ("outcome", outcome),
            ],
        )
    }

    fn stage(&self, stage: &str) -> f64 {
        self.value("portico_call_stage_duration_seconds", &[("stage", stage)])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_protected_parse_as_prometheus_text_and_move_by_exactly_the_calls_made() {
    let home = Home::new(&config());
    let mut daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    let base = daemon.base.clone();

    // Protected like the API: no token, or a wrong one, reads nothing.
    for authorization in [None, Some("Bearer wrong-token")] {
        let refused = get_metrics(&base, authorization).await;
        assert_eq!(refused.status(), 401, "{authorization:?}");
        let body = refused.text().await.unwrap();
        assert!(!body.contains("portico_"), "{body}");
    }

    let before = Scraped::take(&base).await;
    let session = Session::open(&base).await;
    for id in 1..=3 {
        let answer = session.call(id, "system_time", json!({})).await;
        assert!(
            answer["result"]["structuredContent"]["unix_ms"].is_u64(),
            "{answer}"
        );
    }
    for id in 4..=5 {
        let answer = session.call(id, "mcp_cat_t1", json!({})).await;
        assert_eq!(
            answer["result"]["content"][0]["text"], "t1 called",
            "{answer}"
        );
    }
    let denied = session
        .call(6, "file_read", json!({"path": SECRET_ARGUMENT}))
        .await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let unknown = session
        .call(7, "no_such_tool", json!({"q": SECRET_ARGUMENT}))
        .await;
    assert!(unknown["error"].is_object(), "{unknown}");
    let after = Scraped::take(&base).await;

    let moved =
        |name: &str, f: &dyn Fn(&Scraped) -> f64| (name.to_string(), f(&after) - f(&before));
    let deltas: HashMap<String, f64> = [
        moved("time ok", &|s| s.calls("system_time", "(local)", "ok")),
        moved("t1 ok", &|s| s.calls("mcp_cat_t1", "cat", "ok")),
        moved("file_read denied", &|s| {
            s.calls("file_read", "(local)", "denied")
        }),
        moved("unknown", &|s| {
            s.calls("(unknown)", "(none)", "unknown_tool")
        }),
        moved("door", &|s| s.stage("door")),
        moved("pipeline", &|s| s.stage("pipeline")),
        moved("policy", &|s| s.stage("policy")),
        moved("execute", &|s| s.stage("execute")),
        moved("approval", &|s| s.stage("approval")),
        moved("upstream cat", &|s| {
            s.value(
                "portico_upstream_call_duration_seconds",
                &[("server", "cat")],
            )
        }),
    ]
    .into_iter()
    .collect();
    let expected: HashMap<String, f64> = [
        ("time ok", 3.0),
        ("t1 ok", 2.0),
        ("file_read denied", 1.0),
        ("unknown", 1.0),
        // Every tools/call at the door, and through the pipeline.
        ("door", 7.0),
        ("pipeline", 7.0),
        // All but the unknown name met the policies; the denied one ran no further.
        ("policy", 6.0),
        ("execute", 5.0),
        ("approval", 0.0),
        ("upstream cat", 2.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(deltas, expected, "{}", after.text);
    // Nothing else was counted as a call meanwhile.
    let total = |s: &Scraped| -> f64 {
        s.samples
            .samples
            .iter()
            .filter(|sample| sample.metric == "portico_calls_total")
            .map(|sample| match sample.value {
                Sampled::Counter(v) => v,
                _ => panic!("portico_calls_total is a counter"),
            })
            .sum()
    };
    assert_eq!(total(&after) - total(&before), 7.0, "{}", after.text);

    // State, read at the scrape.
    assert_eq!(
        after.value(
            "portico_upstream_state",
            &[("server", "cat"), ("state", "ready")]
        ),
        1.0
    );
    assert_eq!(
        after.value(
            "portico_upstream_state",
            &[("server", "cat"), ("state", "restarting")]
        ),
        0.0
    );
    assert_eq!(
        after.value("portico_upstream_connects_total", &[("server", "cat")]),
        1.0
    );
    assert_eq!(
        after.value(
            "portico_upstream_connect_duration_seconds",
            &[("server", "cat"), ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(
        after.value("portico_sessions", &[("door", "mcp")])
            - before.value("portico_sessions", &[("door", "mcp")]),
        1.0
    );
    assert_eq!(after.value("portico_sessions", &[("door", "sse")]), 0.0);
    assert_eq!(after.value("portico_approvals_pending", &[]), 0.0);
    assert!(
        after
            .text
            .contains("# TYPE portico_approvals_pending gauge\n"),
        "{}",
        after.text
    );
    assert_eq!(
        after.value("portico_a2a_tasks", &[("state", "working")]),
        0.0
    );
    assert!(
        after
            .text
            .contains("# TYPE portico_store_commit_duration_seconds histogram\n"),
        "{}",
        after.text
    );

    // Labels are bounded names, never what a caller sent or a credential.
    assert!(!after.text.contains(SECRET_ARGUMENT), "{}", after.text);
    assert!(!after.text.contains("no_such_tool"), "{}", after.text);
    assert!(!after.text.contains(TOKEN), "{}", after.text);
    assert!(!after.text.contains("metrics-test"), "{}", after.text);

    daemon.stop();
}

/// What every Prometheus user expects of a process, and the version that runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_have_the_standard_process_families_and_the_build_info() {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    // The kernel counts a start in clock ticks: allow one either side.
    let before_start = now() - 1.0;
    let home = Home::new(&config());
    let mut daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    let scraped = Scraped::take(&daemon.base).await;
    let text = &scraped.text;
    for (family, kind) in [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("portico_build_info", "gauge"),
    ] {
        assert!(
            text.contains(&format!("\n# TYPE {family} {kind}\n")),
            "{family} {kind}: {text}"
        );
    }
    let resident = scraped.value("process_resident_memory_bytes", &[]);
    assert!(resident > 1024.0 * 1024.0, "{resident}: {text}");
    assert!(scraped.value("process_virtual_memory_bytes", &[]) >= resident);
    let open = scraped.value("process_open_fds", &[]);
    assert!(open >= 3.0, "{open}: {text}");
    assert!(scraped.value("process_max_fds", &[]) >= open);
    assert!(
        scraped.value("process_cpu_seconds_total", &[]) > 0.0,
        "{text}"
    );
    let started = scraped.value("process_start_time_seconds", &[]);
    assert!(
        started >= before_start && started <= now() + 1.0,
        "started {started}, the test at {before_start}: {text}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        scraped.value("portico_build_info", &[("version", version)]),
        1.0,
        "{text}"
    );
    assert!(
        text.contains(&format!("portico_build_info{{version=\"{version}\"}} 1\n")),
        "{text}"
    );
    daemon.stop();
}
