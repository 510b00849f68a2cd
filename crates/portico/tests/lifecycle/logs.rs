//! `portico logs NAME [-f]`: a server's stderr as the daemon keeps it, across restarts, until the
//! server is removed.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::client::{Daemon, Home};
use crate::commands::{command, portico};
use crate::support::*;

/// The lines a child writes to a pipe, read on a thread.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn next_line(lines: &mpsc::Receiver<String>, what: &str) -> String {
    lines
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("no line from {what} within 30 s (test guard)"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_show_what_a_server_wrote_across_restarts_and_follow_it_until_it_is_removed() {
    let catalog = python_peer("catalog_server.py");
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        stdio_entry(
            "cat",
            &python3(),
            &[catalog.to_str().unwrap(), "--sleep-tool"],
            ""
        )
    ));

    // Without a daemon nothing is kept: the command says so and how to start one.
    let (code, _, stderr) = portico(&home, &["logs", "cat"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "no daemon is running, and a server's stderr is kept by the daemon that runs it: start one with `portico serve`"
        ),
        "{stderr}"
    );

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let (code, stdout, stderr) = portico(&home, &["logs", "cat"]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    assert!(
        stderr.contains("`cat` has written nothing to stderr"),
        "{stderr}"
    );
    let (code, _, stderr) = portico(&home, &["logs", "nope"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no server `nope` in the config the daemon runs; it has: cat"),
        "{stderr}"
    );

    let sleep = ["call", "mcp_cat_sleep", "--args", "{\"seconds\": 0}"];
    let (code, stdout, stderr) = portico(&home, &sleep);
    assert_eq!((code, stdout.as_str()), (0, "slept\n"), "{stderr}");
    let (code, stdout, _) = portico(&home, &["logs", "cat"]);
    assert_eq!((code, stdout.as_str()), (0, "sleep started\n"));

    // Follow: the kept line first, then each new one.
    let mut follower = StopOnDrop(
        command(&home, &["logs", "cat", "-f"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lines_of(follower.0.stdout.take().unwrap());
    let err = lines_of(follower.0.stderr.take().unwrap());
    assert_eq!(next_line(&out, "logs -f"), "sleep started");
    let (code, _, _) = portico(&home, &sleep);
    assert_eq!(code, 0);
    assert_eq!(next_line(&out, "logs -f"), "sleep started");

    // A restart keeps the log.
    let (code, _, stderr) = portico(&home, &["restart", "cat"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, _) = portico(&home, &sleep);
    assert_eq!(code, 0);
    assert_eq!(next_line(&out, "logs -f"), "sleep started");
    let (code, stdout, _) = portico(&home, &["logs", "cat", "-n", "2"]);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "sleep started\nsleep started\n")
    );
    // So does a changed entry (disabled, enabled again: the daemon restarts it twice).
    for change in ["disable", "enable"] {
        let (code, _, stderr) = portico(&home, &[change, "cat"]);
        assert_eq!(code, 0, "{stderr}");
    }
    let (_, stdout, _) = portico(&home, &["logs", "cat"]);
    assert_eq!(stdout, "sleep started\n".repeat(3));

    // Removing the server ends the follower, and its log is gone.
    let (code, _, stderr) = portico(&home, &["remove", "cat"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        next_line(&err, "logs -f stderr"),
        "`cat` was removed from the config"
    );
    assert!(follower.0.wait().unwrap().success());
    let (code, _, stderr) = portico(&home, &["logs", "cat"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no server `cat`"), "{stderr}");
    daemon.stop();
}
