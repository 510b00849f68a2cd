//! The typed configuration.

use crate::upstream_oauth::UpstreamOAuthConfig;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// The default bound of a server's start: long enough for a package runner's cold download.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 120;
/// Default `[[mcp_servers]] max_concurrent_calls`.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 64;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4200";

/// The MCP protocol versions Portico speaks, oldest first.
pub const PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub mcp_servers: Vec<McpServerConfig>,
    #[serde(default)]
    pub expose: ExposeSection,
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    #[serde(default)]
    pub builtins: BuiltinsSection,
    #[serde(default)]
    pub policy: PolicySection,
    /// Tool policies, first match wins; calls no entry matches get `[policy] default`.
    #[serde(default)]
    pub policies: Vec<ToolPolicyConfig>,
    #[serde(default)]
    pub a2a: A2aSection,
    /// OpenTelemetry traces; off unless `otlp_endpoint` is set.
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// Where Portico keeps its state; the embedded SQLite file unless `url` is set.
    #[serde(default)]
    pub store: StoreSection,
    /// The MCP registry `portico search` and `portico add NAME` read.
    #[serde(default)]
    pub registry: RegistrySection,
    /// Where `portico secret set` keeps secrets; `${VAR}`s the environment does not set are looked
    /// up there.
    #[serde(default)]
    pub secrets: SecretsSection,
}

/// The official MCP registry, what `[registry] url` is when not set.
pub const DEFAULT_REGISTRY_URL: &str = "https://registry.modelcontextprotocol.io";

/// `[registry]`: where servers are searched for and added from. Any registry serving the MCP
/// registry API (v0.1) will do: the official one, or a company's own.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegistrySection {
    /// The registry's base URL (default https://registry.modelcontextprotocol.io); the API is
    /// under `{url}/v0.1/`.
    #[serde(default)]
    pub url: Option<String>,
    /// Lets the registry be on this machine or a private network (cloud metadata and link-local
    /// addresses stay blocked).
    #[serde(default)]
    pub allow_private_network: bool,
}

impl RegistrySection {
    /// The URL, defaulted.
    pub fn url(&self) -> &str {
        self.url.as_deref().unwrap_or(DEFAULT_REGISTRY_URL)
    }
}

/// `[secrets]`: where the secret store keeps what `portico secret set` is given.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SecretsSection {
    /// `auto` (the default): the OS keyring where one is usable (Secret Service on Linux, the
    /// Keychain on macOS), else a file in the data dir readable by its owner only. `keyring` or
    /// `file` choose one.
    #[serde(default)]
    pub store: SecretStoreChoice,
}

/// Which secret store `[secrets] store` asks for.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SecretStoreChoice {
    #[default]
    Auto,
    Keyring,
    File,
}

/// `[store]`: where the state lives (A2A tasks, conversations, memory, the audit log, approvals,
/// tool pins). Read when the process starts (a reload does not change it). Without `url`, one SQLite
/// file in the data directory, for one process. With `url`, a PostgreSQL database that several
/// `portico serve` replicas share behind a load balancer (docs/replicas.md).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (or `postgresql://`). `${VAR}` is expanded, so
    /// the password can stay in the environment. Never logged with its password.
    #[serde(default)]
    pub url: Option<String>,
    /// Connections each replica keeps to the database (default 8, at most 256).
    #[serde(default)]
    pub pool_size: Option<usize>,
    /// This replica's name: it owns the A2A tasks it runs (their leases), prefixes the MCP session
    /// ids it issues, and is shown by `/api/health`. Letters, digits, `-` and `_`, at most 32.
    /// Default: the host name and the process id. `${VAR}` is expanded.
    #[serde(default)]
    pub replica: Option<String>,
    /// How many replicas share the configured rate limits: each replica enforces 1/N of every rate
    /// and burst (at least 1 call), so N replicas together admit about what one would (default 1).
    #[serde(default)]
    pub replicas: Option<u32>,
}

