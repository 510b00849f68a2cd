//! `portico-metrics`: what Portico counts and times, and the Prometheus text a scrape of the
//! daemon's `/metrics` reads (format 0.0.4, [`CONTENT_TYPE`]).
//!
//! One [`Metrics`] handle per running Portico, made and owned by the engine and handed to the parts
//! that record into it: the pipeline (calls by tool, server, principal class and outcome; its
//! stages), the MCP door (the door stage), the hub (upstream calls, connects, restarts), the store
//! (commit latency) and the daemon (rate-limit refusals). It is an explicit handle rather than a
//! process global so that two engines in one process (tests, embedders) keep their own counts.
//!
//! What is state rather than an event (upstream state, open sessions, A2A tasks by state, pending
//! approvals) is not kept here in sync by hand: whoever holds that state reads it at scrape time
//! into a [`State`], which [`Metrics::encode`] writes beside the counters.
//!
//! Label values are bounded: a principal is its class (`client`, `agent`, `a2a`), never its name;
//! a tool is a name some source resolved (a name nobody knows is `(unknown)`), and each family keeps
//! at most [`MAX_SERIES`] label sets, past which new ones share an `(other)` series. No argument
//! value, token or message text is ever a label.
//!
//! Beside Portico's own families, a scrape has the standard `process_*` ones (read from `/proc` at
//! scrape time, [`ProcessSample`]) and `portico_build_info{version}`.
//!
//! What it is not: an exporter (no sockets; the daemon serves the text), or a tracer (spans are
//! another matter).

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use portico_core::context::Principal;
use portico_core::{ServerState, TaskState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

mod process;
pub use process::ProcessSample;

/// The version `portico_build_info` reports: the workspace's, which every Portico crate shares.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `Content-Type` of what [`Metrics::encode`] writes: Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Most label sets one family keeps; new ones past it are counted under [`OTHER`]. Tool names are
/// bounded by the catalog and server names by the config, but both change on reloads, and a process
/// that runs for months must not grow a series per name it ever saw.
pub const MAX_SERIES: usize = 4096;

/// The tool label of a call whose name no source knows.
pub const UNKNOWN: &str = "(unknown)";

/// The tool label of a name a passed-through server answers without listing it: any name a client
/// sends, so never a label of its own.
pub const UNLISTED: &str = "(unlisted)";

/// The label value that stands for every value past [`MAX_SERIES`].
pub const OTHER: &str = "(other)";

/// Latency buckets in seconds: half a millisecond (an in-process tool) to five minutes (an agent's
/// run, an approval wait).
const LATENCY_BUCKETS: [f64; 18] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Who made a call, as a bounded label: the kind of principal, not its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrincipalClass {
    /// A client at a door: an MCP client, the HTTP API, the CLI.
    Client,
    /// An agent's loop calling tools.
    Agent,
    /// The A2A door running an agent for a remote agent (`client:a2a`).
    A2a,
}

impl PrincipalClass {
    pub fn of(principal: &Principal) -> Self {
        match principal {
            Principal::Agent(_) => PrincipalClass::Agent,
            // The A2A door's own principal. Door names are refused as `[[server.clients]]`
            // names; only an OAuth token whose `sub` is `a2a` would be counted with it.
            Principal::Client { id, .. } if id == "a2a" => PrincipalClass::A2a,
            Principal::Client { .. } => PrincipalClass::Client,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalClass::Client => "client",
            PrincipalClass::Agent => "agent",
            PrincipalClass::A2a => "a2a",
        }
    }
}

/// A stage of a tool call, each timed in `portico_call_stage_duration_seconds`. The upstream stage
/// is timed per server in `portico_upstream_call_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// An MCP `tools/call` at a door, from the request to its answer (the pipeline included).
    Door,
    /// [`Pipeline::call`](../portico_pipeline/struct.Pipeline.html): every stage, audit included.
    Pipeline,
    /// Asking every policy (`[[policies]]`, taint, host policies).
    Policy,
    /// Waiting for an approval of a held call (held calls only).
    Approval,
    /// The tool's source running it, under the timeout (an upstream call, a built-in, an agent).
    Execute,
}

impl Stage {
    /// Every stage, in the order of [`Stage`]'s variants (which index it).
    pub const ALL: [Stage; 5] = [
        Stage::Door,
        Stage::Pipeline,
        Stage::Policy,
        Stage::Approval,
        Stage::Execute,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Door => "door",
            Stage::Pipeline => "pipeline",
            Stage::Policy => "policy",
            Stage::Approval => "approval",
            Stage::Execute => "execute",
        }
    }
}

