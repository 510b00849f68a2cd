//! Portico as the OAuth client of a protected upstream, driven through the binary over real sockets:
//! a daemon that serves its other servers while one needs login, `portico auth login` with a
//! headless `$BROWSER`, the daemon picking the token up without a restart, refresh on expiry and on
//! a revoked token, a step-up the daemon cannot start by itself, `auth status` and `auth logout`.
//!
//! The upstream is tests/peers/python/oauth_mcp_server.py: an MCP server with its own
//! authorization server, which counts what it was asked and lists the tokens it issued.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "live/http.rs"]
mod http;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::{Daemon, Home, config_with};
use crate::http::Session;
use crate::support::*;

/// The protected peer, listening on 127.0.0.1.
struct Guarded {
    _child: StopOnDrop,
    base: String,
}

impl Guarded {
    fn start(flags: &[&str]) -> Guarded {
        let mut child = Command::new(python3())
            .arg(python_peer("oauth_mcp_server.py"))
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the peer said {line:?}"))
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        Guarded {
            _child: StopOnDrop(child),
            base,
        }
    }

    async fn stats(&self) -> Value {
        crate::http::http()
            .get(format!("{}/stats", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn revoke(&self) {
        let revoked = crate::http::http()
            .post(format!("{}/revoke", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(revoked.status(), 200);
    }

    fn entry(&self) -> String {
        format!(
            "[[mcp_servers]]\nname = \"guarded\"\nallow_private_network = true\n[mcp_servers.transport]\ntype = \"http\"\nurl = \"{}/mcp\"\n",
            self.base
        )
    }
}

fn browser() -> String {
    repo_root()
        .join("tests/conformance/browser-follow.py")
        .display()
        .to_string()
}

fn config(guarded: &Guarded) -> String {
    config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{}", guarded.entry()),
        &["--tools", "t1"],
    )
}

/// `portico auth ARGS` in `home` with `envs`: (exit code, stdout, stderr).
fn auth(home: &Home, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    home.run(&[&["auth"], args].concat(), envs)
}

async fn call_text(session: &Session, id: u64, tool: &str) -> (bool, String) {
    let result = session
        .request(id, "tools/call", json!({"name": tool, "arguments": {}}))
        .await;
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: {result}"))
        .to_string();
    (result["isError"] == json!(true), text)
}

async fn servers(daemon: &Daemon) -> Value {
    crate::http::http()
        .get(format!("{}/api/servers", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn state_of(servers: &Value, name: &str) -> String {
    servers["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("{servers}"))
        .iter()
        .find(|s| s["name"] == json!(name))
        .unwrap_or_else(|| panic!("no {name} in {servers}"))["state"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_serves_the_others_while_one_needs_login_and_takes_the_login_without_a_restart() {
    let guarded = Guarded::start(&[]);
    let home = Home::new(&config(&guarded));
    let mut daemon = Daemon::start_with_env(&home, &[]);
    daemon.wait_for_line("portico: ready");
    assert_eq!(state_of(&servers(&daemon).await, "guarded"), "needs_login");
    assert_eq!(state_of(&servers(&daemon).await, "cat"), "ready");

    // The other server is served; the guarded one's tools are not there yet.
    let session = Session::open(&daemon.base).await;
    let names = session.tool_names(1).await;
    assert!(names.contains(&"mcp_cat_t1".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp_guarded_")),
        "{names:?}"
    );

    // `portico servers` through the daemon says what to do.
    let listed = home.command(&["servers"]).output().unwrap();
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(table.contains("needs login"), "{table}");

    let (code, stdout, stderr) = auth(&home, &["login", "guarded"], &[("BROWSER", &browser())]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("logged in to `guarded` (scopes: tools:read); it lists 2 tool(s)."),
        "{stdout}"
    );
    assert!(
        stderr.contains("/authorize?"),
        "the URL is printed: {stderr}"
    );

    // The credentials file is the user's alone.
    let file = home.dir.path().join("oauth/guarded.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // The daemon notices the new credentials and connects, without a restart.
    daemon.wait_for_line_containing("new OAuth credentials; connecting");
    daemon.wait_for_line_containing("connected server=\"guarded\"");
    assert_eq!(state_of(&servers(&daemon).await, "guarded"), "ready");
    let (failed, text) = call_text(&session, 2, "mcp_guarded_whoami").await;
    assert!(!failed, "{text}");
    assert!(text.ends_with("with scopes [tools:read]"), "{text}");

    let stats = guarded.stats().await;
    assert_eq!(stats["registrations"], json!(1), "{stats}");
    assert_eq!(stats["authorizations"], json!(1), "{stats}");
    assert_eq!(stats["code_exchanges"], json!(1), "{stats}");

    // `auth status` from the file; then no token, access or refresh, ever reached a log.
    let (code, stdout, _) = auth(&home, &["status"], &[]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("guarded: logged in\n  scopes: tools:read\n  token expires in "),
        "{stdout}"
    );
    assert!(stdout.contains("refreshed automatically"), "{stdout}");
    daemon.stop();
    let mut log: Vec<String> = daemon.log.try_iter().collect();
    log.extend(daemon.take_seen());
    let log = log.join("\n") + &stderr + &stdout;
    for token in stats["access_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .chain(stats["refresh_tokens"].as_array().unwrap())
    {
        let token = token.as_str().unwrap();
        assert!(!log.contains(token), "{token} is in a log");
    }

    let (code, stdout, _) = auth(&home, &["logout", "guarded"], &[]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("forgot the OAuth credentials of `guarded`"),
        "{stdout}"
    );
    assert!(!file.exists());
    let (_, stdout, _) = auth(&home, &["status"], &[]);
    assert_eq!(stdout, "guarded: not logged in\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_or_revoked_token_is_refreshed_and_the_call_goes_through() {
    // Every token is expired on arrival: each request refreshes it first.
    let guarded = Guarded::start(&["--expires-in", "0"]);
    let home = Home::new(&config(&guarded));
    let (code, stdout, stderr) = auth(&home, &["login", "guarded"], &[("BROWSER", &browser())]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let refreshes_at_login = guarded.stats().await["refreshes"].as_u64().unwrap();

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    let (failed, text) = call_text(&session, 1, "mcp_guarded_whoami").await;
    assert!(!failed, "{text}");
    let stats = guarded.stats().await;
    assert!(
        stats["refreshes"].as_u64().unwrap() > refreshes_at_login,
        "the expired token was refreshed: {stats}"
    );
    assert_eq!(
        stats["authorizations"],
        json!(1),
        "no second login: {stats}"
    );
    drop(daemon);

    // A server that stops accepting the token (revoked) gets a refreshed one on its 401.
    let guarded = Guarded::start(&[]);
    let home = Home::new(&config(&guarded));
    let (code, stdout, stderr) = auth(&home, &["login", "guarded"], &[("BROWSER", &browser())]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    let (failed, first) = call_text(&session, 1, "mcp_guarded_whoami").await;
    assert!(!failed, "{first}");
    guarded.revoke().await;
    let (failed, second) = call_text(&session, 2, "mcp_guarded_whoami").await;
    assert!(!failed, "{second}");
    assert_ne!(first, second, "a new token answered");
    let stats = guarded.stats().await;
    assert_eq!(stats["refreshes"], json!(1), "{stats}");
    assert_eq!(stats["authorizations"], json!(1), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_up_the_daemon_may_not_start_is_left_to_auth_login_which_asks_for_both_scopes() {
    let guarded = Guarded::start(&[]);
    let home = Home::new(&config(&guarded));
    let (code, _, stderr) = auth(&home, &["login", "guarded"], &[("BROWSER", &browser())]);
    assert_eq!(code, 0, "{stderr}");
    // `$BROWSER` is set, but the server's entry does not say `open_browser = true`.
    let mut daemon = Daemon::start_with_env(&home, &[("BROWSER", &browser())]);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    let (failed, text) = call_text(&session, 1, "mcp_guarded_admin_action").await;
    assert!(failed);
    assert!(
        text.contains(
            "server `guarded` needs login (the server requires scope `admin`); run `portico auth login guarded`"
        ),
        "{text}"
    );
    // One tool's scope does not take the server away: other calls work with the token it has.
    let (failed, _) = call_text(&session, 2, "mcp_guarded_whoami").await;
    assert!(!failed);
    assert_eq!(state_of(&servers(&daemon).await, "guarded"), "ready");
    assert_eq!(guarded.stats().await["authorizations"], json!(1));

    // The advice works: the login asks for what was granted and what the refused call needed,
    // and the running daemon's next call has the new token.
    let (code, stdout, stderr) = auth(&home, &["login", "guarded"], &[("BROWSER", &browser())]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("logged in to `guarded` (scopes: tools:read admin)"),
        "{stdout}"
    );
    let (failed, text) = call_text(&session, 3, "mcp_guarded_admin_action").await;
    assert!(!failed, "{text}");
    assert_eq!(text, "admin done");
    let stats = guarded.stats().await;
    assert_eq!(
        stats["scopes_requested"],
        json!(["tools:read", "tools:read admin"]),
        "{stats}"
    );
    assert_eq!(stats["authorizations"], json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_open_browser_the_daemon_steps_up_by_itself() {
    let guarded = Guarded::start(&[]);
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{}[mcp_servers.oauth]\nopen_browser = true\n",
        guarded.entry()
    ));
    let mut daemon = Daemon::start_with_env(&home, &[("BROWSER", &browser())]);
    daemon.wait_for_line("portico: ready");
    // The first login (the handshake's 401) and the step-up both happen in the daemon.
    assert_eq!(state_of(&servers(&daemon).await, "guarded"), "ready");
    let session = Session::open(&daemon.base).await;
    let (failed, text) = call_text(&session, 1, "mcp_guarded_admin_action").await;
    assert!(!failed, "{text}");
    assert_eq!(text, "admin done");
    let stats = guarded.stats().await;
    assert_eq!(
        stats["scopes_requested"],
        json!(["tools:read", "tools:read admin"]),
        "{stats}"
    );
}
