//! add, remove, enable, disable, restart and stop, with and without a daemon.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::client::{Daemon, Home};
use crate::support::*;

/// A config a person wrote: comments, odd spacing, a section after the servers.
fn hand_written(listen: &str) -> String {
    format!(
        "# My Portico.\n[server]\nlisten = \"{listen}\"   # keep this port\n\n# The catalog, for testing.\n{}# Trailing notes stay where they are.\n[telemetry]\nservice_name = \"me\"  # mine\n",
        stdio_entry(
            "cat",
            &python3(),
            &[
                python_peer("catalog_server.py").to_str().unwrap(),
                "--tools",
                "t1"
            ],
            "timeout_secs   =   30"
        )
    )
}

/// `portico --config HOME/config.toml ARGS` (the config before the arguments, which may end with
/// a command after `--`): (exit code, stdout, stderr).
pub fn portico(home: &Home, args: &[&str]) -> (i32, String, String) {
    let output = command(home, args).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub fn command(home: &Home, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
    command
        .arg("--config")
        .arg(home.config())
        .args(args)
        .env("PORTICO_HOME", home.dir.path())
        .env_remove("PORTICO_CONFIG")
        .stdin(Stdio::null());
    command
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The block `portico add NAME -- python3 catalog_server.py --tools TOOLS` appends.
fn catalog_block(name: &str, tools: &str) -> String {
    format!(
        "\n[[mcp_servers]]\nname = \"{name}\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"--tools\", \"{tools}\"]\n",
        python3().display().to_string(),
        python_peer("catalog_server.py").display().to_string(),
    )
}

#[test]
fn without_a_daemon_the_commands_edit_the_file_and_connect_the_server_here() {
    let original = hand_written("127.0.0.1:0");
    let home = Home::new(&original);
    let config = home.config();
    let shown = config.display().to_string();
    let python = python3().display().to_string();
    let catalog = python_peer("catalog_server.py").display().to_string();

    let (code, stdout, stderr) = portico(
        &home,
        &["add", "echo", "--", &python, &catalog, "--tools", "a,b"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("added `echo` to {shown}"));
    assert!(
        lines[1].starts_with("`echo` is ready: 2 tools (stdio, protocol "),
        "{stdout}"
    );
    assert_eq!(
        lines[2],
        "(connected in this process to check it; `portico serve` runs it for your IDEs)"
    );
    let with_echo = format!("{original}{}", catalog_block("echo", "a,b"));
    assert_eq!(read(&config), with_echo);

    // A taken name (also when it only becomes the same in tool names) writes nothing.
    for taken in ["echo", "ECHO"] {
        let (code, _, stderr) = portico(&home, &["add", taken, "--", &python]);
        assert_eq!(code, 1);
        assert!(
            stderr.contains(&format!(
                "{shown} already has a server `echo` (stdio, runs `{python}`); nothing was written"
            )),
            "{stderr}"
        );
    }
    // Hostile names, and an entry `config check` refuses (a variable set twice), write nothing.
    for name in ["../x", "a b", ".x", "x\ny", "$(id)"] {
        let (code, _, stderr) = portico(&home, &["add", name, "--", &python]);
        assert_eq!(code, 1, "{name:?}");
        assert!(stderr.contains("cannot be a server name"), "{stderr}");
    }
    let (code, _, stderr) = portico(
        &home,
        &[
            "add", "twice", "--env", "A=1", "--env", "A=2", "--", &python,
        ],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("would not pass `portico config check`, so nothing was written"),
        "{stderr}"
    );
    let (code, _, stderr) = portico(&home, &["add", "nothing"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("give the server's URL"), "{stderr}");
    assert_eq!(read(&config), with_echo);

    // A server that cannot start: said in words with its stderr, the entry kept, exit 1.
    let crash = python_peer("fault_crash_at_start.py").display().to_string();
    let (code, stdout, stderr) = portico(&home, &["add", "crashy", "--", &python, &crash]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert_eq!(stdout, format!("added `crashy` to {shown}\n"));
    assert!(stderr.contains("`crashy` did not start: "), "{stderr}");
    assert!(stderr.contains("fatal: cannot start"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "The entry is kept in {shown}: fix it there, or `portico remove crashy`."
        )),
        "{stderr}"
    );
    let crashy_block = format!(
        "\n[[mcp_servers]]\nname = \"crashy\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {python:?}\nargs = [{crash:?}]\n"
    );
    assert_eq!(read(&config), format!("{with_echo}{crashy_block}"));

    // disable adds `enabled = false` to the entry; enable sets it in place.
    let (code, stdout, _) = portico(&home, &["disable", "crashy"]);
    assert_eq!(
        (code, stdout),
        (0, format!("disabled `crashy` in {shown}\n"))
    );
    let disabled_block = crashy_block.replace(
        "name = \"crashy\"\n",
        "name = \"crashy\"\nenabled = false\n",
    );
    assert_eq!(read(&config), format!("{with_echo}{disabled_block}"));
    let (code, stdout, _) = portico(&home, &["disable", "crashy"]);
    assert_eq!(
        (code, stdout),
        (0, format!("`crashy` is already disabled in {shown}\n"))
    );
    let (code, stdout, stderr) = portico(&home, &["enable", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "`echo` is already enabled in {shown}\n`echo` is ready: 2 tools"
        )),
        "{stdout}"
    );

    let (code, stdout, _) = portico(&home, &["remove", "crashy"]);
    assert_eq!(
        (code, stdout),
        (
            0,
            format!("removed `crashy` (stdio, runs `{python}`) from {shown}\n")
        )
    );
    assert_eq!(read(&config), with_echo);
    let (code, _, stderr) = portico(&home, &["remove", "nope"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("{shown} has no server `nope`; it has: cat, echo")),
        "{stderr}"
    );

    // restart and stop need a daemon.
    let (code, _, stderr) = portico(&home, &["restart", "echo"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("nothing is running to restart: no daemon runs"),
        "{stderr}"
    );
    let (code, stdout, _) = portico(&home, &["stop"]);
    assert_eq!((code, stdout.as_str()), (0, "no daemon running\n"));

    let (code, _, _) = portico(&home, &["remove", "echo"]);
    assert_eq!(code, 0);
    assert_eq!(read(&config), original);
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn server_state(daemon: &Daemon, name: &str) -> Option<Value> {
    let listed: Value = http()
        .get(format!("{}/api/servers", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_daemon_the_edits_reach_it_and_restart_and_stop_act_on_it() {
    let original = hand_written("127.0.0.1:0");
    let home = Home::new(&original);
    let config = home.config();
    let shown = config.display().to_string();
    let python = python3().display().to_string();
    let catalog = python_peer("catalog_server.py").display().to_string();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let pid = daemon.child.id();
    let described = format!("the daemon (pid {pid}, {})", daemon.base);

    let (code, stdout, stderr) = portico(
        &home,
        &["add", "echo", "--", &python, &catalog, "--tools", "a,b,c"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("added `echo` to {shown}"));
    assert!(
        lines[1].starts_with(&format!("`echo` is ready in {described}: 3 tools (stdio")),
        "{stdout}"
    );
    assert_eq!(lines.len(), 2, "{stdout}");
    let with_echo = format!("{original}{}", catalog_block("echo", "a,b,c"));
    assert_eq!(read(&config), with_echo);
    assert_eq!(
        server_state(&daemon, "echo").await.unwrap()["state"],
        "ready"
    );

    let (code, stdout, stderr) = portico(&home, &["disable", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!("disabled `echo` in {shown}\n{described} stopped it\n")
    );
    assert_eq!(
        server_state(&daemon, "echo").await.unwrap()["state"],
        "disabled"
    );

    let (code, stdout, stderr) = portico(&home, &["enable", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "enabled `echo` in {shown}\n`echo` is ready in {described}: 3 tools"
        )),
        "{stdout}"
    );
    assert_eq!(
        read(&config),
        with_echo.replace("name = \"echo\"\n", "name = \"echo\"\nenabled = true\n")
    );

    // A run-time disable (the dashboard's) is cleared by `enable`, though the file says enabled.
    let disabled = http()
        .post(format!("{}/api/servers/echo/disable", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(disabled.status(), 202);
    assert_eq!(
        server_state(&daemon, "echo").await.unwrap()["state"],
        "disabled"
    );
    let (code, stdout, stderr) = portico(&home, &["enable", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "`echo` is already enabled in {shown}\n`echo` is ready in {described}"
        )),
        "{stdout}"
    );

    let connects = server_state(&daemon, "echo").await.unwrap()["connects"]
        .as_u64()
        .unwrap();
    let (code, stdout, stderr) = portico(&home, &["restart", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "{described} is restarting `echo`\n`echo` is ready in {described}: 3 tools"
        )),
        "{stdout}"
    );
    assert_eq!(
        server_state(&daemon, "echo").await.unwrap()["connects"],
        connects + 1
    );
    let (code, _, stderr) = portico(&home, &["restart", "nope"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!(
            "{described} has no server `nope`; it has: cat, echo"
        )),
        "{stderr}"
    );

    let (code, stdout, stderr) = portico(&home, &["remove", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!("removed `echo` (stdio, runs `{python}`) from {shown}\n{described} stopped it\n")
    );
    assert_eq!(server_state(&daemon, "echo").await, None);
    assert_eq!(read(&config), original);

    // An edit of a file the daemon does not follow is refused, nothing written.
    let other = home.dir.path().join("other.toml");
    std::fs::write(&other, &original).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("--config")
        .arg(&other)
        .args(["add", "late", "--", &python])
        .env("PORTICO_HOME", home.dir.path())
        .env_remove("PORTICO_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{described} runs {shown}, not {}, and does not follow that file",
            other.display()
        )),
        "{stderr}"
    );
    assert_eq!(read(&other), original);

    // `stop` returns once the process has exited; the test reaps it meanwhile.
    let stopping = command(&home, &["stop"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = daemon.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let output = stopping.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("stopped the daemon (pid {pid})\n")
    );
    assert!(output.status.success());
    assert!(!home.info_file().exists());
    let (code, stdout, _) = portico(&home, &["stop"]);
    assert_eq!((code, stdout.as_str()), (0, "no daemon running\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_doors_token_holder_may_stop_the_daemon_or_read_logs() {
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken = \"door-token\"\n\n[[server.clients]]\nname = \"laptop\"\ntoken = \"laptop-token\"\ntools = [\"system_time\"]\n\n{}",
        stdio_entry(
            "cat",
            &python3(),
            &[
                python_peer("catalog_server.py").to_str().unwrap(),
                "--tools",
                "t1"
            ],
            ""
        )
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    for path in ["/api/shutdown", "/api/mcp/servers/cat/logs"] {
        let anonymous = if path == "/api/shutdown" {
            http().post(format!("{}{path}", daemon.base))
        } else {
            http().get(format!("{}{path}", daemon.base))
        };
        assert_eq!(anonymous.send().await.unwrap().status(), 401, "{path}");
    }
    let scoped = http()
        .post(format!("{}/api/shutdown", daemon.base))
        .bearer_auth("laptop-token")
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 403);
    let (code, _, stderr) = {
        let output = command(&home, &["stop"])
            .env("PORTICO_CLIENT_TOKEN", "laptop-token")
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "`client:laptop` has a `tools` scope, and scoped clients cannot stop the daemon"
        ),
        "{stderr}"
    );
    let logs = http()
        .get(format!("{}/api/mcp/servers/cat/logs", daemon.base))
        .bearer_auth("laptop-token")
        .send()
        .await
        .unwrap();
    assert_eq!(logs.status(), 403);
    assert_eq!(daemon.child.try_wait().unwrap(), None, "still running");

    // The daemon's own token (daemon.json's, which `portico stop` reads) stops it.
    let pid = daemon.child.id();
    let stopping = command(&home, &["stop"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(daemon.child.wait().unwrap().success());
    let output = stopping.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("stopped the daemon (pid {pid})\n")
    );
}
