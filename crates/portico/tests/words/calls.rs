//! Why a call failed, in words: Portico's own schema check refused the arguments (the tool never
//! ran), or the tool's server is down; in this process and through a daemon alike.

use crate::client::*;

fn dead_server_config() -> String {
    "[[mcp_servers]]\nname = \"dead\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"/nonexistent/portico-test-server\"\n".to_string()
}

fn assert_refused_arguments(code: i32, stdout: &str, stderr: &str) {
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "error: Portico refused the arguments: they do not match the tool's inputSchema, so `memory_recall` did not run\n\
         invalid arguments for `memory_recall`: /limit: \"x\" is not of type \"integer\"\n",
        "{stderr}"
    );
    assert!(!stdout.contains("the tool reported a failure"));
}

fn assert_server_down(code: i32, stderr: &str) {
    assert_eq!(code, 1, "{stderr}");
    let down = regex::Regex::new(
        r"error: no tool named `mcp_dead_anything`: its server `dead` is down, retrying \(\d+ failed attempts?, (next in \d+s|trying again now|trying again for \d+s)\): cannot start `/nonexistent/portico-test-server`: no such program",
    )
    .unwrap();
    assert!(down.is_match(stderr), "{stderr}");
    assert!(
        stderr.contains("`portico servers` shows its state"),
        "{stderr}"
    );
}

#[test]
fn a_call_says_portico_refused_the_arguments_or_that_the_server_is_down() {
    let home = Home::new(&dead_server_config());
    let bad = ["call", "memory_recall", "--args", r#"{"limit": "x"}"#];

    let (code, stdout, stderr) = home.run(&[&bad[..], &["--standalone"]].concat(), &[]);
    assert_refused_arguments(code, &stdout, &stderr);
    let (code, _, stderr) = home.run(&["call", "mcp_dead_anything", "--standalone"], &[]);
    assert_server_down(code, &stderr);
    // A field the tool does not take is named, with the ones it takes.
    let (code, stdout, stderr) = home.run(
        &[
            "call",
            "system_time",
            "--args",
            r#"{"x": 1}"#,
            "--standalone",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stdout,
        "error: Portico refused the arguments: they do not match the tool's inputSchema, so `system_time` did not run\n\
         invalid arguments for `system_time`: unexpected field `x`; the tool takes no arguments\n"
    );

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line_containing("cannot start `/nonexistent/portico-test-server`");
    let (code, stdout, stderr) = home.run(&bad, &[]);
    assert_refused_arguments(code, &stdout, &stderr);
    let (code, _, stderr) = home.run(&["call", "mcp_dead_anything"], &[]);
    assert_server_down(code, &stderr);
    assert!(stderr.contains("(answered by "), "{stderr}");
    daemon.stop();
}
