//! `portico a2a`: A2A agents elsewhere, from the terminal. `discover` reads an agent's card; `send`
//! sends it a message and follows the task, progress on stderr and the answer on stdout as it
//! arrives.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;
use clap::Subcommand;
use portico_a2a_client::{
    A2aClient, A2aEvent, AgentCard, ClientOptions, SendRequest, remote_tool_name,
};
use portico_config::ExternalAgentConfig;
use serde_json::json;

/// How long `send` to a URL waits for the task (a configured agent uses its `timeout_secs`).
const URL_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Subcommand)]
pub enum A2aCommand {
    /// Read an agent's card: name, description, interfaces (binding, version, URL), capabilities,
    /// skills.
    Discover {
        /// The agent's base URL (the card is read from /.well-known/agent-card.json under it, else
        /// /.well-known/agent.json), or the card's own URL.
        url: String,
        /// Print the card summary and the card itself as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send a message to an agent and follow the task to its answer: status lines on stderr, the
    /// answer on stdout as it streams, then the final state and the task id (on stderr).
    Send {
        /// A configured agent's name (an [[agents]] entry: at the running daemon, else run in this
        /// process; or an [[a2a.external_agents]] entry), or the agent's URL.
        agent: String,
        /// The message's text.
        message: String,
        /// Continue this task (one that asked for input).
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// Send within this context (conversation).
        #[arg(long, value_name = "ID")]
        context: Option<String>,
        /// Print the outcome (state, task_id, context_id, text, task) as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// With a configured agent's name: run it in this process even when a daemon runs.
        #[command(flatten)]
        standalone: crate::cli::Standalone,
    },
}

pub async fn run(explicit: Option<&Path>, command: A2aCommand) -> anyhow::Result<ExitCode> {
    match command {
        A2aCommand::Discover { url, json } => {
            let client = url_client(&url)?;
            let card = client
                .discover(&url)
                .await
                .map_err(|e| anyhow::anyhow!(e.to_string()))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&card.summary())?);
            } else {
                print!("{}", card_text(&card));
            }
            Ok(ExitCode::SUCCESS)
        }
        A2aCommand::Send {
            agent,
            message,
            task,
            context,
            json,
            standalone,
        } => {
            send(
                explicit,
                standalone.standalone,
                &agent,
                message,
                task,
                context,
                json,
            )
            .await
        }
    }
}

/// The daemon's A2A endpoint for its agent `agent` (`/a2a/{agent}`), reached as the CLI reaches
/// the daemon (its client token, loopback allowed).
fn local_agent_at(daemon: &crate::daemon_client::Daemon, agent: &str) -> ExternalAgentConfig {
    let mut headers = std::collections::BTreeMap::new();
    if let Some(token) = crate::daemon_client::client_token(&daemon.info) {
        headers.insert("Authorization".to_string(), format!("Bearer {token}"));
    }
    ExternalAgentConfig {
        name: agent.to_string(),
        url: format!("{}/a2a/{agent}", daemon.base),
        headers,
        timeout_secs: URL_TIMEOUT.as_secs(),
        allow_private_network: true,
    }
}

/// `portico a2a send AGENT` to one of this config's agents with no daemon running (or
/// `--standalone`): the agent runs in this process, as `portico chat` runs it, and its answer is
/// printed as an A2A answer would be (the conversation is the context).
async fn send_in_process(
    explicit: Option<&Path>,
    agent: &str,
    message: String,
    context: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let engine = crate::cli::start_engine(explicit).await?;
    let Some(found) = engine.agents().agent(agent) else {
        engine.shutdown().await;
        bail!("no agent named `{agent}` runs in this process");
    };
    let tool = found.tool_name.clone();
    eprintln!("portico: `{agent}` (no daemon running: the agent runs in this process)");
    let mut arguments = json!({"message": message});
    if let Some(id) = &context {
        arguments["conversation_id"] = serde_json::Value::String(id.clone());
    }
    let context = portico_pipeline::ToolContext::client("cli");
    let called = engine
        .pipeline()
        .call(&tool, arguments.as_object().cloned(), &context)
        .await;
    engine.shutdown().await;
    let outcome = called?;
    let reply = outcome
        .result
        .structured_content
        .clone()
        .unwrap_or_default();
    let text = match outcome.is_error() {
        true => portico_pipeline::model_text(&outcome.result),
        false => reply["reply"].as_str().unwrap_or_default().to_string(),
    };
    let state = if outcome.is_error() {
        "failed"
    } else {
        "completed"
    };
    let context_id = reply["conversation_id"].as_str();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "state": state, "task_id": null, "context_id": context_id, "text": text,
            }))?
        );
    } else if !text.is_empty() {
        println!("{text}");
    }
    eprintln!("state: {state}");
    if let Some(id) = context_id {
        eprintln!("context: {id}");
    }
    Ok(match outcome.is_error() {
        true => ExitCode::from(1),
        false => ExitCode::SUCCESS,
    })
}

