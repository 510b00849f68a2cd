//! The default agent `assistant` on the embedded defaults: without a model it is listed as needing
//! one and offered to no client (no MCP tool, no A2A card), and what the user sees says what to set
//! (and, with a daemon running, that the daemon keeps the environment it started with); with a model
//! from the environment (OPENAI_BASE_URL and PORTICO_MODEL, a fake provider here) it is offered.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::*;
use crate::fake_models::{FakeModel, Turn};

/// What would give the default agent a model, kept out of every command here but the ones that
/// set them.
const MODEL_VARIABLES: [&str; 5] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "PORTICO_MODEL",
    "PORTICO_CONFIG",
];

/// `portico ARGS` on the embedded defaults: a data dir without a config file, no model variables
/// but `envs`.
fn on_defaults(data: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
    command.args(args).env("PORTICO_HOME", data);
    for name in MODEL_VARIABLES {
        command.env_remove(name);
    }
    command.envs(envs.iter().copied()).stdin(Stdio::null());
    command
}

fn run(command: &mut Command) -> (i32, String, String) {
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The tools `portico mcp --standalone` lists on the defaults with `envs`.
fn served_tools(data: &std::path::Path, envs: &[(&str, &str)]) -> (StdioSession, Vec<String>) {
    let mut session = StdioSession::spawn(on_defaults(data, &["mcp", "--standalone"], envs));
    session.initialize("2025-06-18");
    let names = session.tool_names(1);
    (session, names)
}

#[test]
fn without_a_model_the_default_agent_is_listed_as_needing_one_and_offered_to_no_client() {
    let data = tempfile::tempdir().unwrap();
    let (session, names) = served_tools(data.path(), &[]);
    assert!(session.finish().success());
    assert!(names.iter().any(|n| n == "system_time"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("portico_agent_")),
        "{names:?}"
    );

    let (code, stdout, stderr) = run(&mut on_defaults(data.path(), &["agents"], &[]));
    assert_eq!(code, 0, "{stderr}");
    let first = stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "assistant  (needs a model: not offered as a tool or A2A agent until it has one)"
    );
    assert!(stdout.contains("PORTICO_MODEL"), "{stdout}");

    let (code, stdout, _) = run(&mut on_defaults(data.path(), &["agents", "--json"], &[]));
    assert_eq!(code, 0);
    let agents: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(agents[0]["model"], "needs a model");
    let fix = agents[0]["needs_model"].as_str().unwrap();
    for named in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "PORTICO_MODEL",
    ] {
        assert!(fix.contains(named), "{named}: {fix}");
    }

    // Not offered, yet a call by its name says what to set rather than that it does not exist.
    let (code, stdout, stderr) = run(&mut on_defaults(
        data.path(),
        &[
            "call",
            "portico_agent_assistant",
            "--args",
            r#"{"message": "hi"}"#,
        ],
        &[],
    ));
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("agent `assistant` has no model"),
        "{stdout}"
    );
    assert!(stdout.contains("PORTICO_MODEL"), "{stdout}");

    let (code, stdout, stderr) = run(&mut on_defaults(data.path(), &["chat", "assistant"], &[]));
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    let error = stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        error.starts_with("error: agent `assistant` has no model: set OPENAI_API_KEY"),
        "{stderr}"
    );
    assert!(
        error.ends_with(", then run `portico chat assistant` again"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_model_from_the_environment_the_default_agent_is_a_tool_and_answers() {
    let fake = FakeModel::openai(vec![Turn::Final("hello from the fake model")]).await;
    let base = format!("{}/v1", fake.base);
    let data = tempfile::tempdir().unwrap();
    let envs = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("PORTICO_MODEL", "fake-model"),
    ];
    let (answer, names) = tokio::task::block_in_place(|| {
        let (mut session, names) = served_tools(data.path(), &envs);
        let (answer, _) = session.request(
            2,
            "tools/call",
            json!({"name": "portico_agent_assistant", "arguments": {"message": "hi"}}),
        );
        assert!(session.finish().success());
        (answer, names)
    });
    assert!(
        names.iter().any(|n| n == "portico_agent_assistant"),
        "{names:?}"
    );
    assert_eq!(
        answer["result"]["structuredContent"]["reply"], "hello from the fake model",
        "{answer}"
    );
    // PORTICO_MODEL named the model asked for.
    assert_eq!(fake.requests()[0]["model"], "fake-model");

    let (code, stdout, _) = run(&mut on_defaults(data.path(), &["agents"], &envs));
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("assistant  (portico_agent_assistant)\n"),
        "{stdout}"
    );
}

