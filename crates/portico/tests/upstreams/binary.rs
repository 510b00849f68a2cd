//! The `portico` binary, driven over its real stdout, stderr and exit codes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::*;

fn everything_and_friends(marked: &Marked) -> String {
    let everything = everything_js();
    format!(
        "{}{}{}",
        // The marker directory as an extra (ignored) argument tags the node process.
        stdio_entry(
            "everything",
            &node(),
            &[
                everything.to_str().unwrap(),
                "stdio",
                marked.path().to_str().unwrap()
            ],
            ""
        ),
        stdio_entry(
            "crashy",
            &python3(),
            &[marked.script("fault_crash_at_start.py").to_str().unwrap()],
            ""
        ),
        stdio_entry(
            "envy",
            &python3(),
            &[marked.script("env_dump.py").to_str().unwrap()],
            "env = [\"ALLOWED_VAR\"]"
        ),
    )
}

#[test]
fn servers_reports_transport_state_era_counts_and_errors() {
    let marked = Marked::new();
    let (code, stdout, stderr) = run_portico(
        &everything_and_friends(&marked),
        &["servers", "--json"],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let servers: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(servers.len(), 3);
    assert_eq!(servers[0]["name"], "everything");
    assert_eq!(servers[0]["state"], "ready");
    assert_eq!(servers[0]["transport"], "stdio");
    assert_eq!(servers[0]["protocol_version"], "2025-11-25");
    // server-everything offers its sampling, elicitation and roots tools too, since Portico declares
    // (and relays) those capabilities.
    assert_eq!(servers[0]["tools"], 17);
    assert_eq!(servers[1]["name"], "crashy");
    assert_eq!(servers[1]["state"], "restarting");
    assert!(
        servers[1]["last_error"]
            .as_str()
            .unwrap()
            .contains("server `crashy`")
    );
    assert_eq!(servers[2]["state"], "ready");
    assert!(
        marked.processes().is_empty(),
        "left behind: {:#?}",
        marked.processes()
    );

    let (code, table, _) = run_portico(&everything_and_friends(&marked), &["servers"], &[]);
    assert_eq!(code, 0);
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("PROTOCOL") && header.contains("LAST ERROR"),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("everything")
            && l.contains("ready")
            && l.contains("2025-11-25")),
        "{table}"
    );
    assert!(marked.processes().is_empty());
}

#[test]
fn child_stderr_is_logged_under_the_server_name() {
    let marked = Marked::new();
    let (_, _, stderr) = run_portico(&everything_and_friends(&marked), &["-v", "servers"], &[]);
    let line = stderr
        .lines()
        .find(|l| l.contains("fatal: cannot start"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("server=\"crashy\"") || line.contains("server=crashy"),
        "{line}"
    );
}

#[test]
fn tools_lists_the_namespaced_catalog() {
    let marked = Marked::new();
    let (code, stdout, stderr) = run_portico(
        &everything_and_friends(&marked),
        &["tools", "--server", "everything", "--json"],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let tools: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(tools.len(), 17);
    let echo = tools
        .iter()
        .find(|t| t["name"] == "mcp_everything_echo")
        .unwrap();
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"],
        "string"
    );
    assert!(
        tools
            .iter()
            .all(|t| t["name"].as_str().unwrap().starts_with("mcp_everything_"))
    );

    let (code, text, _) = run_portico(&everything_and_friends(&marked), &["tools"], &[]);
    assert_eq!(code, 0);
    assert!(
        text.lines()
            .any(|l| l.starts_with("mcp_everything_echo  [everything]")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("mcp_envy_env  [envy]")),
        "{text}"
    );

    let (code, _, stderr) = run_portico(
        &everything_and_friends(&marked),
        &["tools", "--server", "nope"],
        &[],
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("no server named `nope`"), "{stderr}");
    assert!(marked.processes().is_empty());
}

#[test]
fn call_prints_the_result_readably_or_as_json() {
    let marked = Marked::new();
    let config = everything_and_friends(&marked);
    let (code, stdout, stderr) = run_portico(
        &config,
        &[
            "call",
            "mcp_everything_echo",
            "--args",
            r#"{"message":"hi"}"#,
        ],
        &[],
    );
    assert_eq!((code, stdout.as_str()), (0, "Echo: hi\n"), "{stderr}");

    let (code, stdout, _) = run_portico(
        &config,
        &[
            "call",
            "mcp_everything_echo",
            "--args",
            r#"{"message":"hi"}"#,
            "--json",
        ],
        &[],
    );
    assert_eq!(code, 0);
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        result["content"][0],
        serde_json::json!({"type": "text", "text": "Echo: hi"})
    );

    let (code, stdout, _) = run_portico(&config, &["call", "mcp_everything_get_tiny_image"], &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("[image: image/png,"), "{stdout}");

    let (code, _, stderr) = run_portico(
        &config,
        &["call", "mcp_everything_echo", "--args", "{not json"],
        &[],
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("--args is not valid JSON"), "{stderr}");

    let (code, _, stderr) = run_portico(&config, &["call", "echo"], &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no tool named `echo`") && stderr.contains("mcp_everything_echo"),
        "{stderr}"
    );
    assert!(marked.processes().is_empty());
}

