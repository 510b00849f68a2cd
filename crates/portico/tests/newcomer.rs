//! A newcomer's first ten minutes on a fresh home, through the real binary: find a server in an MCP
//! registry (`portico search`), add it by its registry name (`portico add`), store the secret it
//! needs (`portico secret set`), see its tools (`portico tools`), point Claude Desktop at Portico
//! (`portico export claude --write`), and have `portico mcp`, started as an IDE starts it with an
//! empty environment, serve that server with the stored secret.
//!
//! The registry is the stdlib fixture over real `server.json` documents (tests/peers/registry);
//! the registry's hosted server is another Portico daemon that requires a bearer token.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::*;
use crate::support::*;

const TOKEN: &str = "newcomer-S3NTINEL-7f3a";

/// The fixture registry, serving its hosted weather server at `remote`'s URL.
fn registry(remote: &str) -> (StopOnDrop, String) {
    let mut child = Command::new(python3())
        .arg(python_peer("registry_server.py"))
        .arg("--substitute")
        .arg(format!("https://weather.example.com/mcp={remote}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    (StopOnDrop(child), url)
}

/// `portico ARGS` as the newcomer runs it: their HOME (the data dir under it), their PATH, nothing
/// else of this environment (no D-Bus session: the secret store is the file).
fn newcomer(home: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn data_dir(home: &Path) -> PathBuf {
    home.join(".local/share/portico")
}

#[test]
fn from_a_registry_search_to_an_ide_started_portico_mcp_with_a_stored_secret() {
    // The hosted server: a daemon whose door requires the token.
    let upstream_home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n{}",
        config_with("", &["--tools", "t1"])
    ));
    let upstream = Daemon::start(&upstream_home);
    let (_registry, registry_url) = registry(&format!("{}/mcp", upstream.base));

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    std::fs::create_dir_all(data_dir(home)).unwrap();
    let config_path = data_dir(home).join("config.toml");
    std::fs::write(
        &config_path,
        format!("[registry]\nurl = \"{registry_url}\"\nallow_private_network = true\n"),
    )
    .unwrap();

    // Search.
    let (code, stdout, stderr) = newcomer(home, &["search", "weather"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    let hosted = stdout
        .lines()
        .find(|l| l.starts_with("com.example.weather/remote "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        hosted.contains(" 3.0.1 ") && hosted.contains(" remote "),
        "{hosted}"
    );

    // Add it by its registry name; its token is a secret the entry only refers to.
    let (code, stdout, stderr) = newcomer(
        home,
        &[
            "add",
            "com.example.weather/remote",
            "--allow-private-network",
        ],
        "",
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("com.example.weather/remote 3.0.1 from ")
            && stdout.contains("added `remote` to ")
            && stdout.contains(
                "`remote` needs secret REMOTE_API_TOKEN: `portico secret set REMOTE_API_TOKEN`"
            ),
        "{stdout}"
    );
    let config = std::fs::read_to_string(&config_path).unwrap();
    assert!(
        config.contains(&format!("url = \"{}/mcp\"", upstream.base))
            && config.contains("headers = { Authorization = \"Bearer ${REMOTE_API_TOKEN}\" }"),
        "{config}"
    );
    assert!(!config.contains(TOKEN), "{config}");

    // Store the secret, from stdin.
    let (code, stdout, stderr) = newcomer(home, &["secret", "set", "REMOTE_API_TOKEN"], TOKEN);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!format!("{stdout}{stderr}").contains(TOKEN));
    let (_, listed, _) = newcomer(home, &["secret", "list"], "");
    assert_eq!(listed, "REMOTE_API_TOKEN  file\n");

    // Its tools are listed.
    let (code, stdout, stderr) = newcomer(home, &["tools"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("mcp_remote_mcp_cat_t1  [remote]  The tool t1"),
        "{stdout}{stderr}"
    );

    // Claude Desktop's own file: Portico's entry added, the rest kept.
    let claude = home.join(".config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    std::fs::write(
        &claude,
        "{\n  \"globalShortcut\": \"Ctrl+Space\",\n  \"mcpServers\": {\n    \"memory\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}\n  }\n}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = newcomer(home, &["export", "claude", "--write"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    let binary = env!("CARGO_BIN_EXE_portico");
    assert_eq!(
        std::fs::read_to_string(&claude).unwrap(),
        format!(
            "{{\n  \"globalShortcut\": \"Ctrl+Space\",\n  \"mcpServers\": {{\n    \"memory\": {{\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}},\n    \"portico\": {{\n      \"command\": \"{binary}\",\n      \"args\": [\"mcp\"]\n    }}\n  }}\n}}\n"
        )
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    let entry = &written["mcpServers"]["portico"];

    // Claude Desktop starts that entry with nothing of the user's shell: HOME only.
    let mut ide = Command::new(entry["command"].as_str().unwrap());
    ide.args(
        entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    )
    .env_clear()
    .env("HOME", home);
    let mut session = StdioSession::spawn(ide);
    session.initialize("2025-06-18");
    let (listed, _) = session.request(2, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp_remote_mcp_cat_t1"), "{names:?}");
    let (called, _) = session.request(
        3,
        "tools/call",
        json!({"name": "mcp_remote_mcp_cat_t1", "arguments": {}}),
    );
    assert_eq!(
        called["result"]["content"],
        json!([{"type": "text", "text": "t1 called"}]),
        "{called}"
    );
    let stderr = session.stderr.lock().unwrap().clone();
    assert!(!stderr.contains(TOKEN), "{stderr}");
    session.finish();
    drop(upstream);
}
