//! The library API as an embedding program uses it: a server over a hub, instructions, typed host
//! tools registered at run time, driven by a real rmcp client over an in-memory pipe.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use portico_engine::{Engine, EngineOptions};
use portico_mcp_server::{Backend, HostTool, PorticoServer, ServerOptions};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Greet {
    /// Who to greet.
    name: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Greeting {
    text: String,
}

/// Counts tools/list_changed notifications.
#[derive(Clone, Default)]
struct Listener(Arc<AtomicUsize>, Arc<tokio::sync::Notify>);

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test", "1"),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedders_serve_typed_host_tools_registered_at_run_time() {
    let mut config = portico_config::Config::default();
    config.builtins.enabled = false;
    let data = tempfile::tempdir().unwrap();
    let engine = Engine::start(&config, EngineOptions::in_dir(data.path())).unwrap();
    let options = ServerOptions {
        instructions: Some("Greets people.".into()),
        ..Default::default()
    };
    let server = PorticoServer::new(Backend::Local(engine.clone()), options);
    server.host_tools().register(
        HostTool::typed("greet", "Greets someone", |input: Greet| async move {
            Ok::<_, std::convert::Infallible>(Greeting {
                text: format!("Hello, {}!", input.name),
            })
        })
        .with("annotations", json!({"readOnlyHint": true})),
    );

    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let server = server.clone();
        async move {
            let (read, write) = tokio::io::split(server_io);
            let running = server.serve((read, write)).await.unwrap();
            running.waiting().await.unwrap();
        }
    });
    let listener = Listener::default();
    let (read, write) = tokio::io::split(client_io);
    let client = listener.clone().serve((read, write)).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(info.instructions.as_deref(), Some("Greets people."));
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let greet = serde_json::to_value(&tools[0]).unwrap();
    assert_eq!(greet["inputSchema"]["properties"]["name"]["type"], "string");
    assert_eq!(
        greet["outputSchema"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(greet["annotations"]["readOnlyHint"], true);

    let mut params = CallToolRequestParams::new("greet");
    params.arguments = json!({"name": "Ada"}).as_object().cloned();
    let result = serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap();
    assert_eq!(result["structuredContent"], json!({"text": "Hello, Ada!"}));

    // Registered while a client is connected: the client hears about it and can call it.
    server.host_tools().register(HostTool::typed(
        "shout",
        "Upper-cases",
        |input: Greet| async move {
            Ok::<_, std::convert::Infallible>(Greeting {
                text: input.name.to_uppercase(),
            })
        },
    ));
    while listener.0.load(Ordering::SeqCst) == 0 {
        listener.1.notified().await;
    }
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, vec!["greet", "shout"]);

    client.cancel().await.unwrap();
    serving.await.unwrap();
    engine.shutdown().await;
}
