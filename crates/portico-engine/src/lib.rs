//! `portico-engine` assembles a running Portico from its configuration: the hub (upstream MCP
//! sessions), the embedded store, the built-in tools, the agents, and the one call pipeline in front of
//! all of them. Every door (`portico mcp`, `/mcp`, the HTTP API, the CLI) is handed an [`Engine`] and
//! calls tools only through [`Engine::pipeline`]: the engine's parts are private, and the upstreams
//! are reached only through [`Upstreams`], which has no tool calls.
//!
//! Tool names resolve in this order: local tools (built-ins, `agent_list`/`agent_send`, tools an
//! embedder registers), then agents (`portico_agent_*`), then remote A2A agents (`a2a_*`, when
//! `[[a2a.external_agents]]` are configured; `portico-a2a-client`), then the upstream catalog.
//!
//! What it is not: a door (no sockets here) or a place for policy logic (that is the pipeline's).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use portico_a2a_client::{RemoteAgentStatus, RemoteAgents};
use portico_agents::{
    Agent, AgentChanges, AgentRuntime, AgentTools, RuntimeSettings, agent_tools, choose,
};
use portico_config::{Config, agent_tool_name};
use portico_hub::{Hub, HubSettings, HubTools, OAuthHome, StopGrace};
use portico_metrics::Metrics;
use portico_net::{CredentialScope, LazyClient, NetPolicy, SafeClient};
use portico_pipeline::{
    ApprovalSettings, ApprovalVia, Approvals, AuditKey, ConditionSpec, DefaultAction, LocalTools,
    Pipeline, PipelineSettings, RuleAction, RuleSpec, TaintMode, TaintPolicy, ToolPatterns,
    ToolRules,
};
use portico_secrets::{SecretStore, Vars};
use portico_store::{AuditWriter, Store};

mod events;
mod replica;
mod tool_sources;
mod upstreams;

pub use events::{ApprovalChange, EVENT_CAPACITY, EngineEvent, Events, TaskChange};
pub use portico_hub::{ListKind, ServerChanges};
/// A server's stderr log (`Upstreams::server_log`), for `/api/mcp/servers/{name}/logs`.
pub use portico_hub::{LogLine, ServerLog};
pub use replica::{Replica, StoreView, open_store_to_read};
pub use tool_sources::ToolOriginKind;
pub use upstreams::{ServerActionError, Upstreams, UpstreamsError};

/// The file the store lives in, inside the data dir.
pub const STORE_FILE: &str = "portico.db";

/// The per-install secret that keys audit argument digests, inside the data dir (owner-only).
pub const AUDIT_KEY_FILE: &str = "audit.key";

