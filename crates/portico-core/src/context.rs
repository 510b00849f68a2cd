//! Who is calling, and what travels with a call through the pipeline.

use std::sync::{Arc, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};
use portico_core::relay::CallContext;

/// The identity a call is made under. Capabilities hang off it: a client of a door sees everything
/// the door exposes; an agent sees only the tools its patterns name, whichever door it was reached
/// through.
#[derive(Clone, Debug)]
pub enum Principal {
    /// A person or program at a door: an MCP client, the HTTP API, the CLI. `id` says which door.
    Client { id: String },
    /// An agent running its loop.
    Agent(Arc<AgentScope>),
}

/// An agent's name and the tools it may see and call.
#[derive(Debug)]
pub struct AgentScope {
    pub name: String,
    pub patterns: ToolPatterns,
}

impl Principal {
    pub fn client(id: impl Into<String>) -> Self {
        Principal::Client { id: id.into() }
    }

    pub fn agent(name: impl Into<String>, patterns: ToolPatterns) -> Self {
        Principal::Agent(Arc::new(AgentScope {
            name: name.into(),
            patterns,
        }))
    }

    /// How audit records name the caller: `client:{door}` or `agent:{name}`.
    pub fn label(&self) -> String {
        match self {
            Principal::Client { id } => format!("client:{id}"),
            Principal::Agent(scope) => format!("agent:{}", scope.name),
        }
    }

    /// Whether this principal may see and call `tool`.
    pub fn may_use(&self, tool: &str) -> bool {
        match self {
            Principal::Client { .. } => true,
            Principal::Agent(scope) => scope.patterns.matches(tool),
        }
    }

    pub fn agent_name(&self) -> Option<&str> {
        match self {
            Principal::Agent(scope) => Some(&scope.name),
            Principal::Client { .. } => None,
        }
    }
}

/// The identity a credential (an `Authorization` header's value) stands for: a short hash, so the
/// secret itself is never kept, logged or compared. Rate limits, session caps and A2A task ownership
/// all key on it, so one client is one identity everywhere.
///
/// Spellings the door's token check accepts as the same token (`bearer`, extra spaces around the
/// token) are one identity: the hash is of the canonical `Bearer <token>`, or a client could take a
/// fresh identity (a fresh rate-limit bucket) per spelling.
pub fn credential_identity(credential: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let canonical = canonical_credential(credential);
    let hash = Sha256::digest(&canonical);
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("key:{hex}")
}

/// `Bearer <token>` with the scheme's case and the whitespace around the token normalised; any other
/// credential as it is, less surrounding whitespace.
fn canonical_credential(credential: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let credential = credential.trim_ascii();
    match credential.split_at_checked(6) {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case(b"bearer")
                && rest.first().is_some_and(u8::is_ascii_whitespace) =>
        {
            let mut canonical = b"Bearer ".to_vec();
            canonical.extend_from_slice(rest.trim_ascii());
            std::borrow::Cow::Owned(canonical)
        }
        _ => std::borrow::Cow::Borrowed(credential),
    }
}

/// Glob patterns over catalog names (`mcp_github_*`, `file_read`, `portico_agent_*`). `*` matches any
/// run of characters, `?` one, `[abc]` a class; names contain no path separators, so `*` is unrestricted.
#[derive(Debug, Clone)]
pub struct ToolPatterns {
    patterns: Vec<String>,
    set: GlobSet,
}

/// A tool pattern that is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("tool pattern `{pattern}` is not a valid glob: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

