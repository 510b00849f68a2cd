//! A minimal line-oriented MCP client over a child's stdio, and a daemon handle, for the door tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

/// Runs the official Python SDK's client (`tests/peers/python/sdk_client.py`, see its usage) with
/// what `setup` adds (arguments, environment), and returns its one JSON report; a failed run fails
/// the test with its output.
pub fn sdk_report(setup: impl FnOnce(&mut Command)) -> Value {
    let mut command = Command::new(venv_python());
    command
        .arg(python_peer("sdk_client.py"))
        .stdin(Stdio::null());
    setup(&mut command);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "sdk_client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// [`sdk_report`] on a blocking thread, for tests that talk to the daemon while the SDK runs.
pub async fn sdk_report_async(setup: impl FnOnce(&mut Command) + Send + 'static) -> Value {
    tokio::task::spawn_blocking(move || sdk_report(setup))
        .await
        .unwrap()
}

/// A config with one quick stdlib upstream named `cat` offering `t1`, plus extra TOML.
pub fn config_with(extra: &str, catalog_flags: &[&str]) -> String {
    let script = python_peer("catalog_server.py");
    let mut args = vec![script.to_str().unwrap().to_string()];
    args.extend(catalog_flags.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    format!("{extra}\n{}", stdio_entry("cat", &python3(), &args, ""))
}

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

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
        command
            .args(args)
            .arg("--config")
            .arg(self.config())
            .env("PORTICO_HOME", self.dir.path());
        command
    }

    /// `portico ARGS` run to its end, without the environment's `$BROWSER` but with `envs`: (exit
    /// code, stdout, stderr).
    pub fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        let output = self
            .command(args)
            .env_remove("BROWSER")
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

    pub fn info_file(&self) -> PathBuf {
        self.dir.path().join("daemon.json")
    }
}

/// `portico mcp` as a child, spoken to in newline-delimited JSON.
pub struct StdioSession {
    pub child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Frame>,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_grew: std::sync::Arc<std::sync::Condvar>,
}

impl StdioSession {
    pub fn start(home: &Home, args: &[&str]) -> StdioSession {
        Self::start_with_env(home, args, &[])
    }

    pub fn start_with_env(home: &Home, args: &[&str], envs: &[(&str, &str)]) -> StdioSession {
        let mut command = home.command(&[&["mcp"], args].concat());
        command.envs(envs.iter().copied());
        Self::spawn(command)
    }

