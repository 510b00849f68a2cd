//! `portico call`: one tool call made as an MCP client makes it, through the running daemon's `/mcp`
//! or (with `--standalone`, or no daemon) through this process's own pipeline. While it runs, what
//! the tool's server sends during the call reaches the person at the terminal (see
//! [`crate::call_terminal`]): progress, questions (elicitation), model requests (sampling). Ctrl-C
//! cancels the call where it runs (the server is sent `notifications/cancelled`, the audit says
//! `cancelled`) and exits 130; a second Ctrl-C exits at once.

use std::future::Future;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use portico_core::relay::{CallContext, Caller};
use portico_engine::Engine;
use portico_pipeline::ToolContext;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::call_terminal::{Models, TerminalCaller};
use crate::cli::{call_arguments, engine_options_for, print_call_result, stopped_by_portico};
use crate::daemon_client::Daemon;

/// `portico call`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// The tool's name as `portico tools` shows it, e.g. mcp_github_create_issue.
    pub tool: String,
    /// Arguments as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Print the raw MCP result as JSON.
    #[arg(long)]
    pub json: bool,
    /// How to answer a question the tool asks during the call (MCP elicitation): ask it on the
    /// terminal; accept the form's defaults (for scripts); decline; cancel. When stdin is not a
    /// terminal, `ask` declines.
    #[arg(long, value_name = "HOW", value_enum, default_value_t = ElicitMode::Ask)]
    pub elicit: ElicitMode,
    /// Answer the tool's requests for a model completion (MCP sampling) with this agent's model.
    /// Default: the first enabled agent's, else the model Portico's environment names
    /// (OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENAI_BASE_URL).
    #[arg(long, value_name = "AGENT")]
    pub sample_with: Option<String>,
    #[command(flatten)]
    pub standalone: crate::cli::Standalone,
}

/// `--elicit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ElicitMode {
    Ask,
    Defaults,
    Decline,
    Cancel,
}

/// The exit status of a call cancelled with Ctrl-C: 128 + SIGINT, as a shell reports it.
const CANCELLED: u8 = 130;

/// How long the daemon may take to accept the CLI's MCP session.
const HANDSHAKE_BOUND: Duration = Duration::from_secs(portico_config::DEFAULT_TIMEOUT_SECS);

