//! The agent loop, and the agents as tools of the pipeline.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::join_all;
use portico_config::{AgentConfig, agent_tool_name};
use portico_core::relay::BoxFuture;
use portico_core::{CallError, JsonObject, ToolResult};
use portico_llm::{
    ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent, ToolCall, ToolSpec,
    Usage,
};
use portico_pipeline::{
    ArtifactPart, Pipeline, Principal, ProgressEvent, ToolContext, ToolEntry, ToolPatterns,
    ToolSource, Trust, TurnState, WeakPipeline, model_text,
};
use portico_store::{BatchWriter, Conversation, NewMessage, Store};
use serde::Serialize;
use serde_json::{Value, json};

use crate::drivers::DriverChoice;
use crate::loop_guard::{LoopGuard, LoopGuardSettings, Verdict};

/// Marks an agent's result as carrying untrusted content (its run read some), so the turn of the
/// agent that called it is tainted too. The pipeline reads and removes it.
pub const UNTRUSTED_META: &str = portico_pipeline::UNTRUSTED_META;

/// Why an agent could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("no agent named `{name}`; known agents: {known}")]
    UnknownAgent { name: String, known: String },
    #[error("{0}")]
    NoModel(String),
    #[error("agent `{agent}`: the model failed: {source}")]
    Model {
        agent: String,
        #[source]
        source: portico_llm::LlmError,
    },
    #[error(
        "agent `{agent}` stopped after {iterations} model turns without a final answer; raise its `max_iterations` or ask for less"
    )]
    MaxIterations { agent: String, iterations: u32 },
    #[error(
        "agent `{agent}` did not answer within {secs}s; raise its `timeout_secs` or ask for less"
    )]
    Timeout { agent: String, secs: u64 },
    #[error(
        "agent `{agent}` cannot call further agents: the depth limit of {limit} agents calling agents was reached"
    )]
    DepthLimit { agent: String, limit: u32 },
    #[error("agent `{agent}`: {message}")]
    Stopped { agent: String, message: String },
    #[error(
        "agent `{agent}`: conversation `{id}` does not exist or belongs to another agent; omit conversation_id to start a new one"
    )]
    BadConversation { agent: String, id: String },
    #[error("agent `{agent}`: the store failed: {source}")]
    Store {
        agent: String,
        #[source]
        source: portico_store::StoreError,
    },
    #[error("agent `{agent}`: Portico is shutting down")]
    ShuttingDown { agent: String },
}

/// What kind of failure it is for the pipeline (and the audit log); the message stays the error's own.
impl From<AgentError> for CallError {
    fn from(error: AgentError) -> Self {
        let message = error.to_string();
        match error {
            AgentError::UnknownAgent { .. } => CallError::NotFound(message),
            AgentError::Timeout { .. } => CallError::Timeout(message),
            AgentError::MaxIterations { .. } | AgentError::DepthLimit { .. } => {
                CallError::Budget(message)
            }
            AgentError::Model { .. } => CallError::UpstreamFailed(message),
            AgentError::NoModel(_)
            | AgentError::ShuttingDown { .. }
            | AgentError::Stopped { .. }
            | AgentError::BadConversation { .. }
            | AgentError::Store { .. } => CallError::Failed(message),
        }
    }
}

/// What an agent answered.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AgentReply {
    /// The agent's final answer.
    pub reply: String,
    /// Pass this back as `conversation_id` to continue the conversation.
    pub conversation_id: String,
    /// Model turns this message took.
    pub iterations: u32,
    /// Tokens used answering this message.
    pub usage: UsageCounts,
    /// Tokens used by the whole conversation so far.
    pub conversation_usage: UsageCounts,
    #[serde(skip)]
    #[schemars(skip)]
    pub tainted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct UsageCounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl From<Usage> for UsageCounts {
    fn from(u: Usage) -> Self {
        UsageCounts {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

/// One configured agent, ready to run.
pub struct Agent {
    pub config: AgentConfig,
    pub tool_name: String,
    pub patterns: ToolPatterns,
    pub driver: DriverChoice,
}

/// A summary for listings (`GET /api/agents`, `portico agents`, `agent_list`).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AgentInfo {
    pub name: String,
    pub tool: String,
    pub description: String,
    pub model: String,
    pub tools: Vec<String>,
    /// Set when the agent has no model: what to set for one. Until it has one the agent is not
    /// offered as an MCP tool nor published as an A2A agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_model: Option<String>,
}

pub struct RuntimeSettings {
    pub max_depth: u32,
    pub loop_guard: LoopGuardSettings,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            max_depth: 4,
            loop_guard: LoopGuardSettings::default(),
        }
    }
}

