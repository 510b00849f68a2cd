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
    // The retry's words depend on timing: `next in 1s`, `trying again now`, ...
    let ready = regex::Regex::new(
        r"^portico: ready; \d+ tool\(s\): \d+ built-in or agent, 20 from 2 of 3 server\(s\); not connected: `crashy` retrying \(\d+ failed attempts?, (next in \d+s|trying again now|trying again for \d+s)\) \(`portico servers` says why\)\. Ctrl-C to stop\.$",
    )
    .unwrap();
    assert!(seen.iter().any(|l| ready.is_match(l)), "{seen:#?}");
    assert!(
        !marked.processes().is_empty(),
        "children should be running while serving"
    );
    terminate(&child.0);
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
        "startup_timeout_secs = 2",
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
        shown.contains("starting 1/2 servers… waiting for mute ("),
        "{shown}"
    );
    assert!(shown.contains("mcp_envy_env  [envy]"), "{shown}");

    let (code, stdout, stderr) = run_portico(&config, &["tools"], &[]);
    assert_eq!(code, 0);
    assert!(
        !stdout.contains("starting 1/2") && !stderr.contains("starting 1/2"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("warning: server `mute` is retrying (1 failed attempt, "),
        "{stderr}"
    );
    assert!(marked.processes().is_empty(), "{:#?}", marked.processes());
}

/// A stdio entry for `catalog_server.py` offering `t1`, behind a shell wrapper that first runs
/// `before` (sh code; `$0` is `{marked}/{name}`, a path prefix for files it writes), then `after`
/// once the server has exited. The server's command line carries the marker directory.
fn wrapped_catalog_entry(marked: &Marked, name: &str, before: &str, after: &str) -> String {
    let record = marked.path().join(name);
    let script = marked.script("catalog_server.py");
    let python = python3();
    stdio_entry(
        name,
        std::path::Path::new("/bin/sh"),
        &[
            "-c",
            &format!("{before}; \"$@\"; {after}"),
            record.to_str().unwrap(),
            python.to_str().unwrap(),
            script.to_str().unwrap(),
            "--tools",
            "t1",
        ],
        "",
    )
}

/// A server that notes each start in `{name}.started`.
fn recording_entry(marked: &Marked, name: &str) -> String {
    wrapped_catalog_entry(marked, name, "echo $$ >> \"$0.started\"", "true")
}

fn was_started(marked: &Marked, name: &str) -> bool {
    marked.path().join(format!("{name}.started")).exists()
}

fn assert_nothing_left(marked: &Marked) {
    assert!(
        marked.processes().is_empty(),
        "left behind: {:#?}",
        marked.processes()
    );
}

