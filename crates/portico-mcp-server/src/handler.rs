use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use portico_core::JsonObject;
use portico_core::trace::{DOOR, DoorSpan, SPAN_TARGET};
use portico_engine::UpstreamsError;
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, Prompt, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceTemplate, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backend::{Backend, BackendError, Listing, ListingDigest};
use crate::input_rounds::{
    CallBinding, ClientKey, InputRoundsCaller, ParkedCalls, check_input_responses,
};
use crate::relay::{DownstreamCaller, PORTICO_CLIENT_NAME};
use crate::subscriptions::{ListenHold, MAX_SUBSCRIPTIONS_PER_SESSION, SessionSubscriptions};
use crate::tool_search::{self, ToolSearch};
use portico_core::relay::CallContext;
use portico_mcp::tool_result_into_object;
use portico_pipeline::LocalTools as HostTools;
use portico_pipeline::{Pipeline, PipelineSettings, Principal};

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

/// The three kinds of things a door can expose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tools,
    Resources,
    Prompts,
}

impl Exposure {
    fn allows(&self, kind: Kind) -> bool {
        match kind {
            Kind::Tools => self.tools,
            Kind::Resources => self.resources,
            Kind::Prompts => self.prompts,
        }
    }
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
    pub tool_search: ToolSearch,
    /// Names the door in audit records: "stdio", "http".
    pub door: String,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            instructions: None,
            exposure: Exposure::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            tool_search: ToolSearch::Off,
            door: "mcp".into(),
        }
    }
}

/// The MCP server over the hub. Cheap to clone: one per client session.
#[derive(Clone)]
pub struct PorticoServer {
    backend: Backend,
    options: Arc<ServerOptions>,
    /// Resources this session subscribed to (exposed URIs), given back upstream when the session
    /// ends. Per session: see [`PorticoServer::for_session`].
    subscriptions: Arc<SessionSubscriptions>,
    /// Tools the embedding program registered; shared by every session.
    host_tools: HostTools,
    /// What host tools are called through, on every backend: the engine's pipeline in process;
    /// proxied to a daemon, which cannot see them, one of this server's own over the host tools.
    host_pipeline: Pipeline,
    /// 2026-07-28 calls waiting for their client's answers; shared by every session, since a
    /// stateless client may come back on another connection.
    parked: ParkedCalls,
    /// Tasks upstreams run for this door's clients; shared by every session, like `parked`.
    task_routes: crate::task_routes::TaskRoutes,
    /// Ends this session's relay task once rmcp drops the session's last handle of this server;
    /// `None` in the relay task's own copy, which must not keep its session alive.
    session: Option<Arc<SessionEnd>>,
    /// Relay tasks alive across all sessions: a gauge tests and the door's stats read.
    relays: Arc<AtomicUsize>,
    /// The client of a session whose requests carry no HTTP request to read it from (legacy SSE,
    /// where messages arrive through a channel): set when the session is opened.
    principal: Option<Principal>,
}

/// Cancels a session's relay task when dropped. rmcp drops a session's server when the session ends
/// (DELETE, idle expiry, shutdown), so nothing waits for a failed send to notice a closed session.
#[derive(Default)]
struct SessionEnd(CancellationToken);

impl Drop for SessionEnd {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Holds one place in the relay gauge for as long as a relay task runs.
struct RelayCounted(Arc<AtomicUsize>);

impl RelayCounted {
    fn new(relays: &Arc<AtomicUsize>) -> Self {
        relays.fetch_add(1, Ordering::SeqCst);
        RelayCounted(relays.clone())
    }
}

impl Drop for RelayCounted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PorticoServer {
    pub fn new(backend: Backend, options: ServerOptions) -> Self {
        // Host tools pass a call pipeline like every other tool (schemas, timeout, audit): in
        // process they are the engine's local tools; before a daemon, they get a pipeline here.
        let (host_tools, host_pipeline) = match &backend {
            Backend::Local(engine) => (engine.local_tools().clone(), engine.pipeline().clone()),
            Backend::Daemon(_) => {
                let host_tools = HostTools::default();
                let pipeline = Pipeline::new(PipelineSettings::default());
                pipeline.add_source(Arc::new(host_tools.clone()));
                (host_tools, pipeline)
            }
        };
        PorticoServer {
            subscriptions: Arc::new(SessionSubscriptions::new(backend.clone())),
            backend,
            options: Arc::new(options),
            host_tools,
            host_pipeline,
            parked: ParkedCalls::default(),
            task_routes: crate::task_routes::TaskRoutes::default(),
            session: Some(Arc::default()),
            relays: Arc::default(),
            principal: None,
        }
    }

    /// How many per-session relay tasks (resource updates, list changes) are running, over all
    /// sessions of this server: one per initialized session that has not ended.
    pub fn live_relays(&self) -> usize {
        self.relays.load(Ordering::SeqCst)
    }

    /// The registry of host tools: register typed Rust functions here to serve them beside the catalog.
    pub fn host_tools(&self) -> &HostTools {
        &self.host_tools
    }

    /// The pipeline host tools are called through: the engine's in process; before a daemon, this
    /// server's own, which audits nowhere until the embedder gives it a sink
    /// ([`Pipeline::set_audit`]).
    pub fn host_pipeline(&self) -> &Pipeline {
        &self.host_pipeline
    }

