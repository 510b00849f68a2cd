//! Command-line interface.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use portico_config::ConfigSource;
use portico_core::ToolResult;
use portico_engine::{Engine, EngineOptions, Upstreams};
use portico_hub::{Hub, HubSettings, OAuthHome, StopGrace};

use crate::{output, progress};

#[derive(Debug, Parser)]
#[command(
    name = "portico",
    version,
    about = "Connect AI agents, tools and IDEs: one hub for your MCP servers"
)]
pub struct Cli {
    /// Config file (default: $PORTICO_CONFIG, then config.toml in Portico's data dir, else built-in defaults).
    #[arg(long, global = true, value_name = "PATH", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug). PORTICO_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    pub verbose: u8,
    #[command(flatten)]
    pub oneview: crate::oneview_cli::GlobalFlags,
    #[command(subcommand)]
    pub command: Command,
}

/// The heading the flags every command takes are listed under, apart from the command's own.
pub(crate) const GLOBAL: &str = "Global options";

/// `--standalone` on a command that can run either through the running daemon or in this process.
/// Not a global flag: on the other commands it would mean nothing.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Standalone {
    /// Never use a running daemon: run this in this process, from this config.
    #[arg(long)]
    pub standalone: bool,
}

/// [`Standalone`] for a command group whose subcommands all take it (`portico conversations list
/// --standalone`).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct StandaloneAll {
    /// Never use a running daemon: run this in this process, from this config.
    #[arg(long, global = true)]
    pub standalone: bool,
}

/// `--standalone` on a config edit (add, remove, enable, disable).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct EditStandalone {
    /// Edit this config's file even when a running daemon follows another, and tell no daemon.
    #[arg(long)]
    pub standalone: bool,
}

