//! The MCP request handler: dispatches the suite's tool, resource, prompt, completion and logging
//! requests to [`crate::catalog`] and performs the server-to-client traffic some tools require.
//!
//! Behaviour follows the era of each request. In a handshake-era session (2025-11-25 and older) the
//! tools that need the client send `sampling/createMessage` and `elicitation/create` mid-call,
//! `logging/setLevel` sets the session's level and `resources/subscribe` subscribes. A 2026-07-28
//! request (stateless, its own `_meta`) gets [`crate::input_required`] rounds instead, logs only when
//! its `_meta` names a `logLevel`, and subscribes through [`crate::listen`]. Every result carries
//! `resultType: "complete"`; rmcp strips it again for handshake-era peers.
//!
//! rmcp 3.11 marks logging and sampling deprecated (SEP-2577 drops them from protocol 2026-07-28).
//! The handshake-era scenarios exercise both, and testing them is this fixture's purpose, hence the
//! module-wide allowance.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CreateMessageRequestParams, ElicitRequestParams,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceUpdatedNotificationParam, ServerCapabilities, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::catalog::{self, CompletionRef, PromptError, RECONNECTION_TOOL, wire};
use crate::input_required::{self, Outcome, StateSeal};
use crate::listen::{Change, Listeners};
use crate::reconnect::StreamControl;
use crate::tasks::{self, Tasks};

/// Delay between the notifications of the logging and progress tools. The suite's descriptions ask for
/// "~50ms" so that a client sees the notifications arrive while the call is still open.
const STEP_DELAY: Duration = Duration::from_millis(50);

/// Delay before the single `notifications/resources/updated` that follows a subscription, so that it
/// arrives after the `resources/subscribe` response, as a real change would.
const UPDATE_DELAY: Duration = Duration::from_millis(100);

/// RFC 5424 severities as MCP names them, least severe first; the index is the rank `setLevel` compares.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Logger name on every `notifications/message` the fixture sends.
const LOGGER: &str = "portico-conformance-fixture";

/// What every handler of the process shares: the `requestState` key and the open listen streams.
/// Stateless clients may send each request on a new connection, which gets a new handler.
#[derive(Default)]
pub struct Shared {
    seal: StateSeal,
    listeners: Listeners,
    tasks: Arc<Tasks>,
}

/// One MCP session's handler. Over Streamable HTTP rmcp builds one per session (through the service
/// factory), so the log level and subscriptions below are per session, as MCP specifies.
pub struct ConformanceServer {
    /// Minimum rank of `notifications/message` to send; 0 (debug) until the client calls `setLevel`.
    log_level: Arc<AtomicU8>,
    subscriptions: Arc<Mutex<HashSet<String>>>,
    /// Present only over Streamable HTTP: lets `test_reconnection` close its own SSE response stream.
    streams: Option<Arc<StreamControl>>,
    shared: Arc<Shared>,
}

impl ConformanceServer {
    /// A handler for stdio, where there is no SSE stream to close.
    pub fn new() -> Self {
        Self::with_shared(Arc::default())
    }

    fn with_shared(shared: Arc<Shared>) -> Self {
        Self {
            log_level: Arc::new(AtomicU8::new(0)),
            subscriptions: Arc::default(),
            streams: None,
            shared,
        }
    }

    /// A handler for one Streamable HTTP session managed by `streams`, sharing `shared` with the
    /// process's other handlers.
    pub fn with_stream_control(streams: Arc<StreamControl>, shared: Arc<Shared>) -> Self {
        Self {
            streams: Some(streams),
            ..Self::with_shared(shared)
        }
    }

    /// Sends `notifications/message` unless `level` is below the minimum: the session's
    /// `logging/setLevel` in the handshake era, the request's `_meta` `logLevel` at 2026-07-28 (no
    /// `logLevel`, no log messages).
    async fn log(&self, context: &RequestContext<RoleServer>, level: &str, message: &str) {
        let rank = level_rank(level).unwrap_or(0);
        let minimum = if takes_input_rounds(context) {
            let requested = context
                .meta
                .log_level()
                .and_then(|level| serde_json::to_value(level).ok())
                .and_then(|level| level.as_str().and_then(level_rank));
            let Some(minimum) = requested else { return };
            minimum
        } else {
            self.log_level.load(Ordering::Relaxed)
        };
        if rank < minimum {
            return;
        }
        let params: LoggingMessageNotificationParam =
            wire(json!({"level": level, "logger": LOGGER, "data": message}));
        let sent = context.peer.notify_logging_message(params).await;
        // A client that went away mid-call cannot be told anything; the call result reports the rest.
        if let Err(error) = sent {
            tracing::debug!(%error, "could not send notifications/message");
        }
    }