    /// This session's server calling as `principal` whatever request it serves: for transports whose
    /// messages carry no HTTP request with the client on it.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// Puts an embedder's tool policies in front of their tools, on the pipeline this server's
    /// calls go through (the engine's in process, so every door of the engine is guarded; before
    /// a daemon, the host pipeline, whose host tools are the only ones it can guard). Register
    /// host tools first: a policy for a name the pipeline does not know fails, naming it.
    pub async fn with_tool_policies(
        self,
        policies: portico_pipeline::ToolPolicies,
    ) -> Result<Self, portico_pipeline::ToolPolicyError> {
        self.host_pipeline.add_tool_policies(policies).await?;
        Ok(self)
    }

    /// A handler for a new client session: same backend and options, its own subscriptions.
    pub fn for_session(&self) -> Self {
        PorticoServer {
            backend: self.backend.clone(),
            options: self.options.clone(),
            subscriptions: Arc::new(SessionSubscriptions::new(self.backend.clone())),
            host_tools: self.host_tools.clone(),
            host_pipeline: self.host_pipeline.clone(),
            parked: self.parked.clone(),
            task_routes: self.task_routes.clone(),
            session: Some(Arc::default()),
            relays: self.relays.clone(),
            principal: None,
        }
    }

    /// This session's server without its session handle, for the session's relay task.
    fn detached(&self) -> Self {
        PorticoServer {
            session: None,
            ..self.clone()
        }
    }

    /// Everything served: host tools first, then the backend's catalog. A catalog tool with a host
    /// tool's name is left out, since the host program chose that name deliberately.
    async fn listing(&self, principal: &Principal) -> Result<Listing, McpError> {
        let mut listing = self
            .backend
            .listing(principal)
            .await
            .map_err(backend_error)?;
        let host = match self.backend {
            Backend::Local(_) => Vec::new(),
            // Through the host pipeline, so its tool policies mark them as in process.
            Backend::Daemon(_) => self
                .host_pipeline
                .list_with_failures(&portico_pipeline::Principal::client(&self.options.door))
                .await
                .into_iter()
                .map(crate::host_policy::advertised)
                .collect(),
        };
        if !host.is_empty() {
            let names: HashSet<&str> = host
                .iter()
                .filter_map(|t| t.get("name")?.as_str())
                .collect();
            listing.tools.retain(|t| {
                t.get("name")
                    .and_then(|n| n.as_str())
                    .is_none_or(|n| !names.contains(n))
            });
            let mut tools = host;
            tools.append(&mut listing.tools);
            listing.tools = tools;
        }
        Ok(listing)
    }

    /// Fires when the backend's catalog or the host tools change.
    fn changes(&self) -> Changes {
        Changes {
            backend: self.backend.changes(),
            host: self.host_tools.changes(),
            announced: self.backend.announced_changes(),
        }
    }

    /// Calls a catalog tool. An unknown tool is a protocol error; an upstream failure is the tool's
    /// failure, which the model should see, so it becomes an isError result.
    async fn forward_call(
        &self,
        principal: &Principal,
        owner: &str,
        name: &str,
        arguments: Option<JsonObject>,
        call_context: &CallContext,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResponse, McpError> {
        if let Backend::Daemon(_) = self.backend
            && self.host_tools.get(name).is_some()
        {
            let context = portico_pipeline::ToolContext::of(principal.clone())
                .with_relay(call_context.clone());
            let called = self.host_pipeline.call(name, arguments, &context).await;
            let result = crate::host_policy::served(called.map_err(|e| backend_error(e.into()))?);
            let result: CallToolResult =
                from_result("tool result", tool_result_into_object(result))?;
            return Ok(self.budgeted(name, result));
        }
        let result = tokio::select! {
            result = self.backend.call_tool(principal, name, arguments, call_context) => result,
            _ = cancelled.cancelled() => {
                return Err(crate::input_rounds::cancelled_by_the_client());
            }
        };
        let result = match result {
            Ok(result) => result,
            // Unknown, or the passed-through upstream's own protocol error: a protocol error here.
            Err(error) if error.is_unknown_tool() || error.is_protocol_error() => {
                return Err(backend_error(error));
            }
            Err(error) => {
                return Ok(
                    CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
                );
            }
        };
        if let Some(task) = result.task {
            return self.relayed_task(*task, owner).await;
        }
        let result: CallToolResult = from_result("tool result", tool_result_into_object(result))?;
        Ok(self.budgeted(name, result))
    }

    /// A task an upstream created for the call: routed for its client, then answered as created.
    /// The upstream has made the task before Portico sees it, so a task that cannot be relayed (its
    /// client at its bound, an id clash, an answer that is not MCP) is cancelled there rather than
    /// left running to its ttl for nobody.
    async fn relayed_task(
        &self,
        task: portico_core::CreatedTask,
        owner: &str,
    ) -> Result<CallToolResponse, McpError> {
        let mut state = task.state;
        let task_id = state
            .get("taskId")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ttl = state
            .get("ttlMs")
            .and_then(serde_json::Value::as_u64)
            .map(std::time::Duration::from_millis);
        state.insert("resultType".into(), "task".into());
        let routed = from_result::<rmcp::model::CreateTaskResult>("task result", state).and_then(
            |created| {
                self.task_routes
                    .record(&task_id, &task.server, owner, ttl)
                    .map(|()| created)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))
            },
        );
        match routed {
            Ok(created) => Ok(CallToolResponse::Task(created)),
            Err(mut refused) => {
                if !task_id.is_empty() {
                    self.cancel_unrouted_task(&task.server, &task_id).await;
                    refused.message = format!(
                        "{}; Portico cancelled the task on its server",
                        refused.message
                    )
                    .into();
                }
                Err(refused)
            }
        }
    }

