//! `portico call` as an MCP client, standalone and through a daemon: Ctrl-C cancels the call at its
//! server (`notifications/cancelled` within a second, the audit says `cancelled`), the tool's
//! questions are answered from their defaults with `--elicit defaults` and declined when stdin is
//! not a terminal, sampling without a model is refused with the reason, and on a terminal progress
//! shows and the questions are asked field by field.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::client::*;
use crate::support::*;

/// A home whose one server, `feat`, is `client_features_server.py`, recording into the returned
/// file; nothing else in the catalog.
fn features_home() -> (Home, PathBuf) {
    let home = Home::new("");
    let record = home.dir.path().join("record");
    let script = python_peer("client_features_server.py");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[builtins]\nenabled = false\n\n{}",
        stdio_entry(
            "feat",
            &python3(),
            &[
                script.to_str().unwrap(),
                "--record",
                record.to_str().unwrap()
            ],
            ""
        )
    );
    std::fs::write(home.config(), config).unwrap();
    (home, record)
}

fn recorded(record: &PathBuf) -> String {
    std::fs::read_to_string(record).unwrap_or_default()
}

/// Waits for `needle` in the server's record: the server writes it as it happens.
fn wait_for_record(record: &PathBuf, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !recorded(record).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "the server never recorded {needle:?} (test guard); record: {}",
            recorded(record)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `portico call mcp_feat_slow` (a 30 s tool) with `extra` flags, interrupted with SIGINT once
/// the server started it: exit code, stdout, stderr, and when the signal was sent.
fn interrupted_call(home: &Home, record: &PathBuf, extra: &[&str]) -> (i32, String, String, f64) {
    let mut child = home
        .command(
            &[
                &["call", "mcp_feat_slow", "--args", r#"{"seconds": 30}"#][..],
                extra,
            ]
            .concat(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_record(record, "started ");
    let sent_at = unix_now();
    signal(child.id(), Signal::INT);
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("portico call did not exit within 20 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        sent_at,
    )
}

/// Asserts the interrupted call's exit, its one line, the server's `notifications/cancelled`
/// within a second of the signal, and the audit's `cancelled` (read as `audit_args` reads it).
fn assert_cancelled(
    home: &Home,
    record: &PathBuf,
    (code, stdout, stderr, sent_at): (i32, String, String, f64),
    audit_args: &[&str],
) {
    assert_eq!(code, 130, "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr.lines().last(),
        Some(
            "portico: cancelled the call to `mcp_feat_slow` (Ctrl-C); its server was told to stop it"
        ),
        "{stderr}"
    );
    wait_for_record(record, "cancelled ");
    let record = recorded(record);
    let started = record
        .lines()
        .find_map(|line| line.strip_prefix("started "))
        .unwrap();
    let cancelled: Vec<&str> = record
        .lines()
        .find_map(|line| line.strip_prefix("cancelled "))
        .unwrap()
        .split(' ')
        .collect();
    // The cancellation names the request that started the tool.
    assert_eq!(cancelled[0], started, "{record}");
    let after = cancelled[1].parse::<f64>().unwrap() - sent_at;
    assert!(
        (0.0..1.0).contains(&after),
        "the server heard of the cancellation {after:.3} s after SIGINT"
    );
    let (code, audit, stderr) = home.run(audit_args, &[]);
    assert_eq!(code, 0, "{stderr}");
    let newest: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&newest["tool"], &newest["outcome"]),
        (&Value::from("mcp_feat_slow"), &Value::from("cancelled")),
        "{audit}"
    );
}

#[test]
fn ctrl_c_cancels_a_standalone_call_at_its_server() {
    let (home, record) = features_home();
    let interrupted = interrupted_call(&home, &record, &["--standalone"]);
    assert_cancelled(&home, &record, interrupted, &["audit", "--json"]);
}

#[test]
fn ctrl_c_cancels_a_call_through_the_daemon_at_its_server() {
    let (home, record) = features_home();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let interrupted = interrupted_call(&home, &record, &[]);
    // `portico audit` asks the daemon, which writes out its queued records first.
    assert_cancelled(&home, &record, interrupted, &["audit", "--json"]);
    // The call ran in the daemon: its audit is the daemon's door's client, not this process.
    let (_, audit, _) = home.run(&["audit", "--json"], &[]);
    assert!(
        audit
            .lines()
            .next()
            .unwrap()
            .contains(r#""caller":"client:http""#),
        "{audit}"
    );
    daemon.stop();
}

/// `portico call TOOL ARGS…` with stdin not a terminal: exit code, stdout, stderr.
fn call(home: &Home, args: &[&str]) -> (i32, String, String) {
    home.run(&[&["call"][..], args].concat(), &[])
}

const DEFAULTS_ANSWER: &str = r#"answer: {"action": "accept", "content": {"age": 30, "color": "green", "name": "John Doe", "subscribe": true}}"#;
const DECLINED: &str = r#"answer: {"action": "decline"}"#;

fn assert_questions_answered_without_a_terminal(home: &Home, flags: &[&str]) {
    let with = |extra: &[&str]| call(home, &[&["mcp_feat_ask"][..], flags, extra].concat());
    let (code, stdout, stderr) = with(&["--elicit", "defaults"]);
    assert_eq!((code, stdout.trim()), (0, DEFAULTS_ANSWER), "{stderr}");
    let (code, stdout, stderr) = with(&[]);
    assert_eq!((code, stdout.trim()), (0, DECLINED), "{stderr}");
    assert!(
        stderr.contains(
            "portico: declined the tool's question (“Tell me about you”): stdin is not a terminal to ask it on; pass --elicit defaults to accept the form's defaults"
        ),
        "{stderr}"
    );
    // A required field without a default: the defaults cannot answer, so they decline.
    let (code, stdout, stderr) = with(&["--args", r#"{"required": true}"#, "--elicit", "defaults"]);
    assert_eq!((code, stdout.trim()), (0, DECLINED), "{stderr}");
    assert!(
        stderr.contains("city required and without a default"),
        "{stderr}"
    );
    let (code, stdout, stderr) = with(&["--elicit", "cancel"]);
    assert_eq!(
        (code, stdout.trim()),
        (0, r#"answer: {"action": "cancel"}"#),
        "{stderr}"
    );
}

#[test]
fn questions_are_answered_from_defaults_or_declined_without_a_terminal_standalone() {
    let (home, _record) = features_home();
    assert_questions_answered_without_a_terminal(&home, &["--standalone"]);
}

#[test]
fn questions_are_answered_from_defaults_or_declined_without_a_terminal_through_the_daemon() {
    let (home, _record) = features_home();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    assert_questions_answered_without_a_terminal(&home, &[]);
    daemon.stop();
}

const NO_MODEL: &str = "no model is configured: the config has no agent, and Portico's environment names no model (set OPENAI_API_KEY, ANTHROPIC_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server), or pass --sample-with naming an agent with a model";

#[test]
fn sampling_without_a_model_is_refused_with_the_reason() {
    let (home, _record) = features_home();
    let output = home
        .command(&["call", "--standalone", "mcp_feat_sample"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    // The tool hears why, in words, and says so; the person at the terminal is told too.
    assert_eq!(
        stdout.trim(),
        format!("refused: portico call refused the sampling request: {NO_MODEL}"),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().last(),
        Some(
            format!("portico: refused the tool's request for a model completion: {NO_MODEL}")
                .as_str()
        ),
        "{stderr}"
    );
}

#[test]
fn sampling_without_a_model_is_refused_with_the_reason_through_the_daemon() {
    let (home, _record) = features_home();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let output = home
        .command(&["call", "mcp_feat_sample"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A 2026-07-28 client answers the daemon's input round; one it cannot answer fails the call.
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "portico: refused the tool's request for a model completion: {NO_MODEL}"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("error: the client did not answer sampling/createMessage: portico call refused the sampling request: {NO_MODEL}")),
        "{stderr}"
    );
    daemon.stop();
}

#[test]
fn a_scripted_agents_model_answers_sampling() {
    let (home, _record) = features_home();
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(
        home.config(),
        format!(
            "{config}\n[[agents]]\nname = \"sayer\"\ntools = []\n[agents.model]\nprovider = \"scripted\"\nrules = [ {{ when = {{}}, steps = [ {{ reply = \"hi there\" }} ] }} ]\n"
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = call(
        &home,
        &["--standalone", "mcp_feat_sample", "--sample-with", "sayer"],
    );
    assert_eq!(code, 0, "{stderr}");
    let answer: Value =
        serde_json::from_str(stdout.trim().strip_prefix("sampled: ").unwrap()).unwrap();
    assert_eq!(
        (&answer["content"], &answer["role"], &answer["stopReason"]),
        (
            &serde_json::json!({"type": "text", "text": "hi there"}),
            &Value::from("assistant"),
            &Value::from("endTurn")
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains("portico: answering the tool's request for a model completion with "),
        "{stderr}"
    );
}

/// `portico call ARGS…` on a pseudo-terminal (stdin and stderr; stdout a pipe), typing `answers`
/// ((what the terminal shows, what to type) in order): the report of `pty_run.py`.
fn on_a_terminal(home: &Home, args: &[&str], answers: &[(&str, &str)]) -> Value {
    on_a_terminal_via(home, &["--standalone"], args, answers)
}

#[test]
fn ctrl_c_while_a_question_waits_on_the_terminal_cancels_at_once() {
    let (home, record) = features_home();
    let started = Instant::now();
    let report = on_a_terminal(
        &home,
        &["mcp_feat_ask"],
        &[("Answer? [Y]es, [d]ecline, [c]ancel: ", "--interrupt")],
    );
    assert_eq!(report["exit"], 130, "{report}");
    // The question's reader, still waiting on the terminal, does not hold the exit up.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let terminal = report["terminal"].as_str().unwrap();
    // The unanswered question's line is ended before the one that says why.
    assert!(
        terminal.contains("Answer? [Y]es, [d]ecline, [c]ancel: \r\nportico: cancelled the call to `mcp_feat_ask` (Ctrl-C); its server was told to stop it"),
        "{terminal:?}"
    );
    wait_for_record(&record, "cancelled ");
}

/// [`on_a_terminal`] with `via` (`--standalone`, or nothing: through the running daemon).
fn on_a_terminal_via(home: &Home, via: &[&str], args: &[&str], answers: &[(&str, &str)]) -> Value {
    let mut command = Command::new(python3());
    command.arg(python_peer("pty_run.py"));
    for (expect, send) in answers {
        match *send {
            // (TEXT, "--interrupt"): Ctrl-C once TEXT shows.
            "--interrupt" => command.args(["--interrupt", expect]),
            _ => command.args(["--expect", expect, "--send", send]),
        };
    }
    command
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_portico"))
        .arg("call")
        .args(via)
        .arg("--config")
        .arg(home.config())
        .args(args)
        .env("PORTICO_HOME", home.dir.path())
        .stdin(Stdio::null());
    let output = command.output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(report.trim()).unwrap_or_else(|e| panic!("{e}: {report}"))
}

#[test]
fn on_a_terminal_progress_shows_and_questions_are_asked_field_by_field() {
    let (home, _record) = features_home();
    let report = on_a_terminal(
        &home,
        &["mcp_feat_slow", "--args", r#"{"seconds": 0.5}"#],
        &[],
    );
    let terminal = report["terminal"].as_str().unwrap();
    assert_eq!(report["exit"], 0, "{report}");
    assert_eq!(report["stdout"], "slept\n");
    assert!(terminal.contains("log info (slow): working"), "{terminal}");
    assert!(terminal.contains("progress 5/5: step 5"), "{terminal}");
    // The status line is taken away before the result.
    assert!(terminal.ends_with("\r\x1b[2K"), "{terminal:?}");

    let report = on_a_terminal(
        &home,
        &["mcp_feat_ask"],
        &[
            ("Answer? [Y]es, [d]ecline, [c]ancel: ", "y"),
            ("name (Your name) [John Doe]: ", "Ann"),
            ("age, a whole number [30]: ", "old"),
            ("type a whole number", ""),
            ("color, a number or a value [green]: ", "1"),
            ("subscribe, y/n [y]: ", "n"),
        ],
    );
    assert_eq!(report["exit"], 0, "{report}");
    assert_eq!(
        report["stdout"],
        "answer: {\"action\": \"accept\", \"content\": {\"age\": 30, \"color\": \"red\", \"name\": \"Ann\", \"subscribe\": false}}\n",
        "{report}"
    );
    let terminal = report["terminal"].as_str().unwrap();
    assert!(
        terminal.contains("The tool asks: Tell me about you"),
        "{terminal}"
    );
    assert!(terminal.contains("1) red  2) green"), "{terminal}");
}

#[test]
fn on_a_terminal_progress_through_the_daemon_shows_too() {
    let (home, _record) = features_home();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let report = on_a_terminal_via(
        &home,
        &[],
        &["mcp_feat_slow", "--args", r#"{"seconds": 0.5}"#],
        &[],
    );
    let terminal = report["terminal"].as_str().unwrap();
    assert_eq!(
        (&report["exit"], &report["stdout"]),
        (&Value::from(0), &Value::from("slept\n")),
        "{report}"
    );
    assert!(terminal.contains("log info (slow): working"), "{terminal}");
    assert!(terminal.contains("progress 5/5: step 5"), "{terminal}");
    daemon.stop();
}