/// Why Portico could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] portico_store::StoreError),
    #[error("agent `{agent}`: {source}")]
    Pattern {
        agent: String,
        #[source]
        source: portico_pipeline::PatternError,
    },
    #[error("[policy] sensitive_tools: {0}")]
    SensitivePattern(#[source] portico_pipeline::PatternError),
    #[error(transparent)]
    Policies(#[from] portico_pipeline::RuleError),
    #[error("built-in tools: {0}")]
    Builtins(#[from] portico_builtins::BuiltinError),
    #[error("{0}")]
    Replica(String),
}

/// The name under which replicas sharing a store keep the audit digest key (see
/// `Store::shared_secret`): one key for all, so a call digests alike through every replica.
const AUDIT_KEY_SECRET: &str = "audit-digest-key";

/// A running Portico. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    /// Private: the pipeline's `HubTools` is the only caller of the hub's tools.
    hub: Hub,
    upstreams: Upstreams,
    pipeline: Pipeline,
    agents: Arc<AgentRuntime>,
    store: Store,
    /// This process among the replicas sharing the store.
    replica: Replica,
    /// Built-ins and tools an embedder registers; served to every door.
    local: LocalTools,
    audit: AuditWriter,
    approvals: Approvals,
    /// What the pipeline, the hub and the store record into; the daemon serves it at `/metrics`.
    metrics: Metrics,
    /// Live events for followers (the daemon's `/api/events`).
    events: Events,
    /// `[[a2a.external_agents]]`, when configured (also a source of the pipeline).
    remote_agents: Option<Arc<RemoteAgents>>,
    /// What a reload needs to make the agents of a new config: their drivers read API keys from
    /// the environment and reach their models through this client.
    env: Arc<EnvLookup>,
    models: LazyClient,
}

/// How often expired approval requests are marked and old ones deleted.
const APPROVAL_SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Where the engine keeps its data, and how it reads the environment.
pub struct EngineOptions {
    pub data_dir: PathBuf,
    /// Reads Portico's environment (API keys for model providers, `${VAR}` in A2A headers and in
    /// servers' `env` and `headers`); what it does not have is looked up in the secret store of
    /// `data_dir` (`[secrets]`).
    pub env: EnvLookup,
    /// Whether every server connects at start (the daemon, `portico mcp`, `portico chat`), or none
    /// until asked with [`Hub::connect`]: one-shot commands connect only what they need (see
    /// [`Engine::servers_for_call`]).
    pub connect_at_start: bool,
    /// How stdio children are stopped at shutdown.
    pub child_stop: StopGrace,
    /// Paths the built-in file tools never reach, even inside their workspace (Portico's own
    /// files: `portico_config::owned_paths`); the data dir always.
    pub protected: Vec<PathBuf>,
    /// Whether this process is a replica of a shared store (`portico serve`): it writes a heartbeat
    /// under its `[store] replica` name and owns the A2A tasks it runs. Other processes on the same
    /// store (a CLI command beside the daemon) are not, so they never take a replica's name.
    pub replica: bool,
}

/// Reads one environment variable.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl EngineOptions {
    pub fn in_dir(data_dir: &Path) -> Self {
        EngineOptions {
            data_dir: data_dir.to_path_buf(),
            env: Box::new(|name| std::env::var(name).ok()),
            connect_at_start: true,
            child_stop: StopGrace::PATIENT,
            protected: vec![data_dir.to_path_buf()],
            replica: false,
        }
    }

    /// For `portico serve`: this process is a replica of its store (see [`EngineOptions::replica`]).
    pub fn as_replica(mut self) -> Self {
        self.replica = true;
        self
    }

    /// Keeps the built-in file tools away from `paths` too.
    pub fn protecting(mut self, paths: Vec<PathBuf>) -> Self {
        self.protected.extend(paths);
        self
    }

    /// For a command that answers once and exits: no server connects until asked, and stdio children
    /// are stopped without a long grace once the answer is out.
    pub fn one_shot(mut self) -> Self {
        self.connect_at_start = false;
        self.child_stop = StopGrace::BRIEF;
        self
    }
}

/// Checks the upstream tools against their pins whenever the catalog changes (definitions arrive)
/// or an approval is answered (a new definition may be approved), and tells the doors to list
/// again when that offers a held tool again. Ends with the pipeline.
fn follow_pins(
    pipeline: &Pipeline,
    hub: &Hub,
    approvals: &Approvals,
    pins: &portico_pipeline::ToolPins,
) {
    let pipeline = pipeline.downgrade();
    let hub = hub.clone();
    let mut catalog = hub.subscribe();
    let mut answers = approvals.answers();
    let mut repinned = pins.changes();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = catalog.changed() => if changed.is_err() { return },
                changed = answers.changed() => if changed.is_err() { return },
                changed = repinned.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    hub.announce_change();
                    continue;
                }
            }
            let Some(pipeline) = pipeline.upgrade() else {
                return;
            };
            pipeline.check_pins().await;
        }
    });
}

