//! Remote A2A agents as tools: one `a2a_{name}` per `[[a2a.external_agents]]`, served through the
//! call pipeline like any other tool.
//!
//! Cards are read in the background when Portico starts (nothing waits on a remote host) and again
//! every five minutes; a failed read keeps the last good card and is retried sooner, with backoff
//! (longer when the agent's `Retry-After` asks for more). An
//! agent whose card was never read is listed with a generic description, and calling it reads the
//! card first; when that fails the call's result says what failed.
//!
//! Output is untrusted (another party wrote it), which feeds the taint rule. The call's timeout is the
//! agent's `timeout_secs`; a task still running then is canceled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use portico_config::{Config, ExternalAgentConfig};
use portico_core::relay::BoxFuture;
use portico_core::retry::RetryPolicy;
use portico_core::{CallError, JsonObject, ToolResult};
use portico_pipeline::{
    ProgressEvent, ProgressMessages, ProgressSink, ToolContext, ToolEntry, ToolSource, Trust,
};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::{A2aClient, A2aEvent, AgentCard, ClientError, SendOutcome, SendRequest};
use crate::wire::{self, is_interrupted, is_terminal};

/// How often a card that was read is read again.
const REFRESH: Duration = Duration::from_secs(300);
/// Retrying a card that could not be read: 5 s, doubling (jittered) up to the refresh interval.
const RETRY: RetryPolicy = RetryPolicy::unlimited(Duration::from_secs(5), REFRESH);
/// How long a listing waits for the first card reads, so a client listing right after start sees the
/// real descriptions (the hub waits for its upstreams the same way).
const SETTLE_WAIT: Duration = Duration::from_secs(3);
/// Added to the agent's timeout for the pipeline's: the client's own deadline fires first, cancels the
/// remote task and says so.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// A card's description goes to models as the tool's description; it is cut at this length.
const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// `a2a_{name}`: lower case, anything but ASCII letters and digits becomes `_`.
pub fn remote_tool_name(agent: &str) -> String {
    let name: String = agent
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("a2a_{name}")
}