/// How long a call through the daemon is waited for: the daemon's own bounds (the tool's timeout,
/// an agent's) end it sooner; Ctrl-C ends it at any time.
const CALL_THROUGH_DAEMON_BOUND: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the CLI waits for its session with the daemon to close (and the cancellation it sends
/// to go out) once the answer is in.
const SESSION_CLOSE_BOUND: Duration = Duration::from_secs(3);

/// The call in this process: the engine connects the servers the tool can need and the pipeline
/// runs it under the principal `client:cli`.
pub async fn standalone(explicit: Option<&Path>, args: &CallArgs) -> anyhow::Result<ExitCode> {
    let arguments = call_arguments(&args.args)?;
    let mut interrupt = Interrupt::install()?;
    let (config, source) = portico_config::load(explicit)?;
    let engine = Engine::start(&config, engine_options_for(&config, &source).one_shot())?;
    let caller = Arc::new(TerminalCaller::new(
        args,
        Models::loaded(config, args.sample_with.clone()),
    ));
    let context = ToolContext::client("cli").with_relay(relay(&caller));
    let started = std::sync::atomic::AtomicBool::new(false);
    let call = async {
        engine
            .upstreams()
            .connect(&engine.servers_for_call(&args.tool));
        crate::progress::until_settled(engine.upstreams()).await;
        started.store(true, std::sync::atomic::Ordering::Relaxed);
        engine
            .pipeline()
            .call(&args.tool, Some(arguments), &context)
            .await
    };
    let called = interrupt.run(call).await;
    caller.hang_up();
    caller.screen().clear();
    let answered = match called {
        Some(Ok(outcome)) => {
            let stopped_by =
                stopped_by_portico(&args.tool, outcome.error.as_ref(), &outcome.result);
            print_call_result(outcome.result, args.json, stopped_by.as_deref())
        }
        Some(Err(error @ portico_pipeline::PipelineError::UnknownTool { .. })) => {
            let servers = engine.upstreams().servers();
            match crate::output::missing_tool_message(&args.tool, &error.to_string(), &servers) {
                Some(message) => Err(anyhow::anyhow!(message)),
                None => Err(error.into()),
            }
        }
        Some(Err(error)) => Err(error.into()),
        None => Ok(cancelled(
            &args.tool,
            started.load(std::sync::atomic::Ordering::Relaxed),
        )),
    };
    // Sends what the cancellation left to send and writes every audit record before exit.
    engine.shutdown().await;
    answered
}

/// A call through the daemon's `/mcp`, as an IDE makes it: the daemon's pipeline runs it (its
/// policies, its audit, its upstream sessions), under the client its token names. What the tool's
/// server asks during the call comes back over this session to this terminal.
pub async fn through_daemon(
    daemon: &Daemon,
    explicit: Option<&Path>,
    args: &CallArgs,
) -> anyhow::Result<ExitCode> {
    let arguments = call_arguments(&args.args)?;
    if let Some(message) = crate::chat::daemon_agent_without_model(daemon, &args.tool).await {
        anyhow::bail!("{message}");
    }
    let mut interrupt = Interrupt::install()?;
    let caller = Arc::new(TerminalCaller::new(
        args,
        Models::from_config_file(explicit, args.sample_with.clone()),
    ));
    let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
    let mut session = daemon.mcp_server();
    // The daemon bounds the call (the tool's timeout, an agent's); this side waits as long.
    session.timeout_secs = CALL_THROUGH_DAEMON_BOUND.as_secs();
    let connecting = tokio::time::timeout(
        HANDSHAKE_BOUND,
        portico_mcp::Upstream::connect(&session, events, portico_mcp::StopGrace::BRIEF),
    );
    let Some(connected) = interrupt.run(connecting).await else {
        return Ok(cancelled(&args.tool, false));
    };
    let not_accepted = || {
        format!(
            "{} did not accept an MCP session at /mcp",
            daemon.describe()
        )
    };
    let (upstream, exit) = connected
        .map_err(|_| anyhow::anyhow!("no answer within {}s", HANDSHAKE_BOUND.as_secs()))
        .with_context(not_accepted)?
        .with_context(not_accepted)?;
    let context = relay(&caller);
    let call = async {
        // The daemon checks the `Mcp-Param-*` headers a tool's schema asks for, which the
        // transport learns from a listing: a session that has not listed cannot send them.
        let standard_headers = rmcp::model::ProtocolVersion::STANDARD_HEADERS;
        if upstream.info().protocol_version.as_str() >= standard_headers.as_str() {
            upstream.list_tools().await?;
        }
        upstream
            .call_tool_with(&args.tool, Some(arguments), &context)
            .await
    };
    let called = interrupt.run(call).await;
    caller.hang_up();
    caller.screen().clear();
    let answered = match called {
        None => Ok(cancelled(&args.tool, true)),
        Some(Ok(result)) => {
            let stopped_by = stopped_by_portico(&args.tool, None, &result);
            print_call_result(result, args.json, stopped_by.as_deref())
        }
        Some(Err(portico_mcp::UpstreamError::Remote { message, .. })) => {
            // A tool missing from the daemon's catalog: its server may be down there.
            let missing = match message.starts_with(&format!("no tool named `{}`", args.tool)) {
                true => crate::oneview_cli::daemon_servers(daemon)
                    .await
                    .ok()
                    .and_then(|servers| {
                        crate::output::missing_tool_message(&args.tool, &message, &servers)
                    }),
                false => None,
            };
            let message = missing.unwrap_or(message);
            Err(anyhow::anyhow!(
                "{message} (answered by {})",
                daemon.describe()
            ))
        }
        Some(Err(error)) => Err(anyhow::Error::new(error).context(format!(
            "calling `{}` through {}",
            args.tool,
            daemon.describe()
        ))),
    };
    // The session closes once the cancellation (if any) is sent.
    upstream.shutdown();
    if tokio::time::timeout(SESSION_CLOSE_BOUND, exit.wait())
        .await
        .is_err()
    {
        tracing::debug!("the session with the daemon did not close within {SESSION_CLOSE_BOUND:?}");
    }
    answered
}

/// What travels with the call: the terminal as its client, asking for progress.
fn relay(caller: &Arc<TerminalCaller>) -> CallContext {
    CallContext {
        caller: Some(caller.clone() as Arc<dyn Caller>),
        progress: true,
    }
}

/// Says the call was cancelled (`sent`: after it went out, so its server was told); the exit
/// status a shell expects of Ctrl-C.
fn cancelled(tool: &str, sent: bool) -> ExitCode {
    if sent {
        eprintln!(
            "portico: cancelled the call to `{tool}` (Ctrl-C); its server was told to stop it"
        );
    } else {
        eprintln!("portico: cancelled the call to `{tool}` (Ctrl-C) before it was made");
    }
    ExitCode::from(CANCELLED)
}

/// Ctrl-C while the call runs. Installed before anything starts, so a Ctrl-C during the
/// connection is the call's cancellation too, not the default (which kills the process before it
/// can tell anyone).
struct Interrupt(Signal);

impl Interrupt {
    fn install() -> anyhow::Result<Interrupt> {
        signal(SignalKind::interrupt())
            .map(Interrupt)
            .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
    }

    /// Runs `work` to its end, or until Ctrl-C: then `work` is dropped (which cancels the call it
    /// makes) and `None` comes back; from then on, another Ctrl-C exits at once.
    async fn run<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        let output = tokio::select! {
            output = work => Some(output),
            _ = self.0.recv() => None,
        };
        if output.is_none() {
            self.exit_on_next();
        }
        output
    }

    fn exit_on_next(&mut self) {
        let Ok(mut again) = signal(SignalKind::interrupt()) else {
            return;
        };
        tokio::spawn(async move {
            again.recv().await;
            eprintln!("portico: interrupted again; exiting now");
            std::process::exit(i32::from(CANCELLED));
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_elicit_modes_are_spelled_as_documented() {
        use clap::ValueEnum;
        let names: Vec<String> = super::ElicitMode::value_variants()
            .iter()
            .map(|mode| mode.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["ask", "defaults", "decline", "cancel"]);
    }
}
