//! The secret store through the real binary: a server whose `${VAR}` nobody set is `needs secret`
//! in `servers`, `tools` and `doctor`; `portico secret set` (value on stdin) brings it up, for a
//! stdio server (through `env`) and an HTTP server (through a header), in one-shot commands, in a
//! running daemon without a restart, and in a `portico mcp` started with an empty environment, as
//! an IDE starts it. The value never shows in anything Portico itself prints or serves.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Daemon, Home, StdioSession};
use super::support::*;

/// The secret's value: it must appear nowhere but in what the upstream itself was given.
const SENTINEL: &str = "s3cret-sentinel-5b1e7a";

fn assert_hidden(what: &str, text: &str) {
    assert!(
        !text.contains(SENTINEL),
        "{what} shows the secret's value:\n{text}"
    );
}

/// A stdio server (`env_dump.py`, whose `env` tool shows what it was given) that gets `DUMP_TOKEN`
/// passed through by name and inside a literal value. The file store, wherever the tests run.
fn dump_config() -> String {
    format!(
        "[secrets]\nstore = \"file\"\n\n{}",
        stdio_entry(
            "dump",
            &python3(),
            &[python_peer("env_dump.py").to_str().unwrap()],
            "env = [\"DUMP_TOKEN\", \"AS_LITERAL=x-${DUMP_TOKEN}\"]",
        )
    )
}