    /// Cancels, at `server`, a task its client will never hear of. Nobody waits on the outcome but
    /// the refused call, so a failure is only logged.
    async fn cancel_unrouted_task(&self, server: &str, task_id: &str) {
        let cancel = portico_core::TaskOperation::Cancel {
            task_id: task_id.to_string(),
        };
        if let Err(error) = self.backend.task_operation(server, cancel).await {
            tracing::warn!(
                server,
                task_id,
                "cancelling a task Portico could not relay failed: {error}"
            );
        }
    }

    /// `tasks/get|update|cancel` from `owner`: to the upstream that runs the task, if `owner`
    /// created it through this door; any other client is told there is no such task.
    async fn task_operation(
        &self,
        owner: &str,
        operation: portico_core::TaskOperation,
    ) -> Result<JsonObject, McpError> {
        let task_id = operation.task_id().to_string();
        let cancelling = matches!(operation, portico_core::TaskOperation::Cancel { .. });
        let Some(server) = self.task_routes.server_of(&task_id, owner) else {
            return Err(McpError::invalid_params(
                format!(
                    "task not found: no task {task_id} of this client runs through Portico (it never existed, expired, or another client created it)"
                ),
                None,
            ));
        };
        let answer = self
            .backend
            .task_operation(&server, operation)
            .await
            .map_err(backend_error)?;
        // `tasks/get` answers carry the status; `tasks/update` and `tasks/cancel` acks do not. A
        // task its client had cancelled no longer counts against the client's running tasks.
        if cancelling
            || matches!(
                answer.get("status").and_then(serde_json::Value::as_str),
                Some("completed" | "failed" | "cancelled")
            )
        {
            self.task_routes.settle(&task_id, owner);
        }
        Ok(answer)
    }

    /// A `tasks/get` answer within the response budget, as a `tools/call` result is: a final result
    /// over it becomes an isError result saying so (the task's state stays as it is); anything else
    /// over it is an error.
    fn budgeted_task_state(
        &self,
        task_id: &str,
        mut answer: JsonObject,
    ) -> Result<JsonObject, McpError> {
        let what = format!("the result of task `{task_id}`");
        let Err(too_big) = self.within_budget(&what, &answer) else {
            return Ok(answer);
        };
        if !answer.contains_key("result") {
            return Err(too_big);
        }
        let error = CallToolResult::error(vec![ContentBlock::text(too_big.message.to_string())]);
        let error = serde_json::to_value(error)
            .map_err(|e| McpError::internal_error(format!("{what}: {e}"), None))?;
        answer.insert("result".into(), error);
        Ok(answer)
    }

    /// A result over the response budget becomes an isError result saying so.
    fn budgeted(&self, name: &str, result: CallToolResult) -> CallToolResponse {
        match self.within_budget(&format!("the result of `{name}`"), &result) {
            Ok(()) => result.into(),
            Err(too_big) => {
                CallToolResult::error(vec![ContentBlock::text(too_big.message.to_string())]).into()
            }
        }
    }

    /// Who is calling: the client the door's token check identified (`client:laptop`, with its
    /// scope), else the door itself (`client:stdio`, `client:http` on a door without tokens).
    fn principal_of(&self, context: &RequestContext<RoleServer>) -> Principal {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .or(self.principal.as_ref())
            .cloned()
            .unwrap_or_else(|| self.door_principal())
    }