/// `--standalone` on a command only the running daemon can answer: not shown, and refused in words
/// when given.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct RefusedStandalone {
    /// Refused: this command acts on the running daemon.
    #[arg(long, global = true, hide = true)]
    pub standalone: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: connect every configured server, serve MCP at /mcp and the API at /api until
    /// interrupted.
    Serve {
        /// Listen here instead of [server] listen: IP:PORT or localhost:PORT (loopback).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
    /// Serve MCP on stdin/stdout for an IDE (newline JSON or Content-Length framing). Proxies to a running
    /// daemon when there is one, else runs the hub in-process.
    /// With --standalone, never proxies to a daemon.
    Mcp {
        #[command(flatten)]
        standalone: Standalone,
    },
    /// Show each configured server: transport, state, protocol version, catalog counts, last error.
    Servers {
        /// Print the statuses as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        standalone: Standalone,
    },
    /// List the whole catalog the doors serve (built-ins, agents, remote agents, each server's
    /// tools), each tool with its source.
    Tools {
        /// Only this server's tools.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// Print the definitions as JSON, each with `source` (and `server`).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        standalone: Standalone,
    },
    /// Call a tool by its catalog name and print the result. Progress shows on a terminal; the
    /// tool's questions are asked there (or answered per --elicit); Ctrl-C cancels the call.
    Call(crate::call_cli::CallArgs),
    /// List the configured agents: name, the MCP tool each is served as, model, description.
    Agents {
        /// Print the agents as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        standalone: Standalone,
    },
    /// Talk to an agent in the terminal, its answer streamed as it is written. One message per line;
    /// Ctrl-D ends. Conversations are stored: pass --conversation to continue one.
    Chat {
        /// The agent's name, as `portico agents` shows it.
        agent: String,
        /// Continue this stored conversation (`portico conversations` lists them).
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
        #[command(flatten)]
        standalone: Standalone,
    },
    /// The stored conversations with agents: list them, show one.
    Conversations {
        #[command(subcommand)]
        command: crate::oneview_cli::ConversationsCommand,
        #[command(flatten)]
        standalone: StandaloneAll,
    },
    /// A2A agents elsewhere: read an agent's card, send it a message.
    A2a {
        #[command(subcommand)]
        command: crate::a2a_cli::A2aCommand,
    },
    /// OAuth logins to protected MCP servers: log in, show the state, log out.
    Auth {
        #[command(subcommand)]
        command: crate::auth_cli::AuthCommand,
    },
    /// The HTTP door's named clients ([[server.clients]]): add one (a new token), list them.
    Clients {
        #[command(subcommand)]
        command: crate::clients_cli::ClientsCommand,
    },
    /// Answer the running daemon's approval requests: list, show, approve, deny.
    Approvals {
        #[command(subcommand)]
        command: crate::approvals_cli::ApprovalsCommand,
        #[command(flatten)]
        standalone: RefusedStandalone,
    },
    /// The audit log of tool calls, newest first; `portico audit verify` checks its hash chain.
    Audit(crate::audit_cli::AuditArgs),
    /// Check the setup: config, environment, listen port, daemon, each server's handshake; one line
    /// per check (ok, warn, FAIL with the fix); exit 1 when something failed.
    Doctor(crate::doctor_cli::DoctorArgs),
    /// Write a commented starter config (with the default agent) to the data dir's config.toml, or
    /// --config PATH; never over an existing file.
    Init,
    /// The secret store: `${NAME}`s the environment does not set are read from it. Set one (value
    /// from the terminal, not echoed, or from stdin), list the names, remove one.
    Secret {
        #[command(subcommand)]
        command: crate::secret_cli::SecretCommand,
    },
    /// Add the MCP servers of Claude Desktop, Cursor or VS Code (or of a file) to the config.
    Import(crate::import_cli::ImportArgs),
    /// Search the MCP registry ([registry] url) for servers: name, version, what it runs as
    /// (npm, pypi, oci, remote), description.
    Search(crate::registry_cli::SearchArgs),
    /// Point an IDE (claude, cursor, vscode) at `portico mcp`: print the JSON to add, or with
    /// --write edit the IDE's config file (a backup first, the diff shown).
    Export(crate::export_cli::ExportArgs),
    /// Add an MCP server to the config (`portico add NAME -- COMMAND [ARGS...]` for stdio,
    /// `portico add NAME URL` for a remote one), then wait for it and say what it offers.
    Add(crate::lifecycle_cli::AddArgs),
    /// Remove a server from the config; a running daemon stops it.
    Remove {
        #[command(flatten)]
        server: crate::lifecycle_cli::NameArg,
        #[command(flatten)]
        standalone: EditStandalone,
    },
    /// Set `enabled = true` in a server's entry, then wait for it and say what it offers.
    Enable {
        #[command(flatten)]
        server: crate::lifecycle_cli::NameArg,
        #[command(flatten)]
        standalone: EditStandalone,
    },
    /// Set `enabled = false` in a server's entry; a running daemon stops it.
    Disable {
        #[command(flatten)]
        server: crate::lifecycle_cli::NameArg,
        #[command(flatten)]
        standalone: EditStandalone,
    },
    /// Restart a server in the running daemon and wait for it.
    Restart {
        #[command(flatten)]
        server: crate::lifecycle_cli::NameArg,
        #[command(flatten)]
        standalone: RefusedStandalone,
    },
    /// Show what a server wrote to stderr, as the running daemon kept it (-f to follow).
    Logs(crate::lifecycle_cli::LogsArgs),
    /// Stop the running daemon (calls in progress finish first) and wait until it has exited.
    Stop {
        #[command(flatten)]
        standalone: RefusedStandalone,
    },
    /// Print a shell completion script (bash, zsh, fish, ...).
    Completions(crate::onramp_cli::CompletionsArgs),
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check the config file and report every problem with line, column and a hint.
    Check,
    /// Print where the config is read from.
    Path,
}

impl Command {
    pub fn is_daemon(&self) -> bool {
        matches!(self, Command::Serve { .. } | Command::Mcp { .. })
    }

