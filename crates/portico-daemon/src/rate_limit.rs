//! GCRA rate limiting per client on every route of the HTTP door (MCP, API, A2A).
//!
//! A client is the identity the door's checks established ([`ClientIdentity`]: `client:{name}` for the
//! token it proved, or its machine's address), never a header it could respell for a fresh bucket.
//! Each request costs 1, except one that runs an agent (an A2A send, an agent message on the API, an MCP call of a
//! `portico_agent_*` tool, on whatever path it is sent to), which costs `agent_cost`: reading cards and
//! polling tasks must not be starved by, nor starve, the expensive work. Over the limit a request gets
//! 429 with `Retry-After`. The health check is never limited, so monitoring keeps working. Keys whose
//! bucket is full again are pruned as requests come, so the table holds only recently active clients.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use aho_corasick::AhoCorasick;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use portico_metrics::{Metrics, RateLimited};
use serde_json::{Value, json};

use crate::security::ClientIdentity;

/// Every this many requests, keys idle long enough to have a full bucket again are dropped.
const PRUNE_EVERY: u64 = 1024;

/// The limiter and how to price requests.
pub struct Limits {
    limiter: DefaultKeyedRateLimiter<String>,
    agent_cost: NonZeroU32,
    /// Bodies larger than this are not inspected (the route refuses them anyway).
    max_body: usize,
    checked: AtomicU64,
    /// Where refusals are counted (`/metrics`).
    metrics: Metrics,
}

impl Limits {
    /// Limits from `section`, of which this process enforces `1 / replicas` (`[store] replicas`):
    /// each replica behind a balancer keeps its own buckets, so N of them together admit about what
    /// the section says one client may do, never less than one request a second and a burst of one.
    pub fn new(
        section: &portico_config::RateLimitSection,
        replicas: u32,
        max_body: usize,
        metrics: Metrics,
    ) -> Option<Arc<Self>> {
        if !section.enabled {
            return None;
        }
        let (per_second, burst) = replica_share(section, replicas);
        let per_second = NonZeroU32::new(per_second)?;
        let burst = NonZeroU32::new(burst)?;
        let agent_cost = NonZeroU32::new(section.agent_cost.clamp(1, burst.get()))?;
        Some(Arc::new(Limits {
            limiter: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            agent_cost,
            max_body,
            checked: AtomicU64::new(0),
            metrics,
        }))
    }

    /// How many clients the limiter holds state for.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> usize {
        self.limiter.len()
    }

    fn prune_now_and_then(&self) {
        if self.checked.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
    }
}

/// This replica's share of the configured rate and burst: each divided by `replicas`, rounded up,
/// at least 1.
fn replica_share(section: &portico_config::RateLimitSection, replicas: u32) -> (u32, u32) {
    let replicas = replicas.max(1);
    (
        section.per_second.max(1).div_ceil(replicas),
        section.burst.max(1).div_ceil(replicas),
    )
}

/// Routes whose path alone says they run an agent (their bodies are not JSON-RPC): the A2A door's
/// HTTP+JSON sends, and the API's agent messages.
fn path_runs_agent(path: &str) -> bool {
    let trimmed = path.trim_end_matches('/');
    portico_a2a::pricing::path_runs_agent(path)
        || (trimmed.starts_with("/api/agents/") && trimmed.ends_with("/message"))
}

/// Whether a JSON-RPC body (or batch) runs an agent, as the door that understands it says: the MCP
/// door for its messages, the A2A door for its own.
fn body_runs_agent(body: &[u8]) -> bool {
    if cannot_run_agent(body) {
        return false;
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let runs = |message: &Value| {
        portico_mcp_server::pricing::message_runs_agent(message)
            || portico_a2a::pricing::message_runs_agent(message)
    };
    match &value {
        Value::Array(items) => items.iter().any(runs),
        single => runs(single),
    }
}

/// A body that holds none of the doors' agent markers (agent methods, agent tool names) cannot run
/// an agent, whatever its structure, so it need not be parsed: the common case (a plain tool call) is
/// priced by a byte scan. A `\u` escape could spell a name without its bytes appearing, so such a
/// body is always parsed.
fn cannot_run_agent(body: &[u8]) -> bool {
    // Built once: one pass over the body for every marker. Looking for each marker in turn cost
    // about 6k instructions per tool call, 2.5% of a call served in process.
    static MARKERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        let markers = portico_mcp_server::pricing::AGENT_MARKERS
            .iter()
            .chain(portico_a2a::pricing::AGENT_METHODS)
            .copied()
            .chain(["\\u"]);
        AhoCorasick::new(markers).expect("the agent markers are valid literals")
    });
    !MARKERS.is_match(body)
}

