//! The CLI through a running daemon, and the same commands with `--standalone`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::client::*;

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

const ECHO_AGENT: &str = r#"
[[agents]]
name = "echoer"
description = "Says what it heard."
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "heard {{message}}" } ] } ]
"#;

fn run(home: &Home, args: &[&str]) -> (i32, String, String) {
    let output: Output = home.command(args).stdin(Stdio::null()).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn json_of(home: &Home, args: &[&str]) -> Value {
    let (code, stdout, stderr) = run(home, args);
    assert_eq!(code, 0, "{args:?}: {stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// `tools/list` over a fresh session on the daemon's `/mcp`, as an IDE lists it.
async fn mcp_tool_names(base: &str) -> Vec<String> {
    let init = http()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "oneview-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    drop(init.text().await.unwrap());
    let post = |body: Value| {
        http()
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
    };
    let initialized = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .unwrap();
    assert_eq!(initialized.status(), 202);
    let body = post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let listed = body
        .lines()
        .map(|line| line.strip_prefix("data: ").unwrap_or(line))
        .find_map(|data| {
            let message: Value = serde_json::from_str(data).ok()?;
            (message["id"] == 1).then_some(message)
        })
        .unwrap_or_else(|| panic!("no tools/list answer in {body:?}"));
    names(&listed["result"]["tools"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_through_the_daemon_shows_what_mcp_serves() {
    let home = Home::new(&config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n{ECHO_AGENT}"),
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");

    // `portico tools` is the whole catalog `/mcp` serves: built-ins, the agent, the server's tool.
    let served = mcp_tool_names(&daemon.base).await;
    let tools = json_of(&home, &["tools", "--json"]);
    assert_eq!(names(&tools), served);
    for expected in [
        "mcp_cat_t1",
        "portico_agent_echoer",
        "system_time",
        "agent_list",
    ] {
        assert!(
            served.iter().any(|n| n == expected),
            "{expected}: {served:?}"
        );
    }
    let source_of = |name: &str| {
        let tool = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap();
        (tool["source"].clone(), tool["server"].clone())
    };
    assert_eq!(source_of("mcp_cat_t1"), (json!("server"), json!("cat")));
    assert_eq!(
        source_of("portico_agent_echoer"),
        (json!("agent"), Value::Null)
    );
    assert_eq!(source_of("system_time"), (json!("built-in"), Value::Null));
    let api: Value = http()
        .get(format!("{}/api/tools", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(names(&api["tools"]), served);

    let (code, text, _) = run(&home, &["tools"]);
    assert_eq!(code, 0);
    assert!(
        text.lines().any(|l| l == "mcp_cat_t1  [cat]  The tool t1"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("system_time  [built-in]  ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "portico_agent_echoer  [agent]  Says what it heard."),
        "{text}"
    );
    let only = json_of(&home, &["tools", "--server", "cat", "--json"]);
    assert_eq!(names(&only), ["mcp_cat_t1"]);

    // An explicit --config naming another file than the daemon's means that file: its servers,
    // from this process, with or without --standalone. (The daemon's own file goes through the
    // daemon, as above.)
    let edited = std::fs::read_to_string(home.config()).unwrap()
        + &crate::support::stdio_entry(
            "late",
            &crate::support::python3(),
            &[
                crate::support::python_peer("catalog_server.py")
                    .to_str()
                    .unwrap(),
                "--tools",
                "t9",
            ],
            "",
        );
    let other = home.dir.path().join("other.toml");
    std::fs::write(&other, edited).unwrap();
    let with_other = |args: &[&str]| -> Value {
        let output = Command::new(env!("CARGO_BIN_EXE_portico"))
            .args(args)
            .arg("--config")
            .arg(&other)
            .env("PORTICO_HOME", home.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{args:?}: {stdout}");
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    };
    let servers = with_other(&["servers", "--json"]);
    assert_eq!(names(&servers), ["cat", "late"]);
    let standalone = with_other(&["servers", "--json", "--standalone"]);
    assert_eq!(names(&standalone), ["cat", "late"]);
    let standalone_tools = with_other(&["tools", "--json", "--standalone"]);
    assert!(names(&standalone_tools).contains(&"mcp_late_t9".to_string()));
    assert!(names(&with_other(&["tools", "--json"])).contains(&"mcp_late_t9".to_string()));

    let agents = json_of(&home, &["agents", "--json"]);
    assert_eq!(names(&agents), ["echoer"]);
    assert_eq!(agents[0]["tool"], "portico_agent_echoer");

    // A call through the daemon runs in the daemon (its audit, as the door's client); one with
    // --standalone runs here, as the CLI.
    let (code, stdout, stderr) = run(&home, &["call", "mcp_cat_t1"]);
    assert_eq!((code, stdout.as_str()), (0, "t1 called\n"), "{stderr}");
    let (code, stdout, stderr) = run(&home, &["call", "system_time", "--json", "--standalone"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"content\""), "{stdout}");
    let (code, _, stderr) = run(&home, &["call", "no_such_tool"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no_such_tool"), "{stderr}");
    assert!(stderr.contains("answered by the daemon (pid "), "{stderr}");

    let audit: Value = http()
        .get(format!("{}/api/audit?tool=mcp_cat_t1", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{audit:#}");
    assert_eq!(records[0]["caller"], "client:http");
    assert_eq!(records[0]["outcome"], "ok");
    // `portico audit` through the daemon shows both, the standalone call as the CLI's.
    let (code, listed, stderr) = run(&home, &["audit", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let callers: Vec<(String, String)> = listed
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).unwrap();
            (
                record["tool"].as_str().unwrap().to_string(),
                record["caller"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(tool, _)| tool != "no_such_tool")
        .collect();
    assert_eq!(
        callers,
        [
            ("system_time".to_string(), "client:cli".to_string()),
            ("mcp_cat_t1".to_string(), "client:http".to_string()),
        ]
    );

    // `portico chat` through the daemon's API, from a pipe; then the conversation is listed.
    let mut chat = home
        .command(&["chat", "echoer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"hello there\n\nagain\n")
        .unwrap();
    let output = chat.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "heard hello there\nheard again\n", "{stderr}");
    assert_eq!(
        stderr.matches("portico: conversation c_").count(),
        1,
        "{stderr}"
    );
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("portico: conversation "))
        .unwrap()
        .to_string();

    let listed: Value = http()
        .get(format!("{}/api/conversations", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conversations = listed["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 1, "{listed:#}");
    assert_eq!(conversations[0]["id"], id.as_str());
    assert_eq!(conversations[0]["agent"], "echoer");
    assert_eq!(conversations[0]["title"], "hello there");
    assert_eq!(conversations[0]["message_count"], 4);
    assert_eq!(listed["next_cursor"], Value::Null);
    // Bounded: a page of one has a cursor to the next, which is empty; limits past 200 are refused.
    let paged: Value = http()
        .get(format!("{}/api/conversations?limit=1", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cursor = paged["next_cursor"].as_str().unwrap().to_string();
    let rest: Value = http()
        .get(format!(
            "{}/api/conversations?limit=1&cursor={cursor}",
            daemon.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest, json!({"conversations": [], "next_cursor": null}));
    let too_many = http()
        .get(format!("{}/api/conversations?limit=201", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(too_many.status(), 400);
    assert_eq!(
        too_many.json::<Value>().await.unwrap(),
        json!({"error": "`limit` must be 1 to 200, got 201"})
    );

    let (code, table, stderr) = run(&home, &["conversations", "list"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("ID  "), "{table}");
    assert!(
        lines[1].starts_with(&format!("{id}  echoer  4  ")),
        "{table}"
    );
    assert!(lines[1].ends_with("  hello there"), "{table}");
    let (code, shown, stderr) = run(&home, &["conversations", "show", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        shown,
        format!(
            "{id}  agent echoer  4 message(s)\nuser> hello there\nassistant> heard hello there\nuser> again\nassistant> heard again\n"
        )
    );
    let (code, _, stderr) = run(&home, &["conversations", "show", "c_nope"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "no conversation `c_nope`; `portico conversations` lists the ones you can read"
        ),
        "{stderr}"
    );

    // With the daemon gone, the same commands run in this process, on the file with `late`.
    assert!(daemon.stop().success());
    std::fs::copy(&other, home.config()).unwrap();
    let tools = json_of(&home, &["tools", "--json"]);
    assert!(names(&tools).contains(&"mcp_late_t9".to_string()));
    assert!(names(&tools).contains(&"system_time".to_string()));
    let (code, shown, stderr) = run(&home, &["conversations", "show", &id, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["messages"].as_array().unwrap().len(), 4);
    let (code, stdout, stderr) = run(&home, &["call", "mcp_late_t9"]);
    assert_eq!((code, stdout.as_str()), (0, "t9 called\n"), "{stderr}");
}

#[test]
fn commands_only_a_daemon_answers_have_no_standalone_form() {
    let home = Home::new("");
    let (code, _, stderr) = run(&home, &["approvals", "list", "--standalone"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: `portico approvals` talks to the running daemon, which holds what it answers; it has no --standalone form\n"
    );
}

#[test]
fn a_daemon_running_another_config_is_said_in_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new("[server]\nlisten = \"127.0.0.1:0\"\n");
    std::fs::set_permissions(home.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    // A daemon that does not say which config it runs gets no note.
    let (code, stdout, stderr) = run(&home, &["servers", "--json"]);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "[]\n", ""));

    // What `daemon.json` says the daemon runs (`config.source`), against the file this command
    // reads.
    let mut info: Value =
        serde_json::from_slice(&std::fs::read(home.info_file()).unwrap()).unwrap();
    info["config"] = json!({"source": home.config().to_str().unwrap(), "sha256": "0"});
    std::fs::write(home.info_file(), serde_json::to_vec(&info).unwrap()).unwrap();
    let (code, _, stderr) = run(&home, &["servers", "--json"]);
    assert_eq!((code, stderr.as_str()), (0, ""));

    info["config"]["source"] = json!("/elsewhere/config.toml");
    std::fs::write(home.info_file(), serde_json::to_vec(&info).unwrap()).unwrap();
    let ours = home.config().display().to_string();
    // The file found without --config (here PORTICO_CONFIG): the daemon's view, said so.
    let output = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(["servers", "--json"])
        .env("PORTICO_HOME", home.dir.path())
        .env("PORTICO_CONFIG", home.config())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "note: the daemon (pid {}, {}) runs config /elsewhere/config.toml, not {ours}; showing the daemon's view (--standalone reads {ours})\n",
            daemon.child.id(),
            daemon.base
        )
    );
    // An explicit --config naming another file: that file, in this process.
    let (code, _, stderr) = run(&home, &["servers", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        stderr,
        format!(
            "note: the daemon (pid {}, {}) runs config /elsewhere/config.toml; --config {ours} is another file, so this runs in this process on it\n",
            daemon.child.id(),
            daemon.base
        )
    );
    let (code, _, stderr) = run(&home, &["-q", "servers"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_client_token_sees_its_own_view_through_the_daemon() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken = \"door-token-0123456789\"\n\n\
         [[server.clients]]\nname = \"laptop\"\ntoken = \"laptop-token-0123456789\"\ntools = [\"system_time\"]\n",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    // The daemon's own token (from daemon.json) sees everything; the laptop's only its scope.
    let all = json_of(&home, &["tools", "--json"]);
    assert!(names(&all).contains(&"mcp_cat_t1".to_string()), "{all}");
    let output = home
        .command(&["tools", "--json"])
        .env("PORTICO_CLIENT_TOKEN", "laptop-token-0123456789")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success());
    let scoped: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(names(&scoped), ["system_time"]);
    // A wrong token is refused, with what to check.
    let output = home
        .command(&["tools"])
        .env("PORTICO_CLIENT_TOKEN", "wrong")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refused the token (PORTICO_CLIENT_TOKEN); check PORTICO_CLIENT_TOKEN against [[server.clients]]"),
        "{stderr}"
    );
    // Without a token the API is closed to anyone else.
    let status = http()
        .get(format!("{}/api/tools", daemon.base))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    assert!(daemon.stop().success());
}

#[test]
fn tools_hidden_by_expose_are_not_listed_and_the_list_says_why() {
    let home = Home::new("[expose]\ntools = false\n");
    let (code, stdout, stderr) = run(&home, &["tools"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "no tools: the config's [expose] tools = false hides them from MCP clients\n"
    );
    assert_eq!(json_of(&home, &["tools", "--json"]), json!([]));
}