/// Whether the URL's host is this machine: a loopback address, or `localhost`.
fn is_loopback_host(url: &str) -> bool {
    match url::Url::parse(url).ok().as_ref().and_then(url::Url::host) {
        Some(url::Host::Ipv4(v4)) => v4.is_loopback(),
        Some(url::Host::Ipv6(v6)) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// What a refusal of a private address says about a URL typed on the command line.
const TYPED_URL_REMEDY: &str = " (only loopback URLs typed here may reach private addresses; \
     configure the agent in [[a2a.external_agents]] with allow_private_network = true to reach it)";

/// A client for a URL typed on the command line.
fn url_client(url: &str) -> anyhow::Result<A2aClient> {
    // Configured agents reach private networks only with `allow_private_network`. A URL typed here
    // whose host is a loopback address is the user explicitly asking for an agent on this machine, so
    // private addresses are allowed for it (the net policy has no loopback-only setting; the requests
    // go to this URL and the interfaces its card lists). Any other URL is public only, and cloud
    // metadata, link-local and the other always-blocked addresses stay refused either way.
    Ok(A2aClient::new(ClientOptions {
        headers: Vec::new(),
        timeout: URL_TIMEOUT,
        network: portico_net::NetPolicy::private_network(is_loopback_host(url))
            .with_private_network_remedy(TYPED_URL_REMEDY),
    })?)
}

fn card_text(card: &AgentCard) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("name:         {}", card.name));
    if !card.description.is_empty() {
        line(format!("description:  {}", card.description));
    }
    if let Some(version) = &card.version {
        line(format!("version:      {version}"));
    }
    line(format!("card:         {}", card.card_url));
    line("interfaces:".into());
    for interface in &card.interfaces {
        let selected = interface.url == card.endpoint.url
            && interface
                .binding
                .eq_ignore_ascii_case(card.endpoint.binding.label())
            && interface.version.starts_with(card.endpoint.version.label());
        line(format!(
            "  {:<10} {:<5} {}{}",
            interface.binding,
            interface.version,
            interface.url,
            if selected { "   (used)" } else { "" }
        ));
    }
    let yes_no = |flag: bool| if flag { "yes" } else { "no" };
    line(format!(
        "capabilities: streaming {}, push notifications {}",
        yes_no(card.streaming),
        yes_no(card.push_notifications)
    ));
    if card.skills.is_empty() {
        line("skills:       none listed".into());
    } else {
        line("skills:".into());
        for skill in &card.skills {
            let name = if skill.name.is_empty() {
                &skill.id
            } else {
                &skill.name
            };
            let description = skill.description.replace('\n', " ");
            line(format!("  {name} ({}): {description}", skill.id));
        }
    }
    out
}

