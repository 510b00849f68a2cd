//! Both OAuth halves at once: one Portico's door protected by `[server.oauth]`, another
//! Portico its OAuth client. `portico auth login` discovers everything from the door's 401 and
//! metadata, registers with the test's authorization server, and logs in through a headless
//! `$BROWSER`; then `portico call` reaches the door's tool with the stored token, as the principal
//! the token names, within its scope.

use crate::client::Home;
use crate::door::Door;
use crate::sdk::PythonIssuer;
use crate::support::repo_root;

#[tokio::test(flavor = "multi_thread")]
async fn portico_logs_in_to_a_portico_door_and_calls_within_its_tokens_scope() {
    let issuer = PythonIssuer::start(&["--grant", "mcp:time", "--sub", "portico-user"]);
    let door = Door::start(&issuer.url, "");
    let client = Home::new(&format!(
        "[[mcp_servers]]\nname = \"door\"\nallow_private_network = true\n[mcp_servers.transport]\ntype = \"http\"\nurl = \"{}\"\n",
        door.audience
    ));
    let browser = repo_root().join("tests/conformance/browser-follow.py");
    let browser = browser.to_str().unwrap();

    // Before a login the door refuses, and the client says what to do.
    let (code, _, stderr) = tokio::task::block_in_place(|| {
        client.run(&["call", "mcp_door_time_now", "--standalone"], &[])
    });
    assert_ne!(code, 0);
    assert!(stderr.contains("run `portico auth login door`"), "{stderr}");

    let (code, stdout, stderr) = tokio::task::block_in_place(|| {
        client.run(&["auth", "login", "door"], &[("BROWSER", browser)])
    });
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // The challenge names both scopes; the issuer grants only mcp:time, so the door lists only
    // the tools mcp:time maps to.
    assert!(
        stdout.starts_with("logged in to `door` (scopes: mcp:time); it lists 2 tool(s)."),
        "{stdout}"
    );

    let (code, stdout, stderr) = tokio::task::block_in_place(|| {
        client.run(&["call", "mcp_door_time_now", "--standalone"], &[])
    });
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "time_now called");
    // Outside the token's scope: not even listed.
    let (code, _, stderr) = tokio::task::block_in_place(|| {
        client.run(&["call", "mcp_door_notes_list", "--standalone"], &[])
    });
    assert_ne!(code, 0);
    assert!(stderr.contains("mcp_door_notes_list"), "{stderr}");
}