/// How a connect attempt to an upstream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectOutcome {
    Ok,
    Failed,
    /// The server wants an OAuth login nobody has done yet.
    NeedsLogin,
    /// The server's `${VAR}`s name secrets nobody has set yet.
    NeedsSecret,
}

impl ConnectOutcome {
    fn as_str(self) -> &'static str {
        match self {
            ConnectOutcome::Ok => "ok",
            ConnectOutcome::Failed => "failed",
            ConnectOutcome::NeedsLogin => "needs_login",
            ConnectOutcome::NeedsSecret => "needs_secret",
        }
    }
}

/// What a request the rate limit refused would have cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimited {
    /// An ordinary request (cost 1).
    Request,
    /// A request that runs an agent (cost `agent_cost`).
    Agent,
}

impl RateLimited {
    fn as_str(self) -> &'static str {
        match self {
            RateLimited::Request => "request",
            RateLimited::Agent => "agent",
        }
    }
}

/// One finished call, as `portico_calls_total` counts it.
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    /// The exposed name the call resolved to, or [`UNKNOWN`].
    pub tool: &'a str,
    /// The upstream server serving the tool, or the kind of Portico's own source in parentheses
    /// (`(local)`, `(agents)`, `(a2a)`); `(none)` for an unknown tool.
    pub server: Cow<'a, str>,
    pub principal: PrincipalClass,
    /// The audit outcome's label (`ok`, `error`, `denied`, ...).
    pub outcome: &'static str,
}

