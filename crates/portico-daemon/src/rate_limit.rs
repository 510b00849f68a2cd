//! GCRA rate limiting per client on every route of the HTTP door (MCP, API, A2A).
//!
//! A client is its credential (the `Authorization` header, hashed) or, without one, its address. Each
//! request costs 1, except one that runs an agent (an A2A send, an agent message on the API, an MCP
//! call of a `portico_agent_*` tool), which costs `agent_cost`: reading cards and polling tasks must
//! not be starved by, nor starve, the expensive work. Over the limit a request gets 429 with
//! `Retry-After`. The health check is never limited, so monitoring keeps working.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::{Value, json};

use crate::listener::PeerAddr;

/// The limiter and how to price requests.
pub struct Limits {
    limiter: DefaultKeyedRateLimiter<String>,
    agent_cost: NonZeroU32,
    a2a_path: Option<String>,
    /// Bodies larger than this are not inspected (the route refuses them anyway).
    max_body: usize,
}

impl Limits {
    pub fn new(
        section: &portico_config::RateLimitSection,
        a2a_path: Option<String>,
        max_body: usize,
    ) -> Option<Arc<Self>> {
        if !section.enabled {
            return None;
        }
        let per_second = NonZeroU32::new(section.per_second.max(1))?;
        let burst = NonZeroU32::new(section.burst.max(1))?;
        let agent_cost = NonZeroU32::new(section.agent_cost.clamp(1, burst.get()))?;
        Some(Arc::new(Limits {
            limiter: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            agent_cost,
            a2a_path: a2a_path.map(|p| p.trim_end_matches('/').to_string()),
            max_body,
        }))
    }
}

fn client(request: &Request) -> String {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        return portico_pipeline::credential_identity(value.as_bytes());
    }
    let extensions = request.extensions();
    let address = match extensions.get::<ConnectInfo<PeerAddr>>() {
        Some(ConnectInfo(PeerAddr(address))) => Some(address),
        // An embedder serving `app()` with axum's own TcpListener.
        None => extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(address)| address),
    };
    match address {
        Some(address) => format!("ip:{}", address.ip()),
        None => "anonymous".into(),
    }
}

/// Method names whose requests run an agent.
const AGENT_METHODS: [&str; 5] = [
    "SendMessage",
    "SendStreamingMessage",
    "message/send",
    "message/stream",
    "tasks/send",
];

/// Whether a JSON-RPC body (or batch) runs an agent.
fn body_runs_agent(body: &[u8]) -> bool {
    if cannot_run_agent(body) {
        return false;
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let runs = |message: &Value| {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        AGENT_METHODS.contains(&method)
            || (method == "tools/call"
                && message["params"]["name"]
                    .as_str()
                    .is_some_and(|name| name.starts_with("portico_agent_")))
    };
    match &value {
        Value::Array(items) => items.iter().any(runs),
        single => runs(single),
    }
}

/// A body that names no agent method and no agent tool cannot run one, whatever its structure, so it
/// need not be parsed: the common case (a plain tool call) is priced by a byte scan. A `\u` escape
/// could spell a name without its bytes appearing, so such a body is always parsed.
fn cannot_run_agent(body: &[u8]) -> bool {
    let contains = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    !contains(b"\\u")
        && !contains(b"portico_agent_")
        && !AGENT_METHODS.iter().any(|m| contains(m.as_bytes()))
}

pub async fn check(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path == "/api/health" {
        return next.run(request).await;
    }
    let key = client(&request);
    let post = request.method() == Method::POST;
    let by_path = post
        && (path.ends_with("/message:send")
            || path.ends_with("/message:stream")
            || path.ends_with("/tasks/send")
            || (path.starts_with("/api/agents/") && path.ends_with("/message")));
    let peek = post
        && !by_path
        && (path == "/mcp"
            || path == "/message"
            || limits
                .a2a_path
                .as_deref()
                .is_some_and(|p| path.starts_with(p)));
    let (request, runs_agent) = if peek {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, limits.max_body).await {
            Ok(bytes) => {
                let runs = body_runs_agent(&bytes);
                (Request::from_parts(parts, Body::from(bytes)), runs)
            }
            Err(_) => {
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    axum::Json(json!({"error": format!("the request body is larger than {} bytes", limits.max_body)})),
                )
                    .into_response();
            }
        }
    } else {
        (request, by_path)
    };
    let cost = if runs_agent {
        limits.agent_cost
    } else {
        NonZeroU32::MIN
    };
    match limits.limiter.check_key_n(&key, cost) {
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

    #[test]
    fn agent_running_bodies_are_recognised() {
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}"#
        ));
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"message/stream"}"#
        ));
        assert!(body_runs_agent(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"portico_agent_x"}}"#));
        assert!(body_runs_agent(
            br#"[{"method":"ping"},{"method":"tasks/send"}]"#
        ));
        assert!(!body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_a_b"}}"#
        ));
        assert!(!body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#
        ));
        assert!(!body_runs_agent(b"not json"));
        // Escapes cannot hide an agent from the price.
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"portico\u005fagent_x"}}"#
        ));
        assert!(body_runs_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"Send\u004dessage","params":{}}"#
        ));
        assert!(cannot_run_agent(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_a_b"}}"#
        ));
        assert!(!cannot_run_agent(br#"{"name":"portico_agent_x"}"#));
    }
}