/// The default `[store] pool_size`.
pub const DEFAULT_STORE_POOL_SIZE: usize = 8;
/// The largest `[store] pool_size`.
pub const MAX_STORE_POOL_SIZE: usize = 256;
/// The longest `[store] replica` name.
pub const MAX_REPLICA_NAME: usize = 32;

impl StoreSection {
    /// The pool size, defaulted.
    pub fn pool_size(&self) -> usize {
        self.pool_size
            .unwrap_or(DEFAULT_STORE_POOL_SIZE)
            .clamp(1, MAX_STORE_POOL_SIZE)
    }

    /// How many replicas share the rate limits, defaulted.
    pub fn replicas(&self) -> u32 {
        self.replicas.unwrap_or(1).max(1)
    }
}

/// What is wrong with a replica name, if anything.
pub fn replica_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.len() > MAX_REPLICA_NAME {
        Some("is longer than 32 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Some("may hold only letters, digits, `-` and `_`")
    } else {
        None
    }
}

/// `[telemetry]`: OpenTelemetry traces over OTLP/HTTP. Read when the process starts (a reload does
/// not change it). Spans carry names, servers, principals' classes and outcomes, never argument
/// values, results or tokens (docs/observability.md).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    /// The collector's OTLP/HTTP traces URL (`http://127.0.0.1:4318/v1/traces`). Absent: no
    /// traces. `${VAR}` is expanded. Loopback and private addresses are allowed: the operator
    /// names this destination.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans (default `portico`).
    #[serde(default)]
    pub service_name: Option<String>,
    /// The share of traces started here that are sampled, 0.0 to 1.0 (default 1.0). A call whose
    /// incoming `traceparent` says sampled or not keeps its caller's choice.
    #[serde(default)]
    pub sample_ratio: Option<f64>,
}

/// The `service.name` spans carry when `[telemetry] service_name` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "portico";

impl TelemetrySection {
    /// The service name, defaulted.
    pub fn service_name(&self) -> &str {
        self.service_name.as_deref().unwrap_or(DEFAULT_SERVICE_NAME)
    }

    /// The sample ratio, defaulted (1.0: every trace).
    pub fn sample_ratio(&self) -> f64 {
        self.sample_ratio.unwrap_or(1.0)
    }
}

/// One `[[policies]]` entry: which calls it matches (tools, callers, argument conditions) and what
/// it does with them.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicyConfig {
    /// Globs over the tool names the doors serve (`mcp_github_create_*`, `file_write`).
    pub tools: Vec<String>,
    /// Globs over callers: `client:{name}` (a `[[server.clients]]` name, `default` for `[server]
    /// token`, or the door: `client:stdio`), `client:*`, and `agent:{name}`. Absent: every caller.
    #[serde(default)]
    pub callers: Option<Vec<String>>,
    /// Conditions on the call's (validated) arguments; all must hold.
    #[serde(default)]
    pub when: Vec<PolicyCondition>,
    pub action: PolicyAction,
    /// What the client is told when the entry denies a call or holds it for approval.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A condition on one argument: the value at `pointer` (a JSON pointer, `/branch`) must match the
/// regex `matches` (searched: anchor it with `^...$`). A string is matched as it is, a number or
/// boolean as its JSON text; a missing value never matches.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyCondition {
    pub pointer: String,
    pub matches: String,
}

/// The actions a `[[policies]]` entry can take.
pub const POLICY_ACTIONS: &[&str] = &["allow", "deny", "approve"];

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolicyAction {
    Allow,
    Deny,
    /// Held for an owner's approval (approvals cannot be given yet: the call does not run).
    Approve,
}

/// What `[policy] default` does with calls no `[[policies]]` entry matches.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolicyDefault {
    #[default]
    Allow,
    Deny,
}

