//! Live reload: the file watched, SIGHUP, a refused config.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::client::{Daemon, Home};
use crate::http::{Session, http, write_config};
use crate::support::*;

/// A stdlib catalog peer named `name` with these flags.
fn catalog(name: &str, flags: &[&str]) -> String {
    let script = python_peer("catalog_server.py");
    let mut args = vec![script.to_str().unwrap()];
    args.extend_from_slice(flags);
    stdio_entry(name, &python3(), &args, "")
}

fn config(servers: &[String]) -> String {
    format!("[server]\nlisten = \"127.0.0.1:0\"\n{}", servers.concat())
}

fn upstream_tools(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| n.starts_with("mcp_"))
        .collect()
}

async fn get_json(url: String) -> Value {
    let response = http().get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_servers_an_attached_client_sees_and_spares_the_others_call() {
    let cat = catalog("cat", &["--sleep-tool", "--tools", "t1"]);
    let home = Home::new(&config(&[
        cat.clone(),
        catalog("old", &["--tools", "o1", "--prompts", "1"]),
    ]));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Arc::new(Session::open(&daemon.base).await);
    assert_eq!(
        upstream_tools(session.tool_names(1).await),
        ["mcp_cat_sleep", "mcp_cat_t1", "mcp_old_o1"]
    );
    let mut events = session.listen().await;
    // A slow call on `cat`, which the reload leaves as it is: it must finish across the reload.
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .request(
                    2,
                    "tools/call",
                    json!({"name": "mcp_cat_sleep", "arguments": {"seconds": 4}}),
                )
                .await
        }
    });
    daemon.wait_for_line_containing("sleep started");

    write_config(
        &home.config(),
        &config(&[cat, catalog("new", &["--tools", "n1"])]),
    );
    let reloaded = daemon.wait_for_line_containing("config reloaded");
    assert!(
        reloaded.contains("config reloaded (file changed) from ")
            && reloaded.ends_with(": added new; removed old; 1 unchanged"),
        "{reloaded}"
    );
    // `old` goes at once; `new` comes when it has connected: each is a list_changed.
    let mut id = 10;
    loop {
        events
            .notification("notifications/tools/list_changed")
            .await;
        id += 1;
        let tools = upstream_tools(session.tool_names(id).await);
        assert!(!tools.contains(&"mcp_old_o1".to_string()), "{tools:?}");
        if tools.contains(&"mcp_new_n1".to_string()) {
            assert_eq!(tools, ["mcp_cat_sleep", "mcp_cat_t1", "mcp_new_n1"]);
            break;
        }
    }
    // `old`'s prompt went with it: a prompts list_changed too (sent after the tools' one).
    let prompts_changed = "notifications/prompts/list_changed".to_string();
    if !events.methods.contains(&prompts_changed) {
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            events.notification(&prompts_changed),
        )
        .await
        .unwrap_or_else(|_| panic!("no prompts list_changed (test guard): {:?}", events.methods));
    }
    assert_eq!(
        session.request(50, "prompts/list", json!({})).await["prompts"],
        json!([])
    );
    let answer = call.await.unwrap();
    assert_eq!(
        answer["content"][0]["text"], "slept",
        "the call in flight on the unchanged server must finish: {answer}"
    );
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(
        health["config"],
        json!({"status": "loaded", "file": home.config().display().to_string(), "reloads": 1})
    );
    assert_eq!(health["servers"], json!({"configured": 2, "ready": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_fails_its_check_is_refused_and_the_running_one_kept() {
    let cat = catalog("cat", &["--tools", "t1"]);
    let home = Home::new(&config(std::slice::from_ref(&cat)));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    let mut events = session.listen().await;

    write_config(
        &home.config(),
        &(config(std::slice::from_ref(&cat)) + "\n[nonsense]\nkey = 1\n"),
    );
    let refused = daemon.wait_for_line_containing("config reload (file changed) refused");
    assert!(refused.contains(" ERROR "), "{refused}");
    let file = home.config().display().to_string();
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(health["config"]["status"], "refused", "{health}");
    assert_eq!(health["config"]["file"], file.as_str());
    assert_eq!(health["config"]["reloads"], 0);
    let error = health["config"]["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("{file} has 1 problem(s):\n  {file}:"))
            && error.contains("nonsense"),
        "{error}"
    );
    let servers = get_json(format!("{}/api/mcp/servers", daemon.base)).await;
    assert_eq!(servers["config"], health["config"]);
    // `portico servers`, through the daemon, lists what runs and says the edit was refused.
    let cli = tokio::task::block_in_place(|| home.command(&["servers"]).output().unwrap());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&cli.stdout),
        String::from_utf8_lossy(&cli.stderr),
    );
    assert_eq!(cli.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("cat"), "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stderr.contains(&format!(
            "the daemon refused the edited config {file}, and runs the one it had: {error}\nfix the file;"
        )),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(servers["connected"][0]["state"], "ready");
    assert_eq!(upstream_tools(session.tool_names(1).await), ["mcp_cat_t1"]);

    // Fixed, with `cat` changed: it restarts with its new catalog, and the refusal is gone.
    write_config(
        &home.config(),
        &config(&[catalog("cat", &["--tools", "t1,t2"])]),
    );
    let reloaded = daemon.wait_for_line_containing("config reloaded");
    assert!(
        reloaded.ends_with(": restarted cat; 0 unchanged"),
        "{reloaded}"
    );
    let mut id = 10;
    loop {
        events
            .notification("notifications/tools/list_changed")
            .await;
        id += 1;
        if upstream_tools(session.tool_names(id).await) == ["mcp_cat_t1", "mcp_cat_t2"] {
            break;
        }
    }
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(
        health["config"],
        json!({"status": "loaded", "file": file, "reloads": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_and_the_daemon_keeps_running() {
    let home = Home::new(&config(&[catalog("cat", &["--tools", "t1"])]));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    signal(daemon.child.id(), Signal::HUP);
    daemon.wait_for_line_containing("SIGHUP: reloading the config");
    let reloaded = daemon.wait_for_line_containing("config reloaded");
    assert!(
        reloaded.contains("config reloaded (SIGHUP) from ")
            && reloaded.ends_with(": no server changed; 1 unchanged"),
        "{reloaded}"
    );
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "SIGHUP must not stop the daemon"
    );
    assert!(home.info_file().exists());
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(health["config"]["reloads"], 1);
    // The session from before the reload still works, on the same server session.
    assert_eq!(upstream_tools(session.tool_names(1).await), ["mcp_cat_t1"]);

    // A change of a section that cannot change live is named, and the rest applied.
    write_config(
        &home.config(),
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nmax_sessions = 7\n{}",
            catalog("cat", &["--tools", "t1"])
        ),
    );
    let warned = daemon.wait_for_line_containing("restart needed");
    assert!(
        warned.contains(" WARN ")
            && warned.ends_with("[server] changed; restart needed for it to take effect (Portico keeps running with the old [server])"),
        "{warned}"
    );
    daemon.wait_for_line_containing("config reloaded (file changed)");
    // It stays visible: health names the section, and so does `portico servers`.
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(health["config"]["status"], "loaded", "{health}");
    assert_eq!(
        health["config"]["restart_needed"],
        json!(["[server]"]),
        "{health}"
    );
    let cli = tokio::task::block_in_place(|| home.command(&["servers"]).output().unwrap());
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(cli.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the daemon runs {}'s servers and agents, but not its edited [server]: those take effect when the daemon restarts (tokens and clients removed there still work until then)",
            home.config().display()
        )),
        "{stderr}"
    );
    assert_eq!(daemon.stop().code(), Some(0));
    assert!(!home.info_file().exists());
}

