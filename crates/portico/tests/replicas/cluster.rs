//! The harness: `portico serve` replicas sharing one fresh PostgreSQL schema, with nginx in front
//! of them routed as docs/replicas.md recommends, and the HTTP helpers the tests use on both.
//!
//! Reuses the door tests' `Home` and `Daemon` (crates/portico/tests/doors/client.rs) and the
//! shared `support.rs` (peers, signals), by `#[path]`.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Daemon, Home};
use crate::support::{Signal, signal};

/// `[server] token` of every replica: a deployment behind a load balancer is not an open loopback
/// door, and a token makes the callers one principal (`client:default`) whichever replica they
/// reach.
pub const TOKEN: &str = "replicas-test-token";

/// The name clients use for the gateway (through the load balancer), listed in `[server]
/// allowed_hosts`, as an operator would for the balancer's public name.
pub const PUBLIC_HOST: &str = "portico.test";

/// How long one replica's lease lasts (`portico_store::REPLICA_LEASE`).
pub const LEASE: Duration = portico_store::REPLICA_LEASE;

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// One `portico serve` replica.
pub struct Replica {
    pub name: String,
    pub port: u16,
    /// `http://127.0.0.1:PORT`, the replica itself (not through the balancer).
    pub base: String,
    pub home: Home,
    pub daemon: Daemon,
}

impl Replica {
    pub fn running(&mut self) -> bool {
        matches!(self.daemon.child.try_wait(), Ok(None))
    }
}

/// n replicas (`gw-a`, `gw-b`, …) of one store, and nginx in front.
pub struct Replicas {
    pub replicas: Vec<Replica>,
    pub lb: Nginx,
}

/// What to do when a peer the tests need is missing: skip (say so), or fail when
/// `PORTICO_REQUIRE_POSTGRES=1` says this run must cover the shared store.
fn required() -> bool {
    std::env::var("PORTICO_REQUIRE_POSTGRES").as_deref() == Ok("1")
}

pub fn replica_name(i: usize) -> String {
    format!("gw-{}", (b'a' + i as u8) as char)
}

impl Replicas {
    /// A fresh schema, `n` replicas each with its own home (data dir) and `extra` config (tables
    /// only: `[a2a]`, `[[agents]]`, `[[policies]]`, `[[mcp_servers]]`…), nginx in front. Ready:
    /// every replica printed `portico: ready`, its `/api/health` shows the store reachable and
    /// every replica alive, and the balancer answers `/api/health`. `None`: skipped (no test
    /// PostgreSQL or nginx, and none required).
    pub fn start(n: usize, extra: &str) -> Option<Replicas> {
        Replicas::start_with(n, extra, |_| String::new())
    }

    /// [`Replicas::start`] with `server(i)`'s lines added to replica `i`'s `[server]` table.
    pub fn start_with(
        n: usize,
        extra: &str,
        server: impl Fn(usize) -> String + Sync,
    ) -> Option<Replicas> {
        let url = portico_store::testing::postgres_test_url()?;
        let Some(nginx) = Nginx::binary() else {
            assert!(
                !required(),
                "nginx is missing ($NGINX or /usr/sbin/nginx): run scripts/install-test-peers"
            );
            eprintln!("skipped: nginx is missing ($NGINX or /usr/sbin/nginx)");
            return None;
        };
        let names: Vec<String> = (0..n).map(replica_name).collect();
        // Started together, as an orchestrator starts a deployment's replicas (both open, and
        // migrate, the same new schema at once).
        let replicas: Vec<Replica> = std::thread::scope(|scope| {
            let started: Vec<_> = names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let config = replica_config(&url, name, n, &server(i), extra);
                    scope.spawn(move || start_replica(name, &config))
                })
                .collect();
            started.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for replica in &replicas {
            wait_until_all_alive(replica, &names);
        }
        let upstreams: Vec<(String, u16)> =
            replicas.iter().map(|r| (r.name.clone(), r.port)).collect();
        let lb = Nginx::start(&nginx, &upstreams);
        Some(Replicas { replicas, lb })
    }

    pub fn a(&self) -> &Replica {
        &self.replicas[0]
    }

