//! Each real peer over each transport, and the protocol era negotiated with it.

use portico_core::ServerState;
use serde_json::json;

use crate::support::*;

fn assert_ready(
    hub: &portico_hub::Hub,
    name: &str,
    transport: &str,
    version: &str,
) -> portico_core::ServerStatus {
    let status = hub.servers().into_iter().find(|s| s.name == name).unwrap();
    assert_eq!(status.state, ServerState::Ready, "{status:#?}");
    assert_eq!(
        status.transport_detail.as_deref(),
        Some(transport),
        "{status:#?}"
    );
    assert_eq!(
        status.protocol_version.as_deref(),
        Some(version),
        "{status:#?}"
    );
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_negotiates_2025_11_25() {
    let everything = everything_js();
    let toml = stdio_entry(
        "everything",
        &node(),
        &[everything.to_str().unwrap(), "stdio"],
        "",
    );
    let hub = settled_hub(&toml).await;
    let status = assert_ready(&hub, "everything", "stdio", "2025-11-25");
    assert_eq!(status.tools, 17);
    let result = hub
        .call_tool("mcp_everything_echo", args(json!({"message": "hi"})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "Echo: hi");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let peer = HttpPeer::everything("streamableHttp");
    let toml = url_entry(
        "everything",
        "http",
        &peer.url("/mcp"),
        "allow_private_network = true",
    );
    let hub = settled_hub(&toml).await;
    assert_ready(&hub, "everything", "streamable-http", "2025-11-25");
    let result = hub
        .call_tool("mcp_everything_echo", args(json!({"message": "over http"})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "Echo: over http");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_label_on_a_legacy_server_falls_back_to_http_plus_sse() {
    let peer = HttpPeer::everything("sse");
    let toml = url_entry(
        "legacy",
        "sse",
        &peer.url("/sse"),
        "allow_private_network = true",
    );
    let hub = settled_hub(&toml).await;
    assert_ready(&hub, "legacy", "legacy-sse", "2025-11-25");
    let result = hub
        .call_tool("mcp_legacy_echo", args(json!({"message": "over sse"})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "Echo: over sse");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_label_on_a_streamable_server_uses_streamable_http() {
    let peer = HttpPeer::everything("streamableHttp");
    let toml = url_entry(
        "mislabelled",
        "sse",
        &peer.url("/mcp"),
        "allow_private_network = true",
    );
    let hub = settled_hub(&toml).await;
    assert_ready(&hub, "mislabelled", "streamable-http", "2025-11-25");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_reads_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello from disk\n").unwrap();
    let fs = filesystem_js();
    let root = dir.path().canonicalize().unwrap();
    let toml = stdio_entry(
        "files",
        &node(),
        &[fs.to_str().unwrap(), root.to_str().unwrap()],
        "",
    );
    let hub = settled_hub(&toml).await;
    assert_ready(&hub, "files", "stdio", "2025-11-25");
    let path = root.join("hello.txt");
    let result = hub
        .call_tool("mcp_files_read_text_file", args(json!({"path": path})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "hello from disk\n");
    let listing = hub
        .call_tool("mcp_files_list_directory", args(json!({"path": root})))
        .await
        .unwrap();
    assert!(
        text_of(&listing).contains("[FILE] hello.txt"),
        "{listing:?}"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_server_negotiates_2026_07_28_over_stdio() {
    let server = python_peer("modern_server.py");
    let toml = stdio_entry("modern", &venv_python(), &[server.to_str().unwrap()], "");
    let hub = settled_hub(&toml).await;
    let status = assert_ready(&hub, "modern", "stdio", "2026-07-28");
    assert_eq!(
        (
            status.tools,
            status.resources,
            status.resource_templates,
            status.prompts
        ),
        (7, 1, 1, 1)
    );
    let sum = hub
        .call_tool("mcp_modern_add", args(json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    let echo = hub
        .call_tool("mcp_modern_echo", args(json!({"message": "modern"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echo), "echo: modern");
    let catalog = hub.catalog();
    let greeting = hub
        .read_resource("portico://modern/fixture://greeting")
        .await
        .unwrap();
    assert_eq!(
        greeting["contents"][0]["text"],
        "Hello from the Portico modern fixture!"
    );
    assert_eq!(
        greeting["contents"][0]["uri"],
        "portico://modern/fixture://greeting"
    );
    let item = hub
        .read_resource("portico://modern/fixture://items/42")
        .await
        .unwrap();
    assert_eq!(item["contents"][0]["text"], "item 42");
    let prompt = hub
        .get_prompt(
            "mcp_modern_greet",
            args(json!({"name": "Ada"})),
            Default::default(),
        )
        .await
        .unwrap();
    assert!(
        serde_json::Value::Object(prompt.clone())
            .to_string()
            .contains("Please greet Ada warmly."),
        "{prompt:?}"
    );
    assert_eq!(
        catalog.resource_templates()[0].uri_template,
        "portico://modern/fixture://items/{id}"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_server_negotiates_2026_07_28_over_streamable_http() {
    use std::io::{BufRead, BufReader};
    let mut child = StopOnDrop(
        std::process::Command::new(venv_python())
            .arg(python_peer("modern_server.py"))
            .args(["--http", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("modern_server: listening on ") {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("modern server readiness line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let toml = url_entry("modern", "http", &url, "allow_private_network = true");
    let hub = settled_hub(&toml).await;
    assert_ready(&hub, "modern", "streamable-http", "2026-07-28");
    let sum = hub
        .call_tool("mcp_modern_add", args(json!({"a": 20, "b": 22})))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 42})));
    hub.shutdown().await;
    drop(child);
}