/// The agents, and how to run them. Also the pipeline's source of `portico_agent_*` tools.
pub struct AgentRuntime {
    /// Swapped whole by [`AgentRuntime::replace_agents`]; a run holds its agent's `Arc`, so a
    /// reload never changes an agent under a run in progress.
    agents: RwLock<Arc<AgentSet>>,
    pipeline: WeakPipeline,
    store: Store,
    /// Conversations are written through the store's group commit: concurrent runs share transactions.
    writer: BatchWriter,
    settings: RuntimeSettings,
}

/// The agents, by name, with their tool entries built once (building one generates the reply's
/// JSON schema, and listing happens on every call).
struct AgentSet {
    agents: BTreeMap<String, Arc<Agent>>,
    /// Every agent's entry: a call by name reaches an agent without a model too, and gets told
    /// what to set.
    entries: Vec<ToolEntry>,
    /// The entries listed to clients: an agent without a model would only fail, so it is not
    /// offered until it has one.
    offered: Vec<ToolEntry>,
}

impl AgentSet {
    fn new(agents: impl IntoIterator<Item = Arc<Agent>>) -> Self {
        let agents: BTreeMap<String, Arc<Agent>> = agents
            .into_iter()
            .map(|a| (a.config.name.clone(), a))
            .collect();
        let entries: Vec<ToolEntry> = agents.values().map(|a| AgentTools::entry(a)).collect();
        let offered = agents
            .values()
            .zip(&entries)
            .filter(|(agent, _)| agent.has_model())
            .map(|(_, entry)| entry.clone())
            .collect();
        AgentSet {
            agents,
            entries,
            offered,
        }
    }
}

/// What [`AgentRuntime::replace_agents`] did, by agent name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Agents whose definition changed: runs in progress finish with the old one.
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl AgentChanges {
    pub fn any(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }
}

impl AgentRuntime {
    pub fn new(
        agents: Vec<Agent>,
        pipeline: WeakPipeline,
        store: Store,
        settings: RuntimeSettings,
    ) -> Self {
        AgentRuntime {
            agents: RwLock::new(Arc::new(AgentSet::new(agents.into_iter().map(Arc::new)))),
            pipeline,
            writer: store.batch_writer(),
            store,
            settings,
        }
    }

    fn set(&self) -> Arc<AgentSet> {
        self.agents.read().expect("agents lock").clone()
    }