    /// The door's span a call runs in (`portico_core::trace`): the HTTP door's, which the request
    /// carries, else one of this door's own (stdio), continuing the trace the request's `_meta`
    /// names (SEP-414).
    fn door_span(&self, context: &RequestContext<RoleServer>) -> tracing::Span {
        let carried = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<DoorSpan>());
        if let Some(DoorSpan(span)) = carried {
            span.record("mcp.method", "tools/call");
            return span.clone();
        }
        let span = tracing::trace_span!(
            target: SPAN_TARGET,
            DOOR,
            otel.kind = "server",
            door = self.options.door.as_str(),
            mcp.method = "tools/call",
        );
        if !span.is_disabled() {
            portico_mcp::trace_context::continue_from_meta(&span, &context.meta);
        }
        span
    }

    /// The session's client when it is fixed, else the door as a client: for what runs outside any
    /// request (a session's list-change relay).
    fn door_principal(&self) -> Principal {
        self.principal
            .clone()
            .unwrap_or_else(|| Principal::client(self.options.door.clone()))
    }

    /// Wraps the requesting client so the upstream's progress, logs and requests reach it.
    fn call_context(&self, context: &RequestContext<RoleServer>) -> CallContext {
        let progress_token = context.meta.get_progress_token();
        let capabilities = context
            .client_capabilities()
            .or_else(|| {
                context
                    .peer
                    .peer_info()
                    .map(|info| info.capabilities.clone())
            })
            .and_then(|caps| serde_json::to_value(caps).ok())
            .unwrap_or_default();
        let client_name = context
            .meta
            .client_info()
            .map(|info| info.name)
            .or_else(|| {
                context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone())
            });
        CallContext {
            progress: progress_token.is_some(),
            caller: Some(Arc::new(DownstreamCaller {
                peer: context.peer.clone(),
                progress_token,
                capabilities,
                // `portico mcp` declares every capability so upstreams ask, whatever its own
                // client can do; it cannot answer an approval question for a client that cannot.
                portico_proxy: client_name.as_deref() == Some(PORTICO_CLIENT_NAME),
            })),
        }
    }

    /// A call, whether to a meta-tool or a catalog tool.
    async fn run_call(
        &self,
        principal: &Principal,
        owner: &str,
        request: CallToolRequestParams,
        call_context: CallContext,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResponse, McpError> {
        if self.options.tool_search != ToolSearch::Off && tool_search::is_meta_tool(&request.name) {
            // Boxed: the meta-tools' future holds a listing and a forwarded call, and would size
            // every plain call's future (and the task rmcp spawns for it) too.
            return Box::pin(self.call_meta_tool(
                principal,
                owner,
                request,
                call_context,
                cancelled,
            ))
            .await;
        }
        self.forward_call(
            principal,
            owner,
            &request.name,
            request.arguments,
            &call_context,
            &cancelled,
        )
        .await
    }

    /// Runs one of the tool-search meta-tools. Calls made through `portico_call_tool` go the same way as
    /// direct calls.
    async fn call_meta_tool(
        &self,
        principal: &Principal,
        owner: &str,
        request: CallToolRequestParams,
        call_context: CallContext,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let listing = self.listing(principal).await?;
        let result = match request.name.as_ref() {
            tool_search::SEARCH_TOOL => tool_search::search_result(&listing.tools, &arguments),
            tool_search::DESCRIBE_TOOL => tool_search::describe_result(&listing.tools, &arguments),
            _ => {
                let Some(name) = arguments.get("name").and_then(serde_json::Value::as_str) else {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        "`name` (a string) is required; find tool names with portico_search_tools",
                    )])
                    .into());
                };
                let inner_arguments = match arguments.get("arguments") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::Object(map)) => Some(map.clone()),
                    Some(_) => {
                        return Ok(CallToolResult::error(vec![ContentBlock::text(
                            "`arguments` must be an object matching the tool's input schema",
                        )])
                        .into());
                    }
                };
                return self
                    .forward_call(
                        principal,
                        owner,
                        name,
                        inner_arguments,
                        &call_context,
                        &cancelled,
                    )
                    .await;
            }
        };
        match result {
            Ok(result) => Ok(from_result::<CallToolResult>("tool-search result", result)?.into()),
            Err(message) => Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into()),
        }
    }

    /// `[expose]` is enforced here, where every door's requests arrive, not only in the advertised
    /// capabilities: a client that ignores them must still not reach what is hidden.
    fn exposed(&self, kind: Kind) -> bool {
        self.options.exposure.allows(kind)
    }

    /// The refusal of a request for something `[expose]` hides.
    fn require_exposed(&self, kind: Kind) -> Result<(), McpError> {
        if self.exposed(kind) {
            return Ok(());
        }
        let key = match kind {
            Kind::Tools => "tools",
            Kind::Resources => "resources",
            Kind::Prompts => "prompts",
        };
        Err(McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!(
                "this Portico does not expose {key} to MCP clients ([expose] {key} = false in its config); set it to true to allow them"
            ),
            None,
        ))
    }

    /// Fails with a clear error when a serialised result would exceed the response budget.
    fn within_budget<T: serde::Serialize>(&self, what: &str, value: &T) -> Result<(), McpError> {
        let size = portico_core::json_size(value);
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

/// The methods of MCP requests whose params carry a 2026-07-28 client's `inputResponses`.
const RETRIED_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// The answer to a request rmcp could not read as any it knows (see `on_custom_request`).
fn refuse_custom_request(method: &str, params: Option<&serde_json::Value>) -> McpError {
    if !RETRIED_METHODS.contains(&method) {
        return McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("`{method}` is not a method Portico serves"),
            None,
        );
    }
    let responses = params.and_then(|params| params.get("inputResponses"));
    let message = match responses {
        Some(responses) if !responses.is_object() => format!(
            "inputResponses of `{method}` is {}, not an object; send the answer to each input request under its key, or leave inputResponses out",
            json_kind(responses)
        ),
        _ => format!(
            "the params of `{method}` are not what MCP defines for it; check their fields and types"
        ),
    };
    McpError::invalid_params(message, None)
}

/// A JSON value's kind, as a message names it.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Whether the client speaks 2026-07-28 or later, where servers ask through `input_required` results
/// instead of requests.
/// The client identity the door put on the HTTP request; stdio has one client.
fn client_of(context: &RequestContext<RoleServer>) -> String {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientKey>())
        .map(|ClientKey(key)| key.clone())
        .unwrap_or_else(|| "stdio".into())
}

fn takes_input_rounds(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .and_then(|v| serde_json::to_value(v).ok())
        .and_then(|v| v.as_str().map(|v| v >= "2026-07-28"))
        .unwrap_or(false)
}

/// Parses a final result from an upstream (or Portico itself). Results from handshake-era upstreams
/// carry no `resultType`, which 2026-07-28 clients require; the field is added here and rmcp strips it
/// again for handshake-era clients.
fn from_result<T: DeserializeOwned>(what: &str, mut object: JsonObject) -> Result<T, McpError> {
    object
        .entry("resultType")
        .or_insert_with(|| serde_json::Value::String("complete".into()));
    from_object(what, object)
}

fn from_object<T: DeserializeOwned>(what: &str, object: JsonObject) -> Result<T, McpError> {
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| {
        McpError::internal_error(format!("upstream {what} is not valid MCP: {e}"), None)
    })
}

/// The JSON-RPC error a request is answered with, logged in words (rmcp's own line for it, in Rust
/// debug form, is kept out of the log; see the binary's log filters).
fn backend_error(error: BackendError) -> McpError {
    let answered = backend_error_data(&error);
    tracing::info!(
        "answered a request with error {}: {}",
        answered.code.0,
        answered.message
    );
    answered
}