/// The A2A doors (serving Portico's agents to other frameworks) and external A2A agents.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct A2aSection {
    /// `false` turns every A2A endpoint off, cards included.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Where the A2A endpoints live: `{listen_path}/{agent}` (JSON-RPC), `{listen_path}/{agent}/...`
    /// (HTTP+JSON), and the legacy `{listen_path}/tasks/send`.
    #[serde(default = "default_listen_path")]
    pub listen_path: String,
    /// The base URL other agents reach Portico at, used in agent cards (e.g.
    /// "https://agents.example.com"). Default: the listen address, unless that is a wildcard.
    #[serde(default)]
    pub public_url: Option<String>,
    /// The agent served at the well-known card paths (default: the first agent).
    #[serde(default)]
    pub primary_agent: Option<String>,
    /// How many tasks the store keeps; finished ones are evicted oldest first to make room, active
    /// ones never.
    #[serde(default = "default_max_tasks")]
    pub max_tasks: usize,
    /// How many A2A event streams (task subscriptions and streamed sends) may be open at once, in
    /// all; one more is refused with 503 until one closes.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// The same, per client identity (the credential it presents).
    #[serde(default = "default_max_streams_per_client")]
    pub max_streams_per_client: usize,
    #[serde(default)]
    pub external_agents: Vec<ExternalAgentConfig>,
    /// Lets push-notification webhooks be on loopback or private addresses (cloud metadata and
    /// link-local stay blocked). Off: a client could otherwise make Portico POST into its network.
    #[serde(default)]
    pub push_allow_private_network: bool,
    /// The card form a card request without a version gets: `"1.0"` (the default; what the spec
    /// and the A2A TCK expect) or `"0.3"`, for deployments whose clients are 0.3-only SDKs, which
    /// read the card without saying their version and need its top-level `url`.
    #[serde(default)]
    pub unversioned_card: CardVersion,
}

/// An A2A card form.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum CardVersion {
    #[default]
    #[serde(rename = "1.0")]
    V1,
    #[serde(rename = "0.3")]
    V03,
}

fn default_listen_path() -> String {
    "/a2a".to_string()
}

fn default_max_tasks() -> usize {
    10_000
}

fn default_max_streams() -> usize {
    1024
}

fn default_max_streams_per_client() -> usize {
    128
}

impl Default for A2aSection {
    fn default() -> Self {
        A2aSection {
            enabled: true,
            listen_path: default_listen_path(),
            public_url: None,
            primary_agent: None,
            max_tasks: default_max_tasks(),
            max_streams: default_max_streams(),
            max_streams_per_client: default_max_streams_per_client(),
            external_agents: Vec::new(),
            push_allow_private_network: false,
            unversioned_card: CardVersion::V1,
        }
    }
}

/// An A2A agent elsewhere, callable as the tool `a2a_{name}`.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExternalAgentConfig {
    pub name: String,
    /// The agent's base URL; its card is fetched from the well-known paths under it.
    pub url: String,
    /// Request headers (e.g. Authorization); `${VAR}` is expanded from Portico's environment.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "default_external_timeout")]
    pub timeout_secs: u64,
    #[serde(default)]
    pub allow_private_network: bool,
}

fn default_external_timeout() -> u64 {
    300
}

/// One agent: a model, a system prompt and the tools it may use.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub model: ModelConfig,
    /// Glob patterns over catalog names: built-ins (`file_read`), upstream tools (`mcp_github_*`),
    /// other agents (`portico_agent_*`). An agent sees and may call only what these match.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// The whole run of one message, tool calls included.
    #[serde(default = "default_agent_timeout")]
    pub timeout_secs: u64,
    #[serde(default = "default_true")]
    pub enabled: bool,
}

pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
pub const DEFAULT_AGENT_TIMEOUT_SECS: u64 = 300;

fn default_max_iterations() -> u32 {
    DEFAULT_MAX_ITERATIONS
}