/// `portico secret set NAME` with `value` piped to it: (exit code, stdout, stderr).
fn secret_set(home: &Home, name: &str, value: &str) -> (i32, String, String) {
    let mut child = home
        .command(&["secret", "set", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{value}\n").as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The environment `env_dump.py` was started with, from its `env` tool's result.
fn dumped_env(result: &Value) -> Value {
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"));
    serde_json::from_str(text).unwrap()
}

#[test]
fn a_stdio_server_needs_its_secret_until_it_is_set_then_gets_it_through_env() {
    let home = Home::new(&dump_config());

    let (code, stdout, stderr) = home.run(&["servers", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let servers: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(servers[0]["state"], "needs_secret", "{stdout}");
    assert_eq!(servers[0]["missing_secrets"], json!(["DUMP_TOKEN"]));
    assert_eq!(
        servers[0]["last_error"],
        "server `dump` needs secret DUMP_TOKEN: set neither in Portico's environment nor in its secret store; run `portico secret set DUMP_TOKEN`"
    );
    let (_, stdout, _) = home.run(&["servers"], &[]);
    assert!(
        stdout.contains("dump  stdio      needs secret DUMP_TOKEN  -"),
        "{stdout}"
    );

    // Its tools are missing, and `tools` says why.
    let (code, stdout, stderr) = home.run(&["tools", "--server", "dump"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "no tools\n");
    assert!(
        stderr.contains(
            "warning: server `dump` lists no tools: it needs secret DUMP_TOKEN; run `portico secret set DUMP_TOKEN`"
        ),
        "{stderr}"
    );

    // One finding, a warning with its fix, as `config check` calls it: the server waits for it.
    let (code, stdout, _) = home.run(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}");
    let about: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("DUMP_TOKEN"))
        .collect();
    assert_eq!(about.len(), 1, "{stdout}");
    assert!(
        about[0].starts_with("warn  env: ")
            && about[0].contains("references ${DUMP_TOKEN}")
            && about[0].contains("fix: run `portico secret set DUMP_TOKEN`"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "ok    secrets: kept in the file {} ([secrets] store = \"file\"); 0 stored",
            home.dir.path().join("secrets.json").display()
        )),
        "{stdout}"
    );

    let (code, stdout, stderr) = secret_set(&home, "DUMP_TOKEN", SENTINEL);
    assert_eq!(code, 0, "{stderr}");
    let file = home.dir.path().join("secrets.json");
    assert_eq!(
        stdout,
        format!(
            "portico: stored DUMP_TOKEN in {} (readable by you only)\nused by `dump`; a running daemon connects it within a second\n",
            file.display()
        )
    );
    assert_hidden("secret set", &(stdout + &stderr));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let (code, stdout, stderr) = home.run(&["secret", "list"], &[]);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "DUMP_TOKEN  file\n"),
        "{stderr}"
    );

    let (code, stdout, stderr) = home.run(&["servers", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let servers: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(servers[0]["state"], "ready", "{stdout}");
    assert!(servers[0].get("missing_secrets").is_none(), "{stdout}");
    let (_, stdout, stderr) = home.run(&["tools", "--server", "dump"], &[]);
    assert!(stdout.contains("mcp_dump_env"), "{stdout}{stderr}");
    assert_hidden("tools", &(stdout + &stderr));
    let (code, stdout, stderr) = home.run(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_hidden("doctor", &(stdout + &stderr));

    // The child got it, by name and inside the literal; Portico's own output never showed it.
    let (code, stdout, stderr) = home.run(&["call", "mcp_dump_env", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_hidden("call's log", &stderr);
    let env = dumped_env(&serde_json::from_str(&stdout).unwrap());
    assert_eq!(env["DUMP_TOKEN"], SENTINEL);
    assert_eq!(env["AS_LITERAL"], format!("x-{SENTINEL}"));

    // Portico's environment comes first.
    let (_, stdout, _) = home.run(
        &["call", "mcp_dump_env", "--json"],
        &[("DUMP_TOKEN", "from-the-environment")],
    );
    let env = dumped_env(&serde_json::from_str(&stdout).unwrap());
    assert_eq!(env["DUMP_TOKEN"], "from-the-environment");

    let (code, stdout, _) = home.run(&["secret", "rm", "DUMP_TOKEN"], &[]);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "portico: removed DUMP_TOKEN\n")
    );
    let (code, _, stderr) = home.run(&["secret", "rm", "DUMP_TOKEN"], &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no secret named DUMP_TOKEN is stored"),
        "{stderr}"
    );
    let (_, stdout, _) = home.run(&["servers", "--json"], &[]);
    assert!(stdout.contains("\"needs_secret\""), "{stdout}");
}

#[test]
fn secret_set_refuses_bad_names_and_empty_values_without_showing_them() {
    let home = Home::new(&dump_config());
    let (code, stdout, stderr) = secret_set(&home, "NOT-A-NAME", SENTINEL);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "error: `NOT-A-NAME` is not a variable name: use letters, digits and `_`, not starting with a digit (as `${NAME}` refers to it)\n"
    );
    let (code, _, stderr) = secret_set(&home, "EMPTY", "");
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: the value of `EMPTY` is empty; give the secret's value\n"
    );
    assert!(!home.dir.path().join("secrets.json").exists());
}

/// `portico mcp` as an IDE starts it: no environment but the home, and no daemon.
fn ide_started_mcp(home: &Home) -> StdioSession {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
    command
        .arg("mcp")
        .env_clear()
        .env("PORTICO_HOME", home.dir.path())
        .env("HOME", home.dir.path());
    StdioSession::spawn(command)
}

#[test]
fn portico_mcp_started_with_an_empty_environment_finds_the_stored_secret() {
    let home = Home::new(&dump_config());
    let (code, _, stderr) = secret_set(&home, "DUMP_TOKEN", SENTINEL);
    assert_eq!(code, 0, "{stderr}");

    let mut session = ide_started_mcp(&home);
    session.initialize("2025-06-18");
    let names = session.upstream_tool_names(1);
    assert!(names.iter().any(|n| n == "mcp_dump_env"), "{names:?}");
    let (response, _) = session.request(
        2,
        "tools/call",
        json!({"name": "mcp_dump_env", "arguments": {}}),
    );
    let env = dumped_env(&response["result"]);
    assert_eq!(env["DUMP_TOKEN"], SENTINEL);
    let stderr = session.stderr.lock().unwrap().clone();
    assert_hidden("portico mcp's log", &stderr);
    assert!(session.finish().success());
}

#[test]
fn portico_mcp_with_an_empty_environment_and_no_secret_says_which_is_missing() {
    let home = Home::new(&dump_config());
    let mut session = ide_started_mcp(&home);
    session.initialize("2025-06-18");
    let names = session.upstream_tool_names(1);
    assert_eq!(names, Vec::<String>::new());
    session.wait_for_stderr(
        "server `dump` needs secret DUMP_TOKEN: set neither in Portico's environment nor in its secret store; run `portico secret set DUMP_TOKEN`",
    );
    assert!(session.finish().success());
}

/// One GET on a new connection to a daemon without a token: the whole answer.
fn http_get(base: &str, path: &str) -> String {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A Portico daemon whose door takes only `Bearer SENTINEL`: an HTTP MCP server that needs a
/// header.
fn guarded_upstream() -> (Home, Daemon) {
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken = \"{SENTINEL}\"\n"
    ));
    let daemon = Daemon::start(&home);
    (home, daemon)
}

fn remote_config(url: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[secrets]\nstore = \"file\"\n\n{}headers = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\n",
        url_entry("remote", "http", url, "allow_private_network = true"),
    )
}

/// `portico servers --json` until the first server is in `state`, within 30 s.
fn wait_for_state(home: &Home, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, stdout, stderr) = home.run(&["servers", "--json"], &[]);
        let servers: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
        if servers[0]["state"] == state {
            return servers;
        }
        assert!(
            Instant::now() < deadline,
            "never {state} (test guard): {stdout}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_running_daemon_connects_a_header_server_once_its_secret_is_set_without_a_restart() {
    let (_upstream_home, upstream) = guarded_upstream();
    let home = Home::new(&remote_config(&format!("{}/mcp", upstream.base)));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line_containing(
        "server `remote` needs secret REMOTE_TOKEN: set neither in Portico's environment nor in its secret store; run `portico secret set REMOTE_TOKEN`",
    );

    // Through the daemon: the API and the CLI say so.
    let servers = wait_for_state(&home, "needs_secret");
    assert_eq!(servers[0]["missing_secrets"], json!(["REMOTE_TOKEN"]));
    let answer = http_get(&daemon.base, "/api/mcp/servers");
    assert!(
        answer.contains("\"state\":\"needs_secret\"")
            && answer.contains("\"missing_secrets\":[\"REMOTE_TOKEN\"]"),
        "{answer}"
    );
    let (_, stdout, stderr) = home.run(&["tools"], &[]);
    assert!(
        stderr.contains("warning: server `remote` lists no tools: it needs secret REMOTE_TOKEN"),
        "{stdout}{stderr}"
    );

    let (code, stdout, stderr) = secret_set(&home, "REMOTE_TOKEN", SENTINEL);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.ends_with("used by `remote`; a running daemon connects it within a second\n"),
        "{stdout}"
    );
    let servers = wait_for_state(&home, "ready");
    assert!(servers[0]["tools"].as_u64().unwrap() > 0, "{servers}");
    daemon.wait_for_line_containing("the secret store changed; connecting");
    let (_, stdout, stderr) = home.run(&["tools", "--server", "remote"], &[]);
    assert!(
        stdout.contains("mcp_remote_system_time"),
        "{stdout}{stderr}"
    );

    let answer = http_get(&daemon.base, "/api/mcp/servers");
    assert!(
        answer.contains("\"state\":\"ready\"") && !answer.contains("missing_secrets"),
        "{answer}"
    );

    // Nothing the daemon says or serves shows the value: its API, its metrics, its log.
    for path in [
        "/api/servers",
        "/api/mcp/servers",
        "/api/health",
        "/metrics",
    ] {
        let answer = http_get(&daemon.base, path);
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        assert_hidden(path, &answer);
    }
    daemon.stop();
    let log: String = daemon
        .take_seen()
        .into_iter()
        .chain(std::iter::from_fn(|| daemon.log.try_recv().ok()))
        .collect::<Vec<_>>()
        .join("\n");
    assert_hidden("the daemon's log", &log);
    drop(upstream);
}

#[test]
fn a_header_server_gets_the_stored_secret_in_one_shot_commands() {
    let (_upstream_home, upstream) = guarded_upstream();
    let home = Home::new(&remote_config(&format!("{}/mcp", upstream.base)));
    let (code, _, stderr) = secret_set(&home, "REMOTE_TOKEN", SENTINEL);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = home.run(&["servers"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("remote  http (streamable-http)  ready"),
        "{stdout}"
    );
    assert_hidden("servers", &(stdout + &stderr));

    // A wrong value is the upstream's refusal, not a secret to ask for.
    let (code, _, stderr) = secret_set(&home, "REMOTE_TOKEN", "not-the-token");
    assert_eq!(code, 0, "{stderr}");
    let (_, stdout, _) = home.run(&["servers", "--json"], &[]);
    let servers: Value = serde_json::from_str(&stdout).unwrap();
    assert_ne!(servers[0]["state"], "ready", "{stdout}");
    assert_ne!(servers[0]["state"], "needs_secret", "{stdout}");
    drop(upstream);
}
