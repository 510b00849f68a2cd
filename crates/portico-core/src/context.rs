//! Who is calling, and what travels with a call through the pipeline.

use std::sync::{Arc, Mutex};

use crate::relay::CallContext;
use globset::{Glob, GlobSet, GlobSetBuilder};

/// The identity a call is made under. Capabilities hang off it: a client of a door sees everything
/// the door exposes, or, when its `[[server.clients]]` entry has a `tools` scope, only what the scope
/// names; an agent sees only the tools its patterns name, whichever door it was reached through.
#[derive(Clone, Debug)]
pub enum Principal {
    /// A person or program at a door: an MCP client, the HTTP API, the CLI. `id` is the client's
    /// name when its token identified it (`laptop`, `default` for `[server] token`), else the door
    /// (`http`, `stdio`, `cli`). `scope`, when set, is all it may list and call.
    Client {
        id: String,
        scope: Option<Arc<ToolPatterns>>,
    },
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
    /// A client with the door's whole catalog.
    pub fn client(id: impl Into<String>) -> Self {
        Principal::Client {
            id: id.into(),
            scope: None,
        }
    }

    /// A named client limited to `scope` (`None`: the door's whole catalog).
    pub fn scoped_client(name: impl Into<String>, scope: Option<Arc<ToolPatterns>>) -> Self {
        Principal::Client {
            id: name.into(),
            scope,
        }
    }

    pub fn agent(name: impl Into<String>, patterns: ToolPatterns) -> Self {
        Principal::Agent(Arc::new(AgentScope {
            name: name.into(),
            patterns,
        }))
    }

    /// How audit records name the caller: `client:{name}` (or `client:{door}`) or `agent:{name}`.
    pub fn label(&self) -> String {
        match self {
            Principal::Client { id, .. } => format!("client:{id}"),
            Principal::Agent(scope) => format!("agent:{}", scope.name),
        }
    }

    /// Whether this principal may see and call `tool`.
    pub fn may_use(&self, tool: &str) -> bool {
        match self {
            Principal::Client { scope, .. } => {
                scope.as_ref().is_none_or(|scope| scope.matches(tool))
            }
            Principal::Agent(scope) => scope.patterns.matches(tool),
        }
    }

    /// A scoped client's name and scope: the client a refusal outside the scope names.
    pub fn client_scope(&self) -> Option<(&str, &ToolPatterns)> {
        match self {
            Principal::Client {
                id,
                scope: Some(scope),
            } => Some((id, scope)),
            _ => None,
        }
    }

    pub fn agent_name(&self) -> Option<&str> {
        match self {
            Principal::Agent(scope) => Some(&scope.name),
            Principal::Client { .. } => None,
        }
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
    /// A piece of an artifact: one part, appended to the artifact `name`.
    Artifact {
        name: String,
        part: ArtifactPart,
        last_chunk: bool,
    },
    /// The run's final answer is a plain message, not the result of a task: where the protocol
    /// allows it (an A2A send that waits for the answer), the caller gets a message and no task.
    AnswerAsMessage,
}

/// One part of an artifact, whichever protocol carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum ArtifactPart {
    Text(String),
    /// A file's content inline.
    File {
        bytes: Vec<u8>,
        name: Option<String>,
        media_type: Option<String>,
    },
    /// A file by reference.
    FileUrl {
        url: String,
        name: Option<String>,
        media_type: Option<String>,
    },
    /// Structured data.
    Data(serde_json::Map<String, serde_json::Value>),
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
    /// The label of the client whose call started the agent run this call belongs to (kept through
    /// nested agents); `None` for a client's own call. Approvals bind it, so a grant given for one
    /// client's run is not another's.
    pub on_behalf_of: Option<String>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.principal)
            .field("relay", &self.relay)
            .field("depth", &self.depth)
            .field("turn", &self.turn)
            .field("progress", &self.progress.is_some())
            .field("on_behalf_of", &self.on_behalf_of)
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
            on_behalf_of: None,
        }
    }

    /// A context for `principal` (a client its token identified, with its scope), with nothing to
    /// relay to.
    pub fn of(principal: Principal) -> Self {
        ToolContext {
            principal,
            ..ToolContext::client("")
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

    /// The client at the far end: the one an agent runs for, else this call's own principal.
    pub fn client_label(&self) -> String {
        self.on_behalf_of
            .clone()
            .unwrap_or_else(|| self.principal.label())
    }

    pub fn report(&self, event: ProgressEvent) {
        if let Some(progress) = &self.progress {
            progress(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_scoped_client_uses_only_its_scope_and_keeps_its_label() {
        let scope = Arc::new(ToolPatterns::new(&["time_*"]).unwrap());
        let laptop = Principal::scoped_client("laptop", Some(scope));
        assert_eq!(laptop.label(), "client:laptop");
        assert!(laptop.may_use("time_now"));
        assert!(!laptop.may_use("file_read"));
        let (name, scope) = laptop.client_scope().unwrap();
        assert_eq!(
            (name, scope.patterns()),
            ("laptop", &["time_*".to_string()][..])
        );
        let ci = Principal::scoped_client("ci", None);
        assert!(ci.may_use("file_read"));
        assert!(ci.client_scope().is_none());
        assert_eq!(ci.label(), "client:ci");
    }

    #[test]
    fn the_client_label_is_the_client_an_agent_runs_for() {
        let client = ToolContext::of(Principal::scoped_client("a", None));
        assert_eq!(client.client_label(), "client:a");
        // What `run_scope` gives an agent's calls, and a nested agent's: the outermost client.
        let agent = ToolContext {
            principal: Principal::agent("x", ToolPatterns::new(&["*"]).unwrap()),
            on_behalf_of: Some(client.client_label()),
            ..ToolContext::client("unused")
        };
        let nested = ToolContext {
            principal: Principal::agent("y", ToolPatterns::new(&["*"]).unwrap()),
            on_behalf_of: Some(agent.client_label()),
            ..ToolContext::client("unused")
        };
        assert_eq!(
            (agent.client_label(), nested.client_label()),
            ("client:a".to_string(), "client:a".to_string())
        );
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