    pub fn b(&self) -> &Replica {
        &self.replicas[1]
    }

    pub fn by_name(&self, name: &str) -> &Replica {
        self.replicas
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no replica {name}"))
    }

    pub fn by_port(&self, port: u16) -> &Replica {
        self.replicas
            .iter()
            .find(|r| r.port == port)
            .unwrap_or_else(|| panic!("no replica on port {port}"))
    }

    /// `kill -9` of replica `name`, reaped. Its stdio upstreams see their stdin close; any still
    /// running 5 s later are killed too, so the test leaves nothing behind.
    pub fn kill9(&mut self, name: &str) {
        let replica = self
            .replicas
            .iter_mut()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no replica {name}"));
        let pid = replica.daemon.child.id();
        let children = children_of(pid);
        signal(pid, Signal::KILL);
        replica.daemon.child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in children {
            while std::path::Path::new(&format!("/proc/{child}")).exists()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            signal(child, Signal::KILL);
        }
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        self.lb.stop();
        // SIGTERM to all first, so they shut down side by side; then each gets 15 s before SIGKILL.
        for replica in &mut self.replicas {
            if replica.running() {
                signal(replica.daemon.child.id(), Signal::TERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        for replica in &mut self.replicas {
            while replica.running() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if replica.running() {
                let _ = replica.daemon.child.kill();
            }
            let _ = replica.daemon.child.wait();
        }
    }
}

fn replica_config(url: &str, name: &str, n: usize, server: &str, extra: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
token = "{TOKEN}"
allowed_hosts = ["{PUBLIC_HOST}"]
{server}

# The tests are not about rate limits: every request through nginx comes from one peer address.
[server.rate_limit]
per_second = 1000
burst = 2000

[store]
url = "{url}"
replica = "{name}"
replicas = {n}

{extra}
"#
    )
}

fn start_replica(name: &str, config: &str) -> Replica {
    let home = Home::new(config);
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let port: u16 = daemon
        .base
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {}", daemon.base));
    Replica {
        name: name.to_string(),
        port,
        base: daemon.base.clone(),
        home,
        daemon,
    }
}

/// Polls the replica's `/api/health` until its store answers and lists every replica alive.
fn wait_until_all_alive(replica: &Replica, names: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = Value::Null;
    loop {
        if let Ok((200, body)) = blocking_health(&replica.base) {
            let alive: BTreeSet<&str> = body["store"]["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["alive"] == true)
                .filter_map(|r| r["name"].as_str())
                .collect();
            if body["store"]["reachable"] == true
                && body["replica"] == replica.name.as_str()
                && names.iter().all(|n| alive.contains(n.as_str()))
            {
                return;
            }
            last = body;
        }
        assert!(
            Instant::now() < deadline,
            "{} never saw its store reachable with {names:?} alive (test guard); last health: {last:#}",
            replica.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `/api/health` with the token, from a thread of its own (callers may be inside a runtime).
fn blocking_health(base: &str) -> Result<(u16, Value), String> {
    let url = format!("{base}/api/health");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let response = http()
                        .get(&url)
                        .bearer_auth(TOKEN)
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    let status = response.status().as_u16();
                    let body = response.json().await.map_err(|e| e.to_string())?;
                    Ok((status, body))
                })
            })
            .join()
            .unwrap()
    })
}

/// Direct children of `pid` (from /proc/*/stat).
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(pid) {
            found.push(child);
        }
    }
    found
}

// ---------------------------------------------------------------------------------------- nginx

/// nginx in the foreground (master and one worker), everything it writes in a temp dir, listening
/// on one loopback port.
pub struct Nginx {
    pub child: Child,
    pub port: u16,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub dir: tempfile::TempDir,
    /// The replicas by port, to read the access log's upstream addresses.
    upstreams: Vec<(String, u16)>,
}

/// One request as nginx's access log recorded it.
#[derive(Debug, Clone)]
pub struct Logged {
    pub method: String,
    pub uri: String,
    pub status: u16,
    /// The replicas nginx tried, in order (`$upstream_addr`), by name.
    pub upstreams: Vec<String>,
    pub mcp_session: String,
}

