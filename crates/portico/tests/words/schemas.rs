//! Every schema of the default catalog is standard JSON Schema: Ajv in strict mode compiles each
//! with no warning and no error.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::fresh_home::fresh;
use crate::support::*;

#[test]
fn ajv_strict_compiles_every_schema_of_the_default_catalog_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let (code, stdout, stderr) = fresh(home, &["init"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Every built-in, shell_exec included, beside the starter's agent.
    let config = home.join(".local/share/portico/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}\n[builtins]\nshell_exec = true\n")).unwrap();
    let (code, tools, stderr) = fresh(home, &["tools", "--json"]);
    assert_eq!(code, 0, "{tools}{stderr}");
    let listed: Vec<Value> = serde_json::from_str(&tools).unwrap();
    assert!(listed.len() >= 10, "{tools}");

    let mut checker = Command::new(node())
        .arg(peers_dir().join("js/ajv_strict.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    checker
        .stdin
        .take()
        .unwrap()
        .write_all(tools.as_bytes())
        .unwrap();
    let output = checker.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(report.trim()).unwrap();
    let schemas = listed
        .iter()
        .map(|t| t.get("inputSchema").is_some() as u64 + t.get("outputSchema").is_some() as u64)
        .sum::<u64>();
    assert_eq!(report["checked"], schemas, "{report:#}");
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report:#}");
}
