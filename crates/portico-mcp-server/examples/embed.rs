//! Embedding Portico's MCP server in your own program: the hub's catalog (from a config file, if given)
//! plus your own typed tools, served on stdin/stdout.
//!
//! ```sh
//! cargo run -p portico-mcp-server --example embed -- [config.toml]
//! ```

use portico_engine::{Engine, EngineOptions};
use portico_mcp_server::{Backend, HostTool, PorticoServer, ServerOptions};
use rmcp::ServiceExt;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Convert {
    /// Temperature in degrees Celsius.
    celsius: f64,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Converted {
    fahrenheit: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = match std::env::args().nth(1) {
        Some(path) => portico_config::load(Some(path.as_ref()))?.0,
        None => portico_config::Config::default(),
    };
    let data_dir = portico_config::data_dir();
    let engine = Engine::start(&config, EngineOptions::in_dir(&data_dir))?;
    let server = PorticoServer::new(
        Backend::Local(engine.clone()),
        ServerOptions {
            instructions: Some("Use to_fahrenheit for temperature conversions.".into()),
            ..ServerOptions::from_config(&config)
        },
    );
    server.host_tools().register(HostTool::typed(
        "to_fahrenheit",
        "Converts Celsius to Fahrenheit",
        |input: Convert| async move {
            Ok::<_, std::convert::Infallible>(Converted {
                fahrenheit: input.celsius * 9.0 / 5.0 + 32.0,
            })
        },
    ));
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    engine.shutdown().await;
    Ok(())
}