/// The tool source for `[[a2a.external_agents]]`, discovery started: the engine places it after the
/// agents and before the hub.
pub fn remote_agents_source(
    config: &Config,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Arc<dyn ToolSource> {
    let agents = RemoteAgents::new(&config.a2a.external_agents, env);
    agents.start();
    agents
}

/// What is known of one agent's card.
#[derive(Default)]
struct Known {
    card: Option<Arc<AgentCard>>,
    /// Why the last read failed, while it does.
    error: Option<String>,
}

/// Why a card read failed, and the agent's `Retry-After` if it sent one.
struct FailedRead {
    error: String,
    retry_after: Option<Duration>,
}

struct Remote {
    config: ExternalAgentConfig,
    tool: String,
    /// `Err` when the client could not be built (a header naming a variable that is not set).
    client: Result<A2aClient, String>,
    known: Mutex<Known>,
    /// One card read at a time; a call arriving during a background read waits for it.
    discovering: tokio::sync::Mutex<()>,
    /// Set once the first read has finished, either way.
    first_read: watch::Sender<bool>,
    generation: Arc<AtomicU64>,
}

impl Remote {
    fn card(&self) -> Option<Arc<AgentCard>> {
        self.known.lock().expect("remote agent lock").card.clone()
    }

    fn label(&self) -> String {
        format!("remote agent `{}` ({})", self.config.name, self.config.url)
    }

    /// Reads the card; on failure the last good one is kept. Call with `discovering` held.
    async fn read_card(&self) -> Result<Arc<AgentCard>, String> {
        self.read_card_or_wait()
            .await
            .map_err(|failed| failed.error)
    }

    /// [`Self::read_card`], saying on failure how long the agent asked us to wait.
    async fn read_card_or_wait(&self) -> Result<Arc<AgentCard>, FailedRead> {
        let client = self.client.as_ref().map_err(|error| FailedRead {
            error: error.clone(),
            retry_after: None,
        })?;
        let result = client.discover(&self.config.url).await;
        let mut known = self.known.lock().expect("remote agent lock");
        match result {
            Ok(card) => {
                let card = Arc::new(card);
                if known.error.take().is_some() {
                    tracing::info!("{}: agent card read again", self.label());
                }
                known.card = Some(card.clone());
                self.generation.fetch_add(1, Ordering::Relaxed);
                Ok(card)
            }
            Err(error) => {
                let retry_after = error.retry_after();
                let error = error.to_string();
                if known.error.as_deref() != Some(&error) {
                    // The error may quote what the remote agent answered.
                    tracing::warn!("{}: {}", self.label(), portico_core::text::log_safe(&error));
                    self.generation.fetch_add(1, Ordering::Relaxed);
                }
                known.error = Some(error.clone());
                Err(FailedRead { error, retry_after })
            }
        }
    }

    /// A background read: `Ok`, or the wait the agent asked for when it failed, if it did.
    async fn refresh(&self) -> Result<(), Option<Duration>> {
        let read = {
            let _reading = self.discovering.lock().await;
            self.read_card_or_wait().await
        };
        self.first_read.send_replace(true);
        read.map(drop).map_err(|failed| failed.retry_after)
    }

    /// The card for a call: the one known, else read now.
    async fn card_for_call(&self) -> Result<Arc<AgentCard>, String> {
        if let Some(card) = self.card() {
            return Ok(card);
        }
        let _reading = self.discovering.lock().await;
        if let Some(card) = self.card() {
            return Ok(card);
        }
        self.read_card().await
    }

    fn description(&self) -> String {
        let known = self.known.lock().expect("remote agent lock");
        let url = &self.config.url;
        let mut text = match &known.card {
            Some(card) => {
                let mut text = card.description.trim().to_string();
                if text.is_empty() {
                    text = format!("The remote A2A agent `{}`.", card.name);
                }
                let skills: Vec<&str> = card
                    .skills
                    .iter()
                    .map(|s| if s.name.is_empty() { &s.id } else { &s.name })
                    .filter(|s| !s.is_empty())
                    .map(String::as_str)
                    .collect();
                if !skills.is_empty() {
                    text.push_str(&format!(" Skills: {}.", skills.join(", ")));
                }
                text
            }
            None => {
                let mut text = format!(
                    "A remote A2A agent at {url}; its card has not been read yet, so what it does is unknown"
                );
                if let Some(error) = &known.error {
                    text.push_str(&format!(" (last attempt: {error})"));
                }
                text.push('.');
                text
            }
        };
        if text.chars().count() > MAX_DESCRIPTION_CHARS {
            text = text.chars().take(MAX_DESCRIPTION_CHARS).collect();
            text.push('…');
        }
        text.push_str(&format!(
            " [Remote A2A agent `{}` at {url}; its answers come from outside Portico. If it asks for \
             input (state input-required), call {} again with its task_id and your answer.]",
            self.config.name, self.tool
        ));
        text
    }

    fn entry(&self, generation: u64) -> ToolEntry {
        let definition = json!({
            "name": self.tool,
            "title": self.card().map(|c| c.name.clone()).unwrap_or_else(|| self.config.name.clone()),
            "description": self.description(),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "What to ask or tell the agent."},
                    "task_id": {"type": "string", "description": "Continue this task: the task_id of an earlier answer whose state was input-required."},
                    "context_id": {"type": "string", "description": "Keep the conversation in this context: the context_id of an earlier answer."},
                },
                "required": ["message"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "reply": {"type": "string", "description": "The agent's answer (for input-required, its question)."},
                    "state": {"type": "string", "description": "completed, input-required, auth-required, failed, rejected or canceled."},
                    "task_id": {"type": "string", "description": "Pass back as task_id to continue the task."},
                    "context_id": {"type": "string"},
                },
                "required": ["reply", "state"],
            },
            "annotations": {"openWorldHint": true},
        });
        ToolEntry {
            name: self.tool.clone(),
            definition: Arc::new(definition.as_object().cloned().unwrap_or_default()),
            trust: Trust::Untrusted,
            sensitive: false,
            timeout: Some(Duration::from_secs(self.config.timeout_secs.max(1)) + CANCEL_GRACE),
            generation,
        }
    }
}

/// One remote agent as [`RemoteAgents::statuses`] shows it.
#[derive(Debug, Clone)]
pub struct RemoteAgentStatus {
    pub name: String,
    pub url: String,
    /// The card last read (kept while later reads fail).
    pub card: Option<Arc<AgentCard>>,
    /// Why the last read failed, while it does (or why the agent cannot be reached at all).
    pub error: Option<String>,
}

