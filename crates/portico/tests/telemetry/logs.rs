//! The log's settings: `PORTICO_LOG` must be a filter, `--log-format json` writes JSON lines.

use std::time::Duration;

use serde_json::Value;

use crate::client::*;

#[test]
fn an_invalid_portico_log_is_an_error_and_the_command_does_not_run() {
    let home = Home::new("");
    for bad in ["garbage", "portico_hub=loud"] {
        let (code, stdout, stderr) = home.run(&["config", "path"], &[("PORTICO_LOG", bad)]);
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(stdout, "", "the command ran: {stdout}");
        assert!(
            stderr.starts_with(&format!("error: PORTICO_LOG=`{bad}` is not a log filter: ")),
            "{stderr}"
        );
        assert!(
            stderr.contains("e.g. PORTICO_LOG=debug or PORTICO_LOG=info,portico_hub=trace"),
            "{stderr}"
        );
    }
    let (code, stdout, stderr) = home.run(&["config", "path"], &[("PORTICO_LOG_FORMAT", "yaml")]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(
        stderr,
        "error: PORTICO_LOG_FORMAT=`yaml` is not a log format: use text or json, or unset it\n"
    );
    // A valid one runs the command.
    let (code, stdout, stderr) =
        home.run(&["config", "path"], &[("PORTICO_LOG", "info,rmcp=warn")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("config.toml"), "{stdout}");
}

#[test]
fn log_format_json_writes_one_json_object_per_log_line() {
    let home = Home::new("[server]\nlisten = \"127.0.0.1:0\"\n");
    let mut daemon = Daemon::start_with_args(&home, &["--log-format", "json"], &[]);
    daemon.wait_for_line("portico: ready");
    assert!(daemon.stop().success());
    // Everything it wrote: the lines read while waiting, then the rest up to its exit.
    let mut lines = daemon.take_seen();
    while let Ok(line) = daemon.log.recv_timeout(Duration::from_secs(10)) {
        lines.push(line);
    }
    // The CLI's own status lines (`portico: listening on ...`) are not log lines; every log line
    // is a JSON object, none is text.
    let (json, other): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|line| line.starts_with('{'));
    for line in other {
        assert!(
            !["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                .iter()
                .any(|level| line.contains(&format!(" {level} "))),
            "a text log line: {line:?}"
        );
    }
    let logged: Vec<Value> = json
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    assert!(!logged.is_empty(), "no log lines: {lines:#?}");
    for line in &logged {
        assert!(line["level"].is_string(), "{line}");
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line["fields"]["message"].is_string(), "{line}");
    }
    assert!(
        logged.iter().any(|line| line["fields"]["message"]
            .as_str()
            .unwrap()
            .starts_with("config: ")),
        "{logged:#?}"
    );
}
