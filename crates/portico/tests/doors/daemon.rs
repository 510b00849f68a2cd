//! The daemon: its HTTP door (API, MCP, security) and `portico mcp` proxying to it.

use serde_json::{Value, json};

use crate::client::*;

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn mcp_post(base: &str, body: Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = http()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap()
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_reports_health_and_servers_in_the_reference_shape() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let health: Value = http()
        .get(format!("{}/api/health", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["pid"], daemon.child.id());
    assert_eq!(health["servers"], json!({"configured": 1, "ready": 1}));

    let servers: Value = http()
        .get(format!("{}/api/mcp/servers", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(servers["configured"][0]["name"], "cat");
    assert_eq!(servers["configured"][0]["transport"]["type"], "stdio");
    assert_eq!(servers["configured"][0]["timeout_secs"], 30);
    let connected = &servers["connected"][0];
    assert_eq!(connected["name"], "cat");
    assert_eq!(connected["connected"], true);
    assert_eq!(connected["tools_count"], 1);
    assert_eq!(
        connected["tools"][0],
        json!({"name": "mcp_cat_t1", "description": "[MCP:cat] The tool t1", "available": true})
    );

    // The info file names the daemon while it runs and is removed when it stops cleanly.
    let info: Value = serde_json::from_slice(&std::fs::read(home.info_file()).unwrap()).unwrap();
    assert_eq!(info["pid"], daemon.child.id());
    assert_eq!(
        format!("http://{}", info["address"].as_str().unwrap()),
        daemon.base
    );
    assert!(daemon.stop().success());
    assert!(!home.info_file().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_and_the_door_checks() {
    // The token comes from the environment through `${VAR}`, so the secret need not be in the file.
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken = \"${DOOR_TEST_TOKEN}\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start_with_env(&home, &[("DOOR_TEST_TOKEN", "let-me-in")]);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let auth = [("authorization", "Bearer let-me-in")];

    let denied = mcp_post(&base, initialize_body(), &[]).await;
    assert_eq!(denied.status(), 401);
    assert_eq!(denied.headers()["www-authenticate"], "Bearer");
    let wrong = mcp_post(
        &base,
        initialize_body(),
        &[("authorization", "Bearer nope")],
    )
    .await;
    assert_eq!(wrong.status(), 401);
    // Health stays public so that `portico mcp` can find the daemon; it reveals no catalog, and
    // without the token not the config's path or a refusal's text either.
    let anonymous = http()
        .get(format!("{base}/api/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 200);
    let anonymous: Value = anonymous.json().await.unwrap();
    assert_eq!(
        anonymous["config"],
        json!({"status": "loaded"}),
        "{anonymous}"
    );
    let with_token: Value = http()
        .get(format!("{base}/api/health"))
        .header(auth[0].0, auth[0].1)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        with_token["config"]["file"],
        home.config().display().to_string(),
        "{with_token}"
    );
    let servers = http()
        .get(format!("{base}/api/mcp/servers"))
        .send()
        .await
        .unwrap();
    assert_eq!(servers.status(), 401);

    let foreign_origin = mcp_post(
        &base,
        initialize_body(),
        &[auth[0], ("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(foreign_origin.status(), 403);
    let rebinding = http()
        .get(format!("{base}/api/health"))
        .header("host", "attacker.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(rebinding.status(), 403);
    let own_origin = base.clone();
    let ok = mcp_post(
        &base,
        initialize_body(),
        &[auth[0], ("origin", own_origin.as_str())],
    )
    .await;
    assert_eq!(ok.status(), 200);
    let session = ok.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(
        session.len() >= 32,
        "session ids must be unguessable: {session}"
    );
    let body = ok.text().await.unwrap();
    assert!(
        body.contains("\"serverInfo\":{\"name\":\"portico\""),
        "{body}"
    );
    assert!(daemon.stop().success());
}

#[test]
fn refuses_to_listen_off_loopback_without_a_token() {
    let home = Home::new(&config_with("[server]\nlisten = \"0.0.0.0:4200\"", &[]));
    let output = home.command(&["serve"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a loopback address, and no token is set"),
        "{stderr}"
    );
    assert!(!home.info_file().exists());
}

#[test]
fn portico_mcp_proxies_to_a_running_daemon() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1", "--dynamic"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");

    // Session one changes state that lives in the daemon's upstream...
    let mut first = StdioSession::start(&home, &[]);
    first.initialize("2025-11-25");
    let (added, _) = first.request(
        1,
        "tools/call",
        json!({"name": "mcp_cat_add_tool", "arguments": {"name": "shared"}}),
    );
    assert_eq!(added["result"]["content"][0]["text"], "added shared");
    assert!(first.finish().success());

    // ...and a second, separate `portico mcp` sees it: both went through the daemon.
    let mut second = StdioSession::start(&home, &[]);
    second.initialize("2025-11-25");
    let names = second.tool_names(1);
    assert!(names.contains(&"mcp_cat_shared".to_string()), "{names:?}");
    let (call, _) = second.request(
        2,
        "tools/call",
        json!({"name": "mcp_cat_shared", "arguments": {}}),
    );
    assert_eq!(call["result"]["content"][0]["text"], "shared called");
    // The daemon's error comes through as the daemon gave it, without the proxy's "server
    // `daemon`: tools/call ... failed:" in front: the same as in-process, below.
    let (proxied_error, _) = second.request(
        3,
        "tools/call",
        json!({"name": "zzz_no_such_tool", "arguments": {}}),
    );
    let proxied_error = proxied_error["error"].clone();
    assert!(
        !proxied_error["message"]
            .as_str()
            .unwrap()
            .contains("server `daemon`"),
        "{proxied_error}"
    );
    let stderr = second.stderr.clone();
    assert!(second.finish().success());
    assert!(
        stderr
            .lock()
            .unwrap()
            .contains("proxying to the running daemon")
    );

    // Without the daemon (a stale info file left behind), `portico mcp` works alone.
    let info = std::fs::read(home.info_file()).unwrap();
    assert!(daemon.stop().success());
    std::fs::write(home.info_file(), info).unwrap();
    let mut alone = StdioSession::start(&home, &[]);
    alone.initialize("2025-11-25");
    let names = alone.tool_names(1);
    assert!(
        !names.contains(&"mcp_cat_shared".to_string()),
        "fresh in-process hub: {names:?}"
    );
    assert!(names.contains(&"mcp_cat_t1".to_string()));
    let (alone_error, _) = alone.request(
        2,
        "tools/call",
        json!({"name": "zzz_no_such_tool", "arguments": {}}),
    );
    assert_eq!(alone_error["error"], proxied_error);
    let stderr = alone.stderr.clone();
    assert!(alone.finish().success());
    assert!(!stderr.lock().unwrap().contains("proxying"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_call_in_progress_finish() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--sleep-tool"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let init = mcp_post(&base, initialize_body(), &[]).await;
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    drop(init.text().await.unwrap());
    let session_header = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let initialized = mcp_post(
        &base,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &session_header,
    )
    .await;
    assert_eq!(initialized.status(), 202);
    let call = tokio::spawn({
        let base = base.clone();
        let session = session.clone();
        async move {
            let headers = [
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ];
            let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_cat_sleep", "arguments": {"seconds": 1.5}}});
            mcp_post(&base, body, &headers).await.text().await.unwrap()
        }
    });
    // The upstream says on stderr (relayed to the daemon's log) when the call has reached it.
    daemon.wait_for_line_containing("sleep started");
    crate::support::terminate(&daemon.child);
    let answer = call.await.unwrap();
    assert!(
        answer.contains("\"text\":\"slept\""),
        "the call in progress must finish: {answer}"
    );
    assert!(daemon.child.wait().unwrap().success());
}

#[test]
fn sigterm_right_after_start_is_a_clean_shutdown() {
    // The daemon says it listens (and may say it is ready) before its door starts waiting for the
    // signal; a SIGTERM in between must still stop it cleanly, not kill it.
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    crate::support::terminate(&daemon.child);
    let status = daemon.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!home.info_file().exists());
}

/// The daemon's accepted sockets have `TCP_NODELAY` set. Without it, the last small write of every
/// answer waits for the client's delayed ACK: ~40 ms per call for kept-alive clients (Node's `fetch`,
/// httpx, wrk). Checked on the daemon's own end of a live connection, fetched from the running process
/// with `pidfd_getfd`, so no timing is involved.
#[cfg(target_os = "linux")]
#[test]
fn accepted_connections_set_tcp_nodelay() {
    use std::io::{Read, Write};

    let home = Home::new(&config_with("[server]\nlisten = \"127.0.0.1:0\"", &[]));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let address = daemon.base.trim_start_matches("http://").to_string();
    let mut client = std::net::TcpStream::connect(&address).unwrap();
    // One full request and answer on a kept-alive connection: by then the daemon has accepted it.
    write!(
        client,
        "GET /api/health HTTP/1.1\r\nHost: {address}\r\n\r\n"
    )
    .unwrap();
    let mut answer = [0u8; 12];
    client.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");

    let server_port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
    let client_port = client.local_addr().unwrap().port();
    let inode = tcp_socket_inode(server_port, client_port)
        .expect("the daemon's end of the connection in /proc/net/tcp");
    let daemon_fd =
        socket_fd_of(daemon.child.id(), inode).expect("the daemon holds its end of the connection");
    let daemon_end = std::net::TcpStream::from(fd_of_process(daemon.child.id(), daemon_fd));
    assert!(
        daemon_end.nodelay().unwrap(),
        "the daemon's accepted socket has TCP_NODELAY off"
    );
    // The probe tells the two settings apart: the test's own client socket never set it.
    assert!(!client.nodelay().unwrap());
    drop(client);
    assert!(daemon.stop().success());
}

/// The inode of the IPv4 loopback socket whose local port is `local` and remote port is `remote`.
#[cfg(target_os = "linux")]
fn tcp_socket_inode(local: u16, remote: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port_of = |field: &str| u16::from_str_radix(field.rsplit(':').next()?, 16).ok();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (port_of(fields[1])? == local && port_of(fields[2])? == remote)
            .then(|| fields[9].parse().ok())
            .flatten()
    })
}

/// The descriptor number under which process `pid` holds socket `inode`.
#[cfg(target_os = "linux")]
fn socket_fd_of(pid: u32, inode: u64) -> Option<i32> {
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .find(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|target| target.to_str() == Some(&wanted))
        })
        .and_then(|entry| entry.file_name().to_str()?.parse().ok())
}

/// A duplicate of descriptor `fd` of process `pid` (pidfd_getfd(2): needs ptrace rights over it, which
/// a parent running as the same user, or root, has).
#[cfg(target_os = "linux")]
fn fd_of_process(pid: u32, fd: i32) -> std::os::fd::OwnedFd {
    use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
    let pid = Pid::from_raw(pid as i32).expect("a child's pid is positive");
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).unwrap_or_else(|e| panic!("pidfd_open: {e}"));
    pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).unwrap_or_else(|e| panic!("pidfd_getfd: {e}"))
}

/// A plain answer to a stateless (2026-07-28) call is one JSON body with a known length, not an SSE
/// stream or chunks: one write per answer. Regression: the in-flight counter once wrapped every body
/// as a stream, which turned each answer into chunks and a separate terminating chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_answer_is_one_json_body_with_its_length() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp_cat_t1", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = mcp_post(
        &daemon.base,
        body,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "mcp_cat_t1"),
        ],
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let length: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(response.headers().get("transfer-encoding").is_none());
    let bytes = response.bytes().await.unwrap();
    assert_eq!(bytes.len(), length);
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["content"][0]["text"], "t1 called");
    assert!(daemon.stop().success());
}