fn default_agent_timeout() -> u64 {
    DEFAULT_AGENT_TIMEOUT_SECS
}

/// Model providers an agent can use. OpenAI-compatible servers differ only in their default base URL
/// and whether a key is needed.
pub const PROVIDERS: &[&str] = &[
    "auto",
    "openai",
    "anthropic",
    "openai-compatible",
    "ollama",
    "vllm",
    "llamacpp",
    "lmstudio",
    "openrouter",
    "groq",
    "scripted",
    "sampling",
];

/// Which model an agent talks to, and how.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// One of [`PROVIDERS`]. `auto` picks from the environment: OPENAI_API_KEY, then
    /// ANTHROPIC_API_KEY, then OPENAI_BASE_URL (an OpenAI-compatible server).
    #[serde(default = "default_provider")]
    pub provider: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (the key itself never goes in the file).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Extra request headers; `${VAR}` is expanded from Portico's environment.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// The `scripted` provider's rules (see the agents documentation).
    #[serde(default)]
    pub rules: Vec<serde_json::Value>,
}

fn default_provider() -> String {
    "auto".to_string()
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            provider: default_provider(),
            model: None,
            base_url: None,
            api_key_env: None,
            temperature: None,
            max_tokens: None,
            headers: BTreeMap::new(),
            max_retries: None,
            rules: Vec::new(),
        }
    }
}

/// Portico's built-in tools.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BuiltinsSection {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The directory `file_read`, `file_write`, `file_list` and `shell_exec` are confined to (default:
    /// `workspace` in Portico's data dir).
    #[serde(default)]
    pub workspace: Option<String>,
    /// `shell_exec` is registered only when this is true.
    #[serde(default)]
    pub shell_exec: bool,
    #[serde(default = "default_web_fetch_max_bytes")]
    pub web_fetch_max_bytes: usize,
    /// Lets `web_fetch` reach loopback and private addresses (metadata and link-local stay blocked).
    #[serde(default)]
    pub web_fetch_allow_private_network: bool,
}

fn default_web_fetch_max_bytes() -> usize {
    1024 * 1024
}

impl Default for BuiltinsSection {
    fn default() -> Self {
        BuiltinsSection {
            enabled: true,
            workspace: None,
            shell_exec: false,
            web_fetch_max_bytes: default_web_fetch_max_bytes(),
            web_fetch_allow_private_network: false,
        }
    }
}

/// The call pipeline's limits and rules.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    #[serde(default = "default_tool_timeout")]
    pub tool_timeout_secs: u64,
    /// What an agent reads of one tool result; the rest is cut with a marker.
    #[serde(default = "default_max_result_chars")]
    pub max_result_chars: usize,
    /// A sensitive call after untrusted content in the same agent turn: "refuse", "approval" or "off".
    #[serde(default = "default_taint")]
    pub taint: String,
    /// Tools treated as sensitive besides `shell_exec` and `file_write` (glob patterns).
    #[serde(default)]
    pub sensitive_tools: Vec<String>,
    /// How deep agents may call agents.
    #[serde(default = "default_max_agent_depth")]
    pub max_agent_depth: u32,
    /// What happens to a call no `[[policies]]` entry matches: "allow" (the default) or "deny".
    #[serde(default)]
    pub default: PolicyDefault,
    /// How long an approval request waits for an answer, and an approved grant for its retry
    /// (the grant's clock starts at the approval).
    #[serde(default = "default_approval_ttl")]
    pub approval_ttl_secs: u64,
    /// How long a held call waits for an answer before it returns `approval_required` (0: not at all).
    #[serde(default)]
    pub approval_wait_secs: u64,
    /// Who approves held calls: "both" (the calling client through elicitation when it can be
    /// asked, else out of band), "elicitation" (only the calling client), "out_of_band" (only the
    /// API, CLI and web page).
    #[serde(default)]
    pub approval_via: ApprovalVia,
    /// Pins each upstream tool's definition when first seen; a changed definition is held (neither
    /// listed nor callable) until someone approves it.
    #[serde(default)]
    pub pin_tools: bool,
}

