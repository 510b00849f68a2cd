//! A held call's message names the approval page by the daemon's full URL.

use crate::client::*;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"

[[policies]]
tools = ["memory_store"]
callers = ["client:*"]
action = "approve"
reason = "an owner approves what clients remember"
"#;

#[test]
fn a_held_call_gives_the_approval_pages_full_url() {
    let home = Home::new(CONFIG);
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let (code, stdout, stderr) = home.run(
        &[
            "call",
            "memory_store",
            "--args",
            r#"{"key": "k", "value": "v"}"#,
            "--elicit",
            "decline",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("error: Portico did not run `memory_store`")
    );
    let message = lines.next().unwrap_or_default();
    let id = message
        .split("portico approvals approve ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        message,
        format!(
            "call to `memory_store` requires approval and was not run: an owner approves what clients remember; approve it with `portico approvals approve {id}` or open {}/approvals/{id}, then retry the same call",
            daemon.base
        )
    );
    daemon.stop();
}
