//! Headless Chromium for the browser tests: Debian's, driven by playwright-core through the
//! scripts in tests/peers/js, shared by the door tests and the replica tests (by `#[path]`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{node, peers_dir};

/// Debian's Chromium, or `None` after saying loudly why the browser tests cannot run. With
/// `PORTICO_REQUIRE_CHROMIUM=1` (scripts/test sets it; its peer install puts Chromium there) a
/// missing browser is a failure, never a skip.
pub(crate) fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PORTICO_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.exists() {
        return Some(path);
    }
    let required = std::env::var("PORTICO_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "PORTICO_REQUIRE_CHROMIUM=1 but there is no Chromium at {}: run scripts/install-test-peers (it installs Debian's chromium) or set PORTICO_TEST_CHROMIUM",
        path.display()
    );
    eprintln!(
        "\n*** SKIPPED: no Chromium at {} (set PORTICO_TEST_CHROMIUM, or run scripts/install-test-peers, which installs Debian's chromium); this browser test did NOT run ***\n",
        path.display()
    );
    None
}

/// Runs `tests/peers/js/SCRIPT` with `args` (and `--timeout-ms 20000`) in `chromium` and returns
/// the JSON report it prints last; every line before it with an `event` field goes to `on_event`
/// as it arrives (the script waits there for the change the test makes). The whole run is bounded
/// by a test guard of 240 s.
pub(crate) fn browser_script(
    chromium: &Path,
    script: &str,
    args: &[&str],
    mut on_event: impl FnMut(&str),
) -> Value {
    let mut child = Command::new(node())
        .arg(peers_dir().join("js").join(script))
        .args(["--timeout-ms", "20000"])
        .args(args)
        .env("PORTICO_TEST_CHROMIUM", chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // Read as it comes, so that a chatty script never blocks on a full pipe.
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut report = None;
    while report.is_none() {
        match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.trim().is_empty() => {}
            Ok(line) => {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("{script} printed {line:?}: {e}"));
                match value["event"].as_str() {
                    Some(event) => on_event(event),
                    None => report = Some(value),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("{script} did not finish within 240 s (test guard)");
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = child.wait();
    let errors = errors.join().unwrap();
    report.unwrap_or_else(|| panic!("{script} printed no report:\n{errors}"))
}
