//! Integration tests of replicas: two `portico serve` processes sharing one PostgreSQL
//! store, behind nginx routed as docs/replicas.md recommends. Health through the balancer, A2A tasks
//! placed on one replica and read, listed, streamed and canceled through the other, an approval
//! granted on one replica used once across both, a replica killed with SIGKILL while running tasks,
//! and MCP (stateless and session) through the balancer across a kill; the dashboard in Chromium
//! behind nginx terminating TLS; and one replica whose store stalls on a lock, still answering
//! everything that does not wait for it.
//!
//! Needs the test PostgreSQL (`PORTICO_TEST_POSTGRES_URL`) and nginx (`$NGINX` or /usr/sbin/nginx);
//! without them the tests are skipped, unless `PORTICO_REQUIRE_POSTGRES=1` makes them fail.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "replicas/cluster.rs"]
mod cluster;

#[path = "doors/browser.rs"]
mod browser;

#[path = "replicas/a2a.rs"]
mod a2a;
#[path = "replicas/approvals.rs"]
mod approvals;
#[path = "replicas/balancer.rs"]
mod balancer;
#[path = "replicas/failover.rs"]
mod failover;
#[path = "replicas/health.rs"]
mod health;
#[path = "replicas/mcp.rs"]
mod mcp;
#[path = "replicas/stalled_store.rs"]
mod stalled_store;