/// `[policy] approval_via`.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalVia {
    Elicitation,
    OutOfBand,
    #[default]
    Both,
}

/// The longest `[policy] approval_ttl_secs`: a week. Longer grants outlive any review that gave them.
pub const MAX_APPROVAL_TTL_SECS: u64 = 7 * 24 * 60 * 60;

/// The longest `[policy] approval_wait_secs`: an hour, since a waiting call holds its client's
/// request (and an agent's run) open that long.
pub const MAX_APPROVAL_WAIT_SECS: u64 = 60 * 60;

fn default_approval_ttl() -> u64 {
    600
}

fn default_tool_timeout() -> u64 {
    60
}

fn default_max_result_chars() -> usize {
    50_000
}

fn default_taint() -> String {
    "refuse".to_string()
}

fn default_max_agent_depth() -> u32 {
    4
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            tool_timeout_secs: default_tool_timeout(),
            max_result_chars: default_max_result_chars(),
            taint: default_taint(),
            sensitive_tools: Vec::new(),
            max_agent_depth: default_max_agent_depth(),
            default: PolicyDefault::Allow,
            approval_ttl_secs: default_approval_ttl(),
            approval_wait_secs: 0,
            approval_via: ApprovalVia::Both,
            pin_tools: false,
        }
    }
}

/// What Portico's MCP doors (`portico mcp`, `/mcp`) offer to clients.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExposeSection {
    #[serde(default = "default_true")]
    pub tools: bool,
    #[serde(default = "default_true")]
    pub resources: bool,
    #[serde(default = "default_true")]
    pub prompts: bool,
    /// Serve upstream tools and prompts as `mcp_{server}_{name}` and resources as
    /// `portico://{server}/{uri}`. `false` serves them under their own names (sensible with a single
    /// upstream); a server entry's own `prefix` overrides this. Colliding unprefixed names are refused.
    #[serde(default = "default_true")]
    pub prefix: bool,
    /// Serve three meta-tools (search, describe, call) instead of the whole tool list: `auto` does so
    /// above `tool_search_threshold` tools.
    #[serde(default)]
    pub tool_search: ToolSearchMode,
    #[serde(default = "default_tool_search_threshold")]
    pub tool_search_threshold: usize,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearchMode {
    #[default]
    Auto,
    On,
    Off,
}

fn default_tool_search_threshold() -> usize {
    100
}