fn backend_error_data(error: &BackendError) -> McpError {
    match error {
        // A passed-through upstream's error, exactly as it sent it.
        BackendError::Pipeline(portico_pipeline::PipelineError::Source(
            portico_core::CallError::Protocol(answered),
        )) => McpError::new(
            rmcp::model::ErrorCode(answered.code),
            answered.message.clone(),
            answered.data.clone(),
        ),
        BackendError::Upstreams(UpstreamsError::UnknownPrompt(_))
        | BackendError::Pipeline(portico_pipeline::PipelineError::UnknownTool { .. }) => {
            McpError::invalid_params(error.to_string(), None)
        }
        BackendError::Upstreams(UpstreamsError::UnknownResource(_)) => {
            McpError::resource_not_found(error.to_string(), None)
        }
        // The daemon's own JSON-RPC error passes through as it is: code, message and data. (Its
        // message already says what failed; the proxy's "server `daemon`: ... failed" in front of
        // it only confused.)
        BackendError::Daemon(portico_mcp::UpstreamError::Remote {
            code: Some(code),
            message,
            data,
            ..
        }) => McpError::new(
            rmcp::model::ErrorCode(*code),
            message.clone(),
            data.as_deref().cloned(),
        ),
        BackendError::Upstreams(UpstreamsError::Remote { code, data, .. }) => McpError::new(
            rmcp::model::ErrorCode(*code),
            error.to_string(),
            data.clone(),
        ),
        _ => McpError::internal_error(error.to_string(), None),
    }
}

