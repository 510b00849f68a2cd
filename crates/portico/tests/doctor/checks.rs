//! `portico doctor`, line by line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::*;

/// A data dir with a config file in it; the doctor runs with both.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new(config: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Home { dir }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// The config's path as the daemon publishes it (canonical).
    /// `portico doctor`'s line on the secret store of this home, with `stored` secrets.
    pub fn secrets_line(&self, stored: usize) -> String {
        format!(
            "ok    secrets: kept in the file {}, as no OS keyring is usable here (no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set); {stored} stored",
            self.dir.path().join("secrets.json").display()
        )
    }

    pub fn canonical_config(&self) -> String {
        std::fs::canonicalize(self.config())
            .unwrap()
            .display()
            .to_string()
    }

    /// Runs `portico --config <config> ARGS` with this data dir; (exit code, stdout, stderr).
    pub fn portico(&self, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        self.portico_with(&self.config(), args, envs)
    }

    pub fn portico_with(
        &self,
        config: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> (i32, String, String) {
        self.run(config, args, envs, &[])
    }

    /// Runs `portico` with `envs` set and the variables named in `unset` removed.
    pub fn run(
        &self,
        config: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
        unset: &[&str],
    ) -> (i32, String, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
        command
            .arg("--config")
            .arg(config)
            .args(args)
            .env("PORTICO_HOME", self.dir.path())
            .env_remove("PORTICO_CONFIG")
            .env_remove("PORTICO_LOG")
            // No D-Bus session bus, wherever the tests run: the secret store is the file.
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env("XDG_RUNTIME_DIR", self.dir.path());
        for name in unset {
            command.env_remove(name);
        }
        let output = command
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }
}

/// A port nothing listens on (bound and let go: the kernel does not hand it out again at once).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A well-behaved stdio server with one `echo`, `env` and `pid` tool each.
fn envy(marked: &Marked) -> String {
    stdio_entry(
        "envy",
        &python3(),
        &[marked.script("env_dump.py").to_str().unwrap()],
        "",
    )
}

/// The line that starts with `prefix`; the test fails showing everything when there is none.
fn line_starting<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{stdout}"))
}

/// Replaces the handshake's milliseconds, which vary, by `N`.
fn without_millis(line: &str) -> String {
    let Some(at) = line.find(" ready in ") else {
        return line.to_string();
    };
    let rest = &line[at + " ready in ".len()..];
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    assert!(digits > 0, "{line}");
    format!("{} ready in N{}", &line[..at], &rest[digits..])
}

#[test]
fn a_clean_setup_passes_every_check_and_exits_0() {
    let marked = Marked::new();
    let port = free_port();
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n\n{}",
        envy(&marked)
    ));
    let (code, stdout, stderr) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let lines: Vec<String> = stdout.lines().map(without_millis).collect();
    assert_eq!(
        lines,
        vec![
            format!("ok    config: {}: no problems", home.config().display()),
            home.secrets_line(0),
            format!("ok    port: 127.0.0.1:{port} is free"),
            "ok    daemon: not running".to_string(),
            "ok    server `envy`: ready in N ms (stdio, 2025-11-25, 3 tool(s))".to_string(),
            "all 5 checks passed".to_string(),
        ],
        "{stderr}"
    );
    assert!(marked.processes().is_empty(), "{:#?}", marked.processes());
}