impl Default for ExposeSection {
    fn default() -> Self {
        ExposeSection {
            tools: true,
            resources: true,
            prompts: true,
            prefix: true,
            tool_search: ToolSearchMode::Auto,
            tool_search_threshold: default_tool_search_threshold(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Sent to MCP clients in the handshake.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Bearer token HTTP clients must present. Required when `listen` is not a loopback address.
    /// `${VAR}` is expanded from Portico's environment, so the secret need not live in the file.
    #[serde(default)]
    pub token: Option<String>,
    /// Browser origins allowed to call the HTTP doors, e.g. "https://app.example.com". Requests with any
    /// other `Origin` get 403; requests without one (non-browser clients) are allowed.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Extra host names (or `host:port`) accepted in the `Host` header besides loopback names.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// The address browsers and other programs reach Portico by when it is not `listen` (behind a
    /// balancer that terminates TLS), e.g. "https://portico.example.com": an allowed origin and host,
    /// and the base of the links Portico gives out (approvals, agent cards).
    #[serde(default)]
    pub public_url: Option<String>,
    /// Balancers (IP addresses or CIDR ranges) whose `X-Forwarded-Proto`, `X-Forwarded-Host`,
    /// `X-Forwarded-For` (or `Forwarded`) Portico believes; from any other peer they are ignored.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Largest response Portico will send; larger results become a clear error.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Largest message `portico mcp` accepts on stdin; larger ones are drained and refused.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// A directory of agent files, one TOML file per agent (the `[[agents]]` fields at top level).
    /// Relative paths are resolved against the config file's directory.
    #[serde(default)]
    pub agents_dir: Option<String>,
    #[serde(default)]
    pub rate_limit: RateLimitSection,
    /// Most MCP sessions (Streamable HTTP, `initialize`d) the HTTP door keeps open at once; a new one
    /// past it gets 503 with `Retry-After`.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Most MCP sessions one client identity (its token, or its machine without one) keeps open; a
    /// new one past it gets 429 with `Retry-After`.
    #[serde(default = "default_max_sessions_per_client")]
    pub max_sessions_per_client: usize,
    /// An MCP session that sees no message for this long is closed; its client gets 404 and starts a
    /// new one, as the protocol says.
    #[serde(default = "default_session_idle_secs")]
    pub session_idle_secs: u64,
    /// Most connections the HTTP door serves at once (lowered to fit the process's file limit). Past
    /// it, new connections get only the health check; every other request gets 503.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Most connections one peer address (an IPv6 peer's /64) holds at once; past it its new
    /// connections are closed at once. By default a quarter of `max_connections`, at least 16; raise
    /// it behind a reverse proxy, where every client comes from the proxy's address.
    #[serde(default)]
    pub max_connections_per_peer: Option<usize>,
    /// Named clients, each with its own token and tool scope (`[[server.clients]]`).
    #[serde(default)]
    pub clients: Vec<crate::ClientConfig>,
    /// JWT access tokens from an OAuth authorization server, beside the static tokens
    /// (`[server.oauth]`).
    #[serde(default)]
    pub oauth: Option<crate::ServerOAuthConfig>,
}

fn default_max_sessions() -> usize {
    1024
}

fn default_max_sessions_per_client() -> usize {
    256
}

fn default_session_idle_secs() -> u64 {
    300
}

fn default_max_connections() -> usize {
    1024
}

/// GCRA rate limiting per client identity on the HTTP door (MCP, API, A2A).
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Sustained requests per second per client.
    #[serde(default = "default_rate_per_second")]
    pub per_second: u32,
    /// How many requests a client may make at once before the rate applies.
    #[serde(default = "default_rate_burst")]
    pub burst: u32,
    /// What one request that runs an agent costs, in requests (reading a card costs 1).
    #[serde(default = "default_agent_cost")]
    pub agent_cost: u32,
}

fn default_rate_per_second() -> u32 {
    100
}

fn default_rate_burst() -> u32 {
    200
}

fn default_agent_cost() -> u32 {
    10
}

impl Default for RateLimitSection {
    fn default() -> Self {
        RateLimitSection {
            enabled: true,
            per_second: default_rate_per_second(),
            burst: default_rate_burst(),
            agent_cost: default_agent_cost(),
        }
    }
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: default_listen(),
            instructions: None,
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            public_url: None,
            trusted_proxies: Vec::new(),
            max_response_bytes: default_max_response_bytes(),
            max_message_bytes: default_max_message_bytes(),
            agents_dir: None,
            rate_limit: RateLimitSection::default(),
            max_sessions: default_max_sessions(),
            max_sessions_per_client: default_max_sessions_per_client(),
            session_idle_secs: default_session_idle_secs(),
            max_connections: default_max_connections(),
            max_connections_per_peer: None,
            clients: Vec::new(),
            oauth: None,
        }
    }
}

fn default_max_response_bytes() -> usize {
    16 * 1024 * 1024
}

fn default_max_message_bytes() -> usize {
    10 * 1024 * 1024
}

fn default_listen() -> String {
    DEFAULT_LISTEN.to_string()
}

