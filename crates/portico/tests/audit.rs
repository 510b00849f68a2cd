//! `portico audit` and `portico audit verify` against the store real calls wrote: the records
//! printed readably and as JSON, the filters, and a store tampered with through SQLite found
//! broken at the exact record, with a non-zero exit.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const CONFIG: &str = r#"
[[policies]]
tools = ["memory_recall"]
action = "deny"
reason = "nothing is forgotten here"
"#;

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), CONFIG).unwrap();
        Home { dir }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("portico.db")
    }

    /// Runs `portico` with this home; (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let output = Command::new(env!("CARGO_BIN_EXE_portico"))
            .arg("--config")
            .arg(self.dir.path().join("config.toml"))
            .args(args)
            .env("PORTICO_HOME", self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }

    fn json_records(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["audit", "--json"];
        all.extend_from_slice(args);
        let (code, stdout, stderr) = self.run(&all);
        assert_eq!(code, 0, "{stderr}");
        stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

fn tamper(store: &Path, sql: &str) {
    rusqlite::Connection::open(store)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

#[test]
fn audit_prints_what_real_calls_recorded_and_verify_finds_a_tampered_record() {
    let home = Home::new();
    // Before anything was called there is no store, and reading the log does not make one.
    let (code, stdout, stderr) = home.run(&["audit"]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    assert!(stderr.starts_with("no audit log yet: "), "{stderr}");
    assert!(!home.store().exists());

    let (code, _, stderr) = home.run(&["call", "system_time"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = home.run(&["call", "memory_recall", "--args", r#"{"query": "k"}"#]);
    assert_eq!(code, 1, "a denied call fails: {stderr}");
    let (code, _, stderr) = home.run(&["call", "system_time"]);
    assert_eq!(code, 0, "{stderr}");

    // --json: one object per line, newest first, exactly the stored fields.
    let records = home.json_records(&[]);
    assert_eq!(records.len(), 3, "{records:?}");
    let keys: Vec<&str> = records[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "arguments_digest",
            "at_ms",
            "caller",
            "detail",
            "duration_ms",
            "hash",
            "id",
            "outcome",
            "prev_hash",
            "tool"
        ]
    );
    let summary: Vec<(i64, &str, &str, &str, Option<&str>)> = records
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["caller"].as_str().unwrap(),
                r["tool"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
                r["detail"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (3, "client:cli", "system_time", "ok", None),
            (
                2,
                "client:cli",
                "memory_recall",
                "denied",
                Some("nothing is forgotten here")
            ),
            (1, "client:cli", "system_time", "ok", None),
        ]
    );
    // The chain: the first record starts at the genesis hash, each links to the one before.
    assert_eq!(records[2]["prev_hash"], "0".repeat(64));
    assert_eq!(records[1]["prev_hash"], records[2]["hash"]);
    assert_eq!(records[0]["prev_hash"], records[1]["hash"]);
    assert_eq!(records[0]["hash"].as_str().unwrap().len(), 64);

    // The table: a header, then one line per record with time, principal, tool, outcome,
    // duration and detail.
    let (code, table, _) = home.run(&["audit"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "ID",
            "TIME",
            "PRINCIPAL",
            "TOOL",
            "OUTCOME",
            "DURATION",
            "DETAIL"
        ]
    );
    let denied: Vec<&str> = lines[2].split_whitespace().collect();
    let at = portico_core::time::rfc3339(records[1]["at_ms"].as_i64().unwrap());
    let duration = format!("{}ms", records[1]["duration_ms"]);
    assert_eq!(
        denied,
        [
            "2",
            at.as_str(),
            "client:cli",
            "memory_recall",
            "denied",
            duration.as_str(),
            "nothing",
            "is",
            "forgotten",
            "here"
        ]
    );
    assert!(lines[1].starts_with("3 "), "{table}");
    assert_eq!(lines[3].split_whitespace().last(), Some("-"), "{table}");

    // Filters.
    let ids = |args: &[&str]| -> Vec<i64> {
        home.json_records(args)
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids(&["--tool", "system_time"]), [3, 1]);
    assert_eq!(ids(&["--principal", "client:cli", "--limit", "2"]), [3, 2]);
    assert_eq!(ids(&["--principal", "agent:nobody"]), Vec::<i64>::new());
    assert_eq!(ids(&["--since", "1h"]), [3, 2, 1]);
    assert_eq!(ids(&["--since", "2999-01-01T00:00:00Z"]), Vec::<i64>::new());
    let since_second = portico_core::time::rfc3339(records[1]["at_ms"].as_i64().unwrap());
    assert_eq!(ids(&["--since", &since_second]), [3, 2]);
    let (code, _, stderr) = home.run(&["audit", "--since", "yesterday"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("`yesterday` is neither a duration back from now"),
        "{stderr}"
    );

    // verify: ok, with the count, the range and the head.
    let (code, stdout, stderr) = home.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "ok: 3 record(s) chained (ids 1 to 3)\nhead: {} (keep it elsewhere to detect a later rewrite)\n",
            records[0]["hash"].as_str().unwrap()
        )
    );

    // An edited record is named, and verify fails.
    tamper(
        &home.store(),
        "UPDATE audit SET outcome = 'ok', detail = NULL WHERE id = 2",
    );
    let (code, stdout, _) = home.run(&["audit", "verify"]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "broken: record 2: its fields do not match its hash: the record was edited\n\
         1 record(s) before it are whole (ids 1 to 1)\n"
    );
    let (code, stdout, _) = home.run(&["audit", "verify", "--json"]);
    assert_eq!(code, 1);
    let verification: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        verification["broken"],
        serde_json::json!({"id": 2, "problem": {"kind": "edited"}})
    );
    assert_eq!(verification["checked"], 1);

    // So is a deleted one.
    tamper(
        &home.store(),
        "UPDATE audit SET outcome = 'denied', detail = 'nothing is forgotten here' WHERE id = 2",
    );
    assert_eq!(home.run(&["audit", "verify"]).0, 0, "restored");
    tamper(&home.store(), "DELETE FROM audit WHERE id = 2");
    let (code, stdout, _) = home.run(&["audit", "verify"]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "broken: record 3: it does not follow record 1: 1 record(s) between them were deleted\n\
         1 record(s) before it are whole (ids 1 to 1)\n"
    );
}

/// One tools/call on the daemon's `/mcp` (2025-06-18), as a client there would make it.
async fn call_over_http(base: &str, tool: &str) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "audit-test", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    drop(init.text().await.unwrap());
    let initialized = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .unwrap();
    assert_eq!(initialized.status(), 202);
    let called = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": {}}}),
        Some(&session),
    )
    .await
    .unwrap();
    let body = called.text().await.unwrap();
    assert!(body.contains(r#""id":1"#), "{body}");
}

/// The daemon and a one-shot CLI command append to the same store file, one chain between them,
/// and `portico audit` reads it while the daemon holds it open. `/api/audit` takes the same
/// filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_reads_beside_a_running_daemon_and_both_processes_extend_one_chain() {
    let home = client::Home::new("[server]\nlisten = \"127.0.0.1:0\"\n");
    let mut daemon = client::Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    call_over_http(&daemon.base, "system_time").await;

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let api = |query: &'static str| {
        let http = http.clone();
        let base = daemon.base.clone();
        async move {
            let response = http
                .get(format!("{base}/api/audit?{query}"))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // The API flushes the daemon's queue before it reads, so the record is committed now.
    let (status, body) = api("principal=client:http&since=1h&tool=system_time").await;
    assert_eq!(status, 200, "{body}");
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{body}");
    assert_eq!(
        (records[0]["id"].clone(), records[0]["caller"].clone()),
        (json!(1), json!("client:http"))
    );
    assert_eq!(records[0]["prev_hash"], "0".repeat(64));
    let (_, none) = api("principal=client:cli").await;
    assert_eq!(none["records"], json!([]));
    let (_, none) = api("since=2999-01-01T00:00:00Z").await;
    assert_eq!(none["records"], json!([]));
    let (status, refused) = api("since=soon").await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("`since`: `soon` is neither a duration"),
        "{refused}"
    );

    // The CLI reads the file the daemon has open (standalone; through the daemon it asks its API)...
    let run = |args: &[&str]| {
        let output = home.command(args).stdin(Stdio::null()).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
        )
    };
    let (code, listed) = run(&[
        "audit",
        "--standalone",
        "--json",
        "--principal",
        "client:http",
    ]);
    assert_eq!(code, 0);
    let listed: Vec<Value> = listed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // The API adds `time`, the record's `at_ms` in RFC 3339, to the stored fields the CLI prints.
    let stored: Vec<Value> = records
        .iter()
        .map(|record| {
            let mut record = record.clone();
            let time = record.as_object_mut().unwrap().remove("time").unwrap();
            assert_eq!(
                portico_core::time::parse_rfc3339(time.as_str().unwrap()),
                record["at_ms"].as_i64()
            );
            record
        })
        .collect();
    assert_eq!(listed, stored);

    // ...and a standalone one-shot call, a second process, appends to the same chain.
    let (code, _) = run(&["call", "system_time", "--standalone"]);
    assert_eq!(code, 0);
    call_over_http(&daemon.base, "system_time").await;
    let (_, body) = api("tool=system_time").await;
    let callers: Vec<&str> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["client:http", "client:cli", "client:http"]);
    let (code, verified) = run(&["audit", "verify"]);
    assert_eq!(code, 0, "{verified}");
    assert!(
        verified.starts_with("ok: 3 record(s) chained (ids 1 to 3)\n"),
        "{verified}"
    );
    // The API walks the same chain to the same head.
    let (code, cli_json) = run(&["audit", "verify", "--json"]);
    assert_eq!(code, 0, "{cli_json}");
    let cli_json: Value = serde_json::from_str(&cli_json).unwrap();
    let response = http
        .get(format!("{}/api/audit/verify", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let api_json: Value = response.json().await.unwrap();
    assert_eq!(
        (&api_json["ok"], &api_json["checked"], &api_json["broken"]),
        (&json!(true), &json!(3), &Value::Null),
        "{api_json}"
    );
    assert_eq!(api_json["head"], cli_json["head"], "{api_json}");
    assert!(daemon.stop().success());
}

fn record(tool: &str, at_ms: i64) -> portico_store::AuditRecord {
    portico_store::AuditRecord {
        at_ms,
        caller: "client:http".into(),
        tool: tool.into(),
        arguments_digest: "d".repeat(64),
        outcome: "ok".into(),
        detail: None,
        duration_ms: 1,
    }
}

/// With `[store] url`, `portico audit` and `audit verify` read the shared PostgreSQL store, not
/// the SQLite file a data directory may still hold from before (here one that is broken).
#[test]
fn audit_verify_reads_the_configured_postgres_store_not_a_stale_local_file() {
    let Some(url) = portico_store::testing::postgres_test_url() else {
        return;
    };
    let shared = portico_store::Store::open_postgres(&url, 2).unwrap();
    shared
        .append_audit(&[
            record("pg_one", 1_000),
            record("pg_two", 2_000),
            record("pg_three", 3_000),
        ])
        .unwrap();
    let conversation = shared.create_conversation("planner").unwrap();
    drop(shared);

    let home = Home::new();
    let stale = portico_store::Store::open(&home.store()).unwrap();
    stale.append_audit(&[record("stale_local", 500)]).unwrap();
    drop(stale);
    tamper(&home.store(), "UPDATE audit SET tool = 'rewritten'");
    std::fs::write(
        home.dir.path().join("config.toml"),
        format!("[store]\nurl = \"{url}\"\n"),
    )
    .unwrap();

    let (code, stdout, stderr) = home.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("ok: 3 record(s) chained (ids 1 to 3)\n"),
        "{stdout}"
    );
    let tools: Vec<String> = home
        .json_records(&["--standalone"])
        .iter()
        .map(|r| r["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tools, ["pg_three", "pg_two", "pg_one"]);

    // Conversations too come from the shared store.
    let (code, stdout, stderr) = home.run(&["conversations", "list", "--standalone", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        listed["conversations"][0]["id"],
        conversation.id.as_str(),
        "{listed}"
    );
    assert_eq!(
        listed["conversations"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
}
