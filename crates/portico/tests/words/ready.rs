//! What the daemon's ready line counts, and `doctor` on an unset `${VAR}`: one warning, as
//! `config check` calls it, naming the variable and the fix.

use crate::client::*;
use crate::support::*;

const DEAD: &str = "[[mcp_servers]]\nname = \"dead\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"/nonexistent/portico-test-server\"\n";

#[test]
fn the_ready_line_counts_built_ins_and_only_the_servers_that_connected() {
    let home = Home::new(&config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{DEAD}"),
        &["--tools", "t1"],
    ));
    let (code, tools, stderr) = home.run(&["tools", "--json", "--standalone"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let tools: Vec<serde_json::Value> = serde_json::from_str(&tools).unwrap();
    let local = tools.iter().filter(|t| t["server"].is_null()).count();
    assert!(local >= 7, "{local}");

    let mut daemon = Daemon::start(&home);
    let ready = daemon.wait_for_line("portico: ready;");
    let expected = regex::Regex::new(&format!(
        r"^portico: ready; {} tool\(s\): {local} built-in or agent, 1 from 1 of 2 server\(s\); not connected: `dead` retrying \(\d+ failed attempts?, (next in \d+s|trying again now|trying again for \d+s)\) \(`portico servers` says why\)\. Ctrl-C to stop\.$",
        local + 1
    ))
    .unwrap();
    assert!(expected.is_match(&ready), "{ready}");
    daemon.stop();
}

#[test]
fn doctor_reports_an_unset_variable_once_as_a_warning_with_its_fix() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
        stdio_entry(
            "envy",
            &python3(),
            &[python_peer("catalog_server.py").to_str().unwrap()],
            "env = { TOKEN = \"${PORTICO_WORDS_UNSET_TOKEN}\" }\n",
        )
    );
    let home = Home::new(&config);
    let (code, stdout, stderr) = home.run(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let about: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("PORTICO_WORDS_UNSET_TOKEN"))
        .collect();
    assert_eq!(about.len(), 1, "{stdout}");
    assert!(
        about[0].starts_with("warn  env: ")
            && about[0].ends_with(
                "references ${PORTICO_WORDS_UNSET_TOKEN}, which is set neither in this environment nor in the secret store; fix: run `portico secret set PORTICO_WORDS_UNSET_TOKEN`, or export PORTICO_WORDS_UNSET_TOKEN before starting Portico"
            ),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(" checks: 0 failed, 1 warning(s)\n"),
        "{stdout}"
    );

    // `config check` says the same, as a warning, and exits 0.
    let (code, stdout, stderr) = home.run(&["config", "check"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("warning: "), "{stdout}");
}