    pub fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        let set = self.set();
        set.agents
            .get(name)
            .or_else(|| {
                set.agents
                    .values()
                    .find(|a| a.tool_name == name || a.config.name.replace('-', "_") == name)
            })
            .cloned()
    }

    /// [`AgentRuntime::agent`], if it may be offered to others (over A2A): one with a model.
    pub fn published(&self, name: &str) -> Option<Arc<Agent>> {
        self.agent(name).filter(|agent| agent.has_model())
    }

    /// The first agent (by name) with a model.
    pub fn first_published(&self) -> Option<String> {
        let set = self.set();
        set.agents
            .values()
            .find(|agent| agent.has_model())
            .map(|agent| agent.config.name.clone())
    }

    pub fn infos(&self) -> Vec<AgentInfo> {
        self.set().agents.values().map(|a| a.info()).collect()
    }

    /// Whether calling the tool `name` runs an agent: a `portico_agent_*` tool, or `agent_send`.
    pub fn runs_an_agent(&self, name: &str) -> bool {
        let set = self.set();
        (name == AGENT_SEND && !set.agents.is_empty())
            || set.agents.values().any(|a| a.tool_name == name)
    }

    /// Makes the agents those of a new config: `build` makes an [`Agent`] of a definition that is
    /// new or changed; an unchanged one is kept as it is. Runs in progress keep the agent they
    /// started with.
    pub fn replace_agents<E>(
        &self,
        configs: &[AgentConfig],
        mut build: impl FnMut(&AgentConfig) -> Result<Agent, E>,
    ) -> Result<AgentChanges, E> {
        let old = self.set();
        let mut changes = AgentChanges::default();
        let mut next = Vec::with_capacity(configs.len());
        for config in configs {
            match old.agents.get(&config.name) {
                Some(agent) if agent.config == *config => {
                    changes.unchanged.push(config.name.clone());
                    next.push(agent.clone());
                    continue;
                }
                Some(_) => changes.changed.push(config.name.clone()),
                None => changes.added.push(config.name.clone()),
            }
            next.push(Arc::new(build(config)?));
        }
        for name in old.agents.keys() {
            if !configs.iter().any(|c| &c.name == name) {
                changes.removed.push(name.clone());
            }
        }
        if changes.any() {
            *self.agents.write().expect("agents lock") = Arc::new(AgentSet::new(next));
        }
        Ok(changes)
    }

    fn unknown(&self, name: &str) -> AgentError {
        AgentError::UnknownAgent {
            name: name.to_string(),
            known: self
                .set()
                .agents
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Runs one message through an agent: loads or starts the conversation, loops model → tools →
    /// model until a final answer, and stores every message. `message_id` is the id the caller gave
    /// the message (an A2A `messageId`), which the scripted driver's rules can match. `context` is
    /// the caller's: its depth, relay (for the sampling driver and progress) and progress sink carry
    /// into the run.
    pub async fn send(
        &self,
        name: &str,
        message: &str,
        message_id: Option<&str>,
        conversation_id: Option<&str>,
        context: &ToolContext,
    ) -> Result<AgentReply, AgentError> {
        let agent = self.agent(name).ok_or_else(|| self.unknown(name))?.clone();
        let agent_name = agent.config.name.clone();
        if context.depth >= self.settings.max_depth {
            return Err(AgentError::DepthLimit {
                agent: agent_name,
                limit: self.settings.max_depth,
            });
        }
        let secs = agent.config.timeout_secs;
        match tokio::time::timeout(
            Duration::from_secs(secs),
            self.run(&agent, message, message_id, conversation_id, context),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(AgentError::Timeout {
                agent: agent_name,
                secs,
            }),
        }
    }

    async fn run(
        &self,
        agent: &Arc<Agent>,
        message: &str,
        message_id: Option<&str>,
        conversation_id: Option<&str>,
        context: &ToolContext,
    ) -> Result<AgentReply, AgentError> {
        let name = agent.config.name.as_str();
        let driver = agent
            .driver
            .for_call(name, context.relay.caller.as_ref())
            .map_err(AgentError::NoModel)?;
        let pipeline = self
            .pipeline
            .upgrade()
            .ok_or_else(|| AgentError::ShuttingDown {
                agent: name.to_string(),
            })?;
        let user = ChatMessage::User {
            text: message.to_string(),
            message_id: message_id.map(str::to_string),
        };
        let (conversation, mut messages) = self
            .open_conversation(name, conversation_id, &context.client_label(), user)
            .await?;
        let scope = self
            .run_scope(agent, &pipeline, &conversation.id, context)
            .await;
        let events = progress_sink(context);

        let mut usage = Usage::default();
        let max_iterations = agent.config.max_iterations.max(1);
        for iteration in 1..=max_iterations {
            let (turn_result, totals) = self
                .model_turn(&scope, driver.as_ref(), &mut messages, &events)
                .await?;
            usage.add(turn_result.usage);
            if turn_result.tool_calls.is_empty() {
                return Ok(AgentReply {
                    reply: turn_result.text,
                    conversation_id: conversation.id.clone(),
                    iterations: iteration,
                    usage: usage.into(),
                    conversation_usage: totals,
                    tainted: scope.turn.untrusted_source().is_some(),
                });
            }
            self.answer_tool_calls(&scope, &turn_result.tool_calls, &mut messages)
                .await?;
        }
        Err(AgentError::MaxIterations {
            agent: name.to_string(),
            iterations: max_iterations,
        })
    }

    /// Loads the conversation `conversation_id` names (or starts one for `client`, the label of the
    /// client the run is for) and stores `user` in it; returns the conversation and its messages,
    /// `user` last. Another client's conversation is one that does not exist.
    async fn open_conversation(
        &self,
        name: &str,
        conversation_id: Option<&str>,
        client: &str,
        user: ChatMessage,
    ) -> Result<(Conversation, Vec<ChatMessage>), AgentError> {
        let (conversation, history) = match conversation_id {
            Some(id) => {
                let (agent, id, client) = (name.to_string(), id.to_string(), client.to_string());
                let lookup = id.clone();
                let found = self
                    .store
                    .run("reading a conversation", move |store| {
                        let conversation = match store.conversation(&lookup)? {
                            Some(c) if c.agent == agent && c.is_for(&client) => c,
                            _ => return Ok(None),
                        };
                        let history = store.messages(&conversation.id)?;
                        Ok(Some((conversation, history)))
                    })
                    .await
                    .map_err(store_failed(name))?;
                let Some((conversation, history)) = found else {
                    return Err(AgentError::BadConversation {
                        agent: name.to_string(),
                        id,
                    });
                };
                self.persist(&conversation.id, &user, Usage::default())
                    .await
                    .map_err(store_failed(name))?;
                (conversation, history)
            }
            // A new conversation and its first message: one write.
            None => {
                let first = new_message(&user, Usage::default());
                let conversation = self
                    .writer
                    .start_conversation(name.to_string(), Some(client.to_string()), first)
                    .await
                    .map_err(store_failed(name))?;
                (conversation, Vec::new())
            }
        };
        let mut messages: Vec<ChatMessage> = history
            .into_iter()
            .filter_map(|m| serde_json::from_value(m.content).ok())
            .collect();
        messages.push(user);
        Ok((conversation, messages))
    }

    /// What the run's turns share: the tools the agent may call, and the context it calls them in.
    async fn run_scope<'a>(
        &self,
        agent: &'a Agent,
        pipeline: &'a Pipeline,
        conversation_id: &'a str,
        context: &ToolContext,
    ) -> RunScope<'a> {
        let principal = Principal::agent(agent.config.name.clone(), agent.patterns.clone());
        let tools: Vec<ToolSpec> = pipeline
            .list(&principal)
            .await
            .into_iter()
            .map(|entry| tool_spec(&entry))
            .collect();
        // A run on behalf of a tainted turn (an agent calling this one) starts tainted: otherwise an
        // agent refused a sensitive call could have this one make it.
        let turn = Arc::new(TurnState::started_by(
            context.turn.as_deref(),
            &context.principal.label(),
        ));
        let tool_context = ToolContext {
            principal,
            relay: context.relay.clone(),
            depth: context.depth + 1,
            turn: Some(turn.clone()),
            progress: context.progress.clone(),
            // The client that started the outermost run, through every nested agent: the one an
            // approval of this run's calls is for, and the one the relay asks.
            on_behalf_of: Some(context.client_label()),
        };
        RunScope {
            agent,
            pipeline,
            conversation_id,
            tools,
            turn,
            tool_context,
            guard: Mutex::new(LoopGuard::new(self.settings.loop_guard)),
        }
    }

    /// One model turn over the conversation so far; its answer is stored and added to `messages`.
    /// Returns the turn and the conversation's token totals after it.
    async fn model_turn(
        &self,
        scope: &RunScope<'_>,
        driver: &dyn ModelDriver,
        messages: &mut Vec<ChatMessage>,
        events: &EventSink,
    ) -> Result<(ModelTurn, UsageCounts), AgentError> {
        let config = &scope.agent.config;
        let request = ChatRequest {
            system: config.system_prompt.clone(),
            messages: messages.clone(),
            tools: scope.tools.clone(),
            temperature: config.model.temperature,
            max_tokens: config.model.max_tokens,
        };
        let turn_result =
            driver
                .complete(&request, events)
                .await
                .map_err(|source| AgentError::Model {
                    agent: config.name.clone(),
                    source,
                })?;
        let assistant = ChatMessage::Assistant {
            text: turn_result.text.clone(),
            tool_calls: turn_result.tool_calls.clone(),
        };
        let totals = self
            .persist(scope.conversation_id, &assistant, turn_result.usage)
            .await
            .map_err(store_failed(&config.name))?;
        messages.push(assistant);
        Ok((turn_result, totals))
    }

    /// Runs the tool calls of one model turn, all at once, and stores their results in the model's
    /// order; a loop-guard break stops the run.
    async fn answer_tool_calls(
        &self,
        scope: &RunScope<'_>,
        calls: &[ToolCall],
        messages: &mut Vec<ChatMessage>,
    ) -> Result<(), AgentError> {
        let name = &scope.agent.config.name;
        let results =
            join_all(calls.iter().map(|call| {
                self.run_tool(scope.pipeline, call, &scope.guard, &scope.tool_context)
            }))
            .await;
        for (call, result) in calls.iter().zip(results) {
            let (text, is_error) = match result {
                ToolRun::Done { text, is_error } => (text, is_error),
                ToolRun::Break(message) => {
                    return Err(AgentError::Stopped {
                        agent: name.clone(),
                        message,
                    });
                }
            };
            let tool_message = ChatMessage::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text,
                is_error,
            };
            self.persist(scope.conversation_id, &tool_message, Usage::default())
                .await
                .map_err(store_failed(name))?;
            messages.push(tool_message);
        }
        Ok(())
    }

    async fn run_tool(
        &self,
        pipeline: &Pipeline,
        call: &ToolCall,
        guard: &Mutex<LoopGuard>,
        context: &ToolContext,
    ) -> ToolRun {
        let arguments = Value::Object(call.arguments.clone());
        let verdict = guard
            .lock()
            .expect("loop guard lock")
            .before(&call.name, &arguments);
        let warning = match verdict {
            Verdict::Allow => None,
            Verdict::Warn(message) => Some(message),
            Verdict::Block(message) => {
                return ToolRun::Done {
                    text: message,
                    is_error: true,
                };
            }
            Verdict::Break(message) => return ToolRun::Break(message),
        };
        context.report(ProgressEvent::ToolStarted {
            name: call.name.clone(),
        });
        let (mut text, is_error) = match pipeline
            .call(&call.name, Some(call.arguments.clone()), context)
            .await
        {
            Ok(outcome) => (model_text(&outcome.result), outcome.is_error()),
            Err(error) => (error.to_string(), true),
        };
        context.report(ProgressEvent::ToolFinished {
            name: call.name.clone(),
            is_error,
        });
        guard
            .lock()
            .expect("loop guard lock")
            .after(&call.name, &arguments, &text);
        if let Some(warning) = warning {
            text.push_str(&format!("\n\n[portico: {warning}]"));
        }
        ToolRun::Done { text, is_error }
    }

    /// Stores one message; returns the conversation's token totals after it.
    async fn persist(
        &self,
        conversation_id: &str,
        message: &ChatMessage,
        usage: Usage,
    ) -> Result<UsageCounts, portico_store::StoreError> {
        let new = new_message(message, usage);
        let conversation = self
            .writer
            .append_message(conversation_id.to_string(), new)
            .await?;
        Ok(UsageCounts {
            input_tokens: conversation.input_tokens,
            output_tokens: conversation.output_tokens,
        })
    }
}