async fn send(
    explicit: Option<&Path>,
    standalone: bool,
    agent: &str,
    message: String,
    task: Option<String>,
    context: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let typed = agent.contains("://");
    let (client, url) = if typed {
        (url_client(agent)?, agent.to_string())
    } else {
        let (config, source) = portico_config::load(explicit)?;
        let agents = &config.a2a.external_agents;
        let external = agents
            .iter()
            .find(|a| a.name == agent || remote_tool_name(&a.name) == agent);
        let local = config.agents.iter().find(|a| a.enabled && a.name == agent);
        match (external, local) {
            (Some(configured), _) => (
                A2aClient::for_agent(configured, &|name| std::env::var(name).ok())?,
                configured.url.clone(),
            ),
            // One of Portico's own agents: over A2A at the running daemon, else in this process.
            (None, Some(_)) => {
                let daemon = match standalone {
                    true => None,
                    false => crate::daemon_client::Daemon::running().await,
                };
                let Some(daemon) = daemon else {
                    if task.is_some() {
                        bail!(
                            "--task continues an A2A task, and tasks are kept by the daemon; with no daemon running `{agent}` runs in this process, where --context ID continues its conversation instead"
                        );
                    }
                    return send_in_process(explicit, agent, message, context, json).await;
                };
                let at_daemon = local_agent_at(&daemon, agent);
                (
                    A2aClient::for_agent(&at_daemon, &|_| None)?,
                    at_daemon.url.clone(),
                )
            }
            (None, None) => {
                let mut names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                names.extend(
                    config
                        .agents
                        .iter()
                        .filter(|a| a.enabled)
                        .map(|a| a.name.as_str()),
                );
                bail!(
                    "no agent named `{agent}` in {source}, neither an [[agents]] entry nor an [[a2a.external_agents]] one (configured: {}); pass the agent's URL to reach one that is not configured",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            }
        }
    };
    // The message, which ends in the remedy the client's policy words; not its source chain.
    let card = client
        .discover(&url)
        .await
        .map_err(|e| anyhow::anyhow!(e.to_string()))?;
    eprintln!(
        "portico: {} at {} ({} {}{})",
        card.name,
        card.endpoint.url,
        card.endpoint.binding.label(),
        card.endpoint.version.label(),
        if card.streaming { ", streaming" } else { "" }
    );

    let printed = Arc::new(AtomicBool::new(false));
    // Text printed without its line ended yet (a chunk that is not the last).
    let open_line = Arc::new(AtomicBool::new(false));
    let on_event = {
        let printed = printed.clone();
        let open_line = open_line.clone();
        move |event: A2aEvent| match event {
            A2aEvent::Status { state, text, .. } => {
                let state = portico_a2a_client::wire::state_to_v03(&state);
                // Progress text goes to stderr as it comes; the text of the status a task ends
                // (or stops for input) with is the answer, which stdout gets once, below. On a
                // terminal, where both streams show, it was printed twice.
                match text {
                    Some(text) if matches!(state, "submitted" | "working") => {
                        eprintln!("[{state}] {text}")
                    }
                    _ => eprintln!("[{state}]"),
                }
            }
            A2aEvent::Artifact {
                text, last_chunk, ..
            } if !json => {
                let mut stdout = std::io::stdout().lock();
                let _ = write!(stdout, "{text}");
                if last_chunk {
                    let _ = writeln!(stdout);
                }
                let _ = stdout.flush();
                printed.store(true, Ordering::Relaxed);
                open_line.store(!last_chunk, Ordering::Relaxed);
            }
            A2aEvent::Message { text } if !json => {
                println!("{text}");
                printed.store(true, Ordering::Relaxed);
            }
            A2aEvent::Artifact { .. } | A2aEvent::Message { .. } => {}
        }
    };
    let request = SendRequest {
        text: message,
        task_id: task,
        context_id: context,
        timeout: None,
        untrusted: None,
    };
    let outcome = client.send(&card, &request, &on_event).await?;

    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "state": outcome.state_label(),
                "task_id": outcome.task_id,
                "context_id": outcome.context_id,
                "text": outcome.text,
                "task": outcome.task,
            }))?
        );
    } else {
        if open_line.load(Ordering::Relaxed) {
            println!();
        }
        // Nothing streamed (no artifacts: a question, a failure, a status message): print the answer.
        // A question or a failure after streamed artifacts is printed too: its status line above
        // no longer carries the text.
        if (!printed.load(Ordering::Relaxed) || outcome.is_interrupted() || outcome.is_failure())
            && !outcome.text.is_empty()
        {
            println!("{}", outcome.text);
        }
    }
    eprintln!("state: {}", outcome.state_label());
    if let Some(id) = &outcome.task_id {
        eprintln!("task: {id}");
    }
    if let Some(id) = &outcome.context_id {
        eprintln!("context: {id}");
    }
    if outcome.is_interrupted()
        && let Some(id) = &outcome.task_id
    {
        eprintln!("continue with: portico a2a send {agent} 'your answer' --task {id}");
    }
    Ok(if outcome.is_failure() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_typed_by_the_user() {
        for url in [
            "http://127.0.0.1:8080/",
            "http://127.1.2.3/",
            "http://[::1]:9/",
            "http://[::ffff:127.0.0.1]/",
            "http://LOCALHOST:3000/a2a",
        ] {
            assert!(is_loopback_host(url), "{url}");
        }
        for url in [
            "http://169.254.169.254/",
            "http://10.0.0.1/",
            "https://agent.example/",
            "not a url",
        ] {
            assert!(!is_loopback_host(url), "{url}");
        }
    }
}