fn parse_all<T: DeserializeOwned>(what: &str, items: Vec<JsonObject>) -> Result<Vec<T>, McpError> {
    items
        .into_iter()
        .map(|item| from_object(what, item))
        .collect()
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
            // Subscriptions are served in both eras: `resources/subscribe`, and resource URIs
            // on a `subscriptions/listen` stream.
            capabilities.resources = ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
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
        if exposure.tools {
            // Tasks are the upstreams': a call becomes one only on an upstream that creates
            // tasks, for a client that declared the extension; Portico relays them.
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(
                    rmcp::model::TASKS_EXTENSION_ID.to_string(),
                    JsonObject::new(),
                );
        }
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("portico", env!("CARGO_PKG_VERSION")));
        if let Some(instructions) = &self.options.instructions {
            info = info.with_instructions(instructions.clone());
        }
        info
    }

    /// A catalog tool's definition, for rmcp's HTTP transport to check a `tools/call`'s
    /// `Mcp-Param-*` headers against the `x-mcp-header` annotations of its input schema
    /// (SEP-2243) before the call reaches the handler. Upstream tools only: Portico's own have
    /// no such annotations, and a daemon's tools are checked by the daemon's door.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let Backend::Local(engine) = &self.backend else {
            return None;
        };
        if !self.exposed(Kind::Tools) {
            return None;
        }
        let catalog = engine.catalog();
        let definition = catalog.tool(name)?.exposed_definition();
        serde_json::from_value(serde_json::Value::Object(definition)).ok()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if !self.exposed(Kind::Tools) {
            return Ok(ListToolsResult::with_all_items(Vec::new()));
        }
        let listing = self.listing(&self.principal_of(&context)).await?;
        let tools = if self.options.tool_search.active(listing.tools.len()) {
            tool_search::meta_tools(listing.tools.len())
        } else {
            listing.tools
        };
        let tools: Vec<Tool> = parse_all("tool definition", tools)?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = std::time::Instant::now();
        let door = self.door_span(&context);
        let answered = Box::pin(self.serve_call_tool(request, context).instrument(door)).await;
        // The door stage of `/metrics`: from the request to its answer, the pipeline included.
        if let Backend::Local(engine) = &self.backend {
            engine
                .metrics()
                .time_stage(portico_metrics::Stage::Door, started.elapsed());
        }
        answered
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Box::pin(self.serve_complete(request, _context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_set_level(request, _context)).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_subscribe(request, _context)).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_unsubscribe(request, _context)).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        if !self.exposed(Kind::Resources) {
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        }
        let resources: Vec<Resource> = parse_all(
            "resource",
            self.listing(&self.door_principal()).await?.resources,
        )?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        if !self.exposed(Kind::Resources) {
            return Ok(ListResourceTemplatesResult::with_all_items(Vec::new()));
        }
        let templates: Vec<ResourceTemplate> = parse_all(
            "resource template",
            self.listing(&self.door_principal())
                .await?
                .resource_templates,
        )?;
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Box::pin(self.serve_read_resource(request, _context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        if !self.exposed(Kind::Prompts) {
            return Ok(ListPromptsResult::with_all_items(Vec::new()));
        }
        let prompts: Vec<Prompt> = parse_all(
            "prompt",
            self.listing(&self.door_principal()).await?.prompts,
        )?;
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Box::pin(self.serve_get_prompt(request, _context)).await
    }

    /// rmcp hands on as a custom request a request of a method it knows whose params it could not
    /// read: that is a client's mistake in the params (-32602), not an unknown method.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        Err(refuse_custom_request(
            &request.method,
            request.params.as_ref(),
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(session) = &self.session else {
            return;
        };
        let ended = session.0.clone();
        // The relay lists what this session's client sees: the client the door identified on the
        // request that finished the handshake.
        let mut server = self.detached();
        if let Some(principal) = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
        {
            server.principal = Some(principal.clone());
        }
        let counted = RelayCounted::new(&self.relays);
        // One task per session relays both kinds of events while the session lives, and ends with it.
        tokio::spawn(async move {
            let _counted = counted;
            tokio::select! {
                _ = ended.cancelled() => {}
                _ = server.relay_session_events(context.peer) => {}
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // List changes, and updates of at most MAX_SUBSCRIPTIONS_PER_SESSION resources per stream.
        let mut accepted = requested.clone();
        accepted.resource_subscriptions = match &accepted.resource_subscriptions {
            Some(uris) if self.exposed(Kind::Resources) && !uris.is_empty() => Some(
                uris.iter()
                    .take(MAX_SUBSCRIPTIONS_PER_SESSION)
                    .cloned()
                    .collect(),
            ),
            _ => None,
        };
        Some(accepted)
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let task_id = request.task_id;
        let operation = portico_core::TaskOperation::Get {
            task_id: task_id.clone(),
        };
        let answer = self.task_operation(&client_of(&context), operation).await?;
        let mut answer = self.budgeted_task_state(&task_id, answer)?;
        answer.insert("resultType".into(), "complete".into());
        from_result("task state", answer)
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let operation = portico_core::TaskOperation::Update {
            task_id: request.task_id,
            answers: request.input_responses.into_iter().collect(),
        };
        self.task_operation(&client_of(&context), operation)
            .await
            .map(drop)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let operation = portico_core::TaskOperation::Cancel {
            task_id: request.task_id,
        };
        self.task_operation(&client_of(&context), operation)
            .await
            .map(drop)
    }

    /// 2026-07-28 clients ask for list changes on a `subscriptions/listen` stream instead.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        Box::pin(self.serve_listen(context)).await
    }
}

/// The bodies of the larger request handlers. rmcp holds every request's handler future inside the
/// future of the task it spawns per request, so that future (copied on every spawn and poll hand-off)
/// is as large as the largest handler's: 3.2 KB for `call_tool`. The trait methods box these instead,
/// one allocation per request, so the per-request task stays small.
impl PorticoServer {
    async fn serve_call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.require_exposed(Kind::Tools)?;
        let principal = self.principal_of(&context);
        // Answers that are not results go nowhere: not to a parked call, not to an upstream.
        if let Some(responses) = &request.input_responses {
            check_input_responses(responses)?;
        }
        // A 2026-07-28 client cannot be sent requests during its call: run the call apart and put
        // what it asks for to the client as input rounds.
        if takes_input_rounds(&context) {
            let binding = CallBinding::new(&request.name, request.arguments.as_ref());
            if let Some(state) = &request.request_state {
                // Every round Portico puts to a client asks something: a retry without answers
                // (left out, or `null`) is a malformed one, refused with the call still parked.
                if request.input_responses.is_none() {
                    return Err(McpError::invalid_params(
                        "a retry with requestState carries inputResponses: an object with the answer to each input request of the round, under its key",
                        None,
                    ));
                }
                return self
                    .parked
                    .next_round(
                        &binding,
                        state,
                        &client_of(&context),
                        request.input_responses.clone(),
                    )
                    .await;
            }
            // The place is taken before anything of the call exists.
            let place = self.parked.admit(&client_of(&context))?;
            let (events, receiver) =
                tokio::sync::mpsc::channel(crate::input_rounds::MAX_REQUESTS_PER_ROUND);
            let mut call_context = self.call_context(&context);
            if let Some(inner) = call_context.caller.take() {
                // Answers sent up front go to the upstream with the call, whose own they are.
                let given = request
                    .input_responses
                    .clone()
                    .map(|answers| answers.into_iter().collect());
                call_context.caller = Some(Arc::new(InputRoundsCaller {
                    inner,
                    events: events.clone(),
                    given: Mutex::new(given),
                }));
            }
            let server = self.clone();
            // A call that asks for input outlives this request, which ends with the first
            // `input_required` answer; a call nobody resumes is ended by expiry instead (see
            // `input_rounds`).
            let cancelled = tokio_util::sync::CancellationToken::new();
            let cancel = cancelled.clone().drop_guard();
            let owner = client_of(&context);
            // Run apart, still in the door's span.
            let call = Box::pin(
                async move {
                    server
                        .run_call(&principal, &owner, request, call_context, cancelled)
                        .await
                }
                .in_current_span(),
            );
            return self
                .parked
                .run(
                    &binding,
                    place,
                    call,
                    events,
                    receiver,
                    crate::input_rounds::CallCancel {
                        guard: cancel,
                        client_gone: context.ct,
                    },
                )
                .await;
        }
        let call_context = self.call_context(&context);
        self.run_call(
            &principal,
            &client_of(&context),
            request,
            call_context,
            context.ct,
        )
        .await
    }

    /// A 2026-07-28 client's `subscriptions/listen` stream: list changes, and updates of the
    /// resources it names, which Portico follows upstream for as long as the stream is open.
    async fn serve_listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut followed = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        followed.sort();
        followed.dedup();
        // Only what was subscribed here is given back at the end: the upstream side is shared and
        // counted, so giving back a URI whose subscribe failed would end another client's. Given
        // back when `held` drops: at the stream's end, or when the client hangs up and this
        // request is dropped, even half-way through these subscribes.
        let mut held = ListenHold::new(self.backend.clone());
        // Taken before the first subscribe, so an update the upstream sends as soon as it
        // follows a URI is not lost while the others are subscribed.
        let updates = self.backend.resource_updates();
        for uri in &followed {
            match self.backend.subscribe(uri).await {
                Ok(()) => held.held(uri.clone()),
                Err(error) => tracing::warn!(
                    uri,
                    "subscriptions/listen: cannot follow the resource: {error}"
                ),
            }
        }
        let served = self.listen_until_done(&context, &followed, updates).await;
        drop(held);
        served
    }

    async fn listen_until_done(
        &self,
        context: &SubscriptionContext,
        followed: &[String],
        mut updates: tokio::sync::broadcast::Receiver<String>,
    ) -> Result<(), McpError> {
        let mut changes = self.changes();
        let principal = self.principal_of(context.request_context());
        let mut last = self.listing(&principal).await.unwrap_or_default().digest();
        let accepted = context.accepted().clone();
        let sink = context.sink();
        loop {
            let change = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.next() => change,
                uri = next_update(&mut updates), if !followed.is_empty() => {
                    if followed.contains(&uri) && sink.notify_resource_updated(uri).await.is_err() {
                        return Ok(());
                    }
                    continue;
                }
            };
            let Ok(now) = self.listing(&principal).await.map(|l| l.digest()) else {
                continue;
            };
            let changed = match change {
                Change::Ended => return Ok(()),
                Change::Maybe => ChangedKinds::between(&last, &now, &self.options.exposure),
                Change::Announced(kind) => ChangedKinds::announced(kind, &self.options.exposure),
            };
            let sent = async {
                if changed.tools && accepted.tools_list_changed == Some(true) {
                    sink.notify_tool_list_changed().await?;
                }
                if changed.prompts && accepted.prompts_list_changed == Some(true) {
                    sink.notify_prompt_list_changed().await?;
                }
                if changed.resources && accepted.resources_list_changed == Some(true) {
                    sink.notify_resource_list_changed().await?;
                }
                Ok::<_, rmcp::service::SubscriptionSendError>(())
            };
            if sent.await.is_err() {
                return Ok(());
            }
            last = now;
        }
    }

    async fn serve_complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = match &request.r#ref {
            rmcp::model::Reference::Resource(resource) => {
                self.require_exposed(Kind::Resources)?;
                portico_core::CompletionRef::Resource {
                    uri: resource.uri.clone(),
                }
            }
            rmcp::model::Reference::Prompt(prompt) => {
                self.require_exposed(Kind::Prompts)?;
                portico_core::CompletionRef::Prompt {
                    name: prompt.name.clone(),
                    title: prompt.title.clone(),
                }
            }
            // A kind of reference newer than this code.
            other => {
                return Err(McpError::internal_error(
                    format!(
                        "completion reference {} is neither a ref/prompt nor a ref/resource",
                        serde_json::to_string(other).unwrap_or_default()
                    ),
                    None,
                ));
            }
        };
        let mut params = serde_json::to_value(&request)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        params.remove("ref");
        let result = self
            .backend
            .complete(&reference, params)
            .await
            .map_err(backend_error)?;
        from_result("completion", result)
    }

    async fn serve_get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.require_exposed(Kind::Prompts)?;
        if let Some(responses) = &request.input_responses {
            check_input_responses(responses)?;
        }
        // The rest of the request (a 2026-07-28 client's answers to the upstream's input rounds)
        // goes to the upstream unread; the envelope is this request's own.
        let mut rest = serde_json::to_value(&request)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        for own in ["name", "arguments", "_meta"] {
            rest.remove(own);
        }
        let result = self
            .backend
            .get_prompt(&request.name, request.arguments, rest)
            .await
            .map_err(backend_error)?;
        // A 2026-07-28 upstream's input rounds for a prompt go to a 2026-07-28 client as they
        // are: its answers and the round's requestState come back to the upstream with the retry.
        if result.get("resultType").and_then(|t| t.as_str()) == Some("input_required") {
            if !takes_input_rounds(&context) {
                return Err(McpError::internal_error(
                    format!(
                        "prompt `{}` needs input from the client, which Portico relays for prompts only to 2026-07-28 clients",
                        request.name
                    ),
                    None,
                ));
            }
            let input: rmcp::model::InputRequiredResult =
                from_object("prompt input round", result)?;
            return Ok(GetPromptResponse::InputRequired(input));
        }
        let result: GetPromptResult = from_result("prompt", result)?;
        self.within_budget(&format!("prompt `{}`", request.name), &result)?;
        Ok(result.into())
    }

    async fn serve_read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.require_exposed(Kind::Resources)?;
        let result =
            self.backend
                .read_resource(&request.uri)
                .await
                .map_err(|error| match error {
                    // SEP-2164: the error names the URI it did not find.
                    BackendError::Upstreams(UpstreamsError::UnknownResource(message)) => {
                        McpError::resource_not_found(
                            message,
                            Some(serde_json::json!({ "uri": request.uri })),
                        )
                    }
                    other => backend_error(other),
                })?;
        let result: ReadResourceResult = from_result("resource contents", result)?;
        self.within_budget(&format!("resource `{}`", request.uri), &result)?;
        Ok(result.into())
    }

    #[allow(deprecated)]
    async fn serve_subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.require_exposed(Kind::Resources)?;
        // The upstream side is shared by every session and counted per subscriber, so a session
        // counts once per URI however often it subscribes; claimed first so that two concurrent
        // subscribes of one session do not both count, and given up if the subscribe fails or
        // this request is dropped.
        let Some(claim) = self.subscriptions.claim(&request.uri)? else {
            return Ok(());
        };
        self.backend
            .subscribe(&request.uri)
            .await
            .map_err(backend_error)?;
        claim.keep();
        Ok(())
    }

    #[allow(deprecated)]
    async fn serve_unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Only a URI this session subscribed to is given back upstream: another session's
        // unsubscribe must not end a subscription that is not its own.
        if !self.subscriptions.release(&request.uri) {
            return Ok(());
        }
        self.backend
            .unsubscribe(&request.uri)
            .await
            .map_err(backend_error)
    }

    #[allow(deprecated)]
    async fn serve_set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = serde_json::to_value(request.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "info".into());
        self.backend
            .set_log_level(&level)
            .await
            .map_err(backend_error)
    }
}