    /// Whether `--standalone` was given (only the commands that take it can have it).
    pub fn standalone(&self) -> bool {
        match self {
            Command::Mcp { standalone }
            | Command::Servers { standalone, .. }
            | Command::Tools { standalone, .. }
            | Command::Agents { standalone, .. }
            | Command::Chat { standalone, .. } => standalone.standalone,
            Command::Call(args) => args.standalone.standalone,
            Command::Audit(args) => args.standalone.standalone,
            Command::Add(args) => args.standalone.standalone,
            Command::Logs(args) => args.standalone.standalone,
            Command::Conversations { standalone, .. } => standalone.standalone,
            Command::Remove { standalone, .. }
            | Command::Enable { standalone, .. }
            | Command::Disable { standalone, .. } => standalone.standalone,
            Command::Approvals { standalone, .. }
            | Command::Restart { standalone, .. }
            | Command::Stop { standalone } => standalone.standalone,
            _ => false,
        }
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Some(code) = crate::oneview_cli::through_daemon(&cli).await? {
        return Ok(code);
    }
    match cli.command {
        Command::Config {
            command: ConfigCommand::Check,
        } => crate::doctor_cli::config_check(cli.config.as_deref()),
        Command::Doctor(args) => crate::doctor_cli::run(cli.config.as_deref(), args).await,
        Command::Config {
            command: ConfigCommand::Path,
        } => {
            println!("{}", portico_config::locate(cli.config.as_deref()));
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { listen } => serve(cli.config.as_deref(), listen).await,
        Command::Init => crate::onramp_cli::init(cli.config.as_deref()),
        Command::Import(args) => crate::import_cli::run(cli.config.as_deref(), args),
        Command::Search(args) => crate::registry_cli::search(cli.config.as_deref(), args).await,
        Command::Export(args) => crate::export_cli::run(cli.config.as_deref(), args),
        Command::Add(args) => {
            let standalone = args.standalone.standalone;
            crate::lifecycle_cli::add(cli.config.as_deref(), standalone, args).await
        }
        Command::Remove { server, standalone } => {
            crate::lifecycle_cli::remove(cli.config.as_deref(), standalone.standalone, &server.name)
                .await
        }
        Command::Enable { server, standalone } => {
            let standalone = standalone.standalone;
            crate::lifecycle_cli::set_enabled(cli.config.as_deref(), standalone, &server.name, true)
                .await
        }
        Command::Disable { server, standalone } => {
            let standalone = standalone.standalone;
            crate::lifecycle_cli::set_enabled(
                cli.config.as_deref(),
                standalone,
                &server.name,
                false,
            )
            .await
        }
        Command::Restart { server, standalone } => {
            crate::lifecycle_cli::restart(standalone.standalone, &server.name).await
        }
        Command::Logs(args) => crate::lifecycle_cli::logs(args.standalone.standalone, &args).await,
        Command::Stop { standalone } => crate::lifecycle_cli::stop(standalone.standalone).await,
        Command::Completions(args) => crate::onramp_cli::completions(args),
        Command::Audit(args) => crate::audit_cli::run(cli.config.as_deref(), args),
        Command::A2a { command } => crate::a2a_cli::run(cli.config.as_deref(), command).await,
        Command::Clients { command } => crate::clients_cli::run(cli.config.as_deref(), command),
        Command::Secret { command } => crate::secret_cli::run(cli.config.as_deref(), command),
        Command::Auth { command } => crate::auth_cli::run(cli.config.as_deref(), command).await,
        Command::Approvals {
            command,
            standalone,
        } => {
            crate::oneview_cli::refuse_standalone(standalone.standalone, "approvals")?;
            crate::approvals_cli::run(command).await
        }
        Command::Conversations { command, .. } => {
            crate::oneview_cli::conversations_standalone(cli.config.as_deref(), &command)
        }
        Command::Mcp { standalone } => {
            crate::stdio_door::run(cli.config.as_deref(), standalone.standalone).await
        }
        Command::Servers { json, .. } => {
            let hub = start_hub(cli.config.as_deref(), None).await?;
            let servers = hub.servers();
            let answer = if json {
                serde_json::to_string_pretty(&servers)
                    .map(|text| text + "\n")
                    .map_err(anyhow::Error::from)
            } else {
                Ok(output::servers_table(&servers))
            };
            let printed = answer.and_then(print_now);
            hub.shutdown().await;
            printed.map(|()| ExitCode::SUCCESS)
        }
        Command::Tools { server, json, .. } => {
            crate::oneview_cli::tools_standalone(cli.config.as_deref(), server.as_deref(), json)
                .await
        }
        Command::Agents { json, .. } => {
            let (config, source) = portico_config::load(cli.config.as_deref())?;
            // Listing agents needs no upstream: none is connected.
            let engine = Engine::start(&config, engine_options_for(&config, &source).one_shot())?;
            let agents = engine.agents().infos();
            let answer = if json {
                serde_json::to_string_pretty(&agents)
                    .map(|text| text + "\n")
                    .map_err(anyhow::Error::from)
            } else {
                Ok(output::agents_table(&agents))
            };
            let printed = answer.and_then(print_now);
            engine.shutdown().await;
            printed.map(|()| ExitCode::SUCCESS)
        }
        Command::Chat {
            agent,
            conversation,
            ..
        } => crate::chat::run(cli.config.as_deref(), &agent, conversation).await,
        Command::Call(args) => crate::call_cli::standalone(cli.config.as_deref(), &args).await,
    }
}

/// `--args` as the JSON object a call takes.
pub(crate) fn call_arguments(args: &str) -> anyhow::Result<portico_core::JsonObject> {
    let arguments: serde_json::Value =
        serde_json::from_str(args).with_context(|| format!("--args is not valid JSON: {args}"))?;
    let serde_json::Value::Object(arguments) = arguments else {
        bail!("--args must be a JSON object such as '{{\"path\": \"/tmp\"}}', got {args}");
    };
    Ok(arguments)
}

/// Prints a call's result; exit code 1 when the call failed. `stopped_by` is what Portico's own
/// checks said when they, not the tool, ended the call (see [`stopped_by_portico`]).
pub(crate) fn print_call_result(
    result: ToolResult,
    json: bool,
    stopped_by: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let is_error = result.is_error();
    print_now(if json {
        // `--json` prints the MCP form, what a client of a door would get.
        serde_json::to_string_pretty(&portico_mcp::tool_result_into_object(result))? + "\n"
    } else {
        output::call_result(&result, stopped_by)
    })?;
    Ok(if is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What to say first when Portico itself, not the tool, ended a call: `error` as the pipeline gave
/// it (in this process), else the error result's text as a door sent it (through a daemon, where
/// the pipeline's messages arrive as the result's text). `None` when the tool answered.
pub(crate) fn stopped_by_portico(
    tool: &str,
    error: Option<&portico_pipeline::PipelineError>,
    result: &ToolResult,
) -> Option<String> {
    use portico_pipeline::PipelineError as E;
    let refused_arguments = format!(
        "Portico refused the arguments: they do not match the tool's inputSchema, so `{tool}` did not run"
    );
    let not_run = format!("Portico did not run `{tool}`");
    match error {
        Some(E::InvalidArguments { .. }) => return Some(refused_arguments),
        Some(
            E::NotPermitted { .. }
            | E::OutsideClientScope { .. }
            | E::Refused { .. }
            | E::ApprovalRequired { .. }
            | E::PolicyFailed { .. }
            | E::PolicyError { .. },
        ) => return Some(not_run),
        Some(_) => return Some(format!("the call to `{tool}` failed")),
        None => {}
    }
    if !result.is_error() {
        return None;
    }
    let text = result
        .content
        .first()
        .and_then(|c| c.get("text"))
        .and_then(|t| t.as_str())
        .unwrap_or("");
    if text.starts_with(&format!("invalid arguments for `{tool}`: ")) {
        Some(refused_arguments)
    } else if text.starts_with(&format!("call to `{tool}` refused: "))
        || text.starts_with(&format!("call to `{tool}` requires approval"))
    {
        Some(not_run)
    } else {
        None
    }
}

/// Writes a one-shot command's answer to stdout and flushes it, so it is out before the command stops
/// its upstreams.
pub(crate) fn print_now(text: String) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")
}

pub(crate) fn engine_options() -> EngineOptions {
    EngineOptions::in_dir(&portico_config::data_dir())
}

/// [`engine_options`] for `config`, read from `source`: the file tools are kept off its files.
pub(crate) fn engine_options_for(
    config: &portico_config::Config,
    source: &ConfigSource,
) -> EngineOptions {
    engine_options().protecting(portico_config::owned_paths(config, source))
}

/// Loads the config and starts the engine, showing progress until every server's first attempt is
/// done.
pub(crate) async fn start_engine(explicit: Option<&std::path::Path>) -> anyhow::Result<Engine> {
    let (config, source) = portico_config::load(explicit)?;
    let engine = Engine::start(&config, engine_options_for(&config, &source))?;
    progress::until_settled(engine.upstreams()).await;
    Ok(engine)
}

/// Loads the config and starts a hub for a one-shot command: connecting `only` that server (refused,
/// before anything starts, when the config has no such server), else every server; shows progress
/// until each first attempt is done. Its children are stopped briefly at shutdown: the answer is out by
/// then.
pub(crate) async fn start_hub(
    explicit: Option<&std::path::Path>,
    only: Option<&str>,
) -> anyhow::Result<Hub> {
    let (config, _source) = portico_config::load(explicit)?;
    let vars = portico_secrets::Vars::with_store(portico_secrets::SecretStore::for_config(&config));
    if let Some(name) = only
        && !config.mcp_servers.iter().any(|s| s.name == name)
    {
        bail!(
            "no server named `{name}` in the config; configured: {}",
            crate::output::names(config.mcp_servers.iter().map(|s| s.name.as_str()))
        );
    }
    let hub = Hub::idle(
        &config,
        HubSettings {
            child_stop: StopGrace::BRIEF,
            // Stored tokens are used; a one-shot command opens no browser (`portico auth login` does).
            oauth: Some(OAuthHome {
                browser: None,
                ..OAuthHome::in_data_dir(&portico_config::data_dir())
            }),
            vars,
            ..HubSettings::default()
        },
    );
    match only {
        Some(name) => hub.connect(&[name.to_string()]),
        None => hub.connect_all(),
    }
    progress::until_settled(&Upstreams::new(hub.clone())).await;
    Ok(hub)
}

async fn serve(
    explicit: Option<&std::path::Path>,
    listen: Option<String>,
) -> anyhow::Result<ExitCode> {
    // One daemon per data dir: a second would share its store and replace its info file. Found as
    // `doctor` and the other commands find it (the info file, and the daemon's proof it is it).
    if let Some(running) = crate::daemon_client::Daemon::running().await {
        bail!(
            "Portico is already running (pid {}) on {}; stop it first (or give this one its own PORTICO_HOME)",
            running.info.pid,
            running.base
        );
    }
    let signals = crate::serve_signals::ServeSignals::install()?;
    let shutdown = signals.stopped();
    let (mut config, source) = portico_config::load(explicit)?;
    if let Some(listen) = &listen {
        config.server.listen.clone_from(listen);
    }
    tracing::info!("config: {source}");
    if source == ConfigSource::Embedded {
        tracing::warn!("{}", crate::onramp_cli::no_config_file());
    } else if config.mcp_servers.is_empty() {
        tracing::warn!(
            "no MCP servers configured; add [[mcp_servers]] entries to {source} (see README)"
        );
    }
    let identity = crate::doctor_cli::config_identity(&source);
    let options = engine_options_for(&config, &source).as_replica();
    let live = portico_daemon::LiveConfig::new(config.clone(), source, explicit.map(Into::into))
        .with_listen(listen);
    let mut door = portico_daemon::DoorConfig::from_config(&config)?.with_live_config(live.clone());
    door.config = identity;
    let engine = Engine::start(&config, options)?;
    warn_agents_without_a_model(&engine);
    let hub = engine.upstreams().clone();
    let info_file = portico_daemon::InfoFile::in_dir(&portico_config::data_dir());
    signals.follow(
        live,
        engine.clone(),
        portico_daemon::InfoFile::in_dir(&portico_config::data_dir()),
    );
    if let Some(stale) = info_file.read() {
        tracing::debug!(
            "replacing daemon info left by pid {} ({})",
            stale.pid,
            info_file.path().display()
        );
    }

    // Report once every server's first attempt is done, without holding up the HTTP door.
    let (bound, listening) = tokio::sync::oneshot::channel::<()>();
    let reporter = {
        let hub = hub.clone();
        let engine = engine.clone();
        let exposed = config.expose.tools;
        tokio::spawn(async move {
            // Ready only once the door listens: a door that cannot listen says so instead.
            if listening.await.is_err() {
                return;
            }
            hub.wait_settled().await;
            let servers = hub.servers();
            eprint!("{}", output::servers_table(&servers));
            // The catalog a client gets, so the count is what `portico tools` lists.
            let listed = portico_daemon::tool_catalog(
                &engine,
                &portico_pipeline::Principal::client("cli"),
                exposed,
            )
            .await;
            eprintln!("{}", output::ready_line(&listed, &servers));
        })
    };
    let served =
        portico_daemon::serve(engine.clone(), &config, door, info_file, shutdown, |addr| {
            eprintln!("portico: listening on http://{addr} (MCP at /mcp)");
            let _ = bound.send(());
        })
        .await;
    reporter.abort();
    // A door that never listened has nothing to shut down in the user's eyes: its error says it.
    if served.is_ok() {
        eprintln!("portico: shutting down");
    }
    // Children get their grace periods (bounded, so a wedged server cannot hold the exit forever);
    // every audit record is written before exit.
    engine.shutdown().await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// An agent without a model is offered to no client: the daemon says so once at start, since its
/// environment (where a model comes from) is fixed from then on.
fn warn_agents_without_a_model(engine: &Engine) {
    for agent in engine.agents().infos() {
        if agent.needs_model.is_some() {
            tracing::warn!(
                "agent `{}` has no model, so no IDE or A2A client is offered it: `portico agents` says what to set in this daemon's environment (then restart it)",
                agent.name
            );
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is called, not when the future
/// is first polled: the daemon reports itself ready before its HTTP door polls it, and a SIGTERM sent
/// in between would otherwise kill the process instead of shutting it down.
pub(crate) fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    }
}