#[test]
fn secrets_in_portico_environment_do_not_reach_children() {
    let marked = Marked::new();
    let (code, stdout, stderr) = run_portico(
        &everything_and_friends(&marked),
        &["call", "mcp_envy_env"],
        &[
            ("ALLOWED_VAR", "fine"),
            ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let env: serde_json::Map<String, Value> = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(env["ALLOWED_VAR"], "fine");
    assert!(!env.contains_key("AWS_SECRET_ACCESS_KEY"));
    assert!(!env.contains_key("PORTICO_HOME"));
}

#[test]
fn config_check_reports_every_problem() {
    let config = "[[mcp_servers]]\nnmae = \"x\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"../x\"\n";
    let (code, stdout, _) = run_portico(config, &["config", "check"], &[]);
    assert_eq!(code, 2);
    assert!(
        stdout.contains(
            "config.toml:2:1: unknown key `nmae` in [[mcp_servers]] (hint: did you mean `name`?"
        ),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("config.toml:5:11: transport.command `../x` contains a `..` path component"),
        "{stdout}"
    );
    assert!(stdout.contains("entry has no `name`"), "{stdout}");
    assert!(stdout.ends_with("3 problem(s) found\n"), "{stdout}");

    let (code, stdout, _) = run_portico(
        "[server]\nlisten = \"127.0.0.1:4200\"\n",
        &["config", "check"],
        &[],
    );
    assert_eq!(code, 0);
    assert!(stdout.ends_with(": ok\n"));

    // Every other command refuses to run on a broken config, with the same diagnostics.
    let (code, _, stderr) = run_portico(config, &["servers"], &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("3 problem(s)") && stderr.contains("unknown key `nmae`"),
        "{stderr}"
    );
}

#[test]
fn serve_runs_until_sigterm_then_stops_its_children() {
    let marked = Marked::new();
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    // Port 0: the default 4200 may be taken by a Portico the developer runs, or by a parallel test.
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        everything_and_friends(&marked)
    );
    std::fs::write(&path, config).unwrap();
    let mut child = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_portico"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("PORTICO_HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let ready = line.starts_with("portico: ready");
        seen.push(line);
        if ready {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|l| l.starts_with("portico: ready; 20 tool(s) from 3 server(s)")),
        "{seen:#?}"
    );
    assert!(
        !marked.processes().is_empty(),
        "children should be running while serving"
    );
    unsafe {
        libc::kill(child.0.id() as i32, libc::SIGTERM);
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?} {rest:#?}");
    assert!(
        rest.iter().any(|l| l == "portico: shutting down"),
        "{rest:#?}"
    );
    assert!(
        marked.processes().is_empty(),
        "left behind: {:#?}",
        marked.processes()
    );
}

#[test]
fn progress_is_shown_on_a_terminal_and_not_when_piped() {
    let marked = Marked::new();
    let config = stdio_entry(
        "mute",
        &python3(),
        &[
            marked.script("fault_never_answers.py").to_str().unwrap(),
            "--hang-handshake",
        ],
        "timeout_secs = 2",
    ) + &stdio_entry(
        "envy",
        &python3(),
        &[marked.script("env_dump.py").to_str().unwrap()],
        "",
    );
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    std::fs::write(&path, &config).unwrap();
    let command = format!(
        "{} --config {} tools",
        env!("CARGO_BIN_EXE_portico"),
        path.display()
    );
    // `script` gives the command a pseudo-terminal, as a person's shell would.
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("PORTICO_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        shown.contains("connecting 1/2 servers… waiting for mute"),
        "{shown}"
    );
    assert!(shown.contains("mcp_envy_env  [envy]"), "{shown}");

    let (code, stdout, stderr) = run_portico(&config, &["tools"], &[]);
    assert_eq!(code, 0);
    assert!(
        !stdout.contains("connecting") && !stderr.contains("connecting"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("warning: server `mute` is restarting"),
        "{stderr}"
    );
    assert!(marked.processes().is_empty(), "{:#?}", marked.processes());
}