impl CallRecord<'_> {
    /// The tool and server labels of a tool with no upstream origin, from its source's kind (a
    /// pipeline `ToolSource::kind`): Portico's own tools by name; the hub's only such tools are a
    /// passed-through server's unlisted names, which are [`UNLISTED`].
    pub fn own_labels<'n>(kind: &str, name: &'n str) -> (&'n str, &'static str) {
        match kind {
            "agents" => (name, "(agents)"),
            "a2a" => (name, "(a2a)"),
            "hub" => (UNLISTED, "(hub)"),
            _ => (name, "(local)"),
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    server: String,
    principal: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectLabels {
    server: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RateLimitLabels {
    kind: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The metric families. Cheap to clone; clones record into the same families.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

struct Inner {
    registry: Registry,
    calls: Bounded<CallLabels, Counter>,
    /// Each stage's histogram, made up front and indexed by [`Stage`]: a call times up to five
    /// stages, none of which needs a lookup.
    stages: [Histogram; Stage::ALL.len()],
    upstream_calls: Bounded<ServerLabels, Histogram, fn() -> Histogram>,
    connects: Bounded<ConnectLabels, Histogram, fn() -> Histogram>,
    restarts: Bounded<ServerLabels, Counter>,
    rate_limited: Family<RateLimitLabels, Counter>,
    store_commits: Histogram,
    store_writes: Counter,
}

impl Metrics {
    pub fn new() -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        let stage_family = HistogramFamily::<StageLabels>::new_with_constructor(latency_histogram);
        let stages = Stage::ALL.map(|stage| {
            stage_family
                .get_or_create(&StageLabels {
                    stage: stage.as_str(),
                })
                .clone()
        });
        let upstream_calls =
            HistogramFamily::<ServerLabels>::new_with_constructor(latency_histogram);
        let connects = HistogramFamily::<ConnectLabels>::new_with_constructor(latency_histogram);
        let restarts = Family::<ServerLabels, Counter>::default();
        let rate_limited = Family::<RateLimitLabels, Counter>::default();
        let store_commits = latency_histogram();
        let store_writes = Counter::default();

        let mut registry = Registry::default();
        // Counters are registered without `_total`: the encoder adds it.
        registry.register(
            "portico_calls",
            "Tool calls through the pipeline, by tool, server, principal class and outcome",
            calls.clone(),
        );
        registry.register(
            "portico_call_stage_duration_seconds",
            "Time a tool call spent in each stage: door, pipeline, policy, approval, execute",
            stage_family,
        );
        registry.register(
            "portico_upstream_call_duration_seconds",
            "Time an upstream MCP server took to answer a tool call, by server",
            upstream_calls.clone(),
        );
        registry.register(
            "portico_upstream_connect_duration_seconds",
            "Time an upstream connect and handshake took, by server and outcome",
            connects.clone(),
        );
        registry.register(
            "portico_upstream_restarts",
            "Restarts scheduled after an upstream's connect, listing or session failed, by server",
            restarts.clone(),
        );
        registry.register(
            "portico_rate_limit_refusals",
            "Requests the door's rate limit refused (429), by what they would have cost",
            rate_limited.clone(),
        );
        registry.register(
            "portico_store_commit_duration_seconds",
            "Time one group commit of store writes took, from its transaction's start to its commit",
            store_commits.clone(),
        );
        registry.register(
            "portico_store_writes",
            "Writes the store's writer thread committed (task, conversation and audit writes)",
            store_writes.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels { version: VERSION })
            .set(1);
        registry.register(
            "portico_build_info",
            "1, labelled with the version of Portico that is running",
            build,
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                calls: Bounded::new(calls),
                stages,
                upstream_calls: Bounded::new(upstream_calls),
                connects: Bounded::new(connects),
                restarts: Bounded::new(restarts),
                rate_limited,
                store_commits,
                store_writes,
            }),
        }
    }

    /// Counts one finished call.
    pub fn count_call(&self, call: CallRecord<'_>) {
        let labels = CallLabels {
            tool: call.tool.to_owned(),
            server: call.server.into_owned(),
            principal: call.principal.as_str(),
            outcome: call.outcome,
        };
        self.inner
            .calls
            .get(labels, |labels| CallLabels {
                tool: OTHER.into(),
                server: OTHER.into(),
                ..labels
            })
            .inc();
    }

    /// Times one stage of one call.
    pub fn time_stage(&self, stage: Stage, took: Duration) {
        self.inner.stages[stage as usize].observe(took.as_secs_f64());
    }

    /// Times one tool call an upstream answered (or failed).
    pub fn time_upstream_call(&self, server: &str, took: Duration) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.inner
            .upstream_calls
            .get(labels, |_| ServerLabels {
                server: OTHER.into(),
            })
            .observe(took.as_secs_f64());
    }

    /// Times one connect attempt (spawn or connect, and the MCP handshake).
    pub fn time_connect(&self, server: &str, outcome: ConnectOutcome, took: Duration) {
        let labels = ConnectLabels {
            server: server.to_owned(),
            outcome: outcome.as_str(),
        };
        self.inner
            .connects
            .get(labels, |labels| ConnectLabels {
                server: OTHER.into(),
                ..labels
            })
            .observe(took.as_secs_f64());
    }

    /// Counts a restart the hub scheduled for `server`.
    pub fn count_restart(&self, server: &str) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.inner
            .restarts
            .get(labels, |_| ServerLabels {
                server: OTHER.into(),
            })
            .inc();
    }

    /// Counts a request the rate limit refused.
    pub fn count_rate_limited(&self, kind: RateLimited) {
        self.inner
            .rate_limited
            .get_or_create(&RateLimitLabels {
                kind: kind.as_str(),
            })
            .inc();
    }

    /// Times one group commit of `writes` store writes.
    pub fn time_store_commit(&self, writes: usize, took: Duration) {
        self.inner.store_commits.observe(took.as_secs_f64());
        self.inner.store_writes.inc_by(writes as u64);
    }

    /// Every family in Prometheus text format 0.0.4: the counters and histograms recorded so far,
    /// then `state`'s gauges.
    pub fn encode(&self, state: &State) -> String {
        let mut text = String::new();
        // Writing to a `String` cannot fail, and every name and label here is valid.
        let _ = prometheus_text::encode(&mut text, &self.inner.registry);
        let _ = prometheus_text::encode(&mut text, &state.registry());
        if let Some(sample) = ProcessSample::read() {
            let mut registry = Registry::default();
            sample.register(&mut registry);
            let _ = prometheus_text::encode(&mut text, &registry);
        }
        text
    }
}

/// A family that keeps at most [`MAX_SERIES`] label sets: past that, a new label set is recorded
/// as the one its `overflow` makes of it.
struct Bounded<L, M, C = fn() -> M> {
    family: Family<L, M, C>,
    /// Label sets made (a race between two makers of the same set counts it twice, which only
    /// brings the bound a little closer).
    made: AtomicUsize,
}