impl Engine {
    /// Starts everything `config` describes. Upstreams connect in the background; the engine is
    /// usable at once. Must be called inside a tokio runtime.
    pub fn start(config: &Config, options: EngineOptions) -> Result<Engine, EngineError> {
        let metrics = Metrics::new();
        // The one lookup of every `${VAR}` and passed-through name (servers' env and headers,
        // model keys, A2A headers, the store's URL): the environment, then the secret store.
        let vars = Vars::from_fn(
            options.env,
            Some(SecretStore::open(&options.data_dir, config.secrets.store)),
        );
        let env: EnvLookup = {
            let vars = vars.clone();
            Box::new(move |name| vars.get(name))
        };
        let (store, replica) =
            replica::open_store(&config.store, &options.data_dir, &env, options.replica)?;
        store.set_metrics(metrics.clone());
        let audit = store.audit_writer();
        let events = Events::default();
        // Every record, the pipeline's, the approvals' and the pins', is published as it is queued.
        let observed_audit: Arc<dyn portico_pipeline::AuditSink> =
            Arc::new(events::ObservedAudit {
                writer: audit.clone(),
                events: events.clone(),
            });
        let hub_settings = HubSettings {
            child_stop: options.child_stop,
            oauth: Some(OAuthHome::in_data_dir(&options.data_dir)),
            metrics: metrics.clone(),
            vars,
            ..HubSettings::default()
        };
        let hub = if options.connect_at_start {
            Hub::start_with(config, hub_settings)
        } else {
            Hub::idle(config, hub_settings)
        };
        let policy = &config.policy;
        let pipeline = Pipeline::new(PipelineSettings {
            tool_timeout: Duration::from_secs(policy.tool_timeout_secs),
            max_result_chars: policy.max_result_chars,
        });
        pipeline.set_audit(observed_audit.clone());
        pipeline.set_metrics(metrics.clone());
        let audit_key = if replica.shared() {
            store.shared_secret(AUDIT_KEY_SECRET, rand::random())?
        } else {
            portico_store::load_or_create_secret(&options.data_dir.join(AUDIT_KEY_FILE))?
        };
        pipeline.set_audit_key(AuditKey::new(audit_key));
        let taint = match policy.taint.as_str() {
            "off" => TaintMode::Off,
            "approval" => TaintMode::RequireApproval,
            _ => TaintMode::Refuse,
        };
        let sensitive =
            ToolPatterns::new(&policy.sensitive_tools).map_err(EngineError::SensitivePattern)?;
        // The config's rules first: an owner's explicit deny is the more telling refusal.
        let rules = tool_rules(config)?;
        if !rules.allows_everything() {
            pipeline.add_policy(Arc::new(rules));
        }
        pipeline.add_policy(Arc::new(TaintPolicy::new(taint, sensitive)));
        // A call waits no longer than its request can be answered.
        let approval_ttl_secs = policy.approval_ttl_secs.max(1);
        let approvals = Approvals::new(
            store.clone(),
            ApprovalSettings {
                ttl: Duration::from_secs(approval_ttl_secs),
                wait: Duration::from_secs(policy.approval_wait_secs.min(approval_ttl_secs)),
                via: match policy.approval_via {
                    portico_config::ApprovalVia::Elicitation => ApprovalVia::Elicitation,
                    portico_config::ApprovalVia::OutOfBand => ApprovalVia::OutOfBand,
                    portico_config::ApprovalVia::Both => ApprovalVia::Both,
                },
                ..ApprovalSettings::default()
            },
        );
        approvals.set_audit(observed_audit.clone());
        events.observe_approvals(&approvals);
        approvals.sweep_every(APPROVAL_SWEEP_EVERY);
        pipeline.set_approvals(approvals.clone());

        let local = LocalTools::default();
        if config.builtins.enabled {
            let workspace = match &config.builtins.workspace {
                Some(dir) => PathBuf::from(dir),
                None => options.data_dir.join("workspace"),
            };
            let mut settings = portico_builtins::BuiltinSettings::new(workspace);
            settings.shell_exec = config.builtins.shell_exec;
            settings.protected = options.protected.clone();
            settings.web_fetch_max_bytes = config.builtins.web_fetch_max_bytes;
            let web_policy =
                portico_builtins::web_fetch_policy(config.builtins.web_fetch_allow_private_network);
            let web = http_client(web_policy, CredentialScope::Nowhere);
            portico_builtins::register(&local, &settings, store.clone(), web)?;
        }

        // Model endpoints are the operator's own configuration, and local model servers (Ollama,
        // vLLM, llama.cpp) live on loopback or the LAN, so private addresses are allowed; cloud
        // metadata and link-local addresses stay blocked.
        // Every model request carries its API key: no redirect may take it to another origin.
        let models = http_client(
            NetPolicy::allow_private_network(),
            CredentialScope::Everywhere,
        );
        let env: Arc<EnvLookup> = Arc::new(env);
        let agents = config
            .agents
            .iter()
            .filter(|a| a.enabled)
            .map(|agent| build_agent(agent, &env, &models))
            .collect::<Result<Vec<_>, _>>()?;
        let runtime = Arc::new(AgentRuntime::new(
            agents,
            pipeline.downgrade(),
            store.clone(),
            RuntimeSettings {
                max_depth: policy.max_agent_depth,
                ..RuntimeSettings::default()
            },
        ));
        if !config.agents.is_empty() {
            for tool in agent_tools(&runtime) {
                local.register(tool);
            }
        }
        pipeline.add_source(Arc::new(local.clone()));
        pipeline.add_source(Arc::new(AgentTools::new(runtime.clone())));
        let remote_agents = if config.a2a.external_agents.is_empty() {
            None
        } else {
            // `a2a_*` names cannot collide with the hub's `mcp_*`; cards are read in the
            // background, so nothing here waits on a remote host.
            let remote = RemoteAgents::new(&config.a2a.external_agents, &**env);
            remote.start();
            pipeline.add_source(remote.clone());
            Some(remote)
        };
        pipeline.add_source(Arc::new(HubTools::new(hub.clone())));
        if policy.pin_tools {
            let pins = portico_pipeline::ToolPins::new(store.clone(), approvals.clone())?;
            pins.set_audit(observed_audit.clone());
            pipeline.set_pins(pins.clone());
            follow_pins(&pipeline, &hub, &approvals, &pins);
        }
        events.follow_servers(&hub);
        Ok(Engine {
            events,
            replica,
            remote_agents,
            upstreams: Upstreams::new(hub.clone()),
            hub,
            pipeline,
            agents: runtime,
            store,
            local,
            audit,
            approvals,
            metrics,
            env,
            models,
        })
    }