    /// `command` (a `portico mcp` made by the caller, as an IDE would start it) started and spoken to.
    pub fn spawn(mut command: Command) -> StdioSession {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(frame) = read_frame(&mut reader) {
                if tx.send(frame).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr_grew = std::sync::Arc::new(std::sync::Condvar::new());
        let sink = stderr.clone();
        let grew = stderr_grew.clone();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                grew.notify_all();
            }
        });
        StdioSession {
            child,
            stdin,
            lines,
            stderr,
            stderr_grew,
        }
    }

    /// Waits until the server's stderr (its log, with upstreams' stderr) contains `needle`.
    pub fn wait_for_stderr(&self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut log = self.stderr.lock().unwrap();
        while !log.contains(needle) {
            let left = deadline
                .checked_duration_since(std::time::Instant::now())
                .unwrap_or_else(|| panic!("never logged {needle:?} (test guard): {log}"));
            log = self.stderr_grew.wait_timeout(log, left).unwrap().0;
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message the server wrote, with the framing it used.
    pub fn next_frame(&mut self) -> Frame {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "no message from portico mcp (test guard); stderr: {}",
                    self.stderr.lock().unwrap()
                )
            })
    }

    /// The next message the server wrote, parsed.
    pub fn next(&mut self) -> Value {
        let frame = self.next_frame();
        serde_json::from_slice(&frame.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&frame.body)))
    }

    /// Sends one message with `Content-Length` framing.
    pub fn send_framed(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        bytes.extend_from_slice(&body);
        self.send_raw(&bytes);
    }

    /// Sends a request and returns its response, collecting notifications seen meanwhile.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let message = self.next();
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (message, notes);
            }
            notes.push(message);
        }
    }

    pub fn initialize(&mut self, version: &str) -> Value {
        let (response, _) = self.request(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "door-test", "version": "1"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        response
    }

    pub fn tool_names(&mut self, id: u64) -> Vec<String> {
        let (response, _) = self.request(id, "tools/list", json!({}));
        response["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{response}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The upstream (`mcp_*`) tools listed, after checking Portico's built-ins are served beside them.
    pub fn upstream_tool_names(&mut self, id: u64) -> Vec<String> {
        let names = self.tool_names(id);
        assert!(
            names.iter().any(|n| n == "system_time"),
            "built-ins are served too: {names:?}"
        );
        names
            .into_iter()
            .filter(|n| n.starts_with("mcp_"))
            .collect()
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        let _ = &mut self.lines;
        status
    }
}

/// One message as written by the server: its body and whether it came `Content-Length` framed (with
/// the declared length) or as a line.
#[derive(Debug)]
pub struct Frame {
    pub content_length: Option<usize>,
    pub body: Vec<u8>,
}

/// Reads one frame in whichever framing the server used.
fn read_frame(reader: &mut impl BufRead) -> Option<Frame> {
    let mut line = Vec::new();
    if reader.read_until(b'\n', &mut line).ok()? == 0 {
        return None;
    }
    let text = String::from_utf8_lossy(&line).to_string();
    if let Some(length) = text.strip_prefix("Content-Length: ") {
        let length: usize = length.trim().parse().expect("numeric Content-Length");
        let mut blank = Vec::new();
        reader.read_until(b'\n', &mut blank).ok()?;
        assert_eq!(blank, b"\r\n", "header block must end with a blank line");
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).ok()?;
        return Some(Frame {
            content_length: Some(length),
            body,
        });
    }
    assert!(line.ends_with(b"\n"));
    line.pop();
    Some(Frame {
        content_length: None,
        body: line,
    })
}

/// `portico serve` on a free loopback port, stopped (SIGTERM) on drop.
pub struct Daemon {
    pub child: Child,
    pub base: String,
    pub log: mpsc::Receiver<String>,
    /// Lines read while waiting for another one: the daemon's lines may come in either order (it can
    /// report "ready" before "listening" when its servers connect fast).
    seen: Vec<String>,
}

impl Daemon {
    pub fn start(home: &Home) -> Daemon {
        Self::start_with_env(home, &[])
    }

    pub fn start_with_env(home: &Home, envs: &[(&str, &str)]) -> Daemon {
        Self::start_with_args(home, &[], envs)
    }

    /// `portico serve ARGS…` with `envs`.
    pub fn start_with_args(home: &Home, args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let mut command = home.command(&[&["serve"], args].concat());
        command.envs(envs.iter().copied());
        Self::spawn(command)
    }

    /// `command`, a `portico serve` made by the caller, started.
    pub fn spawn(mut command: Command) -> Daemon {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut daemon = Daemon {
            child,
            base: String::new(),
            log,
            seen: Vec::new(),
        };
        let line = daemon.wait_for_line("portico: listening on ");
        let base = line
            .trim_start_matches("portico: listening on ")
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        daemon.base = base;
        daemon
    }

    pub fn wait_for_line(&mut self, prefix: &str) -> String {
        self.wait_for(prefix, |line| line.starts_with(prefix))
    }

    pub fn wait_for_line_containing(&mut self, needle: &str) -> String {
        self.wait_for(needle, |line| line.contains(needle))
    }

    fn wait_for(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        if let Some(i) = self.seen.iter().position(|line| matches(line)) {
            return self.seen.remove(i);
        }
        loop {
            let line = self
                .log
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!(
                        "daemon never printed {what:?} (test guard); saw {:#?}",
                        self.seen
                    )
                });
            if matches(&line) {
                return line;
            }
            self.seen.push(line);
        }
    }

    /// The lines waits read past and kept, taken.
    pub fn take_seen(&mut self) -> Vec<String> {
        std::mem::take(&mut self.seen)
    }

    pub fn stop(&mut self) -> std::process::ExitStatus {
        terminate(&self.child);
        self.child.wait().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}