impl ToolPatterns {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let glob = Glob::new(pattern).map_err(|e| PatternError {
                pattern: pattern.to_string(),
                reason: e.kind().to_string(),
            })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| PatternError {
            pattern: patterns
                .iter()
                .map(|p| p.as_ref())
                .collect::<Vec<_>>()
                .join(", "),
            reason: e.to_string(),
        })?;
        Ok(ToolPatterns {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            set,
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        self.set.is_match(name)
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// What an agent's current turn (one incoming message, through to its answer) has read. The taint rule
/// uses it: content from outside Portico's trust boundary may carry instructions that try to steer the
/// agent into sensitive actions.
///
/// A turn started on a tainted turn's behalf (a sub-agent it called, an A2A message it sent to a
/// Portico) starts tainted: otherwise the first agent could have another one do what it was refused.
#[derive(Debug, Default)]
pub struct TurnState {
    untrusted_from: Mutex<Option<Untrusted>>,
}

/// Where a turn's untrusted content came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The tool whose output was untrusted.
    pub tool: String,
    /// Who read it, when it was not this turn: the caller whose tainted turn started this one.
    pub via: Option<String>,
}

impl TurnState {
    /// A turn started by `caller` on behalf of `parent` (the caller's turn, if it has one): tainted
    /// if that turn is, naming the first turn that read the untrusted content.
    pub fn started_by(parent: Option<&TurnState>, caller: &str) -> TurnState {
        let inherited = parent.and_then(TurnState::untrusted).map(|from| Untrusted {
            via: Some(from.via.unwrap_or_else(|| caller.to_string())),
            tool: from.tool,
        });
        TurnState {
            untrusted_from: Mutex::new(inherited),
        }
    }

    /// A turn that starts tainted: what started it had read untrusted output from `tool`.
    pub fn tainted(tool: &str, via: &str) -> TurnState {
        TurnState {
            untrusted_from: Mutex::new(Some(Untrusted {
                tool: tool.to_string(),
                via: Some(via.to_string()),
            })),
        }
    }

    /// Records that the turn has read untrusted output from `tool`; the first source is kept, since
    /// it is the one to report.
    pub fn mark_untrusted(&self, tool: &str) {
        let mut from = self.untrusted_from.lock().expect("turn state lock");
        if from.is_none() {
            *from = Some(Untrusted {
                tool: tool.to_string(),
                via: None,
            });
        }
    }

    /// The first tool whose untrusted output this turn read (or the turn that started it), if any.
    pub fn untrusted_source(&self) -> Option<String> {
        self.untrusted().map(|from| from.tool)
    }

    /// Where this turn's untrusted content came from, if it has any.
    pub fn untrusted(&self) -> Option<Untrusted> {
        self.untrusted_from.lock().expect("turn state lock").clone()
    }
}

/// Something a running call reports before it finishes: an agent's streamed text, the tools it calls.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressEvent {
    Text(String),
    Status {
        state: String,
        message: Option<String>,
    },
    ToolStarted {
        name: String,
    },
    ToolFinished {
        name: String,
        is_error: bool,
    },
    Artifact {
        name: String,
        text: String,
        last_chunk: bool,
    },
}

pub type ProgressSink = Arc<dyn Fn(ProgressEvent) + Send + Sync>;

/// Everything a call carries besides its name and arguments.
#[derive(Clone)]
pub struct ToolContext {
    pub principal: Principal,
    /// The client at the far end, for relaying progress, logs and sampling/elicitation requests.
    pub relay: CallContext,
    /// How many agents deep this call is (an agent calling an agent calling ...).
    pub depth: u32,
    /// The agent turn this call belongs to, when an agent makes it.
    pub turn: Option<Arc<TurnState>>,
    /// Where progress of long calls (agents) goes, when someone listens.
    pub progress: Option<ProgressSink>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.principal)
            .field("relay", &self.relay)
            .field("depth", &self.depth)
            .field("turn", &self.turn)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl ToolContext {
    /// A context for a client at a door, with nothing to relay to.
    pub fn client(id: impl Into<String>) -> Self {
        ToolContext {
            principal: Principal::client(id),
            relay: CallContext::default(),
            depth: 0,
            turn: None,
            progress: None,
        }
    }

    pub fn with_relay(mut self, relay: CallContext) -> Self {
        self.relay = relay;
        self
    }

    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = Some(progress);
        self
    }

    pub fn report(&self, event: ProgressEvent) {
        if let Some(progress) = &self.progress {
            progress(event);
        }
    }
}

/// Progress messages on their way to a client at a door, in order. Cheap to clone.
#[derive(Clone)]
pub struct ProgressMessages {
    sender: tokio::sync::mpsc::UnboundedSender<Forward>,
}

enum Forward {
    Message(String),
    /// Answered once everything queued before it has been sent.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl ProgressMessages {
    /// Queues a message; never blocks.
    pub fn send(&self, message: String) {
        let _ = self.sender.send(Forward::Message(message));
    }

