//! The advertised failure branch through the official Python `mcp` SDK: a tool under a
//! conditional `deny` is listed with an `outputSchema` widened to admit the refusal envelope; the
//! SDK (which validates every successful result against the listed schema, and skips `isError`
//! results) accepts the tool's own answer under it and gets the envelope for a refused call.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::*;
use crate::support::*;

const CONFIG: &str = r#"
[[policies]]
tools = ["file_write"]
when = [{ pointer = "/path", matches = "^protected/" }]
action = "deny"
reason = "files under protected/ are read-only"
"#;

#[test]
fn the_python_sdk_accepts_answers_under_the_widened_schema_and_gets_the_envelope() {
    let home = Home::new(CONFIG);
    for era in ["legacy", "modern"] {
        let open = format!(r#"{{"path": "open/{era}.txt", "content": "hello"}}"#);
        let output = Command::new(venv_python())
            .arg(python_peer("sdk_client.py"))
            .args(["--era", era, "--list"])
            .args(["--call", "file_write", "--args", &open])
            .args(["--call", "file_write", "--args"])
            .arg(r#"{"path": "protected/x.txt", "content": "no"}"#)
            .args(["--stdio", "--"])
            .arg(env!("CARGO_BIN_EXE_portico"))
            .args(["mcp", "--standalone", "--config"])
            .arg(home.config())
            .env("PORTICO_HOME", home.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        let calls = report["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 2, "{report:#}");
        // Validated by the SDK against the listed (widened) schema, and accepted.
        assert_eq!(calls[0].get("error"), None, "{era}: {report:#}");
        assert_eq!(
            calls[0]["result"].get("isError"),
            Some(&json!(false)),
            "{report:#}"
        );
        assert!(
            calls[0]["result"]["structuredContent"].is_object(),
            "{report:#}"
        );
        assert_eq!(calls[1].get("error"), None, "{era}: {report:#}");
        assert_eq!(calls[1]["result"]["isError"], true, "{report:#}");
        assert_eq!(
            calls[1]["result"]["structuredContent"],
            json!({"ok": false, "error": {
                "code": "policy_denied",
                "tool": "file_write",
                "reason": "files under protected/ are read-only",
            }}),
            "{report:#}"
        );
        assert!(!home.dir.path().join("workspace/protected/x.txt").exists());
    }

    // What the SDK was given: the tool's own schema and the envelope, under an object root.
    let mut child = home
        .command(&["mcp", "--standalone"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let listed = list_over_stdio(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    let file_write = listed
        .iter()
        .find(|tool| tool["name"] == "file_write")
        .unwrap();
    let schema = &file_write["outputSchema"];
    assert_eq!(schema["type"], "object", "{schema:#}");
    let branches = schema["anyOf"].as_array().unwrap();
    assert_eq!(branches.len(), 2, "{schema:#}");
    assert_eq!(branches[1]["properties"]["ok"], json!({"const": false}));
    assert_eq!(
        file_write["_meta"]["portico/hostPolicy"],
        json!({"action": "deny", "reason": "files under protected/ are read-only", "conditional": true})
    );
}

/// `tools/list` over `portico mcp`'s newline-JSON stdio.
fn list_over_stdio(child: &mut std::process::Child) -> Vec<Value> {
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "failure-branch", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "portico mcp closed stdout"
        );
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            return message["result"]["tools"].as_array().unwrap().clone();
        }
    }
}