#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    pub name: String,
    /// Bounds each request to this server (and a call's wait for a place in flight).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Bounds the start: spawning or reaching the server and its handshake. A cold `npx -y`, a first
    /// `uvx` or a `docker run` that pulls an image takes far longer than a request should, so this is
    /// its own bound; unset, it is [`DEFAULT_STARTUP_TIMEOUT_SECS`] or `timeout_secs` if longer.
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    /// Requests in flight to this server at once; past it a request waits for one to finish, within
    /// its `timeout_secs`.
    #[serde(default = "default_max_concurrent_calls")]
    pub max_concurrent_calls: usize,
    #[serde(default, deserialize_with = "deserialize_env")]
    #[schemars(with = "EnvField")]
    pub env: Vec<EnvEntry>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Lets this server's URL (and its redirects) reach loopback and private-range addresses. Cloud
    /// metadata and link-local addresses stay blocked regardless.
    #[serde(default)]
    pub allow_private_network: bool,
    /// Overrides `[expose] prefix` for this server.
    #[serde(default)]
    pub prefix: Option<bool>,
    /// Pins the MCP protocol version instead of negotiating the newest (for servers that misbehave in
    /// a newer era, or to keep server-to-client requests, which 2026-07-28 replaced).
    #[serde(default)]
    pub protocol_version: Option<String>,
    pub transport: Transport,
    /// How Portico authorizes itself to this server when it requires OAuth (HTTP transports only;
    /// discovered when absent).
    #[serde(default)]
    pub oauth: Option<UpstreamOAuthConfig>,
}

impl McpServerConfig {
    /// Whether this server's catalog is namespaced, given the `[expose]` default.
    pub fn prefixed(&self, expose: &ExposeSection) -> bool {
        self.prefix.unwrap_or(expose.prefix)
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_secs)
    }

    /// How long the start (spawn or first contact, and the handshake) may take.
    pub fn startup_timeout_secs(&self) -> u64 {
        self.startup_timeout_secs
            .unwrap_or_else(|| DEFAULT_STARTUP_TIMEOUT_SECS.max(self.timeout_secs))
    }

    pub fn startup_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.startup_timeout_secs())
    }
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

fn default_max_concurrent_calls() -> usize {
    DEFAULT_MAX_CONCURRENT_CALLS
}

fn default_true() -> bool {
    true
}

/// One environment variable given to a stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvEntry {
    /// Passed through from Portico's own environment when set there.
    PassThrough(String),
    /// A literal value; `${VAR}` in it is expanded from Portico's environment.
    Literal { name: String, value: String },
}

impl EnvEntry {
    pub fn name(&self) -> &str {
        match self {
            EnvEntry::PassThrough(name) | EnvEntry::Literal { name, .. } => name,
        }
    }

    /// Parses a list item: `NAME` passes through, `NAME=value` is literal.
    pub fn from_list_item(item: &str) -> Self {
        match item.split_once('=') {
            Some((name, value)) => EnvEntry::Literal {
                name: name.to_string(),
                value: value.to_string(),
            },
            None => EnvEntry::PassThrough(item.to_string()),
        }
    }
}

/// `env` is either the reference list of names (items may also be `NAME=value`) or, as in Claude
/// Desktop's JSON, a table of literal values.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum EnvField {
    List(Vec<String>),
    Table(BTreeMap<String, String>),
}

fn deserialize_env<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<EnvEntry>, D::Error> {
    Ok(match EnvField::deserialize(d)? {
        EnvField::List(items) => items.iter().map(|i| EnvEntry::from_list_item(i)).collect(),
        EnvField::Table(table) => table
            .into_iter()
            .map(|(name, value)| EnvEntry::Literal { name, value })
            .collect(),
    })
}

#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Transport {
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Legacy HTTP+SSE, or Streamable HTTP behind a URL labelled "sse": Portico tries Streamable HTTP
    /// first and falls back.
    Sse {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    Http {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Sse { .. } => "sse",
            Transport::Http { .. } => "http",
        }
    }
}
