//! A host policy with a host-owned grant store: `save` runs only with a grant bound to that exact
//! call (caller, tool and arguments), used up by the call it lets through. The first call fails
//! with the host's own envelope naming an approval request; the host approves it; the same call
//! then runs once, and a second retry needs a new approval.
//!
//! ```sh
//! cargo run -p portico-mcp-server --example tool_policy
//! ```
//!
//! The client here is an rmcp client over an in-memory pipe, so the example runs by itself; a real
//! host serves `server` on stdio or HTTP and approves from its own UI.

use std::sync::{Arc, Mutex};

use portico_core::JsonObject;
use portico_engine::{Engine, EngineOptions};
use portico_mcp_server::{
    Backend, BeforeCall, HostTool, PolicyCall, PorticoServer, ServerOptions, ToolPolicies,
    ToolPolicy,
};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Save {
    /// Where to save, relative to the host's project.
    path: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Saved {
    saved: String,
}

/// The host's failure envelope: the advertised failure branch of `save`.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ApprovalRequired {
    ok: bool,
    error: ApprovalError,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ApprovalError {
    /// Always `save_approval_required`.
    code: String,
    approval_request_id: String,
    approval_path: String,
}

/// One call, exactly: who, which tool, which arguments.
#[derive(Clone, PartialEq)]
struct Bound {
    caller: String,
    tool: String,
    arguments: JsonObject,
}

/// The host's own approvals: pending requests by id, and unused grants.
#[derive(Default)]
struct Grants {
    pending: Mutex<Vec<(String, Bound)>>,
    granted: Mutex<Vec<Bound>>,
    issued: std::sync::atomic::AtomicUsize,
}

impl Grants {
    /// Takes the grant for exactly this call, if there is one; under the lock, so two concurrent
    /// retries cannot both use it.
    fn consume(&self, call: &Bound) -> bool {
        let mut granted = self.granted.lock().unwrap();
        match granted.iter().position(|grant| grant == call) {
            Some(at) => {
                granted.remove(at);
                true
            }
            None => false,
        }
    }

    fn request(&self, call: Bound) -> String {
        let n = 1 + self
            .issued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("req-{n}");
        self.pending.lock().unwrap().push((id.clone(), call));
        id
    }

    /// The owner approves request `id` (from the host's UI).
    fn approve(&self, id: &str) {
        let mut pending = self.pending.lock().unwrap();
        if let Some(at) = pending.iter().position(|(pending_id, _)| pending_id == id) {
            let (_, call) = pending.remove(at);
            self.granted.lock().unwrap().push(call);
        }
    }
}

struct SaveNeedsApproval(Arc<Grants>);

impl ToolPolicy for SaveNeedsApproval {
    type Failure = ApprovalRequired;
    type Error = std::convert::Infallible;

    async fn before_call(
        &self,
        call: PolicyCall,
    ) -> Result<BeforeCall<ApprovalRequired>, Self::Error> {
        let bound = Bound {
            caller: call.caller,
            tool: call.tool,
            arguments: call.arguments,
        };
        if self.0.consume(&bound) {
            return Ok(BeforeCall::Proceed);
        }
        let id = self.0.request(bound);
        Ok(BeforeCall::Fail(ApprovalRequired {
            ok: false,
            error: ApprovalError {
                code: "save_approval_required".into(),
                approval_path: format!("/#approvals/{id}"),
                approval_request_id: id,
            },
        }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = portico_config::Config::default();
    config.builtins.enabled = false;
    let data = std::env::temp_dir().join(format!("portico-tool-policy-{}", std::process::id()));
    let engine = Engine::start(&config, EngineOptions::in_dir(&data))?;
    let server = PorticoServer::new(
        Backend::Local(engine.clone()),
        ServerOptions {
            instructions: Some("Saving needs the owner's approval.".into()),
            ..ServerOptions::default()
        },
    );
    server.host_tools().register(HostTool::typed(
        "save",
        "Saves the project",
        |input: Save| async move {
            println!("  (host) saving {}", input.path);
            Ok::<_, std::convert::Infallible>(Saved { saved: input.path })
        },
    ));
    let grants = Arc::new(Grants::default());
    // Registered once the tool exists: a policy for an unknown name fails here, naming it.
    let server = server
        .with_tool_policies(ToolPolicies::new().with("save", SaveNeedsApproval(grants.clone())))
        .await?;

    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await?;
    let save = || {
        let mut params = CallToolRequestParams::new("save");
        params.arguments = serde_json::json!({"path": "main.fgui"})
            .as_object()
            .cloned();
        params
    };

    let first = client.call_tool(save()).await?;
    println!(
        "first call: isError={:?} {}",
        first.is_error,
        serde_json::to_string(&first.structured_content)?
    );
    grants.approve("req-1");
    let second = client.call_tool(save()).await?;
    println!(
        "after approval: isError={:?} {}",
        second.is_error,
        serde_json::to_string(&second.structured_content)?
    );
    let third = client.call_tool(save()).await?;
    println!(
        "a second retry: isError={:?} {}",
        third.is_error,
        serde_json::to_string(&third.structured_content)?
    );

    client.cancel().await?;
    engine.shutdown().await;
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
