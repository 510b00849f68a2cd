//! Servers slow to start, as a cold `npx -y`, a first `uvx` or a `docker run` pulling an image are:
//! they read nothing for 11 s or 40 s, then answer what waited in the pipe, the era probe first.
//! Each connects, in both protocol eras, in `portico servers`, `portico doctor` and `portico serve`,
//! and `serve` shows it `starting` with its elapsed time and its last stderr line meanwhile.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::*;
use crate::support::*;

/// (name, seconds before it reads anything, era, the protocol version it ends up on).
const SLOW: &[(&str, u32, &str, &str)] = &[
    ("late11_handshake", 11, "handshake", "2025-11-25"),
    ("late40_handshake", 40, "handshake", "2025-11-25"),
    ("late11_discover", 11, "discover", "2026-07-28"),
    ("late40_discover", 40, "discover", "2026-07-28"),
];

fn slow_config() -> String {
    let slow_start = python_peer("slow_start.py");
    let mut toml = String::new();
    for (name, delay, era, _) in SLOW {
        let delay = delay.to_string();
        let (server_python, server) = match *era {
            // A stdlib server of the handshake era, which answers `server/discover` with an error.
            "handshake" => (python3(), python_peer("catalog_server.py")),
            // The Python SDK's server, which answers `server/discover`.
            _ => (venv_python(), python_peer("modern_server.py")),
        };
        let mut args = vec![
            slow_start.to_str().unwrap(),
            &delay,
            server_python.to_str().unwrap(),
            server.to_str().unwrap(),
        ];
        if *era == "handshake" {
            args.extend(["--tools", "echo,add"]);
        }
        // The default bounds: nothing here raises `startup_timeout_secs` or `timeout_secs`.
        toml.push_str(&stdio_entry(name, &python3(), &args, ""));
    }
    toml
}

#[test]
fn slow_servers_connect_in_servers_in_both_eras() {
    let home = Home::new(&slow_config());
    let (code, stdout, stderr) = home.run(&["servers", "--json", "--standalone"], &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let servers: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    for (name, _, _, version) in SLOW {
        let status = servers
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == *name)
            .unwrap_or_else(|| panic!("{name} missing: {stdout}"));
        assert_eq!(status["state"], "ready", "{status}");
        assert_eq!(status["protocol_version"], *version, "{status}");
        assert!(status["last_error"].is_null(), "{status}");
    }
    assert!(!stderr.contains("uncorrelated"), "{stderr}");
}

#[test]
fn slow_servers_pass_doctor_in_both_eras() {
    let home = Home::new(&slow_config());
    let (_, stdout, stderr) = home.run(&["doctor"], &[]);
    for (name, _, _, version) in SLOW {
        let line = stdout
            .lines()
            .find(|l| l.contains(&format!("server `{name}`")))
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}\n{stderr}"));
        assert!(line.starts_with("ok"), "{line}\n{stdout}");
        assert!(line.contains(&format!("stdio, {version},")), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_servers_show_starting_then_connect_in_serve() {
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
        slow_config()
    ));
    let daemon = tokio::task::block_in_place(|| Daemon::start(&home));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let servers = || async {
        let answer: Value = http
            .get(format!("{}/api/mcp/servers", daemon.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["connected"].as_array().unwrap().clone()
    };
    let guard = Instant::now() + Duration::from_secs(150);
    let mut seen_starting = None;
    loop {
        assert!(
            Instant::now() < guard,
            "never all ready: {:#?}",
            servers().await
        );
        let now = servers().await;
        let late = now
            .iter()
            .find(|s| s["name"] == "late40_handshake")
            .unwrap();
        if late["state"] == "starting"
            && late["starting_secs"].as_u64().is_some_and(|secs| secs >= 2)
            && late["last_stderr"]
                .as_str()
                .is_some_and(|line| line.starts_with("slow_start: fetching packages, "))
        {
            seen_starting = Some(late.clone());
        }
        if now.iter().all(|s| s["state"] == "ready") {
            for (name, _, _, version) in SLOW {
                let status = now.iter().find(|s| s["name"] == *name).unwrap();
                assert_eq!(status["protocol_version"], *version, "{status}");
                assert!(status.get("starting_secs").unwrap().is_null(), "{status}");
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let starting = seen_starting.expect("late40_handshake was never seen starting");
    assert!(starting["last_error"].is_null(), "{starting}");
    assert_eq!(starting["connected"], false, "{starting}");
}
