//! `portico-engine` assembles a running Portico from its configuration: the hub (upstream MCP
//! sessions), the embedded store, the built-in tools, the agents, and the one call pipeline in front of
//! all of them. Every door (`portico mcp`, `/mcp`, the HTTP API, the CLI) is handed an [`Engine`] and
//! calls tools only through [`Engine::pipeline`].
//!
//! Tool names resolve in this order: local tools (built-ins, `agent_list`/`agent_send`, tools an
//! embedder registers), then agents (`portico_agent_*`), then remote A2A agents (`a2a_*`, when
//! `[[a2a.external_agents]]` are configured and the embedder passes
//! [`EngineOptions::remote_agents`]), then the upstream catalog.
//!
//! What it is not: a door (no sockets here) or a place for policy logic (that is the pipeline's).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use portico_agents::{Agent, AgentRuntime, AgentTools, RuntimeSettings, agent_tools, choose};
use portico_config::{Config, agent_tool_name};
use portico_hub::{Hub, HubSettings, HubTools, StopGrace};
use portico_net::{CredentialScope, LazyClient, NetPolicy, SafeClient};
use portico_pipeline::{
    AuditKey, LocalTools, Pipeline, PipelineSettings, TaintMode, TaintPolicy, ToolPatterns,
    ToolSource,
};
use portico_store::{AuditWriter, Store};

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
    #[error("built-in tools: {0}")]
    Builtins(#[from] portico_builtins::BuiltinError),
}

/// A running Portico. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub hub: Hub,
    pub pipeline: Pipeline,
    pub agents: Arc<AgentRuntime>,
    pub store: Store,
    /// Built-ins and tools an embedder registers; served to every door.
    pub local: LocalTools,
    audit: AuditWriter,
}

/// Where the engine keeps its data, and how it reads the environment.
pub struct EngineOptions {
    pub data_dir: PathBuf,
    /// Reads Portico's environment (API keys for model providers, `${VAR}` in A2A headers).
    pub env: EnvLookup,
    /// Builds the remote A2A agents' tool source from the config (and starts reading their cards in
    /// the background); it is placed after the agents and before the hub. `portico-a2a` provides it
    /// (`portico_a2a::remote_agents_source`): a hook, because that crate depends on this one. Used only
    /// when `[[a2a.external_agents]]` are configured.
    pub remote_agents: Option<SourceFactory>,
    /// Whether every server connects at start (the daemon, `portico mcp`, `portico chat`), or none
    /// until asked with [`Hub::connect`]: one-shot commands connect only what they need (see
    /// [`Engine::servers_for_call`]).
    pub connect_at_start: bool,
    /// How stdio children are stopped at shutdown.
    pub child_stop: StopGrace,
}

/// Reads one environment variable.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Builds a tool source from the config, with Portico's environment.
pub type SourceFactory = Box<
    dyn FnOnce(&Config, &(dyn Fn(&str) -> Option<String> + Send + Sync)) -> Arc<dyn ToolSource>
        + Send,
>;

impl EngineOptions {
    pub fn in_dir(data_dir: &Path) -> Self {
        EngineOptions {
            data_dir: data_dir.to_path_buf(),
            env: Box::new(|name| std::env::var(name).ok()),
            remote_agents: None,
            connect_at_start: true,
            child_stop: StopGrace::PATIENT,
        }
    }

    /// For a command that answers once and exits: no server connects until asked, and stdio children
    /// are stopped without a long grace once the answer is out.
    pub fn one_shot(mut self) -> Self {
        self.connect_at_start = false;
        self.child_stop = StopGrace::BRIEF;
        self
    }

    /// Serves `[[a2a.external_agents]]` as `a2a_*` tools through `factory`.
    pub fn with_remote_agents(mut self, factory: SourceFactory) -> Self {
        self.remote_agents = Some(factory);
        self
    }
}

impl Engine {
    /// Starts everything `config` describes. Upstreams connect in the background; the engine is
    /// usable at once. Must be called inside a tokio runtime.
    pub fn start(config: &Config, options: EngineOptions) -> Result<Engine, EngineError> {
        let store = Store::open(&options.data_dir.join(STORE_FILE))?;
        let audit = store.audit_writer();
        let hub_settings = HubSettings {
            child_stop: options.child_stop,
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
        pipeline.set_audit(Arc::new(audit.clone()));
        let audit_key =
            portico_store::load_or_create_secret(&options.data_dir.join(AUDIT_KEY_FILE))?;
        pipeline.set_audit_key(AuditKey::new(audit_key));
        let taint = match policy.taint.as_str() {
            "off" => TaintMode::Off,
            "approval" => TaintMode::RequireApproval,
            _ => TaintMode::Refuse,
        };
        let sensitive =
            ToolPatterns::new(&policy.sensitive_tools).map_err(EngineError::SensitivePattern)?;
        pipeline.add_policy(Arc::new(TaintPolicy::new(taint, sensitive)));

        let local = LocalTools::default();
        if config.builtins.enabled {
            let workspace = match &config.builtins.workspace {
                Some(dir) => PathBuf::from(dir),
                None => options.data_dir.join("workspace"),
            };
            let mut settings = portico_builtins::BuiltinSettings::new(workspace);
            settings.shell_exec = config.builtins.shell_exec;
            settings.web_fetch_max_bytes = config.builtins.web_fetch_max_bytes;
            let web_policy = if config.builtins.web_fetch_allow_private_network {
                NetPolicy::allow_private_network()
            } else {
                NetPolicy::public_only()
            };
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
        let mut agents = Vec::new();
        for agent in config.agents.iter().filter(|a| a.enabled) {
            let patterns =
                ToolPatterns::new(&agent.tools).map_err(|source| EngineError::Pattern {
                    agent: agent.name.clone(),
                    source,
                })?;
            agents.push(Agent {
                tool_name: agent_tool_name(&agent.name),
                patterns,
                driver: choose(&agent.name, &agent.model, &*options.env, &models),
                config: agent.clone(),
            });
        }
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
        if !config.a2a.external_agents.is_empty() {
            match options.remote_agents {
                // `a2a_*` names cannot collide with the hub's `mcp_*`; cards are read in the
                // background, so nothing here waits on a remote host.
                Some(factory) => pipeline.add_source(factory(config, &*options.env)),
                None => tracing::warn!(
                    "{} [[a2a.external_agents]] configured, but this embedding of Portico does not serve remote agents",
                    config.a2a.external_agents.len()
                ),
            }
        }
        pipeline.add_source(Arc::new(HubTools::new(hub.clone())));
        Ok(Engine {
            hub,
            pipeline,
            agents: runtime,
            store,
            local,
            audit,
        })
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

    /// Stops the upstreams and makes sure every audit record is written.
    pub async fn shutdown(&self) {
        if tokio::time::timeout(Duration::from_secs(30), self.hub.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some servers did not stop within 30s");
        }
        self.audit.flush().await;
    }

    /// Waits until every audit record made so far is written.
    pub async fn flush_audit(&self) {
        self.audit.flush().await;
    }
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