/// A process that took a dead daemon's port, answering like Portico's health check: it echoes the pid
/// recorded in `daemon.json` (pids are public) with a made-up proof, and records every request it gets.
struct FakeDaemon {
    address: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeDaemon {
    fn start(pid: u32) -> FakeDaemon {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (seen, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let mut reader = std::io::BufReader::new(stream);
                let mut head = String::new();
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                head.push_str(&String::from_utf8_lossy(&body));
                let answer = if head.starts_with("GET /api/health") {
                    json!({"status": "ok", "pid": pid, "version": "0.1.0", "proof": "00".repeat(32)})
                        .to_string()
                } else {
                    "{}".to_string()
                };
                seen.lock().unwrap().push(head);
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        FakeDaemon {
            address,
            requests,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn portico_mcp_never_sends_the_token_to_an_impostor_on_the_recorded_port() {
    let home = Home::new(&config_with("", &["--tools", "t1"]));
    // The pid of a live process, as a killed daemon's stale file would name one that was reused.
    let pid = std::process::id();
    let fake = FakeDaemon::start(pid);
    let token = "stale-file-token-must-stay-secret";
    std::fs::write(
        home.info_file(),
        json!({
            "address": fake.address.to_string(),
            "pid": pid,
            "token": token,
            "version": "0.1.0",
            "identity_key": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        })
        .to_string(),
    )
    .unwrap();

    let mut session = StdioSession::start(&home, &[]);
    session.initialize("2025-11-25");
    // Served in-process: the local upstream's tool is there.
    let names = session.tool_names(1);
    assert!(names.contains(&"mcp_cat_t1".to_string()), "{names:?}");
    let stderr = session.stderr.clone();
    assert!(session.finish().success());

    let requests = fake.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .all(|r| r.starts_with("GET /api/health?challenge=")),
        "only the identity challenge may reach it: {requests:#?}"
    );
    assert!(!requests.is_empty(), "the health check asked it");
    assert!(
        requests.iter().all(|r| !r.contains(token)),
        "the token leaked: {requests:#?}"
    );
    let log = stderr.lock().unwrap().clone();
    assert!(
        log.contains(&format!(
            "names a daemon with pid {pid} at {}, but what answers there echoes the pid yet it did not answer the identity challenge with a valid proof; not sending it the token",
            fake.address
        )),
        "{log}"
    );
    assert!(!log.contains("proxying"), "{log}");
}

/// The health check answers a challenge with a proof only a reader of the owner-only `daemon.json`
/// can check; a challenge longer than any nonce is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_proves_the_daemons_identity_to_readers_of_its_info_file() {
    let home = Home::new(&config_with("[server]\nlisten = \"127.0.0.1:0\"", &[]));
    let mut daemon = tokio::task::block_in_place(|| Daemon::start(&home));
    let info: portico_daemon::DaemonInfo =
        serde_json::from_slice(&std::fs::read(home.info_file()).unwrap()).unwrap();
    let challenge = portico_daemon::new_challenge();
    let health: Value = http()
        .get(format!("{}/api/health?challenge={challenge}", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let proof = health["proof"].as_str().unwrap();
    assert_eq!(info.verify_identity(&challenge, proof), Ok(()));
    assert!(info.verify_identity("another", proof).is_err());

    let too_long = "a".repeat(portico_daemon::MAX_CHALLENGE_CHARS + 1);
    let refused = http()
        .get(format!("{}/api/health?challenge={too_long}", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "challenge must be 1 to 128 characters");
    assert!(daemon.stop().success());
}