    /// Waits until every message queued so far has reached the client: a call must not answer
    /// before the progress it reported, or the client would see progress after the result.
    pub async fn flush(&self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.sender.send(Forward::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

impl ToolContext {
    /// When the client at the far end asked for progress, a queue whose messages reach it as
    /// `notifications/progress` with those messages, in order (a forwarding task sends them, so
    /// queuing never blocks).
    pub fn progress_messages(&self) -> Option<ProgressMessages> {
        let caller = self.relay.caller.clone()?;
        if !self.relay.progress {
            return None;
        }
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Forward>();
        tokio::spawn(async move {
            let mut count = 0u64;
            while let Some(forward) = receiver.recv().await {
                match forward {
                    Forward::Message(message) => {
                        count += 1;
                        let params = serde_json::json!({"progress": count, "message": message});
                        caller
                            .notify(
                                portico_core::relay::methods::PROGRESS,
                                params.as_object().cloned().unwrap_or_default(),
                            )
                            .await;
                    }
                    Forward::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Some(ProgressMessages { sender })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_bearer_token_are_one_identity() {
        let canonical = credential_identity(b"Bearer s3cret");
        for spelling in [
            &b"Bearer   s3cret"[..],
            b"bearer s3cret",
            b"BEARER s3cret  ",
            b"Bearer\ts3cret",
            b" Bearer s3cret",
        ] {
            assert_eq!(
                credential_identity(spelling),
                canonical,
                "{}",
                String::from_utf8_lossy(spelling)
            );
        }
        assert_ne!(credential_identity(b"Bearer s3cre"), canonical);
        assert_ne!(credential_identity(b"Bearers3cret"), canonical);
        assert_ne!(credential_identity(b"Basic s3cret"), canonical);
    }

    #[test]
    fn patterns_match_whole_names() {
        let patterns =
            ToolPatterns::new(&["mcp_github_*", "file_read", "portico_agent_?ev"]).unwrap();
        assert!(patterns.matches("mcp_github_create_issue"));
        assert!(patterns.matches("file_read"));
        assert!(patterns.matches("portico_agent_dev"));
        assert!(!patterns.matches("file_read_more"));
        assert!(!patterns.matches("mcp_gitlab_x"));
        assert!(!patterns.matches("xmcp_github_x"));
        let agent = Principal::agent("a", patterns);
        assert!(agent.may_use("file_read"));
        assert!(!agent.may_use("file_write"));
        assert_eq!(agent.label(), "agent:a");
        assert!(Principal::client("stdio").may_use("anything"));
    }

    #[test]
    fn bad_patterns_are_named() {
        let error = ToolPatterns::new(&["file_[read"]).unwrap_err();
        assert_eq!(error.pattern, "file_[read");
    }

    #[test]
    fn turn_state_keeps_the_first_untrusted_source() {
        let turn = TurnState::default();
        assert_eq!(turn.untrusted_source(), None);
        turn.mark_untrusted("web_fetch");
        turn.mark_untrusted("mcp_x_y");
        assert_eq!(turn.untrusted_source().as_deref(), Some("web_fetch"));
    }

    #[test]
    fn a_turn_started_by_a_tainted_turn_is_tainted_and_names_the_first_reader() {
        let clean = TurnState::default();
        assert_eq!(
            TurnState::started_by(Some(&clean), "agent:a").untrusted(),
            None
        );
        assert_eq!(TurnState::started_by(None, "client:a2a").untrusted(), None);
        let reader = TurnState::default();
        reader.mark_untrusted("web_fetch");
        let child = TurnState::started_by(Some(&reader), "agent:reader");
        let grandchild = TurnState::started_by(Some(&child), "agent:child");
        let expected = Untrusted {
            tool: "web_fetch".into(),
            via: Some("agent:reader".into()),
        };
        assert_eq!(child.untrusted(), Some(expected.clone()));
        assert_eq!(grandchild.untrusted(), Some(expected));
        // What the child reads itself does not replace what it started with.
        child.mark_untrusted("mcp_x_y");
        assert_eq!(child.untrusted_source().as_deref(), Some("web_fetch"));
    }
}
