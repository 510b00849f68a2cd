//! The CLI's and the log's small rough edges, asserted on their exact texts.

use std::process::Stdio;

use serde_json::Value;

use crate::client::*;

fn run_with(home: &Home, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let output = home
        .command(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A data dir others can read is warned of on every command; these tests want no other output.
fn owner_only(home: &Home) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(home.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_log_filter_that_is_not_one_is_an_error_and_the_command_does_not_run() {
    let home = Home::new("");
    owner_only(&home);
    let (code, stdout, stderr) =
        run_with(&home, &["agents", "--json"], &[("PORTICO_LOG", "garbage")]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "error: PORTICO_LOG=`garbage` is not a log filter: `garbage` is neither a level (trace, debug, info, warn, error, off) nor TARGET=LEVEL. Set a level or TARGET=LEVEL list, e.g. PORTICO_LOG=debug or PORTICO_LOG=info,portico_hub=trace, or unset it\n"
    );
    let (code, _, stderr) = run_with(&home, &["agents"], &[("PORTICO_LOG", "error")]);
    assert_eq!((code, stderr.as_str()), (0, ""));
}

#[test]
fn localhost_listens_on_loopback_and_serve_takes_listen() {
    // `[server] listen = "localhost:0"` passes the check and serves on 127.0.0.1.
    let home = Home::new("[server]\nlisten = \"localhost:0\"\n");
    let (code, stdout, _) = run_with(&home, &["config", "check"], &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.ends_with(": ok\n"), "{stdout}");
    let mut daemon = Daemon::start(&home);
    assert!(
        daemon.base.starts_with("http://127.0.0.1:"),
        "{}",
        daemon.base
    );
    assert!(daemon.stop().success());

    // `--listen` overrides the config; a name other than localhost is refused with the forms.
    let home = Home::new("[server]\nlisten = \"127.0.0.1:1\"\n");
    let mut child = home
        .command(&[
            "serve",
            "--listen",
            "localhost:0",
            "--log-format",
            "json",
            "-v",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let mut json_lines = Vec::new();
    let listening = loop {
        let line = lines
            .next()
            .expect("serve ended before it listened (test guard)")
            .unwrap();
        if let Some(rest) = line.strip_prefix("portico: listening on ") {
            break rest.to_string();
        }
        json_lines.push(line);
    };
    assert!(listening.starts_with("http://127.0.0.1:"), "{listening}");
    // Every log line before it is one JSON object (the rest is what serve prints for people: the
    // servers table and its `portico:` lines); the config line is among them.
    assert!(
        json_lines.iter().all(|l| l.starts_with('{')
            || l.starts_with("no MCP servers configured")
            || l.starts_with("portico: ")),
        "{json_lines:#?}"
    );
    let logged: Vec<Value> = json_lines
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        logged.iter().any(|l| l["level"] == "INFO"
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("config: "))),
        "{json_lines:#?}"
    );
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());

    let (code, _, stderr) = run_with(&home, &["serve", "--listen", "example.com:80"], &[]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr
            .lines()
            .last()
            .map(|l| format!("{l}\n"))
            .unwrap_or_default(),
        "error: [server] listen `example.com:80` is not an address and port such as 127.0.0.1:4200 or localhost:4200\n"
    );
}

#[test]
fn quiet_leaves_only_errors_on_stderr() {
    // A server that cannot start: `portico tools` warns of it, `-q` does not.
    let home = Home::new(&crate::support::stdio_entry(
        "gone",
        std::path::Path::new("/nonexistent/server"),
        &[],
        "",
    ));
    owner_only(&home);
    let (code, stdout, stderr) = run_with(&home, &["tools"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: server `gone` is"), "{stderr}");
    assert!(stdout.contains("system_time  [built-in]"), "{stdout}");
    let (code, quiet_stdout, quiet_stderr) = run_with(&home, &["-q", "tools"], &[]);
    assert_eq!((code, quiet_stderr.as_str()), (0, ""));
    assert_eq!(quiet_stdout, stdout);
}

#[test]
fn chat_on_a_terminal_edits_the_line_and_keeps_a_history() {
    let home = Home::new(
        r#"
[[agents]]
name = "echoer"
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "heard {{message}}" } ] } ]
"#,
    );
    owner_only(&home);
    let command = format!(
        "{} chat echoer --standalone --config {}",
        env!("CARGO_BIN_EXE_portico"),
        home.config().display()
    );
    // `script` gives the chat a pseudo-terminal; what is written to it is typed there. "helo",
    // Left, "l" makes "hello" (line editing), then Ctrl-D ends the chat.
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("PORTICO_HOME", home.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"helo\x1b[Dl\r").unwrap();
    // Ctrl-D only once the answer is out: typed ahead, it would end the line being edited.
    let stdout = child.stdout.take().unwrap();
    let mut reader = std::io::BufReader::new(stdout);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        assert!(
            read > 0,
            "the chat ended before answering (test guard): {seen}"
        );
        seen.push_str(&line);
        if line.contains("heard ") {
            break;
        }
    }
    assert!(seen.contains("heard hello"), "{seen:?}");
    std::io::Write::write_all(&mut stdin, b"\x04").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{seen}");
    let history_file = home.dir.path().join("chat_history");
    let history = std::fs::read_to_string(&history_file).unwrap();
    assert_eq!(history.lines().last(), Some("hello"), "{history:?}");
    // What was typed can be a secret: the file is the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&history_file)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}