impl PorticoServer {
    /// Subscribed resources' updates and (for handshake-era clients, which get them as plain
    /// notifications) list changes, relayed to one session until its client is gone.
    async fn relay_session_events(self, peer: rmcp::service::Peer<RoleServer>) {
        tokio::join!(
            self.relay_resource_updates(peer.clone()),
            self.relay_list_changes(peer)
        );
    }

    async fn relay_resource_updates(&self, peer: rmcp::service::Peer<RoleServer>) {
        let mut updates = self.backend.resource_updates();
        loop {
            let uri = match updates.recv().await {
                Ok(uri) => uri,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            };
            if !self.subscriptions.contains(&uri) {
                continue;
            }
            let params = ResourceUpdatedNotificationParam::new(uri);
            if peer.notify_resource_updated(params).await.is_err() || peer.is_transport_closed() {
                return;
            }
        }
    }

    async fn relay_list_changes(&self, peer: rmcp::service::Peer<RoleServer>) {
        let mut changes = self.changes();
        let mut last = self
            .listing(&self.door_principal())
            .await
            .unwrap_or_default()
            .digest();
        let exposure = &self.options.exposure;
        loop {
            let change = changes.next().await;
            if let Change::Ended = change {
                return;
            }
            let Ok(now) = self
                .listing(&self.door_principal())
                .await
                .map(|l| l.digest())
            else {
                continue;
            };
            let changed = match change {
                Change::Announced(kind) => ChangedKinds::announced(kind, exposure),
                _ => ChangedKinds::between(&last, &now, exposure),
            };
            let sent = async {
                if changed.tools {
                    peer.notify_tool_list_changed().await?;
                }
                if changed.prompts {
                    peer.notify_prompt_list_changed().await?;
                }
                if changed.resources {
                    peer.notify_resource_list_changed().await?;
                }
                Ok::<_, rmcp::service::ServiceError>(())
            };
            if sent.await.is_err() || peer.is_transport_closed() {
                return;
            }
            last = now;
        }
    }
}

