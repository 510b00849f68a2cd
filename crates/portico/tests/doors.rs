//! Integration tests of Portico's MCP doors: `portico mcp` on stdio and the daemon's HTTP door, driven
//! over real pipes and sockets.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "doors/agents_sdk.rs"]
mod agents_sdk;
#[path = "doors/approvals.rs"]
mod approvals;
#[path = "doors/approvals_web.rs"]
mod approvals_web;
#[path = "doors/bounds.rs"]
mod bounds;
#[path = "doors/browser.rs"]
mod browser;
#[path = "doors/clients.rs"]
mod clients;
#[path = "doors/daemon.rs"]
mod daemon;
#[path = "doors/dashboard_api.rs"]
mod dashboard_api;
#[path = "doors/dashboard_layout.rs"]
mod dashboard_layout;
#[path = "doors/dashboard_pages.rs"]
mod dashboard_pages;
#[path = "doors/dashboard_web.rs"]
mod dashboard_web;
#[path = "doors/failure_branch.rs"]
mod failure_branch;
#[path = "doors/gateway.rs"]
mod gateway;
#[path = "doors/legacy_sse.rs"]
mod legacy_sse;
#[path = "doors/metrics.rs"]
mod metrics;
#[path = "doors/on_behalf.rs"]
mod on_behalf;
#[path = "doors/pinning.rs"]
mod pinning;
#[path = "doors/policies.rs"]
mod policies;
#[path = "doors/sdk.rs"]
mod sdk;
#[path = "doors/session_memory.rs"]
mod session_memory;
#[path = "doors/stdio.rs"]
mod stdio;
#[path = "doors/subscription_bounds.rs"]
mod subscription_bounds;
#[path = "doors/task_relay_bounds.rs"]
mod task_relay_bounds;
#[path = "doors/tasks.rs"]
mod tasks;