/// Remote A2A agents as a pipeline tool source. Dropping it stops the background card reads.
pub struct RemoteAgents {
    agents: Vec<Arc<Remote>>,
    generation: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl Drop for RemoteAgents {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RemoteAgents {
    /// One tool per agent. `env` expands `${VAR}` in their headers; an agent whose headers cannot be
    /// expanded is still listed, and calling it says which variable is missing.
    pub fn new(
        configs: &[ExternalAgentConfig],
        env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Arc<RemoteAgents> {
        let generation = Arc::new(AtomicU64::new(1));
        let mut agents: Vec<Arc<Remote>> = Vec::new();
        for config in configs {
            let tool = remote_tool_name(&config.name);
            if agents.iter().any(|a| a.tool == tool) {
                tracing::warn!(
                    "[[a2a.external_agents]] `{}`: another agent is already served as `{tool}`; this one is skipped",
                    config.name
                );
                continue;
            }
            let client = A2aClient::for_agent(config, env).map_err(|e| e.to_string());
            if let Err(error) = &client {
                tracing::warn!("[[a2a.external_agents]] `{}`: {error}", config.name);
            }
            agents.push(Arc::new(Remote {
                config: config.clone(),
                tool,
                client,
                known: Mutex::default(),
                discovering: tokio::sync::Mutex::new(()),
                first_read: watch::channel(false).0,
                generation: generation.clone(),
            }));
        }
        Arc::new(RemoteAgents {
            agents,
            generation,
            stop: CancellationToken::new(),
        })
    }

    /// Starts reading the cards in the background and refreshing them. Without a tokio runtime the
    /// cards are read on the first call instead.
    pub fn start(&self) {
        let runtime = tokio::runtime::Handle::try_current().ok();
        for agent in &self.agents {
            match (&runtime, &agent.client) {
                (Some(runtime), Ok(_)) => {
                    runtime.spawn(refresh_loop(Arc::downgrade(agent), self.stop.clone()));
                }
                _ => {
                    agent.first_read.send_replace(true);
                }
            }
        }
    }

    /// The tool names served, in configuration order.
    pub fn tool_names(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.tool.clone()).collect()
    }

    /// The card read for `tool`, if any.
    pub fn card(&self, tool: &str) -> Option<Arc<AgentCard>> {
        self.agents.iter().find(|a| a.tool == tool)?.card()
    }

    /// Each agent as configured, with the card last read and the error of the last read while
    /// reads fail, in configuration order.
    pub fn statuses(&self) -> Vec<RemoteAgentStatus> {
        self.agents
            .iter()
            .map(|agent| {
                let known = agent.known.lock().expect("remote agent lock");
                RemoteAgentStatus {
                    name: agent.config.name.clone(),
                    url: agent.config.url.clone(),
                    card: known.card.clone(),
                    error: known.error.clone().or_else(|| agent.client.clone().err()),
                }
            })
            .collect()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
}

async fn refresh_loop(agent: Weak<Remote>, stop: CancellationToken) {
    let mut failures = 0u32;
    loop {
        let Some(remote) = agent.upgrade() else {
            return;
        };
        let refreshed = tokio::select! {
            _ = stop.cancelled() => return,
            refreshed = remote.refresh() => refreshed,
        };
        drop(remote);
        let wait = match refreshed {
            Ok(()) => {
                failures = 0;
                REFRESH
            }
            Err(retry_after) => {
                failures = failures.saturating_add(1);
                retry_wait(failures - 1, retry_after)
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The wait before retrying a failed card read: the backoff, or longer if the agent's
/// `Retry-After` asks for more (up to the policy's cap). Never shorter than the backoff: this loop
/// runs for as long as Portico does, and `Retry-After: 0` must not make it spin.
fn retry_wait(retry: u32, retry_after: Option<Duration>) -> Duration {
    let backoff = RETRY.backoff(retry);
    match retry_after {
        Some(asked) => RETRY.delay(retry, Some(asked)).max(backoff),
        None => backoff,
    }
}

/// Where a call's progress goes: the caller's sink, else (an MCP client that asked for progress)
/// progress notifications, whose queue is returned to be flushed before the call answers.
fn progress_sink(context: &ToolContext) -> (Option<ProgressSink>, Option<ProgressMessages>) {
    if let Some(sink) = &context.progress {
        return (Some(sink.clone()), None);
    }
    let Some(messages) = portico_pipeline::progress_messages(context) else {
        return (None, None);
    };
    let queue = messages.clone();
    let sink: ProgressSink = Arc::new(move |event: ProgressEvent| {
        if let ProgressEvent::Status {
            message: Some(message),
            ..
        } = event
        {
            queue.send(message);
        }
    });
    (Some(sink), Some(messages))
}

/// A remote agent's events as progress. Everything is reported as `working` status text: the
/// remote task's states and artifacts are not the caller's own (an A2A task of a Portico agent that
/// calls this tool must not take them for its own input-required, completion or answer).
fn progress_of(tool: &str, event: A2aEvent) -> Option<ProgressEvent> {
    let text = match event {
        A2aEvent::Status { state, text, .. } => {
            if is_terminal(&state) || is_interrupted(&state) {
                return None;
            }
            text.unwrap_or_else(|| wire::state_to_v03(&state).to_string())
        }
        A2aEvent::Artifact { text, .. } | A2aEvent::Message { text } => text,
    };
    Some(ProgressEvent::Status {
        state: "working".into(),
        message: Some(format!("{tool}: {text}")),
    })
}

/// The MCP result of a finished send.
fn result_of(tool: &str, outcome: &SendOutcome) -> ToolResult {
    let state = outcome.state_label();
    let mut structured = json!({"reply": outcome.text, "state": state});
    if let Some(id) = &outcome.task_id {
        structured["task_id"] = json!(id);
    }
    if let Some(id) = &outcome.context_id {
        structured["context_id"] = json!(id);
    }
    let mut text = outcome.text.clone();
    if outcome.is_interrupted() {
        let waiting = if state == "auth-required" {
            "needs authorization before it can go on"
        } else {
            "is waiting for an answer"
        };
        let id = outcome.task_id.as_deref().unwrap_or_default();
        text = format!(
            "{text}\n\n[state: {state}; task_id: {id}. The agent {waiting}: call {tool} again with \
             task_id \"{id}\" and the answer as message.]"
        );
    }
    let is_error = is_terminal(&outcome.state) && outcome.state != "TASK_STATE_COMPLETED";
    if is_error {
        text = format!("the remote agent's task ended {state}: {text}");
    } else if text.is_empty() {
        text = format!("[state: {state}; the agent sent no text]");
    }
    ToolResult {
        structured_content: Some(structured),
        is_error: Some(is_error),
        ..ToolResult::text(text)
    }
}

impl ToolSource for RemoteAgents {
    fn kind(&self) -> &'static str {
        "a2a"
    }

    fn entries(&self) -> Vec<ToolEntry> {
        let generation = self.generation();
        self.agents.iter().map(|a| a.entry(generation)).collect()
    }

    fn find(&self, name: &str) -> Option<ToolEntry> {
        let generation = self.generation();
        self.agents
            .iter()
            .find(|a| a.tool == name)
            .map(|a| a.entry(generation))
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let reads = self.agents.iter().map(|agent| {
                let mut done = agent.first_read.subscribe();
                async move {
                    let _ = done.wait_for(|done| *done).await;
                }
            });
            let _ = tokio::time::timeout(SETTLE_WAIT, futures::future::join_all(reads)).await;
        })
    }

    fn call<'a>(
        &'a self,
        entry: &'a ToolEntry,
        arguments: JsonObject,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>> {
        Box::pin(async move {
            let remote = self
                .agents
                .iter()
                .find(|a| a.tool == entry.name)
                .ok_or_else(|| CallError::NotFound(format!("tool `{}` was removed", entry.name)))?;
            let client = match &remote.client {
                Ok(client) => client.clone(),
                Err(error) => return Ok(ToolResult::error(format!("{}: {error}", remote.label()))),
            };
            let started = Instant::now();
            let card = match remote.card_for_call().await {
                Ok(card) => card,
                Err(error) => {
                    return Ok(ToolResult::error(format!(
                        "{}: could not read its agent card: {error}",
                        remote.label()
                    )));
                }
            };
            let argument = |key: &str| {
                arguments
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            let request = SendRequest {
                text: argument("message").unwrap_or_default(),
                task_id: argument("task_id"),
                context_id: argument("context_id"),
                timeout: Some(
                    client
                        .timeout()
                        .saturating_sub(started.elapsed())
                        .max(Duration::from_secs(1)),
                ),
                // The remote agent acts on this turn's behalf: if a Portico, it starts tainted too.
                untrusted: context
                    .turn
                    .as_ref()
                    .and_then(|turn| turn.untrusted_source()),
            };
            let (sink, forwarded) = progress_sink(context);
            let tool = remote.tool.clone();
            let report = move |event: A2aEvent| {
                if let Some(sink) = &sink
                    && let Some(progress) = progress_of(&tool, event)
                {
                    sink(progress);
                }
            };
            let sent = client.send(&card, &request, &report).await;
            if let Some(messages) = forwarded {
                messages.flush().await;
            }
            match sent {
                Ok(outcome) => Ok(result_of(&remote.tool, &outcome)),
                Err(error) => {
                    let message = format!("{}: {error}", remote.label());
                    Err(match error {
                        ClientError::DiscoveryTimeout { .. } | ClientError::Timeout { .. } => {
                            CallError::Timeout(message)
                        }
                        ClientError::Refused(_)
                        | ClientError::InvalidUrl(_)
                        | ClientError::Unreachable { .. }
                        | ClientError::NoCard { .. } => CallError::UpstreamGone(message),
                        _ => CallError::UpstreamFailed(message),
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_lowercase_with_underscores() {
        assert_eq!(remote_tool_name("PyEcho"), "a2a_pyecho");
        assert_eq!(remote_tool_name("my-agent.v2"), "a2a_my_agent_v2");
        assert_eq!(remote_tool_name("héllo"), "a2a_h_llo");
    }

    #[test]
    fn results_say_how_to_continue() {
        let outcome = SendOutcome {
            task: json!({}),
            state: "TASK_STATE_INPUT_REQUIRED".into(),
            text: "which colour?".into(),
            task_id: Some("t1".into()),
            context_id: Some("c1".into()),
        };
        let result = result_of("a2a_x", &outcome);
        assert_eq!(result.is_error, Some(false));
        assert_eq!(
            result.structured_content.clone().unwrap(),
            json!({"reply": "which colour?", "state": "input-required", "task_id": "t1", "context_id": "c1"})
        );
        let text = result.content[0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("which colour?\n\n[state: input-required; task_id: t1."),
            "{text}"
        );
        assert!(
            text.contains("call a2a_x again with task_id \"t1\""),
            "{text}"
        );

        let failed = SendOutcome {
            state: "TASK_STATE_FAILED".into(),
            text: "it broke".into(),
            ..outcome
        };
        let result = result_of("a2a_x", &failed);
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0]["text"],
            "the remote agent's task ended failed: it broke"
        );
    }

    #[test]
    fn remote_states_never_leak_into_the_callers_progress() {
        let status = |state: &str| A2aEvent::Status {
            task_id: None,
            state: state.into(),
            text: Some("note".into()),
        };
        assert_eq!(
            progress_of("a2a_x", status("TASK_STATE_WORKING")),
            Some(ProgressEvent::Status {
                state: "working".into(),
                message: Some("a2a_x: note".into())
            })
        );
        assert_eq!(progress_of("a2a_x", status("TASK_STATE_COMPLETED")), None);
        assert_eq!(
            progress_of("a2a_x", status("TASK_STATE_INPUT_REQUIRED")),
            None
        );
        let chunk = A2aEvent::Artifact {
            task_id: None,
            artifact_id: "a".into(),
            name: "a".into(),
            text: "part".into(),
            append: true,
            last_chunk: false,
        };
        assert!(matches!(
            progress_of("a2a_x", chunk),
            Some(ProgressEvent::Status { state, .. }) if state == "working"
        ));
    }

    #[tokio::test]
    async fn unread_agents_are_listed_and_a_failed_read_is_the_calls_answer() {
        let config = ExternalAgentConfig {
            name: "Meta".into(),
            url: "http://169.254.169.254/".into(),
            headers: Default::default(),
            timeout_secs: 5,
            allow_private_network: true,
        };
        let agents = RemoteAgents::new(&[config], &|_| None);
        let entries = agents.entries();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].name, "a2a_meta");
        assert_eq!(entries[0].trust, Trust::Untrusted);
        assert_eq!(entries[0].timeout, Some(Duration::from_secs(15)));
        let description = entries[0].definition["description"].as_str().unwrap();
        assert!(
            description.contains("has not been read yet"),
            "{description}"
        );

        let context = ToolContext::client("test");
        let result = agents
            .call(&entries[0], JsonObject::new(), &context)
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true));
        let text = result.content[0]["text"].as_str().unwrap();
        assert!(
            text.contains("could not read its agent card")
                && text.contains("169.254.169.254 is a cloud metadata address"),
            "{text}"
        );
        // The failure is now part of the listing.
        let description = agents.entries()[0].definition["description"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(description.contains("cloud metadata"), "{description}");
    }

    #[tokio::test]
    async fn a_missing_header_variable_is_reported_on_call() {
        let config = ExternalAgentConfig {
            name: "secret".into(),
            url: "https://agent.example/".into(),
            headers: [(
                "Authorization".to_string(),
                "Bearer ${NOPE_TOKEN}".to_string(),
            )]
            .into_iter()
            .collect(),
            timeout_secs: 5,
            allow_private_network: false,
        };
        let agents = RemoteAgents::new(&[config], &|_| None);
        agents.start();
        agents.settle().await;
        let entry = agents.find("a2a_secret").unwrap();
        let result = agents
            .call(&entry, JsonObject::new(), &ToolContext::client("test"))
            .await
            .unwrap();
        let text = result.content[0]["text"].as_str().unwrap();
        assert!(text.contains("NOPE_TOKEN"), "{text}");
    }

    /// An agent whose card is refused once with 429 and `Retry-After: 1`, then served; each
    /// request's path and arrival by the server's clock go to the returned channel.
    async fn rate_limited_once() -> (
        String,
        tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
    ) {
        use axum::http::{StatusCode, Uri, header};
        use axum::response::IntoResponse;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let card = json!({
            "name": "limited", "description": "Rate limited at first", "version": "1",
            "supportedInterfaces": [{"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false},
        });
        let (arrived, arrivals) = tokio::sync::mpsc::unbounded_channel();
        let served = Arc::new(AtomicU64::new(0));
        let router = axum::Router::new().fallback(move |uri: Uri| {
            let (arrived, served, card) = (arrived.clone(), served.clone(), card.clone());
            async move {
                arrived
                    .send((uri.path().to_string(), Instant::now()))
                    .unwrap();
                if served.fetch_add(1, Ordering::SeqCst) == 0 {
                    (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response()
                } else {
                    axum::Json(card).into_response()
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (base, arrivals)
    }

    #[tokio::test]
    async fn a_card_refresh_answered_429_waits_for_retry_after_before_asking_again() {
        let (base, mut arrivals) = rate_limited_once().await;
        let config = ExternalAgentConfig {
            name: "limited".into(),
            url: base,
            headers: Default::default(),
            timeout_secs: 20,
            allow_private_network: true,
        };
        let agents = RemoteAgents::new(&[config], &|_| None);
        agents.start();

        let within = Duration::from_secs(20);
        let (first_path, first_at) = tokio::time::timeout(within, arrivals.recv())
            .await
            .unwrap()
            .unwrap();
        let (second_path, second_at) = tokio::time::timeout(within, arrivals.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first_path, crate::client::CARD_PATH);
        assert_eq!(
            second_path,
            crate::client::CARD_PATH,
            "after a 429 the same card is asked for again, not another path"
        );
        let gap = second_at - first_at;
        assert!(gap >= Duration::from_secs(1), "asked again after {gap:?}");
        // The second answer is read into the card (no sleep: the answer is already on its way).
        tokio::time::timeout(within, async {
            while agents.card("a2a_limited").is_none() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the card is read once the agent serves it");
        assert!(arrivals.try_recv().is_err(), "two requests in all");
    }

    #[test]
    fn a_retry_after_lengthens_the_card_retry_but_never_shortens_it() {
        let asked = Duration::from_secs(120);
        assert_eq!(retry_wait(0, Some(asked)), asked);
        assert_eq!(retry_wait(0, Some(Duration::from_secs(3600))), REFRESH);
        let wait = retry_wait(0, Some(Duration::ZERO));
        assert!(wait >= RETRY.ceiling(0) / 2, "{wait:?}");
    }
}