    async fn call(
        &self,
        name: &str,
        arguments: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let string_argument = |key: &str| -> Result<String, McpError> {
            match arguments.get(key) {
                Some(Value::String(value)) => Ok(value.clone()),
                _ => Err(McpError::invalid_params(
                    format!("tool {name} needs the string argument `{key}`"),
                    None,
                )),
            }
        };
        Ok(match name {
            "test_simple_text" => {
                catalog::text_result("This is a simple text response for testing.")
            }
            "test_image_content" => catalog::image_result(),
            "test_audio_content" => catalog::audio_result(),
            "test_embedded_resource" => catalog::embedded_resource_result(),
            "test_multiple_content_types" => catalog::mixed_content_result(),
            "test_error_handling" => {
                catalog::error_result("This tool intentionally returns an error for testing")
            }
            "test_tool_with_logging" => {
                self.log(context, "info", "Tool execution started").await;
                tokio::time::sleep(STEP_DELAY).await;
                self.log(context, "info", "Tool processing data").await;
                tokio::time::sleep(STEP_DELAY).await;
                self.log(context, "info", "Tool execution completed").await;
                catalog::text_result("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => self.progress(context).await,
            RECONNECTION_TOOL => self.reconnection(context).await,
            "test_sampling" => sample(&string_argument("prompt")?, context).await,
            "test_elicitation" => {
                let params = catalog::elicitation_basic(&string_argument("message")?);
                elicit(params, "User response", context).await
            }
            "test_elicitation_sep1034_defaults" => {
                let params = catalog::elicitation_sep1034_defaults();
                elicit(params, "Elicitation completed", context).await
            }
            "test_elicitation_sep1330_enums" => {
                let params = catalog::elicitation_sep1330_enums();
                elicit(params, "Elicitation completed", context).await
            }
            "json_schema_2020_12_tool" => catalog::text_result(&format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(arguments.clone())
            )),
            catalog::CUSTOM_HEADER_TOOL => {
                catalog::text_result(&format!("Region: {}", string_argument("region")?))
            }
            "test_missing_capability" => {
                // Needs sampling: a request that did not declare it is refused, as 2026-07-28 requires.
                if client_capabilities(context).sampling.is_none() {
                    let mut required = ClientCapabilities::default();
                    required.sampling = Some(Default::default());
                    return Err(McpError::missing_required_client_capability(required));
                }
                catalog::text_result("The client declared sampling")
            }
            "test_logging_tool" => {
                self.log(context, "info", "test_logging_tool ran").await;
                catalog::text_result("Logged at info, if the request asked for logs")
            }
            "test_trigger_tool_change" => {
                let delivered = self.shared.listeners.announce(Change::Tools).await;
                if !takes_input_rounds(context) {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                catalog::text_result(&format!(
                    "Announced a tool list change to {delivered} listen stream(s)"
                ))
            }
            "test_trigger_prompt_change" => {
                let delivered = self.shared.listeners.announce(Change::Prompts).await;
                if !takes_input_rounds(context) {
                    let _ = context.peer.notify_prompt_list_changed().await;
                }
                catalog::text_result(&format!(
                    "Announced a prompt list change to {delivered} listen stream(s)"
                ))
            }
            _ => {
                return Err(McpError::invalid_params(
                    format!("unknown tool: {name}"),
                    None,
                ));
            }
        })
    }

    /// The [`input_required`] exchange behind `name`, when there is one and the request takes input
    /// rounds (2026-07-28). Handshake-era sessions keep mid-call requests for the tools that have them;
    /// the 2026-only tools answer them with rmcp's refusal of `input_required` for such peers.
    fn input_round(
        &self,
        name: &str,
        arguments: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
        responses: Option<&rmcp::model::InputResponses>,
        request_state: Option<&str>,
    ) -> Option<Result<Round, McpError>> {
        let handshake_tool = matches!(
            name,
            "test_sampling"
                | "test_elicitation"
                | "test_elicitation_sep1034_defaults"
                | "test_elicitation_sep1330_enums"
        );
        if handshake_tool && !takes_input_rounds(context) {
            return None;
        }
        let capabilities = client_capabilities(context);
        if handshake_tool {
            let declared = if name == "test_sampling" {
                capabilities.sampling.is_some()
            } else {
                capabilities.elicitation.is_some()
            };
            if !declared {
                let what = if name == "test_sampling" {
                    "sampling"
                } else {
                    "elicitation"
                };
                return Some(Ok(Round::Done(catalog::error_result(&format!(
                    "The client did not declare the {what} capability"
                )))));
            }
        }
        let outcome = input_required::advance(
            &self.shared.seal,
            name,
            arguments,
            &capabilities,
            responses,
            request_state,
        )?;
        Some(outcome.map(|outcome| match outcome {
            Outcome::InputRequired(result) => Round::Ask(result),
            Outcome::Complete(answers) if name == input_required::PROMPT => {
                Round::Done(input_required::prompt_result(&answers))
            }
            Outcome::Complete(answers) => Round::Done(catalog::text_result(
                &input_required::completion_text(name, &answers),
            )),
        }))
    }

    /// `test_tool_with_progress`: 0, 50 and 100 of 100, ~50 ms apart, on the call's progress token.
    async fn progress(&self, context: &RequestContext<RoleServer>) -> Value {
        let token = context.meta.get_progress_token();
        for (step, progress) in [0, 50, 100].into_iter().enumerate() {
            if step > 0 {
                tokio::time::sleep(STEP_DELAY).await;
            }
            // Without a token the client asked for no progress; the delays still run, as specified.
            let Some(token) = &token else { continue };
            let params: ProgressNotificationParam = wire(json!({
                "progressToken": token,
                "progress": progress,
                "total": 100,
                "message": format!("Completed step {progress} of 100"),
            }));
            if let Err(error) = context.peer.notify_progress(params).await {
                tracing::debug!(%error, "could not send notifications/progress");
            }
        }
        let token = token.map_or(Value::Null, |token| json!(token));
        catalog::text_result(&format!("Progress reported on token {token}"))
    }

    /// `test_reconnection` (SEP-1699 polling). Over Streamable HTTP the tool closes the SSE stream of
    /// its own POST and answers only once the client has reconnected with `Last-Event-ID`, so the
    /// answer travels on the resumed stream. Elsewhere (stdio, or a request outside a session) it
    /// just answers.
    async fn reconnection(&self, context: &RequestContext<RoleServer>) -> Value {
        let session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok());
        let outcome = match (&self.streams, session) {
            (Some(streams), Some(session)) => {
                streams.close_and_await_resume(session, &context.id).await
            }
            _ => crate::reconnect::Outcome::NotApplicable,
        };
        tracing::debug!(?outcome, "test_reconnection");
        catalog::text_result(
            "Reconnection test completed successfully. If you received this, the client properly \
             reconnected after stream closure.",
        )
    }
}

/// Where an [`input_required`] exchange stands after one call.
enum Round {
    /// Answer with these input requests.
    Ask(rmcp::model::InputRequiredResult),
    /// Answer with this (tool or prompt) result.
    Done(Value),
}

/// Decodes a fixture result, adding `resultType: "complete"`, which 2026-07-28 requires on every
/// result (rmcp strips it for handshake-era peers).
fn complete<T: DeserializeOwned>(mut value: Value) -> T {
    if let Some(object) = value.as_object_mut() {
        object
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
    }
    wire(value)
}

/// Whether the request speaks 2026-07-28 or later, where servers ask through `input_required`
/// results instead of requests.
fn takes_input_rounds(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= "2026-07-28")
}