/// `serve --listen` stands over the file's `[server] listen` in every reload too: saving the file
/// is no `[server]` change (it once reported "restart needed" on every save).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_listen_is_kept_over_the_file_across_reloads() {
    let file = |extra: &str| {
        format!(
            "[server]\nlisten = \"localhost:0\"\n{}{extra}",
            catalog("cat", &["--tools", "t1"])
        )
    };
    let home = Home::new(&file(""));
    let mut daemon = Daemon::start_with_args(&home, &["--listen", "127.0.0.1:0"], &[]);
    daemon.wait_for_line("portico: ready");
    write_config(&home.config(), &file("# saved again\n"));
    let reloaded = daemon.wait_for_line_containing("config reloaded (file changed)");
    assert!(
        reloaded.ends_with(": no server changed; 1 unchanged"),
        "{reloaded}"
    );
    let health = get_json(format!("{}/api/health", daemon.base)).await;
    assert_eq!(
        health["config"],
        json!({"status": "loaded", "file": home.config().display().to_string(), "reloads": 1}),
        "no section waits for a restart: {health}"
    );
    assert_eq!(daemon.stop().code(), Some(0));
}

fn agent_file(name: &str) -> String {
    format!(
        "name = \"{name}\"\n[model]\nprovider = \"scripted\"\nrules = [{{ steps = [{{ reply = \"{name} here\" }}] }}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_directory_is_followed_too() {
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nagents_dir = \"agents\"\n{}",
        catalog("cat", &["--tools", "t1"])
    ));
    let agents = home.dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    std::fs::write(agents.join("alpha.toml"), agent_file("alpha")).unwrap();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    let agent_tools = |names: Vec<String>| -> Vec<String> {
        names
            .into_iter()
            .filter(|n| n.starts_with("portico_agent_"))
            .collect()
    };
    assert_eq!(
        agent_tools(session.tool_names(1).await),
        ["portico_agent_alpha"]
    );
    let mut events = session.listen().await;

    write_config(&agents.join("beta.toml"), &agent_file("beta"));
    std::fs::remove_file(agents.join("alpha.toml")).unwrap();
    let reloaded = daemon.wait_for_line_containing("config reloaded");
    // The two file operations may be seen by one reload or by two.
    let reloaded = if reloaded.ends_with("; added agent beta; removed agent alpha; 1 unchanged") {
        reloaded
    } else {
        daemon.wait_for_line_containing("config reloaded")
    };
    assert!(
        reloaded.ends_with(": no server changed; removed agent alpha; 1 unchanged")
            || reloaded.ends_with(
                ": no server changed; added agent beta; removed agent alpha; 1 unchanged"
            ),
        "{reloaded}"
    );
    let mut id = 10;
    loop {
        events
            .notification("notifications/tools/list_changed")
            .await;
        id += 1;
        if agent_tools(session.tool_names(id).await) == ["portico_agent_beta"] {
            break;
        }
    }
    let answer = session
        .request(
            99,
            "tools/call",
            json!({"name": "portico_agent_beta", "arguments": {"message": "hi"}}),
        )
        .await;
    assert_eq!(
        answer["structuredContent"]["reply"], "beta here",
        "{answer}"
    );
    let listed = get_json(format!("{}/api/agents", daemon.base)).await;
    let names: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beta"]);
}