/// The next resource update; never, once no more can come.
async fn next_update(updates: &mut tokio::sync::broadcast::Receiver<String>) -> String {
    loop {
        match updates.recv().await {
            Ok(uri) => return uri,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => std::future::pending().await,
        }
    }
}

/// Change signals from the backend and the host tools, awaited together.
struct Changes {
    backend: tokio::sync::watch::Receiver<u64>,
    host: tokio::sync::watch::Receiver<u64>,
    announced: Option<tokio::sync::broadcast::Receiver<portico_engine::ListKind>>,
}

/// What [`Changes::next`] saw.
enum Change {
    /// Something may have changed: compare the listings.
    Maybe,
    /// A passed-through upstream announced a change of this list, which reads the same.
    Announced(portico_engine::ListKind),
    /// Nothing can change any more.
    Ended,
}

impl Changes {
    /// Waits for the next change.
    async fn next(&mut self) -> Change {
        let announced = async {
            match self.announced.as_mut() {
                Some(announced) => loop {
                    match announced.recv().await {
                        Ok(kind) => return Some(kind),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(_) => return None,
                    }
                },
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = self.backend.changed() => if r.is_ok() { Change::Maybe } else { Change::Ended },
            r = self.host.changed() => if r.is_ok() { Change::Maybe } else { Change::Ended },
            kind = announced => match kind {
                Some(kind) => Change::Announced(kind),
                None => Change::Ended,
            },
        }
    }
}

impl ChangedKinds {
    /// Only the announced list, if exposed.
    fn announced(kind: portico_engine::ListKind, exposure: &Exposure) -> Self {
        use portico_engine::ListKind;
        ChangedKinds {
            tools: exposure.tools && kind == ListKind::Tools,
            prompts: exposure.prompts && kind == ListKind::Prompts,
            resources: exposure.resources && kind == ListKind::Resources,
        }
    }
}

/// Which exposed lists differ between two listings: a list_changed goes out only for a real change, not
/// for every server state change.
struct ChangedKinds {
    tools: bool,
    prompts: bool,
    resources: bool,
}

impl ChangedKinds {
    fn between(last: &ListingDigest, now: &ListingDigest, exposure: &Exposure) -> Self {
        ChangedKinds {
            tools: exposure.tools && now.tools != last.tools,
            prompts: exposure.prompts && now.prompts != last.prompts,
            resources: exposure.resources && now.resources != last.resources,
        }
    }
}

impl ServerOptions {
    /// The options the config's `[server]` and `[expose]` sections ask for.
    pub fn from_config(config: &portico_config::Config) -> Self {
        ServerOptions {
            instructions: config.server.instructions.clone(),
            exposure: Exposure {
                tools: config.expose.tools,
                resources: config.expose.resources,
                prompts: config.expose.prompts,
            },
            max_response_bytes: config.server.max_response_bytes,
            tool_search: match config.expose.tool_search {
                portico_config::ToolSearchMode::On => ToolSearch::On,
                portico_config::ToolSearchMode::Off => ToolSearch::Off,
                portico_config::ToolSearchMode::Auto => {
                    ToolSearch::Above(config.expose.tool_search_threshold)
                }
            },
            door: "mcp".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_size_is_the_length_of_the_json() {
        let result = CallToolResult::success(vec![ContentBlock::text("héllo \"quoted\"\n")]);
        assert_eq!(
            portico_core::json_size(&result),
            serde_json::to_vec(&result).unwrap().len()
        );
    }
}