/// The capabilities the request declared: its own `_meta` at 2026-07-28, the session's otherwise.
fn client_capabilities(context: &RequestContext<RoleServer>) -> ClientCapabilities {
    context.client_capabilities().unwrap_or_default()
}

impl Default for ConformanceServer {
    fn default() -> Self {
        Self::new()
    }
}

fn level_rank(level: &str) -> Option<u8> {
    LOG_LEVELS
        .iter()
        .position(|candidate| *candidate == level)
        .and_then(|rank| u8::try_from(rank).ok())
}

/// `test_sampling`: one `sampling/createMessage` round trip, answered with the model's text.
async fn sample(prompt: &str, context: &RequestContext<RoleServer>) -> Value {
    // The spec says a server must not send sampling requests to a client that did not declare the
    // capability; the suite's description asks for an error result in that case.
    if !client_declared(context, |caps| caps.sampling.is_some()) {
        return catalog::error_result("The client did not declare the sampling capability");
    }
    let params: CreateMessageRequestParams = wire(catalog::sampling_request(prompt));
    let answer = context.peer.create_message(params).await;
    match answer {
        Ok(result) => {
            let result = serde_json::to_value(&result).unwrap_or(Value::Null);
            catalog::text_result(&format!(
                "LLM response: {}",
                input_required::sampled_text(&result)
            ))
        }
        Err(error) => catalog::error_result(&format!("Sampling failed: {error}")),
    }
}