#[test]
fn a_config_with_problems_fails_with_each_problem_and_its_fix() {
    let home = Home::new("[[mcp_servers]]\nnmae = \"x\"\n");
    let (code, stdout, _) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 1, "{stdout}");
    let path = home.config().display().to_string();
    assert_eq!(
        stdout,
        format!(
            "FAIL  config: {path}:1:1: [[mcp_servers]] entry has no `name`; fix: add name = \"...\"\n\
             FAIL  config: {path}:1:1: [[mcp_servers]] entry has no transport; fix: add a [mcp_servers.transport] table with type = \"stdio\", \"http\" or \"sse\"\n\
             FAIL  config: {path}:2:1: unknown key `nmae` in [[mcp_servers]]; fix: did you mean `name`? known keys: name, timeout_secs, startup_timeout_secs, max_concurrent_calls, env, enabled, allow_private_network, prefix, protocol_version, transport, oauth\n\
             ok    daemon: not running\n\
             4 checks: 3 failed, 0 warning(s)\n"
        )
    );
    // Nothing past the config is tried on a file that does not load; the daemon is still looked at.

    let missing = Home::new("");
    let gone = missing.dir.path().join("nowhere.toml");
    let (code, stdout, _) = missing.portico_with(&gone, &["doctor"], &[]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with(&format!(
            "FAIL  cannot read config file {}: No such file or directory (os error 2); fix: create it, or point --config (or PORTICO_CONFIG) at an existing file\n",
            gone.display()
        )),
        "{stdout}"
    );
}