/// A chat message as the store keeps it.
fn new_message(message: &ChatMessage, usage: Usage) -> NewMessage {
    NewMessage {
        role: match message {
            ChatMessage::User { .. } => "user",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
        }
        .to_string(),
        content: serde_json::to_value(message).unwrap_or(Value::Null),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
    }
}

/// What every turn of one run shares.
struct RunScope<'a> {
    agent: &'a Agent,
    pipeline: &'a Pipeline,
    conversation_id: &'a str,
    tools: Vec<ToolSpec>,
    /// The run's turn: whether it has read untrusted content.
    turn: Arc<TurnState>,
    tool_context: ToolContext,
    guard: Mutex<LoopGuard>,
}

/// Maps a store failure to the agent's error.
fn store_failed(agent: &str) -> impl Fn(portico_store::StoreError) -> AgentError + '_ {
    move |source| AgentError::Store {
        agent: agent.to_string(),
        source,
    }
}

/// Forwards what the model streams to the caller's progress sink.
fn progress_sink(context: &ToolContext) -> EventSink {
    let context = context.clone();
    Arc::new(move |event| {
        context.report(match event {
            StreamEvent::TextDelta(text) => ProgressEvent::Text(text),
            StreamEvent::Status { state, message } => ProgressEvent::Status { state, message },
            StreamEvent::Artifact {
                name,
                part,
                last_chunk,
            } => ProgressEvent::Artifact {
                name,
                part,
                last_chunk,
            },
            StreamEvent::AnswerAsMessage => ProgressEvent::AnswerAsMessage,
        })
    })
}