pub async fn check(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path == "/api/health" {
        return next.run(request).await;
    }
    limits.prune_now_and_then();
    let key = match request.extensions().get::<ClientIdentity>() {
        Some(ClientIdentity(identity)) => identity.clone(),
        None => "anonymous".into(),
    };
    let post = request.method() == Method::POST;
    let by_path = post && path_runs_agent(&path);
    // Any other POST is priced by its body: MCP and A2A JSON-RPC are served under more than one
    // spelling of their paths (`/mcp/`, nested routes), and the price must not depend on which.
    let peek = post && !by_path;
    let (request, runs_agent) = if peek {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, limits.max_body).await {
            Ok(bytes) => {
                let runs = body_runs_agent(&bytes);
                (Request::from_parts(parts, Body::from(bytes)), runs)
            }
            Err(_) => return crate::body_limit::too_large(limits.max_body),
        }
    } else {
        (request, by_path)
    };
    let cost = if runs_agent {
        limits.agent_cost
    } else {
        NonZeroU32::MIN
    };
    let verdict = limits.limiter.check_key_n(&key, cost);
    if !matches!(verdict, Ok(Ok(()))) {
        limits.metrics.count_rate_limited(if runs_agent {
            RateLimited::Agent
        } else {
            RateLimited::Request
        });
    }
    match verdict {
        Ok(Ok(())) => next.run(request).await,
        Ok(Err(not_until)) => {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            too_many(seconds.max(1))
        }
        // Cannot happen: the cost is clamped to the burst.
        Err(_) => too_many(1),
    }
}

