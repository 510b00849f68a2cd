//! Definitions and results pass through whole: schemas, annotations, every content type.

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_content_type_and_field_passes_through() {
    let everything = everything_js();
    let toml = stdio_entry("ev", &node(), &[everything.to_str().unwrap(), "stdio"], "");
    let hub = settled_hub(&toml).await;

    let image = hub
        .call_tool("mcp_ev_get_tiny_image", args(json!({})))
        .await
        .unwrap();
    let types: Vec<&str> = image
        .content
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"image"), "{types:?}");
    let img = image.content.iter().find(|c| c["type"] == "image").unwrap();
    assert_eq!(img["mimeType"], "image/png");
    assert!(img["data"].as_str().unwrap().len() > 100);

    let links = hub
        .call_tool("mcp_ev_get_resource_links", args(json!({"count": 2})))
        .await
        .unwrap();
    let link_count = links
        .content
        .iter()
        .filter(|c| c["type"] == "resource_link")
        .count();
    assert_eq!(link_count, 2, "{links:?}");

    let reference = hub
        .call_tool(
            "mcp_ev_get_resource_reference",
            args(json!({"resourceType": "Text", "resourceId": 1})),
        )
        .await
        .unwrap();
    let embedded = reference
        .content
        .iter()
        .find(|c| c["type"] == "resource")
        .expect("embedded resource");
    assert!(
        embedded["resource"]["uri"].as_str().unwrap().contains("1"),
        "{embedded:?}"
    );

    let structured = hub
        .call_tool(
            "mcp_ev_get_structured_content",
            args(json!({"location": "New York"})),
        )
        .await
        .unwrap();
    assert!(
        structured
            .structured_content
            .as_ref()
            .is_some_and(Value::is_object),
        "{structured:?}"
    );

    let annotated = hub
        .call_tool(
            "mcp_ev_get_annotated_message",
            args(json!({"messageType": "error", "includeImage": true})),
        )
        .await
        .unwrap();
    assert!(
        annotated.content[0]["annotations"].is_object(),
        "{annotated:?}"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_definitions_are_kept_unchanged_but_for_the_name() {
    let server = python_peer("modern_server.py");
    let toml = stdio_entry("modern", &venv_python(), &[server.to_str().unwrap()], "");
    let hub = settled_hub(&toml).await;
    let catalog = hub.catalog();
    let add = catalog.tool("mcp_modern_add").unwrap();
    assert_eq!(add.upstream_name, "add");
    let schema = &add.definition["outputSchema"];
    assert_eq!(schema["properties"]["sum"]["type"], "integer");
    assert_eq!(schema["required"], json!(["sum"]));
    let delete = catalog.tool("mcp_modern_delete_item").unwrap();
    assert_eq!(delete.definition["title"], "Delete an item (pretend)");
    assert_eq!(
        delete.definition["annotations"]["destructiveHint"],
        Value::Bool(true)
    );
    let exposed = delete.exposed_definition();
    assert_eq!(exposed["name"], "mcp_modern_delete_item");
    let mut original = exposed.clone();
    original.insert("name".into(), "delete_item".into());
    assert_eq!(original, delete.definition);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_keep_is_error() {
    let server = python_peer("modern_server.py");
    let toml = stdio_entry("modern", &venv_python(), &[server.to_str().unwrap()], "");
    let hub = settled_hub(&toml).await;
    // Wrong argument types: the SDK answers with an isError result, which must reach the caller as is.
    let result = hub
        .call_tool("mcp_modern_add", args(json!({"a": "x", "b": 1})))
        .await;
    match result {
        Ok(r) => assert_eq!(r.is_error, Some(true), "{r:?}"),
        Err(e) => panic!("expected an isError result, got error {e}"),
    }
    hub.shutdown().await;
}