enum ToolRun {
    Done { text: String, is_error: bool },
    Break(String),
}

impl Agent {
    /// Whether the agent can run: a model is configured, or it uses the caller's (sampling).
    pub fn has_model(&self) -> bool {
        self.driver.missing().is_none()
    }

    pub fn info(&self) -> AgentInfo {
        AgentInfo {
            name: self.config.name.clone(),
            tool: self.tool_name.clone(),
            description: self.config.description.clone(),
            model: self.driver.describe(),
            tools: self.config.tools.clone(),
            needs_model: self.driver.missing().map(str::to_string),
        }
    }
}

fn tool_spec(entry: &ToolEntry) -> ToolSpec {
    let description = entry
        .definition
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let input_schema = entry
        .definition
        .get("inputSchema")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(|| {
            json!({"type": "object"})
                .as_object()
                .cloned()
                .unwrap_or_default()
        });
    ToolSpec {
        name: entry.name.clone(),
        description,
        input_schema,
    }
}

/// The agents as pipeline tools: `portico_agent_{name}` with a `message`, an optional
/// `conversation_id` and an optional `message_id` (the caller's id for the message).
pub struct AgentTools {
    /// Its agent set holds one entry per agent, built once: listing and resolving agents happens
    /// on every call (an A2A message resolves its agent and lists that agent's tools), and building
    /// an entry generates the reply's JSON schema.
    runtime: Arc<AgentRuntime>,
}