impl<L, M, C> Bounded<L, M, C>
where
    L: Clone + std::hash::Hash + Eq,
    C: MetricConstructor<M>,
{
    fn new(family: Family<L, M, C>) -> Self {
        Bounded {
            family,
            made: AtomicUsize::new(0),
        }
    }

    fn get(&self, labels: L, overflow: impl FnOnce(L) -> L) -> impl Deref<Target = M> + '_ {
        if let Some(metric) = self.family.get(&labels) {
            return metric;
        }
        let labels = if self.made.fetch_add(1, Ordering::Relaxed) < MAX_SERIES {
            labels
        } else {
            overflow(labels)
        };
        self.family.get_or_create(&labels)
    }
}

/// What is state rather than an event, read by its holders at scrape time.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub upstreams: Vec<UpstreamState>,
    /// Open sessions per door (`mcp`: Streamable HTTP, `sse`: the legacy HTTP+SSE transport).
    pub sessions: Vec<(&'static str, usize)>,
    /// Stored A2A tasks by state; `None` when they could not be read (the family is left out).
    pub a2a_tasks: Option<Vec<(TaskState, usize)>>,
    /// Approval requests waiting for an answer; `None` when they could not be read.
    pub approvals_pending: Option<usize>,
}

/// One upstream server as a scrape sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamState {
    pub server: String,
    pub state: ServerState,
    /// Connections established since the server's supervisor started.
    pub connects: u32,
}

/// Every state an upstream can be in, for the one-series-per-state gauge.
const SERVER_STATES: [ServerState; 8] = [
    ServerState::Disabled,
    ServerState::Idle,
    ServerState::Starting,
    ServerState::Ready,
    ServerState::Restarting,
    ServerState::NeedsLogin,
    ServerState::NeedsSecret,
    ServerState::Failed,
];

fn server_state_label(state: ServerState) -> &'static str {
    match state {
        ServerState::Disabled => "disabled",
        ServerState::Idle => "idle",
        ServerState::Starting => "starting",
        ServerState::Ready => "ready",
        ServerState::Restarting => "restarting",
        ServerState::NeedsLogin => "needs_login",
        ServerState::NeedsSecret => "needs_secret",
        ServerState::Failed => "failed",
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamStateLabels {
    server: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DoorLabels {
    door: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskStateLabels {
    state: &'static str,
}

impl State {
    /// The gauges of this scrape, in a registry of their own made for it.
    fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        let states = Family::<UpstreamStateLabels, Gauge>::default();
        let connects = Family::<ServerLabels, Counter>::default();
        for upstream in &self.upstreams {
            for state in SERVER_STATES {
                let labels = UpstreamStateLabels {
                    server: upstream.server.clone(),
                    state: server_state_label(state),
                };
                states
                    .get_or_create(&labels)
                    .set(i64::from(upstream.state == state));
            }
            connects
                .get_or_create(&ServerLabels {
                    server: upstream.server.clone(),
                })
                .inc_by(u64::from(upstream.connects));
        }
        registry.register(
            "portico_upstream_state",
            "1 for the state each upstream server is in, 0 for the others",
            states,
        );
        registry.register(
            "portico_upstream_connects",
            "Connections established to each upstream server since its supervisor started",
            connects,
        );
        let sessions = Family::<DoorLabels, Gauge>::default();
        for (door, open) in &self.sessions {
            sessions
                .get_or_create(&DoorLabels { door })
                .set(gauge_value(*open));
        }
        registry.register(
            "portico_sessions",
            "Open MCP sessions, by door (mcp: Streamable HTTP, sse: legacy HTTP+SSE)",
            sessions,
        );
        if let Some(tasks) = &self.a2a_tasks {
            let by_state = Family::<TaskStateLabels, Gauge>::default();
            for state in TaskState::ALL {
                let count = tasks
                    .iter()
                    .filter(|(s, _)| *s == state)
                    .map(|(_, n)| *n)
                    .sum();
                by_state
                    .get_or_create(&TaskStateLabels {
                        state: state.v03_name(),
                    })
                    .set(gauge_value(count));
            }
            registry.register("portico_a2a_tasks", "Stored A2A tasks, by state", by_state);
        }
        if let Some(pending) = self.approvals_pending {
            let gauge = Gauge::<i64>::default();
            gauge.set(gauge_value(pending));
            registry.register(
                "portico_approvals_pending",
                "Approval requests waiting for an answer",
                gauge,
            );
        }
        registry
    }
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