#[test]
fn tools_for_one_server_starts_only_that_server() {
    let marked = Marked::new();
    let config = recording_entry(&marked, "a") + &recording_entry(&marked, "b");

    // An unknown name is refused before anything starts.
    let (code, _, stderr) = run_portico(&config, &["tools", "--server", "nope"], &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no server named `nope` in the config; configured: a, b"),
        "{stderr}"
    );
    assert!(!was_started(&marked, "a") && !was_started(&marked, "b"));

    let (code, stdout, stderr) = run_portico(&config, &["tools", "--server", "a", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let tools: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcp_a_t1"]);
    assert!(was_started(&marked, "a"));
    assert!(
        !was_started(&marked, "b"),
        "b was started for `tools --server a`"
    );
    assert_nothing_left(&marked);

    // The marker does record a start: listing every server starts b too.
    let (code, stdout, stderr) = run_portico(&config, &["tools"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mcp_b_t1  [b]"), "{stdout}");
    assert!(was_started(&marked, "b"));
    assert_nothing_left(&marked);
}

#[test]
fn call_starts_only_the_servers_the_tool_can_come_from() {
    let agent = r#"
[[agents]]
name = "asker"
tools = ["mcp_b_t1"]
[agents.model]
provider = "scripted"
rules = [
  { when = {}, steps = [ { call_tool = { name = "mcp_b_t1", arguments = {} } }, { reply = "b said {{last_tool_result}}" } ] },
]
"#;
    let run = |args: &[&str]| {
        let marked = Marked::new();
        let config = recording_entry(&marked, "a") + &recording_entry(&marked, "b") + agent;
        let (code, stdout, stderr) = run_portico(&config, args, &[]);
        assert_nothing_left(&marked);
        let started = (was_started(&marked, "a"), was_started(&marked, "b"));
        (code, stdout, stderr, started)
    };

    // A built-in needs no upstream.
    let (code, stdout, stderr, started) = run(&["call", "system_time", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("unix_ms"), "{stdout}");
    assert_eq!(started, (false, false));

    // `mcp_a_*` can only be a's.
    let (code, stdout, stderr, started) = run(&["call", "mcp_a_t1"]);
    assert_eq!((code, stdout.as_str()), (0, "t1 called\n"), "{stderr}");
    assert_eq!(started, (true, false));

    // An agent may call anything its patterns allow: every server is started.
    let (code, stdout, stderr, started) = run(&[
        "call",
        "portico_agent_asker",
        "--args",
        r#"{"message": "ask b"}"#,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("b said t1 called"), "{stdout}");
    assert_eq!(started, (true, true));

    // A name no server's prefix fits: every server, so the error can suggest their tools.
    let (code, _, stderr, started) = run(&["call", "t1"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no tool named `t1`")
            && stderr.contains("`mcp_a_t1`")
            && stderr.contains("`mcp_b_t1`"),
        "{stderr}"
    );
    assert_eq!(started, (true, true));
}

#[test]
fn a_child_that_ignores_eof_and_sigterm_does_not_hold_up_a_command() {
    let marked = Marked::new();
    // SIGTERM is ignored by the shell and everything it starts; once the server has exited on stdin
    // EOF, the shell becomes a long sleep in its place (same pid).
    let config = wrapped_catalog_entry(
        &marked,
        "stubborn",
        "trap '' TERM; echo $$ > \"$0.pid\"",
        "exec sleep 600",
    );
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    std::fs::write(&path, &config).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("--config")
        .arg(&path)
        .args(["servers", "--json"])
        .env("PORTICO_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let portico = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let stubborn_pid = || -> Option<i32> {
        std::fs::read_to_string(marked.path().join("stubborn.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let Ok(output) = finished.recv_timeout(std::time::Duration::from_secs(120)) else {
        // Stop what the test started before failing: Portico, and the child's process group.
        signal(portico, Signal::KILL);
        if let Some(group) = stubborn_pid().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
        panic!("`portico servers` did not finish (test guard)");
    };
    let output = output.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let servers: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(servers[0]["state"], "ready", "{servers:#?}");
    let pid = stubborn_pid().expect("the stubborn child wrote its pid");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the stubborn child {pid} outlived the command"
    );
    assert_nothing_left(&marked);
}

#[test]
fn the_daemon_gives_a_stopping_child_time_to_clean_up() {
    let marked = Marked::new();
    // After stdin EOF the server exits and the shell takes a second to "clean up", ignoring SIGTERM
    // meanwhile; the daemon's patient stop waits for it.
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        wrapped_catalog_entry(
            &marked,
            "careful",
            "trap '' TERM",
            "sleep 1; echo done > \"$0.cleaned\""
        )
    );
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let mut daemon = StopOnDrop(
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
    let mut lines = BufReader::new(daemon.0.stderr.take().unwrap()).lines();
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.starts_with("portico: ready")),
        "the daemon never got ready"
    );
    terminate(&daemon.0);
    let _rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(daemon.0.wait().unwrap().success());
    assert!(
        marked.path().join("careful.cleaned").exists(),
        "the child was killed before it finished cleaning up"
    );
    assert_nothing_left(&marked);
}
