//! `--config X` while a daemon runs another file: X's servers, from this process, said in a note;
//! the daemon's own file still goes through the daemon.

use crate::client::*;

#[test]
fn an_explicit_other_config_beside_a_daemon_runs_that_config() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\n",
        &["--tools", "t1"],
    ));
    // As Portico would have made it (this test's temporary dir may be open to others).
    std::fs::set_permissions(
        home.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");

    // The daemon's file: the daemon answers.
    let (code, stdout, stderr) = home.run(&["tools"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mcp_cat_t1  [cat]"), "{stdout}");
    assert_eq!(stderr, "");

    // Another file, named with --config: its servers, not the daemon's.
    let other = home.dir.path().join("other.toml");
    std::fs::write(&other, config_with("", &["--tools", "o1"])).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(["tools", "--config"])
        .arg(&other)
        .env("PORTICO_HOME", home.dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("mcp_cat_o1  [cat]"), "{stdout}");
    assert!(!stdout.contains("mcp_cat_t1"), "{stdout}");
    assert_eq!(
        stderr,
        format!(
            "note: the daemon (pid {}, {}) runs config {}; --config {} is another file, so this runs in this process on it\n",
            daemon.child.id(),
            daemon.base,
            home.config().display(),
            other.display()
        )
    );
    daemon.stop();
}