    /// What calls, upstreams and the store recorded: the counters and histograms of `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The engine's part of a scrape's state, read now: each upstream's state and connects, the
    /// stored A2A tasks by state and the pending approval requests (a count the store cannot give
    /// is left out of the scrape, and logged).
    pub async fn metrics_state(&self) -> portico_metrics::State {
        let upstreams = self
            .hub
            .servers()
            .into_iter()
            .map(|status| portico_metrics::UpstreamState {
                server: status.name,
                state: status.state,
                connects: status.connects,
            })
            .collect();
        let counted = self
            .store
            .run("counting tasks and approvals", |store| {
                Ok::<_, portico_store::StoreError>((
                    store.task_counts_by_state(),
                    store.pending_approval_count(),
                ))
            })
            .await;
        let (tasks, pending) = match counted {
            Ok((tasks, pending)) => (
                tasks
                    .inspect_err(|error| tracing::warn!("/metrics: {error}"))
                    .ok(),
                pending
                    .inspect_err(|error| tracing::warn!("/metrics: {error}"))
                    .ok(),
            ),
            Err(error) => {
                tracing::warn!("/metrics: the store's counts failed: {error}");
                (None, None)
            }
        };
        portico_metrics::State {
            upstreams,
            sessions: Vec::new(),
            a2a_tasks: tasks,
            approvals_pending: pending,
        }
    }

    /// Live events: server status, approvals, audit records, A2A task states (see [`Events`]).
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// `[[a2a.external_agents]]` with their cards as last read (empty when none is configured).
    pub fn remote_agents(&self) -> Vec<RemoteAgentStatus> {
        self.remote_agents
            .as_ref()
            .map(|remote| remote.statuses())
            .unwrap_or_default()
    }

    /// Approval requests and grants: listing and answering them (the daemon's `/api/approvals`).
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The one way to call a tool, from every door and agent.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The upstream servers, for everything but tool calls.
    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    /// The aggregated upstream catalog as it is now (read-only).
    pub fn catalog(&self) -> Arc<portico_core::Catalog> {
        self.hub.catalog()
    }

