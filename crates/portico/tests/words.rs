//! The words a user sees from the CLI, each checked through the real binary: what Portico creates
//! and the warnings it then (never) prints, the schemas it serves, why a call failed, a taken port,
//! the ready line, the approval link, `--config` beside a daemon, one-shot logging, agents by name.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "words/agents_by_name.rs"]
mod agents_by_name;
#[path = "words/approval.rs"]
mod approval;
#[path = "words/calls.rs"]
mod calls;
#[path = "words/fresh_home.rs"]
mod fresh_home;
#[path = "words/logging.rs"]
mod logging;
#[path = "words/other_config.rs"]
mod other_config;
#[path = "words/ready.rs"]
mod ready;
#[path = "words/schemas.rs"]
mod schemas;
#[path = "words/serve.rs"]
mod serve;
