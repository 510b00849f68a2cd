//! One server's life from the command line, driven through the real binary: `portico add`,
//! `remove`, `enable`, `disable`, `restart`, `logs` and `stop`, without a daemon (the config file
//! edited, the server connected here to show what it offers) and with one (the same edits, which it
//! follows live, and its answers). The config's bytes outside the edited entry never change.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "lifecycle/commands.rs"]
mod commands;
#[path = "lifecycle/logs.rs"]
mod logs;
