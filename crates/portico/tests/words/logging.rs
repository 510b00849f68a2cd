//! One-shot commands log in words (no timestamps, targets or fields), only what the user must act
//! on, never beside their answer on stdout; `portico mcp` logs an error answer in words, never as
//! a Rust debug struct.

use serde_json::json;

use crate::client::*;

const DEAD: &str = "[[mcp_servers]]\nname = \"dead\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"/nonexistent/portico-test-server\"\n";

#[test]
fn a_one_shot_command_says_once_in_words_what_needs_acting_on() {
    let home = Home::new(DEAD);
    // As Portico would have made it (this test's temporary dir may be open to others).
    std::fs::set_permissions(
        home.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let (code, stdout, stderr) = home.run(&["tools", "--standalone"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.lines().all(|l| l.contains("  [")), "{stdout}");
    let warning = regex::Regex::new(
        r"^warning: server `dead` is retrying \(\d+ failed attempts?, (next in \d+s|trying again now|trying again for \d+s)\): cannot start `/nonexistent/portico-test-server`: no such program \(is it installed, and on the PATH Portico was started with\?\)\n$",
    )
    .unwrap();
    assert!(warning.is_match(&stderr), "{stderr}");
}

#[test]
fn portico_mcp_logs_an_error_answer_in_words() {
    let home = Home::new("");
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-06-18");
    let (answer, _) = session.request(
        2,
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    session.wait_for_stderr("answered a request with error -32602: no tool named `no_such_tool`");
    let log = session.stderr.lock().unwrap().clone();
    assert!(!log.contains("ErrorData"), "{log}");
    assert!(!log.contains("ErrorCode("), "{log}");
    session.finish();
}