#[test]
fn doctor_finds_a_missing_command_an_unset_variable_a_taken_port_a_dead_url_and_a_failing_child() {
    let marked = Marked::new();
    // Something else holds the listen port.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port();
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let crashy = marked.script("fault_crash_at_start.py");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\ntoken = \"${{PORTICO_DOCTOR_UNSET_TOKEN}}\"\n\n{}{}{}{}",
        envy(&marked),
        stdio_entry(
            "missing",
            Path::new("no-such-portico-test-program"),
            &[],
            ""
        ),
        url_entry("dead", "http", &dead, "allow_private_network = true"),
        stdio_entry("crashy", &python3(), &[crashy.to_str().unwrap()], ""),
    );
    let home = Home::new(&config);
    let path = home.config().display().to_string();
    let (code, stdout, stderr) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let lines: Vec<String> = stdout.lines().map(without_millis).collect();
    let python = python3().display().to_string();
    let missing_line = line_starting(&stdout, "FAIL  command:");
    assert_eq!(
        lines,
        vec![
            format!("ok    config: {path}: no problems"),
            home.secrets_line(0),
            format!(
                "warn  env: {path}:3:9: server.token references ${{PORTICO_DOCTOR_UNSET_TOKEN}}, which is set neither in this environment nor in the secret store; fix: run `portico secret set PORTICO_DOCTOR_UNSET_TOKEN`, or export PORTICO_DOCTOR_UNSET_TOKEN before starting Portico"
            ),
            missing_line.to_string(),
            format!(
                "FAIL  port: 127.0.0.1:{port} is in use by another program (not a Portico daemon); fix: stop that program, or change [server] listen to a free port"
            ),
            "ok    daemon: not running".to_string(),
            "ok    server `envy`: ready in N ms (stdio, 2025-11-25, 3 tool(s))".to_string(),
            format!("FAIL  server `dead`: cannot reach {dead}: connection refused"),
            format!(
                "FAIL  server `crashy`: `{python}` exited or closed its stdout before answering the handshake; its stderr ended with:"
            ),
            "    fatal: cannot start".to_string(),
            "9 checks: 4 failed, 1 warning(s)".to_string(),
        ],
        "{stderr}"
    );
    assert!(
        missing_line.ends_with(
            ": server `missing`: command `no-such-portico-test-program` is not on PATH; fix: install it, or give its full path (Portico searches the PATH it was started with)"
        ),
        "{missing_line}"
    );

    // The same, as JSON.
    let (code, stdout, _) = home.portico(&["doctor", "--json"], &[]);
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["ok"], false);
    let summary: Vec<(String, String)> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["check"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("config", "ok"),
        ("secrets", "ok"),
        ("env", "warn"),
        ("command", "fail"),
        ("port", "fail"),
        ("daemon", "ok"),
        ("server", "ok"),
        ("server", "fail"),
        ("server", "fail"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(summary, expected);
    let dead_check = &report["checks"][7];
    assert_eq!(
        dead_check["message"],
        format!("server `dead`: cannot reach {dead}: connection refused")
    );
    assert!(dead_check["millis"].is_u64(), "{dead_check}");
    assert_eq!(
        report["checks"][2]["fix"],
        "run `portico secret set PORTICO_DOCTOR_UNSET_TOKEN`, or export PORTICO_DOCTOR_UNSET_TOKEN before starting Portico"
    );
    drop(squatter);
    assert!(marked.processes().is_empty(), "{:#?}", marked.processes());
}

/// Starts `portico serve` on `home`'s config and waits until it listens.
pub fn start_daemon(home: &Home) -> StopOnDrop {
    let mut child = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_portico"))
            .args(["serve", "--config"])
            .arg(home.config())
            .env("PORTICO_HOME", home.dir.path())
            .env_remove("PORTICO_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && line.starts_with("portico: ready") {
                let _ = tx.send(());
                sent = true;
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the daemon never said it was ready");
    child
}

#[test]
fn doctor_tells_whether_the_running_daemon_runs_this_config() {
    let port = free_port();
    let config = format!("[server]\nlisten = \"127.0.0.1:{port}\"\n");
    let home = Home::new(&config);
    let daemon = start_daemon(&home);
    let pid = daemon.0.id();
    let at = format!("pid {pid} at http://127.0.0.1:{port}");

    let (code, stdout, stderr) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "ok    config: {}: no problems\n{}\nok    port: 127.0.0.1:{port} is in use by the running daemon (pid {pid})\nok    daemon: running ({at}) with this config ({}, unchanged)\nwarn  servers: none configured; fix: add [[mcp_servers]] entries to the config (see the README's Configure section)\n5 checks: 0 failed, 1 warning(s)\n",
            home.config().display(),
            home.secrets_line(0),
            home.canonical_config()
        )
    );

    // Edited into a config the daemon refuses: it keeps running the old one, and doctor says the
    // file is not what it runs (a warning) beside the file's own problem (a failure).
    std::fs::write(home.config(), format!("{config}[nonsense]\n")).unwrap();
    let (code, stdout, _) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        line_starting(&stdout, "warn  daemon:"),
        format!(
            "warn  daemon: running ({at}) with {}, but the file changed since the daemon read it; fix: the daemon reloads the file within a second of a save it can run; if this stays, `portico servers` says why it refused the edit",
            home.canonical_config()
        )
    );
    assert!(
        line_starting(&stdout, "FAIL  config:").contains("nonsense"),
        "{stdout}"
    );

    // Edited into one it can run: once the daemon has reloaded it (its daemon.json names the new
    // text), doctor finds it runs the file as it is.
    let published = |home: &Home| {
        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(home.dir.path().join("daemon.json")).unwrap())
                .unwrap();
        info["config"]["sha256"].as_str().unwrap().to_string()
    };
    let before = published(&home);
    std::fs::write(home.config(), format!("{config}# edited\n")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while published(&home) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon never republished its config after the edit"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, stdout, _) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        line_starting(&stdout, "ok    daemon:"),
        format!(
            "ok    daemon: running ({at}) with this config ({}, unchanged)",
            home.canonical_config()
        )
    );

    // Another file altogether.
    let other = home.dir.path().join("other.toml");
    std::fs::write(&other, &config).unwrap();
    let (code, stdout, _) = home.portico_with(&other, &["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        line_starting(&stdout, "warn  daemon:"),
        format!(
            "warn  daemon: running ({at}) with {theirs}, not {ours}: it and the IDEs it serves see another config than this command; fix: restart the daemon with this config, or pass --config {theirs}",
            theirs = home.canonical_config(),
            ours = std::fs::canonicalize(&other).unwrap().display()
        )
    );
    drop(daemon);

    // Gone: its info file is removed on shutdown, so it is simply not running.
    let (code, stdout, _) = home.portico(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("\nok    daemon: not running\n"), "{stdout}");
}
