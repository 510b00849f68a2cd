//! The official Python `mcp` SDK's client driving both doors, in the handshake era and in 2026-07-28.

use serde_json::Value;

use crate::client::*;

/// Runs `sdk_client.py` with `args` and returns its JSON report.
fn sdk_client(home: &Home, args: &[&str]) -> Value {
    sdk_report(|command| {
        command.args(args).env("PORTICO_HOME", home.dir.path());
    })
}

const ACTIONS: &[&str] = &[
    "--list",
    "--call",
    "mcp_cat_t1",
    "--args",
    "{}",
    "--read",
    "portico://cat/mem://r/0",
    "--prompt",
    "mcp_cat_prompt_0",
];

fn assert_full_session(report: &Value, era: &str) {
    let expected = if era == "modern" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(report["protocol_version"], expected, "{report:#}");
    assert_eq!(report["server_info"]["name"], "portico", "{report:#}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp_cat_t1"), "{tools:?}");
    assert_eq!(
        report["calls"][0]["result"]["content"][0]["text"], "t1 called",
        "{report:#}"
    );
    assert_eq!(
        report["reads"][0]["result"]["contents"][0]["text"], "resource 0",
        "{report:#}"
    );
    assert_eq!(
        report["resources"][0]["uri"], "portico://cat/mem://r/0",
        "{report:#}"
    );
    assert!(
        report["prompt_results"][0]["result"].is_object(),
        "{report:#}"
    );
}

fn stdio_args<'a>(home: &'a Home, era: &'a str, extra: &[&'a str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["--era".into(), era.into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend([
        "--stdio".into(),
        "--".into(),
        env!("CARGO_BIN_EXE_portico").into(),
        "mcp".into(),
        "--standalone".into(),
        "--config".into(),
    ]);
    args.push(home.config().display().to_string());
    args
}

#[test]
fn python_sdk_over_portico_mcp_in_both_eras() {
    let home = Home::new(&config_with(
        "",
        &["--tools", "t1", "--prompts", "1", "--resources", "1"],
    ));
    for era in ["legacy", "modern"] {
        let args = stdio_args(&home, era, ACTIONS);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_full_session(&sdk_client(&home, &args), era);
    }
}

#[test]
fn python_sdk_over_http_in_both_eras() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1", "--prompts", "1", "--resources", "1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let url = format!("{}/mcp", daemon.base);
    for era in ["legacy", "modern"] {
        let mut args = vec!["--era", era, "--http", url.as_str()];
        args.extend_from_slice(ACTIONS);
        assert_full_session(&sdk_client(&home, &args), era);
    }
    assert!(daemon.stop().success());
}

#[test]
fn python_sdk_hears_list_changes_in_both_eras() {
    let home = Home::new(&config_with("", &["--tools", "t1", "--dynamic"]));
    for era in ["legacy", "modern"] {
        let name = format!("added_{era}");
        let call_args = format!("{{\"name\": \"{name}\"}}");
        let args = stdio_args(
            &home,
            era,
            &[
                "--call",
                "mcp_cat_add_tool",
                "--args",
                &call_args,
                "--expect-list-changed",
                "--list-after",
                "--timeout",
                "20",
            ],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let report = sdk_client(&home, &args);
        assert_eq!(report["list_changed"], true, "{report:#}");
        let via = if era == "modern" {
            "subscriptions/listen"
        } else {
            "notification"
        };
        assert_eq!(report["list_changed_via"], via, "{report:#}");
        let after: Vec<&str> = report["after"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            after.contains(&format!("mcp_cat_{name}").as_str()),
            "{after:?}"
        );
    }
}