impl Nginx {
    pub fn binary() -> Option<PathBuf> {
        let path = std::env::var_os("NGINX")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
        path.exists().then_some(path)
    }

    /// Starts nginx before `upstreams` (name, port) and waits until it answers `/api/health`.
    pub fn start(binary: &PathBuf, upstreams: &[(String, u16)]) -> Nginx {
        let mut last_error = String::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("portico-nginx-")
                .tempdir()
                .unwrap();
            // The workers run as another user when nginx starts as root: they must reach the
            // temp paths below.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let port = free_port();
            let config = nginx_config(dir.path(), port, upstreams);
            let config_path = dir.path().join("nginx.conf");
            std::fs::write(&config_path, config).unwrap();
            let child = Command::new(binary)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(&config_path)
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nginx");
            let mut nginx = Nginx {
                child,
                port,
                base: format!("http://127.0.0.1:{port}"),
                dir,
                upstreams: upstreams.to_vec(),
            };
            match nginx.wait_ready() {
                Ok(()) => {
                    nginx.assert_listens_on_loopback_only();
                    return nginx;
                }
                Err(error) => {
                    last_error = error;
                    nginx.stop();
                    if !last_error.contains("Address already in use") {
                        break;
                    }
                }
            }
        }
        panic!("nginx did not start: {last_error}");
    }

    /// Polls the balancer's `/api/health` until it answers 200; on failure, why, with nginx's
    /// error log.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "nginx exited ({status}); its error log:\n{}",
                    self.error_log()
                ));
            }
            let last = match blocking_health(&self.base) {
                Ok((200, _)) => return Ok(()),
                Ok((status, body)) => format!("{status} {body}"),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "the balancer at {} never answered /api/health with 200 within 20 s (last: {last}); nginx's error log:\n{}",
                    self.base,
                    self.error_log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Every request nginx logged so far.
    pub fn access_log(&self) -> Vec<Logged> {
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines()
            .map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                assert_eq!(fields.len(), 5, "{line}");
                let upstreams = fields[3]
                    .split([',', ':'])
                    .map(str::trim)
                    .filter_map(|part| part.parse::<u16>().ok())
                    .map(|port| {
                        self.upstreams
                            .iter()
                            .find(|(_, p)| *p == port)
                            .map(|(name, _)| name.clone())
                            .unwrap_or_else(|| format!("port {port}"))
                    })
                    .collect();
                Logged {
                    method: fields[0].to_string(),
                    uri: fields[1].to_string(),
                    status: fields[2].parse().unwrap_or(0),
                    upstreams,
                    mcp_session: fields[4].to_string(),
                }
            })
            .collect()
    }

    /// nginx's listening sockets (master's and workers'), from /proc: only 127.0.0.1:PORT.
    fn assert_listens_on_loopback_only(&self) {
        let master = self.child.id();
        let mut pids = vec![master];
        pids.extend(children_of(master));
        let mut inodes = BTreeSet::new();
        for pid in &pids {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if let Ok(target) = std::fs::read_link(fd.path())
                    && let Some(inode) = target
                        .to_string_lossy()
                        .strip_prefix("socket:[")
                        .and_then(|s| s.strip_suffix(']'))
                {
                    inodes.insert(inode.to_string());
                }
            }
        }
        let mut listening = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = std::fs::read_to_string(table).unwrap_or_default();
            for line in text.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // local_address, st (0A: LISTEN), inode
                if fields.len() > 9 && fields[3] == "0A" && inodes.contains(fields[9]) {
                    listening.push(fields[1].to_string());
                }
            }
        }
        // 127.0.0.1 in /proc/net/tcp's little-endian hex, and the port in hex.
        let expected = format!("0100007F:{:04X}", self.port);
        assert_eq!(
            listening,
            vec![expected],
            "nginx (pids {pids:?}) must listen on 127.0.0.1:{} only",
            self.port
        );
    }

    /// Fast shutdown (SIGTERM to the master), then SIGKILL after 10 s.
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), Signal::TERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The balancer's config: MCP sessions (Streamable HTTP's `Mcp-Session-Id`, the legacy HTTP+SSE
/// `sessionId`) go to the replica their prefix names, with the others as backups (which answer
/// 404, so the client starts a new session); everything else round-robin.
fn nginx_config(dir: &std::path::Path, port: u16, upstreams: &[(String, u16)]) -> String {
    let dir = dir.display();
    let server = |port: u16| format!("127.0.0.1:{port}");
    let mut mcp_map = String::new();
    let mut legacy_map = String::new();
    let mut groups = String::new();
    for (name, own) in upstreams {
        let group = format!("portico_{}", name.replace('-', "_"));
        let escaped = name.replace('.', "\\.");
        mcp_map.push_str(&format!("        ~^{escaped}\\. {group};\n"));
        legacy_map.push_str(&format!("        ~^{escaped}\\. {group};\n"));
        let backups: String = upstreams
            .iter()
            .filter(|(other, _)| other != name)
            .map(|(_, p)| format!("        server {} backup;\n", server(*p)))
            .collect();
        groups.push_str(&format!(
            "    upstream {group} {{\n        server {} max_fails=1 fail_timeout=5s;\n{backups}        keepalive 8;\n        keepalive_timeout 5s;\n    }}\n",
            server(*own)
        ));
    }
    let all: String = upstreams
        .iter()
        .map(|(_, p)| {
            format!(
                "        server {} max_fails=1 fail_timeout=5s;\n",
                server(*p)
            )
        })
        .collect();
    format!(
        r#"daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log notice;

events {{
    worker_connections 512;
}}

http {{
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    log_format replicas '$request_method\t$uri\t$status\t$upstream_addr\t$http_mcp_session_id';
    access_log {dir}/access.log replicas;

    # A session lives in the replica that created it: its id starts with that replica's name.
    map $http_mcp_session_id $portico_mcp {{
        default portico_all;
{mcp_map}    }}
    map $arg_sessionId $portico_legacy {{
        default portico_all;
{legacy_map}    }}

    upstream portico_all {{
{all}        keepalive 32;
        # Shorter than Portico's 10 s idle deadline: a reused connection it just closed would
        # be an error that takes a healthy replica out (max_fails=1).
        keepalive_timeout 5s;
    }}
{groups}
    server {{
        listen 127.0.0.1:{port};

        proxy_http_version 1.1;
        proxy_set_header Connection "";
        # The Host the client used, port included: Portico checks it against its allowed names
        # ([server] allowed_hosts lists the balancer's), and the dashboard compares it with Origin.
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        # Streams (MCP, A2A, /api/events) pass through as they come, and may stay open.
        proxy_buffering off;
        proxy_read_timeout 300s;
        proxy_next_upstream error timeout;

        location /mcp {{
            proxy_pass http://$portico_mcp;
        }}
        # The legacy HTTP+SSE door's POSTs (`/message?sessionId=…`).
        location /message {{
            proxy_pass http://$portico_legacy;
        }}
        location / {{
            proxy_pass http://portico_all;
        }}
    }}
}}
"#
    )
}

// ------------------------------------------------------------------------------------ requests

/// A request to `base` with the token: (status, JSON body or Null).
pub async fn api(base: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = http()
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// `/api/health` with the token: (status, body).
pub async fn health(base: &str) -> (u16, Value) {
    api(base, "GET", "/api/health", None).await
}

/// One A2A 1.0 JSON-RPC call to agent `agent` at `base`; the whole JSON-RPC answer.
pub async fn rpc(base: &str, agent: &str, method: &str, params: Value) -> Value {
    let response = http()
        .post(format!("{base}/a2a/{agent}"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{method}: {text}");
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["id"], 7, "{body}");
    body
}

pub fn user_message(text: &str) -> Value {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({"messageId": format!("m-{}-{n}", std::process::id()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

pub fn text_of_parts(parts: &Value) -> String {
    parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

/// Polls `check` every 100 ms until it returns `Some`, for at most `limit`; panics with `what` and
/// the last value seen.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{what}: not within {limit:?} (test guard); last: {last}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
