use std::sync::Arc;

use portico_core::JsonObject;
use portico_hub::{Hub, HubError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde::de::DeserializeOwned;

/// The default cap on one response, serialised: big enough for real tool output, small enough that a
/// runaway upstream cannot make Portico write a frame a client will choke on.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// What a door exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    pub tools: bool,
    pub resources: bool,
    pub prompts: bool,
}

impl Default for Exposure {
    fn default() -> Self {
        Exposure {
            tools: true,
            resources: true,
            prompts: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub instructions: Option<String>,
    pub exposure: Exposure,
    pub max_response_bytes: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            instructions: None,
            exposure: Exposure::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// The MCP server over the hub. Cheap to clone: one per client session.
#[derive(Clone)]
pub struct PorticoServer {
    hub: Hub,
    options: Arc<ServerOptions>,
}

impl PorticoServer {
    pub fn new(hub: Hub, options: ServerOptions) -> Self {
        PorticoServer {
            hub,
            options: Arc::new(options),
        }
    }

    /// Fails with a clear error when a serialised result would exceed the response budget.
    fn within_budget<T: serde::Serialize>(&self, what: &str, value: &T) -> Result<(), McpError> {
        let size = serde_json::to_vec(value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > self.options.max_response_bytes {
            return Err(McpError::internal_error(
                format!(
                    "{what} is {size} bytes, over Portico's response limit of {} bytes; ask for less (e.g. a narrower query), or raise [server] max_response_bytes",
                    self.options.max_response_bytes
                ),
                None,
            ));
        }
        Ok(())
    }
}

fn from_object<T: DeserializeOwned>(what: &str, object: JsonObject) -> Result<T, McpError> {
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| {
        McpError::internal_error(format!("upstream {what} is not valid MCP: {e}"), None)
    })
}

fn hub_error(error: HubError) -> McpError {
    match &error {
        HubError::UnknownTool { .. } | HubError::UnknownPrompt { .. } => {
            McpError::invalid_params(error.to_string(), None)
        }
        HubError::UnknownResource { .. } => McpError::resource_not_found(error.to_string(), None),
        _ => McpError::internal_error(error.to_string(), None),
    }
}

impl ServerHandler for PorticoServer {
    fn get_info(&self) -> ServerConfig {
        let exposure = &self.options.exposure;
        let mut capabilities = ServerCapabilities::default();
        if exposure.tools {
            capabilities.tools = ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
                .tools;
        }
        if exposure.resources {
            capabilities.resources = ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_list_changed()
                .build()
                .resources;
        }
        if exposure.prompts {
            capabilities.prompts = ServerCapabilities::builder()
                .enable_prompts()
                .enable_prompts_list_changed()
                .build()
                .prompts;
        }
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("portico", env!("CARGO_PKG_VERSION")));
        if let Some(instructions) = &self.options.instructions {
            info = info.with_instructions(instructions.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.hub.catalog();
        let tools = catalog
            .tools()
            .iter()
            .map(|t| from_object::<Tool>("tool definition", t.exposed_definition()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = self.hub.call_tool(&request.name, request.arguments);
        let result = tokio::select! {
            result = call => result,
            _ = context.ct.cancelled() => {
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        };
        let result = match result {
            Ok(result) => result,
            // An unknown tool is a protocol error; an upstream failure is the tool's failure and the model
            // should see it, so it becomes an isError result.
            Err(error @ HubError::UnknownTool { .. }) => return Err(hub_error(error)),
            Err(error) => {
                return Ok(
                    CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
                );
            }
        };
        let result: CallToolResult = from_object("tool result", result)?;
        if let Err(too_big) =
            self.within_budget(&format!("the result of `{}`", request.name), &result)
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                too_big.message.to_string(),
            )])
            .into());
        }
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let catalog = self.hub.catalog();
        let resources = catalog
            .resources()
            .iter()
            .map(|r| from_object::<Resource>("resource", r.exposed_definition()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let catalog = self.hub.catalog();
        let templates = catalog
            .resource_templates()
            .iter()
            .map(|t| from_object::<ResourceTemplate>("resource template", t.exposed_definition()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let result = self
            .hub
            .read_resource(&request.uri)
            .await
            .map_err(hub_error)?;
        let result: ReadResourceResult = from_object("resource contents", result)?;
        self.within_budget(&format!("resource `{}`", request.uri), &result)?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let catalog = self.hub.catalog();
        let prompts = catalog
            .prompts()
            .iter()
            .map(|p| from_object::<Prompt>("prompt", p.exposed_definition()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let result = self
            .hub
            .get_prompt(&request.name, request.arguments)
            .await
            .map_err(hub_error)?;
        let result: GetPromptResult = from_object("prompt", result)?;
        self.within_budget(&format!("prompt `{}`", request.name), &result)?;
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Relay catalog changes to this client for as long as its session lives.
        let hub = self.hub.clone();
        let peer = context.peer;
        let exposure = self.options.exposure.clone();
        tokio::spawn(async move {
            let mut changes = hub.subscribe();
            let mut last = CatalogShape::of(&hub);
            while changes.changed().await.is_ok() {
                let now = CatalogShape::of(&hub);
                let sent = async {
                    if exposure.tools && now.tools != last.tools {
                        peer.notify_tool_list_changed().await?;
                    }
                    if exposure.prompts && now.prompts != last.prompts {
                        peer.notify_prompt_list_changed().await?;
                    }
                    if exposure.resources && now.resources != last.resources {
                        peer.notify_resource_list_changed().await?;
                    }
                    Ok::<_, rmcp::service::ServiceError>(())
                };
                if sent.await.is_err() || peer.is_transport_closed() {
                    return;
                }
                last = now;
            }
        });
    }
}

/// What clients can observe of the catalog: names and definitions per kind. A list_changed is only sent
/// when one of these actually changed, not on every server state change.
#[derive(PartialEq)]
struct CatalogShape {
    tools: Vec<JsonObject>,
    prompts: Vec<JsonObject>,
    resources: Vec<JsonObject>,
}

impl CatalogShape {
    fn of(hub: &Hub) -> Self {
        let catalog = hub.catalog();
        CatalogShape {
            tools: catalog
                .tools()
                .iter()
                .map(|t| t.exposed_definition())
                .collect(),
            prompts: catalog
                .prompts()
                .iter()
                .map(|p| p.exposed_definition())
                .collect(),
            resources: catalog
                .resources()
                .iter()
                .map(|r| r.exposed_definition())
                .chain(
                    catalog
                        .resource_templates()
                        .iter()
                        .map(|t| t.exposed_definition()),
                )
                .collect(),
        }
    }
}
