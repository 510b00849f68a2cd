//! `portico a2a send NAME` reaches one of Portico's own agents by name (at the daemon over A2A, or
//! run in this process), and `conversations show` without an id offers the recent ones.

use crate::client::*;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"

[[agents]]
name = "echo"
description = "Echoes what it is told"
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "echo: {{message}}" } ] } ]
"#;

fn owner_only(home: &Home) {
    std::fs::set_permissions(
        home.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
}

#[test]
fn a2a_send_reaches_a_local_agent_by_name_in_process_and_at_the_daemon() {
    let home = Home::new(CONFIG);
    owner_only(&home);

    let (code, stdout, stderr) = home.run(&["a2a", "send", "echo", "hello"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "echo: hello\n", "{stderr}");
    assert!(
        stderr.starts_with(
            "portico: `echo` (no daemon running: the agent runs in this process)\nstate: completed\ncontext: c_"
        ),
        "{stderr}"
    );

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let (code, stdout, stderr) = home.run(&["a2a", "send", "echo", "hi there"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "echo: hi there\n", "{stderr}");
    assert!(
        stderr.starts_with(&format!("portico: echo at {}/a2a/echo (", daemon.base)),
        "{stderr}"
    );
    assert!(stderr.contains("state: completed\n"), "{stderr}");

    // A name that is neither: what is configured.
    let (code, _, stderr) = home.run(&["a2a", "send", "nobody", "hi"], &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no agent named `nobody` in ")
            && stderr.contains("(configured: echo); pass the agent's URL"),
        "{stderr}"
    );
    daemon.stop();
}

#[test]
fn conversations_show_without_an_id_lists_the_recent_ones_and_how_to_pick() {
    let home = Home::new(CONFIG);
    owner_only(&home);
    let (code, _, stderr) = home.run(&["conversations", "show"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.starts_with("no conversations yet"), "{stderr}");

    let (code, _, stderr) = home.run(&["a2a", "send", "echo", "remember me"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("context: "))
        .unwrap_or_else(|| panic!("{stderr}"))
        .to_string();

    let check = |stdout: &str, stderr: &str| {
        assert!(
            stdout.starts_with(
                "recent conversations (`portico conversations list` lists them all):\n"
            ),
            "{stdout}"
        );
        assert!(stdout.contains(&id), "{stdout}");
        assert_eq!(
            stderr,
            format!(
                "which one? give its id, e.g. `portico conversations show {id}` (the most recent)\n"
            )
        );
    };
    let (code, stdout, stderr) = home.run(&["conversations", "show", "--standalone"], &[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    check(&stdout, &stderr);

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let (code, stdout, stderr) = home.run(&["conversations", "show"], &[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    check(&stdout, &stderr);
    daemon.stop();
}