    /// The configured agents: their definitions, and runs (whose tool calls go through the pipeline).
    pub fn agents(&self) -> &Arc<AgentRuntime> {
        &self.agents
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// This process among the replicas sharing the store: its name, whether the store is shared.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Built-ins and tools an embedder registers (host tools); served to every door through the
    /// pipeline.
    pub fn local_tools(&self) -> &LocalTools {
        &self.local
    }

    /// The upstream servers a call of `name` needs connected: every server for an agent (its model
    /// may call any tool its patterns allow), none for another local tool or a remote agent, else the
    /// servers that may serve the name ([`Hub::servers_for_tool`]).
    pub fn servers_for_call(&self, name: &str) -> Vec<String> {
        if self.agents.runs_an_agent(name) {
            return self.hub.server_names();
        }
        match self.pipeline.source_kind(name) {
            Some(kind) if kind != HubTools::KIND => Vec::new(),
            _ => self.hub.servers_for_tool(name),
        }
    }

    /// Applies a new config to the running engine: its `[[mcp_servers]]` take effect at once
    /// ([`Hub::reload`]: only the servers that changed are touched); every other section but the
    /// agents the
    /// engine built its parts from at start, and a change there is named in
    /// [`Reloaded::restart_needed`] rather than half applied.
    ///
    /// The agents change too (`[[agents]]` and the agents directory): a new or changed agent is
    /// built (an error there, such as a bad tool pattern, refuses the whole reload before anything
    /// changed), a removed one goes; runs in progress finish with the agent they started with.
    pub async fn reload(&self, old: &Config, new: &Config) -> Result<Reloaded, EngineError> {
        // Only servers and agents are taken from the new config: `[expose] prefix` too names the
        // hub's tools, and applying it while the doors keep the old `[expose]` would serve a mix.
        let running = Config {
            mcp_servers: new.mcp_servers.clone(),
            agents: new.agents.clone(),
            ..old.clone()
        };
        let enabled: Vec<portico_config::AgentConfig> =
            new.agents.iter().filter(|a| a.enabled).cloned().collect();
        let had_agents = !old.agents.is_empty();
        let agents = self.agents.replace_agents(&enabled, |agent| {
            build_agent(agent, &self.env, &self.models)
        })?;
        if !had_agents && !new.agents.is_empty() {
            for tool in agent_tools(&self.agents) {
                self.local.register(tool);
            }
        }
        let servers = self.hub.reload(&running).await;
        if agents.any() {
            // The doors list again and tell their clients when what they may list changed.
            self.hub.announce_change();
        }
        Ok(Reloaded {
            servers,
            agents,
            restart_needed: restart_needed(old, new),
            running,
        })
    }

    /// Kills every stdio upstream child now, for a second Ctrl-C: see [`Hub::kill_children_now`].
    pub fn kill_children_now(&self) {
        self.hub.kill_children_now();
    }

    /// Stops the upstreams and makes sure every audit record is written.
    pub async fn shutdown(&self) {
        if tokio::time::timeout(Duration::from_secs(30), self.hub.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some servers did not stop within 30s");
        }
        self.audit.flush().await;
        self.replica.leave(&self.store).await;
    }

    /// Waits until every audit record made so far is written.
    pub async fn flush_audit(&self) {
        self.audit.flush().await;
    }
}

/// What [`Engine::reload`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reloaded {
    pub servers: ServerChanges,
    pub agents: AgentChanges,
    /// The sections that changed but take effect only when Portico is started again, as the
    /// config names them (`[server]`, `[[agents]]`, ...).
    pub restart_needed: Vec<&'static str>,
    /// The config the engine runs now: the new `[[mcp_servers]]`, every other section as it was.
    pub running: Config,
}

/// The sections other than `[[mcp_servers]]` and `[[agents]]` that differ: each is read once, when
/// its part starts. `[server]` holds the listen address, tokens, clients and door limits; the
/// pipeline compiled `[policy]` and `[[policies]]`; the built-ins were registered with theirs.
fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut sections = Vec::new();
    if old.server != new.server {
        sections.push("[server]");
    }
    if old.expose != new.expose {
        sections.push("[expose]");
    }
    if old.builtins != new.builtins {
        sections.push("[builtins]");
    }
    if old.policy != new.policy {
        sections.push("[policy]");
    }
    if old.policies != new.policies {
        sections.push("[[policies]]");
    }
    if old.a2a != new.a2a {
        sections.push("[a2a]");
    }
    // The trace exporter is part of the log, installed once at start.
    if old.telemetry != new.telemetry {
        sections.push("[telemetry]");
    }
    sections
}

