//! The aggregated catalog end to end: naming collisions, odd and long names, pagination, refresh on
//! list_changed in both eras, and an old server's era.

use std::time::Duration;

use portico_core::naming::{MAX_TOOL_NAME_LEN, is_valid_tool_name, stable_hash};
use portico_core::{ServerState, ServerStatus};
use portico_hub::Hub;
use serde_json::json;

use crate::support::*;

fn catalog_server(name: &str, flags: &[&str]) -> String {
    let script = python_peer("catalog_server.py");
    let mut args = vec![script.to_str().unwrap().to_string()];
    args.extend(flags.iter().map(|f| f.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    stdio_entry(name, &python3(), &args, "")
}

async fn wait_until(hub: &Hub, pred: impl Fn(&Hub) -> bool) {
    let mut changes = hub.subscribe();
    let wait = async {
        while !pred(hub) {
            changes.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("condition not reached (test guard)");
}

fn status(hub: &Hub, name: &str) -> ServerStatus {
    hub.servers().into_iter().find(|s| s.name == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_names_are_disambiguated_and_routed_exactly() {
    let toml = format!(
        "{}{}",
        catalog_server("a", &["--tools", "b_x"]),
        catalog_server("a_b", &["--tools", "x"])
    );
    let hub = settled_hub(&toml).await;
    let first = format!("mcp_a_b_x_{}", stable_hash("a", "b_x"));
    let second = format!("mcp_a_b_x_{}", stable_hash("a_b", "x"));
    let catalog = hub.catalog();
    let mut names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    names.sort();
    let mut expected = vec![first.as_str(), second.as_str()];
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(catalog.collisions().len(), 1);
    assert_eq!(
        text_of(&hub.call_tool(&first, args(json!({}))).await.unwrap()),
        "b_x called"
    );
    assert_eq!(
        text_of(&hub.call_tool(&second, args(json!({}))).await.unwrap()),
        "x called"
    );
    assert!(hub.call_tool("mcp_a_b_x", args(json!({}))).await.is_err());
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_and_odd_names_become_valid_and_still_route() {
    let long = "very_long_tool_name_".repeat(5);
    let odd = "Get-Weather/Now ü";
    let tools = format!("{long},{odd}");
    let hub = settled_hub(&catalog_server("My-Server.v2", &["--tools", &tools])).await;
    let catalog = hub.catalog();
    assert_eq!(catalog.tools().len(), 2);
    for tool in catalog.tools() {
        assert!(is_valid_tool_name(&tool.name), "{}", tool.name);
        assert!(tool.name.len() <= MAX_TOOL_NAME_LEN);
        let result = hub.call_tool(&tool.name, args(json!({}))).await.unwrap();
        assert_eq!(text_of(&result), format!("{} called", tool.upstream_name));
    }
    assert!(catalog.tool("mcp_my_server_v2_get_weather_now__").is_some());
    let long_tool = catalog
        .tools()
        .iter()
        .find(|t| t.upstream_name == long)
        .unwrap();
    assert_eq!(long_tool.name.len(), MAX_TOOL_NAME_LEN);
    assert!(
        long_tool
            .name
            .ends_with(&stable_hash("My-Server.v2", &long))
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_is_followed_across_pages() {
    let tools: Vec<String> = (0..25).map(|i| format!("t{i}")).collect();
    let toml = catalog_server(
        "paged",
        &[
            "--tools",
            &tools.join(","),
            "--prompts",
            "7",
            "--resources",
            "9",
            "--page-size",
            "4",
        ],
    );
    let hub = settled_hub(&toml).await;
    let s = status(&hub, "paged");
    assert_eq!((s.tools, s.prompts, s.resources), (25, 7, 9), "{s:#?}");
    let catalog = hub.catalog();
    assert!(catalog.tool("mcp_paged_t24").is_some());
    assert!(catalog.prompt("mcp_paged_prompt_6").is_some());
    let read = hub
        .read_resource("portico://paged/mem://r/8")
        .await
        .unwrap();
    assert_eq!(read["contents"][0]["text"], "resource 8");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_server_keeps_its_2024_11_05_era() {
    let hub = settled_hub(&catalog_server(
        "old",
        &["--tools", "t", "--only-version", "2024-11-05"],
    ))
    .await;
    let s = status(&hub, "old");
    assert_eq!(s.state, ServerState::Ready, "{s:#?}");
    assert_eq!(s.protocol_version.as_deref(), Some("2024-11-05"));
    assert_eq!(
        text_of(&hub.call_tool("mcp_old_t", args(json!({}))).await.unwrap()),
        "t called"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_refreshes_the_catalog_in_the_handshake_era() {
    let hub = settled_hub(&catalog_server("dyn", &["--tools", "first", "--dynamic"])).await;
    assert!(hub.catalog().tool("mcp_dyn_fresh").is_none());
    let added = hub
        .call_tool("mcp_dyn_add_tool", args(json!({"name": "fresh"})))
        .await
        .unwrap();
    assert_eq!(text_of(&added), "added fresh");
    wait_until(&hub, |hub| hub.catalog().tool("mcp_dyn_fresh").is_some()).await;
    assert_eq!(status(&hub, "dyn").tools, 3);
    assert_eq!(
        text_of(
            &hub.call_tool("mcp_dyn_fresh", args(json!({})))
                .await
                .unwrap()
        ),
        "fresh called"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_refreshes_the_catalog_in_the_2026_era() {
    let server = python_peer("modern_server.py");
    let hub = settled_hub(&stdio_entry(
        "modern",
        &venv_python(),
        &[server.to_str().unwrap()],
        "",
    ))
    .await;
    assert_eq!(
        status(&hub, "modern").protocol_version.as_deref(),
        Some("2026-07-28")
    );
    let added = hub
        .call_tool("mcp_modern_add_tool", args(json!({"name": "late"})))
        .await
        .unwrap();
    assert_eq!(text_of(&added), "added late");
    wait_until(&hub, |hub| hub.catalog().tool("mcp_modern_late").is_some()).await;
    assert_eq!(
        text_of(
            &hub.call_tool("mcp_modern_late", args(json!({})))
                .await
                .unwrap()
        ),
        "late called"
    );
    hub.shutdown().await;
}
