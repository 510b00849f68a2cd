//! The REST API.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use portico_config::{Config, EnvEntry, Transport};
use portico_core::ServerState;
use portico_hub::Hub;
use serde_json::{Value, json};

#[derive(Clone)]
struct ApiState {
    hub: Hub,
    /// `/api/mcp/servers` shows the configuration; computed once, with secrets left out.
    configured: Value,
}

pub(crate) fn routes(hub: Hub, config: &Config) -> Router {
    let state = ApiState {
        hub,
        configured: configured_servers(config),
    };
    Router::new()
        .route("/api/health", get(health))
        .route("/api/mcp/servers", get(servers))
        .with_state(state)
}

async fn health(State(state): State<ApiState>) -> Json<Value> {
    let servers = state.hub.servers();
    let ready = servers
        .iter()
        .filter(|s| s.state == ServerState::Ready)
        .count();
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "servers": {"configured": servers.len(), "ready": ready},
    }))
}

/// The reference shape: `configured` (what the config says) and `connected` (live sessions with their
/// tools), extended with state, protocol version and last error.
async fn servers(State(state): State<ApiState>) -> Json<Value> {
    let catalog = state.hub.catalog();
    let connected: Vec<Value> = state
        .hub
        .servers()
        .into_iter()
        .map(|s| {
            let tools: Vec<Value> = catalog
                .tools_of(&s.name)
                .map(|t| {
                    let description = t.definition.get("description").and_then(Value::as_str).unwrap_or("");
                    json!({"name": t.name, "description": format!("[MCP:{}] {description}", s.name)})
                })
                .collect();
            json!({
                "name": s.name,
                "tools_count": tools.len(),
                "tools": tools,
                "connected": s.state == ServerState::Ready,
                "state": s.state,
                "transport": s.transport_detail.clone().unwrap_or_else(|| s.transport.clone()),
                "protocol_version": s.protocol_version,
                "resources_count": s.resources + s.resource_templates,
                "prompts_count": s.prompts,
                "last_error": s.last_error,
            })
        })
        .collect();
    Json(json!({"configured": state.configured, "connected": connected}))
}

fn configured_servers(config: &Config) -> Value {
    config
        .mcp_servers
        .iter()
        .map(|s| {
            // Header values and literal env values often hold credentials: show names only.
            let transport = match &s.transport {
                Transport::Stdio { command, args, cwd } => {
                    json!({"type": "stdio", "command": command, "args": args, "cwd": cwd})
                }
                Transport::Http { url, headers } | Transport::Sse { url, headers } => json!({
                    "type": s.transport.kind(),
                    "url": url,
                    "headers": headers.keys().collect::<Vec<_>>(),
                }),
            };
            let env: Vec<&str> = s.env.iter().map(EnvEntry::name).collect();
            json!({
                "name": s.name,
                "transport": transport,
                "timeout_secs": s.timeout_secs,
                "env": env,
                "enabled": s.enabled,
            })
        })
        .collect()
}