impl AgentTools {
    pub fn new(runtime: Arc<AgentRuntime>) -> Self {
        AgentTools { runtime }
    }

    fn entry(agent: &Agent) -> ToolEntry {
        let description = if agent.config.description.is_empty() {
            format!("Ask the `{}` agent", agent.config.name)
        } else {
            agent.config.description.clone()
        };
        let definition = json!({
            "name": agent.tool_name,
            "title": format!("Agent: {}", agent.config.name),
            "description": description,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "What to ask or tell the agent."},
                    "conversation_id": {"type": "string", "description": "Continue an earlier conversation: the conversation_id a previous answer returned."},
                    "message_id": {"type": "string", "description": "Your own id for this message (an A2A messageId), if it has one."}
                },
                "required": ["message"]
            },
            "outputSchema": portico_pipeline::standard_schema_for::<AgentReply>(),
        });
        ToolEntry {
            name: agent.tool_name.clone(),
            definition: Arc::new(definition.as_object().cloned().unwrap_or_default()),
            trust: Trust::Trusted,
            sensitive: false,
            timeout: Some(Duration::from_secs(agent.config.timeout_secs + 5)),
            generation: 0,
        }
    }
}

impl ToolSource for AgentTools {
    fn kind(&self) -> &'static str {
        "agents"
    }

    fn entries(&self) -> Vec<ToolEntry> {
        self.runtime.set().offered.clone()
    }

    fn find(&self, name: &str) -> Option<ToolEntry> {
        self.runtime
            .set()
            .entries
            .iter()
            .find(|e| e.name == name)
            .cloned()
    }

    fn call<'a>(
        &'a self,
        entry: &'a ToolEntry,
        arguments: JsonObject,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>> {
        Box::pin(async move {
            let message = arguments
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let conversation_id = arguments.get("conversation_id").and_then(Value::as_str);
            let message_id = arguments.get("message_id").and_then(Value::as_str);
            let mut context = context.clone();
            let mut forwarded = None;
            if context.progress.is_none()
                && let Some(messages) = portico_pipeline::progress_messages(&context)
            {
                context.progress = Some(progress_as_messages(messages.clone()));
                forwarded = Some(messages);
            }
            let reply = self
                .runtime
                .send(&entry.name, message, message_id, conversation_id, &context)
                .await;
            if let Some(messages) = forwarded {
                messages.flush().await;
            }
            let reply = reply?;
            let mut result = ToolResult::text(reply.reply.clone());
            if reply.tainted {
                result.meta = Some(JsonObject::from_iter([(
                    UNTRUSTED_META.to_string(),
                    Value::Bool(true),
                )]));
            }
            result.structured_content = Some(serde_json::to_value(reply).unwrap_or(Value::Null));
            Ok(result)
        })
    }
}