fn too_many(seconds: u64) -> Response {
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        axum::Json(json!({"error": format!("rate limit exceeded; retry after {seconds}s ([server.rate_limit] sets the limits)")})),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::PeerAddr;
    use crate::security::{self, DoorPolicy};
    use crate::test_messages::{PING, call_tool, request};
    use axum::Router;
    use axum::extract::ConnectInfo;
    use axum::routing::post;
    use tower::ServiceExt;

    /// A door with the real security and rate-limit layers over stand-in routes; one request per
    /// second sustained, so a test's few requests see only the burst.
    fn door(token: Option<&str>, burst: u32, agent_cost: u32) -> (Router, Arc<Limits>) {
        let section = portico_config::RateLimitSection {
            enabled: true,
            per_second: 1,
            burst,
            agent_cost,
        };
        let limits = Limits::new(&section, 1, 1 << 20, Metrics::new()).unwrap();
        let policy = Arc::new(DoorPolicy::new(
            "127.0.0.1:4200".parse().unwrap(),
            token.map(str::to_string),
            Vec::new(),
            Vec::new(),
        ));
        let router = Router::new()
            .route("/mcp", post(|| async { "ok" }))
            .route("/mcp/", post(|| async { "ok" }))
            .layer(axum::middleware::from_fn_with_state(limits.clone(), check))
            .layer(axum::middleware::from_fn_with_state(
                policy,
                security::check,
            ));
        (router, limits)
    }

    #[test]
    fn each_replica_enforces_its_share_of_the_limits() {
        let section = portico_config::RateLimitSection {
            enabled: true,
            per_second: 100,
            burst: 201,
            agent_cost: 10,
        };
        assert_eq!(replica_share(&section, 1), (100, 201));
        assert_eq!(replica_share(&section, 2), (50, 101));
        assert_eq!(replica_share(&section, 3), (34, 67));
        assert_eq!(replica_share(&section, 0), (100, 201));
        assert_eq!(replica_share(&section, 1000), (1, 1));
    }

    #[tokio::test]
    async fn a_replica_of_two_admits_half_the_burst() {
        let section = portico_config::RateLimitSection {
            enabled: true,
            per_second: 1,
            burst: 6,
            agent_cost: 1,
        };
        let limits = Limits::new(&section, 2, 1 << 20, Metrics::new()).unwrap();
        let admitted = (0..6)
            .filter(|_| {
                limits
                    .limiter
                    .check_key_n(&"client:a".to_string(), NonZeroU32::MIN)
                    .is_ok_and(|r| r.is_ok())
            })
            .count();
        assert_eq!(admitted, 3);
    }

    async fn send(router: &Router, path: &str, authorization: Option<&str>, body: &str) -> u16 {
        let mut request = Request::post(path)
            .header("host", "127.0.0.1:4200")
            .header("content-type", "application/json");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let mut request = request.body(Body::from(body.to_string())).unwrap();
        request
            .extensions_mut()
            .insert(ConnectInfo(PeerAddr("127.0.0.1:40000".parse().unwrap())));
        router
            .clone()
            .oneshot(request)
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    fn ping() -> String {
        request(1, PING, None)
    }

    #[tokio::test]
    async fn without_a_token_an_authorization_header_is_not_a_fresh_bucket() {
        let (router, limits) = door(None, 3, 1);
        for i in 0..3 {
            let value = format!("Bearer random-{i}");
            assert_eq!(send(&router, "/mcp", Some(&value), &ping()).await, 200);
        }
        assert_eq!(
            send(&router, "/mcp", Some("Bearer random-9"), &ping()).await,
            429
        );
        assert_eq!(send(&router, "/mcp", None, &ping()).await, 429);
        assert_eq!(limits.keys(), 1);
    }

    /// `/metrics`: each 429 is counted once, by what the request would have cost.
    #[tokio::test]
    async fn refusals_are_counted_by_what_they_would_have_cost() {
        let (router, limits) = door(None, 3, 2);
        for _ in 0..3 {
            assert_eq!(send(&router, "/mcp", None, &ping()).await, 200);
        }
        assert_eq!(send(&router, "/mcp", None, &ping()).await, 429);
        assert_eq!(send(&router, "/mcp", None, &ping()).await, 429);
        let agent = call_tool("portico_agent_x");
        assert_eq!(send(&router, "/mcp", None, &agent).await, 429);
        let text = limits.metrics.encode(&portico_metrics::State::default());
        let refusals: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("portico_rate_limit_refusals_total"))
            .collect();
        let mut refusals = refusals;
        refusals.sort_unstable();
        assert_eq!(
            refusals,
            [
                r#"portico_rate_limit_refusals_total{kind="agent"} 1"#,
                r#"portico_rate_limit_refusals_total{kind="request"} 2"#,
            ]
        );
    }

    #[tokio::test]
    async fn spellings_of_the_token_share_one_bucket() {
        let (router, limits) = door(Some("s3cret"), 3, 1);
        for spelling in ["Bearer s3cret", "Bearer   s3cret", "bearer s3cret  "] {
            assert_eq!(send(&router, "/mcp", Some(spelling), &ping()).await, 200);
        }
        assert_eq!(
            send(&router, "/mcp", Some("Bearer     s3cret"), &ping()).await,
            429
        );
        assert_eq!(limits.keys(), 1);
        // Refused before the limiter: a wrong token costs no bucket.
        assert_eq!(
            send(&router, "/mcp", Some("Bearer wrong"), &ping()).await,
            401
        );
        assert_eq!(limits.keys(), 1);
    }

    #[tokio::test]
    async fn an_agent_call_costs_the_same_on_every_spelling_of_the_path() {
        let agent = call_tool("portico_agent_x");
        for path in ["/mcp", "/mcp/"] {
            let (router, _) = door(None, 10, 10);
            assert_eq!(send(&router, path, None, &agent).await, 200, "{path}");
            assert_eq!(send(&router, path, None, &ping()).await, 429, "{path}");
        }
    }

    #[test]
    fn agent_running_bodies_are_recognised() {
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}"#
        ));
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"message/stream"}"#
        ));
        assert!(body_runs_agent(call_tool("portico_agent_x").as_bytes()));
        assert!(body_runs_agent(
            format!(r#"[{{"method":"{PING}"}},{{"method":"tasks/send"}}]"#).as_bytes()
        ));
        assert!(!body_runs_agent(call_tool("mcp_a_b").as_bytes()));
        assert!(!body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#
        ));
        assert!(!body_runs_agent(b"not json"));
        // Escapes cannot hide an agent from the price.
        assert!(body_runs_agent(
            call_tool(r"portico\u005fagent_x").as_bytes()
        ));
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"Send\u004dessage","params":{}}"#
        ));
        assert!(cannot_run_agent(call_tool("mcp_a_b").as_bytes()));
        assert!(!cannot_run_agent(br#"{"name":"portico_agent_x"}"#));
    }
}
