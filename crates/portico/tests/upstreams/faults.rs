//! Faulty servers: each gives a clear error naming it, the others keep working, and no process is left.

use std::time::Duration;

use portico_core::ServerState;
use portico_core::retry::RetryPolicy;
use portico_hub::{Hub, HubError};
use portico_mcp::UpstreamError;
use serde_json::json;

use crate::support::*;

fn fast_backoff() -> RetryPolicy {
    RetryPolicy::unlimited(Duration::from_millis(50), Duration::from_millis(500))
}

async fn hub_with(toml: &str) -> Hub {
    let hub = Hub::start_with_backoff(&parse_config(toml), fast_backoff());
    tokio::time::timeout(Duration::from_secs(120), hub.wait_settled())
        .await
        .expect("settle (test guard)");
    hub
}

/// Waits (on the hub's change notifications, not a timer) until `pred` holds for the named server.
async fn wait_for(
    hub: &Hub,
    name: &str,
    pred: impl Fn(&portico_core::ServerStatus) -> bool,
) -> portico_core::ServerStatus {
    let mut changes = hub.subscribe();
    let wait = async {
        loop {
            if let Some(s) = hub.servers().into_iter().find(|s| s.name == name)
                && pred(&s)
            {
                return s;
            }
            changes.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("condition not reached (test guard)")
}

fn steady(marked: &Marked) -> String {
    let script = marked.script("env_dump.py");
    stdio_entry("steady", &python3(), &[script.to_str().unwrap()], "")
}

async fn assert_steady_works(hub: &Hub) {
    let result = hub
        .call_tool("mcp_steady_echo", args(json!({"message": "still here"})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "echo: still here");
}

async fn assert_nothing_left(hub: Hub, marked: &Marked) {
    hub.shutdown().await;
    let left = marked.processes();
    assert!(left.is_empty(), "processes left behind: {left:#?}");
    let zombies = zombie_children();
    assert!(zombies.is_empty(), "zombie children: {zombies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_exiting_mid_call_fails_the_call_at_once_and_is_restarted() {
    let marked = Marked::new();
    let dying = marked.script("fault_exit_mid_call.py");
    let toml = format!(
        "{}{}",
        stdio_entry(
            "dying",
            &python3(),
            &[dying.to_str().unwrap()],
            "timeout_secs = 60"
        ),
        steady(&marked)
    );
    let hub = hub_with(&toml).await;
    let error = hub
        .call_tool("mcp_dying_slow", args(json!({})))
        .await
        .unwrap_err();
    // Closed, not Timeout: the call failed when the server died, not 60s later.
    assert!(
        matches!(error, HubError::Upstream(UpstreamError::Closed { ref server, .. }) if server == "dying"),
        "{error}"
    );
    assert!(error.to_string().contains("`dying`"), "{error}");
    assert_steady_works(&hub).await;
    let back = wait_for(&hub, "dying", |s| {
        s.state == ServerState::Ready && s.connects >= 2
    })
    .await;
    assert_eq!(back.tools, 2);
    let ok = hub
        .call_tool("mcp_dying_ok", args(json!({})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "ok");
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_never_answers_times_out_without_blocking_other_calls() {
    let marked = Marked::new();
    let stuck = marked.script("fault_never_answers.py");
    let toml = format!(
        "{}{}",
        stdio_entry(
            "stuck",
            &python3(),
            &[stuck.to_str().unwrap()],
            "timeout_secs = 3"
        ),
        steady(&marked)
    );
    let hub = hub_with(&toml).await;
    let hanging = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.call_tool("mcp_stuck_hang", args(json!({}))).await })
    };
    // While `hang` is in flight on the same server, another call to it is answered.
    let ok = hub
        .call_tool("mcp_stuck_ok", args(json!({})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "ok");
    assert!(
        !hanging.is_finished(),
        "hang must still be waiting when ok returns"
    );
    let error = hanging.await.unwrap().unwrap_err();
    assert!(
        matches!(error, HubError::Upstream(UpstreamError::Timeout { ref server, secs: 3, .. }) if server == "stuck"),
        "{error}"
    );
    assert!(error.to_string().contains("timed out after 3s"), "{error}");
    assert_steady_works(&hub).await;
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_max_concurrent_calls_wait_for_a_place_and_fail_clearly_without_one() {
    let marked = Marked::new();
    let stuck = marked.script("fault_never_answers.py");
    let toml = format!(
        "{}{}",
        stdio_entry(
            "stuck",
            &python3(),
            &[stuck.to_str().unwrap()],
            "timeout_secs = 2\nmax_concurrent_calls = 1"
        ),
        steady(&marked)
    );
    let hub = hub_with(&toml).await;
    assert_eq!(hub.in_flight("stuck"), Some(0));
    let hanging = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.call_tool("mcp_stuck_hang", args(json!({}))).await })
    };
    // The place is taken before the request goes out; nothing announces it but the gauge.
    tokio::time::timeout(Duration::from_secs(30), async {
        while hub.in_flight("stuck") != Some(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the hanging call takes the place (test guard)");
    // A second hanging call queues for the place (places go in arrival order), so when the first
    // times out the place passes to it and stays taken for another full timeout: `ok`, queued
    // behind both, reaches its own deadline first. The second call starts half a second after the
    // first so that its own wait outlasts the first call's timeout and clean-up: not a wait for a
    // state (the gauges below are those) but the offset between two deadlines this test is about.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let queued = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.call_tool("mcp_stuck_hang", args(json!({}))).await })
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while hub.waiting_for_place("stuck") != Some(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the second hanging call waits for the place (test guard)");
    // `ok` waits for a place, within its timeout, and gives up clearly.
    let error = hub
        .call_tool("mcp_stuck_ok", args(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(error, HubError::Upstream(UpstreamError::Busy { ref server, max: 1, secs: 2, .. }) if server == "stuck"),
        "{error}"
    );
    assert!(
        error.to_string().contains(
            "1 requests were already in flight to this server (its max_concurrent_calls)"
        ),
        "{error}"
    );
    let hung_too = queued.await.unwrap().unwrap_err();
    assert!(
        matches!(hung_too, HubError::Upstream(UpstreamError::Timeout { .. })),
        "{hung_too}"
    );
    // Other servers are not held back.
    assert_steady_works(&hub).await;
    let hung = hanging.await.unwrap().unwrap_err();
    assert!(
        matches!(hung, HubError::Upstream(UpstreamError::Timeout { .. })),
        "{hung}"
    );
    // The timed-out call gave its place back.
    assert_eq!(hub.in_flight("stuck"), Some(0));
    let ok = hub
        .call_tool("mcp_stuck_ok", args(json!({})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "ok");
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_hanging_in_the_handshake_does_not_delay_the_others() {
    let marked = Marked::new();
    let mute = marked.script("fault_never_answers.py");
    let toml = format!(
        "{}{}",
        stdio_entry(
            "mute",
            &python3(),
            &[mute.to_str().unwrap(), "--hang-handshake"],
            "startup_timeout_secs = 2"
        ),
        steady(&marked)
    );
    let hub = Hub::start_with_backoff(&parse_config(&toml), fast_backoff());
    // The steady server becomes ready while the mute one is still in its handshake.
    let steady_status = wait_for(&hub, "steady", |s| s.state == ServerState::Ready).await;
    assert_eq!(steady_status.tools, 3);
    assert_steady_works(&hub).await;
    let mute_status = wait_for(&hub, "mute", |s| s.last_error.is_some()).await;
    let error = mute_status.last_error.unwrap();
    assert!(
        error.contains("server `mute`: no handshake answer within 2s"),
        "{error}"
    );
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_lines_and_a_20_mib_line_on_stdout_are_survived() {
    let marked = Marked::new();
    let noisy = marked.script("fault_noisy_stdout.py");
    let toml = format!(
        "{}{}",
        stdio_entry("noisy", &python3(), &[noisy.to_str().unwrap()], ""),
        steady(&marked)
    );
    let hub = hub_with(&toml).await;
    let status = hub
        .servers()
        .into_iter()
        .find(|s| s.name == "noisy")
        .unwrap();
    assert_eq!(status.state, ServerState::Ready, "{status:#?}");
    for i in 0..3 {
        let result = hub
            .call_tool("mcp_noisy_echo", args(json!({"message": format!("n{i}")})))
            .await
            .unwrap();
        assert_eq!(text_of(&result), format!("echo: n{i}"));
    }
    assert_steady_works(&hub).await;
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_crashing_at_start_is_reported_and_retried() {
    let marked = Marked::new();
    let crash = marked.script("fault_crash_at_start.py");
    let toml = format!(
        "{}{}",
        stdio_entry("crashy", &python3(), &[crash.to_str().unwrap()], ""),
        steady(&marked)
    );
    let hub = hub_with(&toml).await;
    let status = wait_for(&hub, "crashy", |s| s.last_error.is_some()).await;
    assert_eq!(status.state, ServerState::Restarting, "{status:#?}");
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap()
            .ends_with(
                "` exited or closed its stdout before answering the handshake; its stderr ended with:\n    fatal: cannot start"
            ),
        "{status:#?}"
    );
    assert_eq!(status.stderr_tail, ["fatal: cannot start"]);
    let error = hub
        .call_tool("mcp_crashy_anything", args(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(error, HubError::UnknownTool { .. }), "{error}");
    assert_steady_works(&hub).await;
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_ignoring_sigterm_is_killed_and_its_process_group_with_it() {
    let marked = Marked::new();
    let script = marked.script("env_dump.py");
    let toml = stdio_entry(
        "stubborn",
        &python3(),
        &[
            script.to_str().unwrap(),
            "--ignore-sigterm",
            "--ignore-stdin-eof",
            "--spawn-grandchild",
        ],
        "",
    );
    let hub = hub_with(&toml).await;
    let pids = hub
        .call_tool("mcp_stubborn_pid", args(json!({})))
        .await
        .unwrap();
    let pids: serde_json::Value = serde_json::from_str(&text_of(&pids)).unwrap();
    let child = pids["pid"].as_u64().unwrap() as u32;
    let grandchild = pids["grandchild"].as_u64().unwrap() as u32;
    assert_eq!(
        pids["pgid"].as_u64().unwrap() as u32,
        child,
        "the child leads its own process group"
    );
    assert_eq!(hub.handshake("stubborn").unwrap().pid, Some(child));
    assert!(std::path::Path::new(&format!("/proc/{grandchild}")).exists());
    hub.shutdown().await;
    for pid in [child, grandchild] {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        // Gone, or at most a zombie of init's that is being reaped — never running.
        assert!(
            state.as_deref().is_none_or(|s| s
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim().starts_with('Z'))),
            "pid {pid} still alive: {state:?}"
        );
    }
    assert!(zombie_children().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_environment_is_cleared_but_for_base_and_whitelisted_names() {
    let marked = Marked::new();
    let script = marked.script("env_dump.py");
    // Whitelisted: HOME-style base names plus one pass-through and one literal with expansion. Everything
    // else in the test process's environment (CARGO_*, RUST_*, ...) must not reach the child.
    let toml = stdio_entry(
        "envy",
        &python3(),
        &[script.to_str().unwrap()],
        "env = [\"CARGO_PKG_NAME\", \"GREETING=hello ${CARGO_PKG_NAME}\", \"NOT_SET_ANYWHERE_XYZ\"]",
    );
    let hub = hub_with(&toml).await;
    let result = hub
        .call_tool("mcp_envy_env", args(json!({})))
        .await
        .unwrap();
    let env: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text_of(&result)).unwrap();
    let mut names: Vec<&str> = env.keys().map(String::as_str).collect();
    names.sort();
    let allowed = [
        "CARGO_PKG_NAME",
        "GREETING",
        "HOME",
        "PATH",
        "TEMP",
        "TMP",
        "TMPDIR",
        // CA bundles are not secrets: passed whenever Portico has them.
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    ];
    for name in &names {
        assert!(
            allowed.contains(name),
            "unexpected variable {name} reached the child: {names:?}"
        );
    }
    assert!(names.contains(&"PATH"));
    assert_eq!(env["CARGO_PKG_NAME"], "portico");
    assert_eq!(env["GREETING"], "hello portico");
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok() && !env.contains_key("CARGO_MANIFEST_DIR"));
    assert_nothing_left(hub, &marked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_dir_command_is_refused_and_not_retried() {
    let toml = stdio_entry("sneaky", std::path::Path::new("../../bin/sh"), &[], "");
    // The config check refuses it up front...
    assert!(portico_config::parse("t", &toml).is_err());
    // ...and the upstream layer refuses it again for configs built in code.
    let mut config = portico_config::parse(
        "t",
        &stdio_entry("sneaky", std::path::Path::new("sh"), &[], ""),
    )
    .unwrap();
    if let portico_config::Transport::Stdio { command, .. } = &mut config.mcp_servers[0].transport {
        *command = "../../bin/sh".into();
    }
    let hub = Hub::start_with_backoff(&config, fast_backoff());
    hub.wait_settled().await;
    let status = &hub.servers()[0];
    assert_eq!(status.state, ServerState::Failed, "{status:#?}");
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap()
            .contains("`..` path component"),
        "{status:#?}"
    );
    hub.shutdown().await;
}

/// After a crash, the server's tools vanished from the catalog until it was back: a call in between
/// got `no tool named ...` (-32602 at the door) and clients saw the tools go and come back (two list
/// changes). They stay listed; a call hears that the server is restarting and when it tries next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarting_server_keeps_its_tools_listed_and_says_when_it_is_back() {
    let marked = Marked::new();
    let dying = marked.script("fault_exit_mid_call.py");
    let toml = stdio_entry(
        "crashy",
        &python3(),
        &[dying.to_str().unwrap()],
        "timeout_secs = 60",
    );
    // A restart delay long enough that the call below is made inside it: 1.5 to 3 s.
    let backoff = RetryPolicy::unlimited(Duration::from_secs(3), Duration::from_secs(3));
    let hub = Hub::start_with_backoff(&parse_config(&toml), backoff);
    tokio::time::timeout(Duration::from_secs(120), hub.wait_settled())
        .await
        .expect("settle (test guard)");
    let names = |hub: &Hub| -> Vec<String> {
        hub.catalog()
            .tools()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    let listed = names(&hub);
    assert_eq!(listed, ["mcp_crashy_slow", "mcp_crashy_ok"]);
    let before = hub.catalog();

    let crashed = hub
        .call_tool("mcp_crashy_slow", args(json!({})))
        .await
        .unwrap_err();
    assert!(crashed.to_string().contains("`crashy`"), "{crashed}");
    let restarting = wait_for(&hub, "crashy", |s| s.state == ServerState::Restarting).await;
    assert_eq!(restarting.tools, 2, "still counted: {restarting:#?}");
    // The same catalog, not rebuilt: nothing changed for clients to hear about.
    assert!(std::sync::Arc::ptr_eq(&before, &hub.catalog()));
    let error = hub
        .call_tool("mcp_crashy_ok", args(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            HubError::Restarting { ref server, attempt: 1, next_in: Some(_), .. } if server == "crashy"
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("server `crashy` is restarting (attempt 1, next in "),
        "{message}"
    );
    // Why, in words, with the child's last stderr lines.
    assert!(
        message.contains(
            "(last error: server `crashy` exited or closed the connection; its stderr ended with:\n"
        ) && message.ends_with("\n    fault_exit_mid_call: exiting mid-call with code 3)"),
        "{message}"
    );

    let back = wait_for(&hub, "crashy", |s| {
        s.state == ServerState::Ready && s.connects >= 2
    })
    .await;
    assert_eq!(back.tools, 2);
    assert_eq!(names(&hub), listed);
    let ok = hub
        .call_tool("mcp_crashy_ok", args(json!({})))
        .await
        .unwrap();
    assert_eq!(text_of(&ok), "ok");
    assert_nothing_left(hub, &marked).await;
}