/// An agent's streamed text and tool calls as progress messages for an MCP client that asked.
fn progress_as_messages(
    messages: portico_pipeline::ProgressMessages,
) -> portico_pipeline::ProgressSink {
    Arc::new(move |event: ProgressEvent| {
        let message = match event {
            ProgressEvent::Text(text) => text,
            ProgressEvent::Status { state, message } => {
                format!("[{state}] {}", message.unwrap_or_default())
            }
            ProgressEvent::ToolStarted { name } => format!("[calling {name}]"),
            ProgressEvent::ToolFinished { name, is_error } => {
                format!("[{name} {}]", if is_error { "failed" } else { "done" })
            }
            ProgressEvent::Artifact { name, part, .. } => match part {
                ArtifactPart::Text(text) => format!("[{name}] {text}"),
                ArtifactPart::File {
                    name: file, bytes, ..
                } => format!(
                    "[{name}] file {} ({} bytes)",
                    file.as_deref().unwrap_or("(unnamed)"),
                    bytes.len()
                ),
                ArtifactPart::FileUrl { url, .. } => format!("[{name}] file {url}"),
                ArtifactPart::Data(data) => format!("[{name}] {}", Value::Object(data)),
            },
            // Only a protocol with messages and tasks tells them apart.
            ProgressEvent::AnswerAsMessage => return,
        };
        messages.send(message);
    })
}

/// The local tool through which one agent sends a message to another.
pub const AGENT_SEND: &str = "agent_send";

/// The agent-facing helpers: `agent_list` and `agent_send`. `agent_send` calls the target through the
/// pipeline as its `portico_agent_*` tool, so the calling agent's patterns still decide whether it may.
pub fn agent_tools(runtime: &Arc<AgentRuntime>) -> Vec<portico_pipeline::LocalTool> {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct ListInput {}
    #[derive(Serialize, schemars::JsonSchema)]
    struct ListOutput {
        /// The agents the caller may call, with the tool each is reached as.
        agents: Vec<AgentInfo>,
    }
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct SendInput {
        /// The agent's name, as agent_list shows it.
        agent: String,
        /// What to ask or tell it.
        message: String,
        /// Continue an earlier conversation with that agent.
        #[serde(default)]
        conversation_id: Option<String>,
    }

    let list_runtime = Arc::downgrade(runtime);
    let list = portico_pipeline::LocalTool::typed_with_context(
        "agent_list",
        "List the other agents you can call with agent_send.",
        move |_: ListInput, context: ToolContext| {
            let runtime = list_runtime.upgrade();
            async move {
                let runtime = runtime.ok_or("Portico is shutting down")?;
                let agents = runtime
                    .infos()
                    .into_iter()
                    .filter(|info| context.principal.may_use(&info.tool))
                    .filter(|info| Some(info.name.as_str()) != context.principal.agent_name())
                    .collect();
                Ok::<_, &str>(ListOutput { agents })
            }
        },
    );
    let send_runtime = Arc::downgrade(runtime);
    let send = portico_pipeline::LocalTool::typed_with_context(
        AGENT_SEND,
        "Send a message to another agent and get its answer.",
        move |input: SendInput, context: ToolContext| {
            let runtime = send_runtime.upgrade();
            async move {
                let runtime = runtime.ok_or_else(|| "Portico is shutting down".to_string())?;
                let pipeline = runtime
                    .pipeline
                    .upgrade()
                    .ok_or_else(|| "Portico is shutting down".to_string())?;
                let tool = agent_tool_name(&input.agent);
                let mut arguments = json!({"message": input.message});
                if let Some(id) = input.conversation_id {
                    arguments["conversation_id"] = Value::String(id);
                }
                let outcome = pipeline
                    .call(&tool, arguments.as_object().cloned(), &context)
                    .await
                    .map_err(|e| e.to_string())?;
                if outcome.is_error() {
                    return Err(model_text(&outcome.result));
                }
                let structured = outcome
                    .result
                    .structured_content
                    .clone()
                    .unwrap_or_else(|| json!({"reply": model_text(&outcome.result)}));
                Ok::<_, String>(SendOutput {
                    agent: input.agent,
                    reply: structured
                        .get("reply")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| model_text(&outcome.result)),
                    conversation_id: structured
                        .get("conversation_id")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            }
        },
    );
    vec![list, send]
}

#[derive(Serialize, schemars::JsonSchema)]
struct SendOutput {
    agent: String,
    reply: String,
    conversation_id: Option<String>,
}