/// One configured agent, ready to run: its tool patterns compiled, its model driver chosen.
fn build_agent(
    agent: &portico_config::AgentConfig,
    env: &EnvLookup,
    models: &LazyClient,
) -> Result<Agent, EngineError> {
    let patterns = ToolPatterns::new(&agent.tools).map_err(|source| EngineError::Pattern {
        agent: agent.name.clone(),
        source,
    })?;
    Ok(Agent {
        tool_name: agent_tool_name(&agent.name),
        patterns,
        driver: choose(&agent.name, &agent.model, env, models),
        config: agent.clone(),
    })
}

/// `[[policies]]` and `[policy] default`, compiled once for the pipeline.
fn tool_rules(config: &Config) -> Result<ToolRules, portico_pipeline::RuleError> {
    use portico_config::{PolicyAction, PolicyDefault};
    let specs: Vec<RuleSpec> = config
        .policies
        .iter()
        .map(|policy| RuleSpec {
            tools: policy.tools.clone(),
            callers: policy.callers.clone(),
            when: policy
                .when
                .iter()
                .map(|condition| ConditionSpec {
                    pointer: condition.pointer.clone(),
                    matches: condition.matches.clone(),
                })
                .collect(),
            action: match policy.action {
                PolicyAction::Allow => RuleAction::Allow,
                PolicyAction::Deny => RuleAction::Deny,
                PolicyAction::Approve => RuleAction::Approve,
            },
            reason: policy.reason.clone(),
        })
        .collect();
    let default = match config.policy.default {
        PolicyDefault::Allow => DefaultAction::Allow,
        PolicyDefault::Deny => DefaultAction::Deny,
    };
    ToolRules::compile(&specs, default)
}

/// An outbound client built on first use (building one loads TLS roots, which start-up should not
/// wait for).
fn http_client(policy: NetPolicy, credentials: CredentialScope) -> LazyClient {
    LazyClient::new(move || {
        SafeClient::builder()
            .policy(policy.clone())
            .credentials(credentials.clone())
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("portico/", env!("CARGO_PKG_VERSION")))
            .build()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `config check` and the pipeline parse `[[policies]]` with the same code: what one accepts the
    /// other compiles, and what the check refuses would not compile.
    #[test]
    fn policies_config_check_accepts_compile_and_the_ones_it_refuses_would_not() {
        let text = r#"
[policy]
default = "deny"
[[policies]]
tools = ["mcp_github_{create,delete}_*", "file_[wr]*", "a?c"]
callers = ["client:*", "agent:code-reviewer"]
when = [
  { pointer = "/branch", matches = "^(main|release/.*)$" },
  { pointer = "/a~1b/~0c/0", matches = "(?i)^yes$" },
  { pointer = "/", matches = "" },
]
action = "approve"
[[policies]]
tools = ["*"]
action = "allow"
"#;
        let config = portico_config::parse("t", text).unwrap();
        let rules = tool_rules(&config).unwrap();
        assert!(!rules.allows_everything());
        let decision = rules.decide(
            "mcp_github_create_issue",
            "client:http",
            &serde_json::json!({"branch": "main", "a/b": {"~c": ["YES"]}, "": "x"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(
            (decision.action, decision.rule),
            (RuleAction::Approve, Some(1))
        );

        for (field, bad) in [
            ("tools", r#"tools = ["file_[write"]"#),
            (
                "callers",
                r#"tools = ["x"]
callers = ["client:{a"]"#,
            ),
            (
                "pointer",
                r#"tools = ["x"]
when = [{ pointer = "branch", matches = "x" }]"#,
            ),
            (
                "regex",
                r#"tools = ["x"]
when = [{ pointer = "/branch", matches = "(main" }]"#,
            ),
        ] {
            let text = format!("[[policies]]\n{bad}\naction = \"deny\"\n");
            assert_eq!(portico_config::check(&text).len(), 1, "{field}: {text}");
            let config: Config = toml::from_str(&text).unwrap();
            assert!(tool_rules(&config).is_err(), "{field}");
        }
    }
}