/// Most IDEs attach through `portico mcp`, which proxies to the daemon: a reload reaches them too.
#[test]
fn an_ide_through_portico_mcp_hears_of_a_reload() {
    let home = Home::new(&config(&[catalog("cat", &["--tools", "t1"])]));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let mut ide =
        crate::client::StdioSession::start_with_env(&home, &[], &[("PORTICO_LOG", "info")]);
    ide.wait_for_stderr("proxying to the running daemon");
    ide.initialize("2025-06-18");
    assert_eq!(ide.upstream_tool_names(1), ["mcp_cat_t1"]);

    write_config(
        &home.config(),
        &config(&[
            catalog("cat", &["--tools", "t1"]),
            catalog("dog", &["--tools", "d1"]),
        ]),
    );
    let reloaded = daemon.wait_for_line_containing("config reloaded");
    assert!(reloaded.ends_with(": added dog; 1 unchanged"), "{reloaded}");
    let mut id = 10;
    loop {
        let message = ide.next();
        if message["method"] != "notifications/tools/list_changed" {
            continue;
        }
        id += 1;
        if ide.upstream_tool_names(id) == ["mcp_cat_t1", "mcp_dog_d1"] {
            break;
        }
    }
    let (call, _) = ide.request(
        99,
        "tools/call",
        json!({"name": "mcp_dog_d1", "arguments": {}}),
    );
    assert_eq!(call["result"]["content"][0]["text"], "d1 called", "{call}");
    assert!(ide.finish().success());
}