/// The defaults with the daemon on a free port.
fn defaults_on_a_free_port() -> Home {
    let defaults = include_str!("../../../portico-config/src/default.toml");
    assert!(defaults.contains("listen = \"127.0.0.1:4200\""));
    Home::new(&defaults.replace("127.0.0.1:4200", "127.0.0.1:0"))
}

/// `portico ARGS` on `home`'s config, with no model variables but `envs`.
fn in_home(home: &Home, args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut command = home.command(args);
    for name in MODEL_VARIABLES {
        command.env_remove(name);
    }
    command.envs(envs.iter().copied()).stdin(Stdio::null());
    command
}

fn start_daemon(home: &Home, envs: &[(&str, &str)]) -> Daemon {
    tokio::task::block_in_place(|| {
        let mut daemon = Daemon::spawn(in_home(home, &["serve"], envs));
        daemon.wait_for_line("portico: ready");
        daemon
    })
}

async fn primary_card_status(base: &str) -> (u16, Value) {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_a_model_publishes_no_card_and_says_its_environment_is_its_own() {
    let home = defaults_on_a_free_port();
    let mut daemon = start_daemon(&home, &[]);
    let warned = tokio::task::block_in_place(|| {
        daemon.wait_for_line_containing("agent `assistant` has no model")
    });
    assert!(
        warned.ends_with(
            " WARN agent `assistant` has no model, so no IDE or A2A client is offered it: `portico agents` says what to set in this daemon's environment (then restart it)"
        ),
        "{warned}"
    );

    let (status, body) = primary_card_status(&daemon.base).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("none has a model yet"),
        "{body}"
    );

    let listed: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{}/api/agents", daemon.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["agents"][0]["model"], "needs a model", "{listed}");
    assert!(
        listed["agents"][0]["needs_model"]
            .as_str()
            .is_some_and(|fix| fix.contains("PORTICO_MODEL")),
        "{listed}"
    );

    // The dashboard's chat: refused before anything runs, in the daemon's terms.
    let refused = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/api/agents/assistant/message", daemon.base))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("agent `assistant` has no model: set OPENAI_API_KEY"),
        "{body}"
    );
    assert!(
        error.ends_with(&format!(
            "This daemon (pid {}) has its own environment, read when it started: set the variable \
             where `portico serve` runs, then restart the daemon (`portico stop`, then `portico serve`)",
            daemon.child.id()
        )),
        "{body}"
    );

    // This shell has a key the daemon started without: the daemon must be restarted, not the
    // key set again.
    let (code, stdout, stderr) = tokio::task::block_in_place(|| {
        run(&mut in_home(
            &home,
            &["chat", "assistant"],
            &[("OPENAI_API_KEY", "sk-this-shell")],
        ))
    });
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    let pid = daemon.child.id();
    assert_eq!(
        stderr,
        format!(
            "error: agent `assistant` has no model in the daemon (pid {pid}, {}): this shell sets \
             OPENAI_API_KEY, but the daemon keeps the environment it started with; restart it from \
             a shell that has it: `portico stop`, then `portico serve`\n",
            daemon.base
        )
    );
    assert!(!stderr.contains("sk-this-shell"));

    // Neither has one: what to set, where the daemon runs.
    let (code, _, stderr) =
        tokio::task::block_in_place(|| run(&mut in_home(&home, &["chat", "assistant"], &[])));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("PORTICO_MODEL"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the daemon (pid {pid}, {}) has its own environment, read when it started",
            daemon.base
        )),
        "{stderr}"
    );
    // The same through `portico call`.
    let (code, _, stderr) = tokio::task::block_in_place(|| {
        run(&mut in_home(
            &home,
            &[
                "call",
                "portico_agent_assistant",
                "--args",
                r#"{"message": "hi"}"#,
            ],
            &[("ANTHROPIC_API_KEY", "this-shell")],
        ))
    });
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("this shell sets ANTHROPIC_API_KEY"),
        "{stderr}"
    );
    daemon.stop();

    // Started with a model: the card is there.
    let fake = FakeModel::openai(vec![Turn::Final("unused")]).await;
    let base = format!("{}/v1", fake.base);
    let mut daemon = start_daemon(
        &home,
        &[("OPENAI_BASE_URL", &base), ("PORTICO_MODEL", "fake-model")],
    );
    let (status, card) = primary_card_status(&daemon.base).await;
    assert_eq!(status, 200, "{card}");
    let said = daemon.take_seen();
    assert!(
        !said.iter().any(|line| line.contains("has no model")),
        "{said:#?}"
    );
    assert_eq!(card["name"], "assistant");
    daemon.stop();
}