/// The elicitation tools: one `elicitation/create` round trip, answered with the client's decision.
async fn elicit(params: Value, label: &str, context: &RequestContext<RoleServer>) -> Value {
    if !client_declared(context, |caps| caps.elicitation.is_some()) {
        return catalog::error_result("The client did not declare the elicitation capability");
    }
    let params: ElicitRequestParams = wire(params);
    match context.peer.create_elicitation(params).await {
        Ok(result) => {
            let result = serde_json::to_value(&result).unwrap_or(Value::Null);
            catalog::text_result(&input_required::elicitation_summary(label, &result))
        }
        Err(error) => catalog::error_result(&format!("Elicitation failed: {error}")),
    }
}

fn client_declared(
    context: &RequestContext<RoleServer>,
    check: impl Fn(&rmcp::model::ClientCapabilities) -> bool,
) -> bool {
    context
        .peer
        .peer_info()
        .is_some_and(|info| check(&info.capabilities))
}

fn prompt_error(name: &str, error: PromptError) -> McpError {
    match error {
        PromptError::UnknownPrompt => {
            McpError::invalid_params(format!("unknown prompt: {name}"), None)
        }
        PromptError::MissingArgument(key) => {
            McpError::invalid_params(format!("prompt {name} needs the argument `{key}`"), None)
        }
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> InitializeResult {
        // Every capability a server scenario exercises. Tool and prompt list changes are announced by
        // the trigger tools (`test_trigger_tool_change`, `test_trigger_prompt_change`); the resource
        // list never changes, so it promises no such notifications.
        let capabilities: ServerCapabilities = wire(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": false},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}
        }));
        InitializeResult::new(capabilities)
            .with_server_info(wire(json!({
                "name": "portico-conformance-fixture",
                "version": env!("CARGO_PKG_VERSION"),
            })))
            .with_instructions(
                "Test fixture exposing the server surface the MCP conformance suite \
                 (@modelcontextprotocol/conformance 0.2.0-alpha.12) expects. Not a product server.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(complete(catalog::tools()))
    }

    /// Lets rmcp's HTTP transport check `Mcp-Param-*` headers against the tool's `x-mcp-header`
    /// annotations (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let tools: ListToolsResult = wire(catalog::tools());
        tools.tools.into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        if tasks::handles(&request.name) {
            let call = self.shared.tasks.call(
                &request.name,
                &arguments,
                &client_capabilities(&context),
                request.input_responses.as_ref(),
            )?;
            return Ok(match call {
                tasks::Call::Done(result) => complete::<CallToolResult>(result).into(),
                tasks::Call::After(delay, result) => {
                    tokio::time::sleep(delay).await;
                    complete::<CallToolResult>(result).into()
                }
                tasks::Call::Ask(result) => {
                    CallToolResponse::InputRequired(wire::<rmcp::model::InputRequiredResult>(
                        result,
                    ))
                }
                tasks::Call::Task(created) => CallToolResponse::Task(created),
            });
        }
        let round = self.input_round(
            &request.name,
            &arguments,
            &context,
            request.input_responses.as_ref(),
            request.request_state.as_deref(),
        );
        let result = match round {
            Some(round) => match round? {
                Round::Ask(result) => return Ok(result.into()),
                Round::Done(result) => result,
            },
            None => self.call(&request.name, &arguments, &context).await?,
        };
        Ok(complete::<CallToolResult>(result).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(complete(catalog::resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(complete(catalog::resource_templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match catalog::read_resource(&request.uri) {
            Some(result) => Ok(complete::<ReadResourceResult>(result).into()),
            None => Err(McpError::resource_not_found(
                format!("no such resource: {}", request.uri),
                Some(json!({"uri": request.uri})),
            )),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if catalog::read_resource(&request.uri).is_none() {
            return Err(McpError::resource_not_found(
                format!("no such resource: {}", request.uri),
                Some(json!({"uri": request.uri})),
            ));
        }
        self.subscriptions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(request.uri.clone());
        // The suite only checks the empty result. One `notifications/resources/updated` after the
        // answer gives a gateway test something to observe: that updates for a subscription reach the
        // subscriber. Skipped if the client unsubscribed in the meantime.
        let subscriptions = Arc::clone(&self.subscriptions);
        let peer = context.peer.clone();
        tokio::spawn(async move {
            tokio::time::sleep(UPDATE_DELAY).await;
            let still_subscribed = subscriptions
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .contains(&request.uri);
            if still_subscribed {
                let params: ResourceUpdatedNotificationParam = wire(json!({"uri": request.uri}));
                if let Err(error) = peer.notify_resource_updated(params).await {
                    tracing::debug!(%error, "could not send notifications/resources/updated");
                }
            }
        });
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&request.uri);
        Ok(())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.shared.tasks.get(&request.task_id)
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared
            .tasks
            .update(&request.task_id, &request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared.tasks.cancel(&request.task_id)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for, except resources the fixture does not have. rmcp narrows the result
        // further to what get_info advertises.
        let mut accepted = requested.clone();
        if let Some(uris) = accepted.resource_subscriptions.as_mut() {
            uris.retain(|uri| catalog::read_resource(uri).is_some());
        }
        Some(accepted)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let _registration = self.shared.listeners.register(subscription.sink().clone());
        // The handshake era's subscribe sends one update after subscribing; the listen stream does
        // the same for each resource it accepted, so a gateway can relay an update either way.
        let uris = subscription
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        if !uris.is_empty() {
            let sink = subscription.sink().clone();
            tokio::spawn(async move {
                tokio::time::sleep(UPDATE_DELAY).await;
                for uri in uris {
                    if let Err(error) = sink.notify_resource_updated(uri).await {
                        tracing::debug!(%error, "could not send notifications/resources/updated");
                    }
                }
            });
        }
        subscription.cancelled().await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(complete(catalog::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let round = self.input_round(
            &request.name,
            &arguments,
            &context,
            request.input_responses.as_ref(),
            request.request_state.as_deref(),
        );
        if let Some(round) = round {
            return Ok(match round? {
                Round::Ask(result) => result.into(),
                Round::Done(result) => complete::<GetPromptResult>(result).into(),
            });
        }
        let argument = |key: &str| arguments.get(key).and_then(Value::as_str);
        let result = catalog::get_prompt(&request.name, argument)
            .map_err(|error| prompt_error(&request.name, error))?;
        Ok(complete::<GetPromptResult>(result).into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        // Matched on the wire form: rmcp's `Reference` is non-exhaustive.
        let reference = serde_json::to_value(&request.r#ref).unwrap_or(Value::Null);
        let kind = match reference["type"].as_str() {
            Some("ref/prompt") => CompletionRef::Prompt(reference["name"].as_str().unwrap_or("")),
            Some("ref/resource") => {
                CompletionRef::ResourceTemplate(reference["uri"].as_str().unwrap_or(""))
            }
            _ => CompletionRef::Unknown,
        };
        Ok(complete(catalog::complete(
            kind,
            &request.argument.name,
            &request.argument.value,
        )))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Read the level through its wire name: rmcp's `LoggingLevel` enum is deprecated (SEP-2577).
        let level = serde_json::to_value(&request)
            .ok()
            .and_then(|params| params["level"].as_str().and_then(level_rank));
        let Some(rank) = level else {
            return Err(McpError::invalid_params("unknown logging level", None));
        };
        self.log_level.store(rank, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_rank_in_severity_order() {
        assert_eq!(level_rank("debug"), Some(0));
        assert_eq!(level_rank("info"), Some(1));
        assert_eq!(level_rank("emergency"), Some(7));
        assert_eq!(level_rank("loud"), None);
    }

    #[test]
    fn sampled_text_reads_single_and_array_content() {
        let sampled_text = input_required::sampled_text;
        assert_eq!(
            sampled_text(&json!({"content": {"type": "text", "text": "a"}})),
            "a"
        );
        assert_eq!(
            sampled_text(&json!({"content": [{"type": "text", "text": "b"}]})),
            "b"
        );
    }

    #[test]
    fn results_gain_result_type_complete() {
        let result: CallToolResult = complete(catalog::text_result("x"));
        let wire = serde_json::to_value(result).unwrap();
        assert_eq!(wire["resultType"], "complete");
        assert_eq!(wire["content"][0]["text"], "x");
    }

    #[test]
    fn info_advertises_what_the_scenarios_need() {
        let info = serde_json::to_value(ConformanceServer::new().get_info()).unwrap();
        let caps = &info["capabilities"];
        for key in ["tools", "prompts", "logging", "completions"] {
            assert!(caps[key].is_object(), "{key} missing from {caps}");
        }
        assert_eq!(caps["resources"]["subscribe"], true);
    }
}
