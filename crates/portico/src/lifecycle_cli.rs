//! One server's life from the command line: `portico add|remove|enable|disable` edit the config
//! file (`portico_config::edit`: every byte outside the entry kept, the result checked before it is
//! written, written atomically), and a running daemon follows the file (live reload), so these wait
//! until it has applied the change and say what it did; `add` and `enable` then wait for the
//! server and print what it offers or why it failed. Without a daemon, `add` and `enable` connect
//! the server in this process, as `portico tools --server NAME` does, to show the same.
//! `portico restart` and `portico stop` need a daemon (`/api/servers/{name}/restart`,
//! `/api/shutdown`).
//!
//! Which file: the one this command would read (`--config`, `$PORTICO_CONFIG`, the data dir's
//! `config.toml`). When a daemon runs another file, the command edits the daemon's file if the user
//! named none (and says so), and refuses if the user named one: editing a file the daemon does not
//! follow would look done and change nothing. `--standalone` edits the command's file regardless.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use portico_config::ConfigSource;
use portico_config::edit;
use portico_core::{ServerState, ServerStatus};
use portico_daemon::{ConfigLoad, ConfigStatus};

use crate::daemon_client::Daemon;

/// How long a command waits for the daemon to apply an edited file: it reads the file twice a
/// second and applies a change once two reads agree.
const RELOAD_WAIT: Duration = Duration::from_secs(20);
/// How long `add`, `enable` and `restart` wait for the server to start in the daemon: a cold
/// `npx -y` or `docker run` downloads first.
const START_WAIT: Duration = Duration::from_secs(300);
/// How long `stop` waits for the daemon to exit: its calls in progress get 30 s, its servers'
/// processes a few seconds each.
const STOP_WAIT: Duration = Duration::from_secs(60);
/// How often the daemon is asked while waiting.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The server's name (letters, digits, `-`, `_`, `.`): its tools are served as mcp_{name}_*.
    pub name: String,
    /// The server's URL (Streamable HTTP; --transport sse for legacy HTTP+SSE). For a stdio server,
    /// give `-- COMMAND [ARGS...]` instead.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// After `--`: the command that runs a stdio server, and its arguments (run without a shell).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// What the URL speaks: http (Streamable HTTP, the default) or sse (legacy HTTP+SSE, tried
    /// after Streamable HTTP).
    #[arg(long, value_enum, value_name = "http|sse")]
    pub transport: Option<RemoteTransport>,
    /// A header for every request to the URL, 'Name: value' (repeat for more); `${VAR}` in the value
    /// comes from Portico's environment when it connects.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// An environment variable for a stdio server (repeat for more): NAME takes its value from
    /// Portico's environment when the server starts, NAME=value sets it.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Write the entry and return, without waiting for the server to start.
    #[arg(long)]
    pub no_wait: bool,
    /// A server from the MCP registry (NAME is a registry name such as io.github.owner/server):
    /// name its entry this instead of the registry name's last part.
    #[arg(long = "as", value_name = "ENTRY")]
    pub entry_name: Option<String>,
    /// A server from the MCP registry: run it this way when it offers several (npm, pypi, oci,
    /// remote).
    #[arg(long, value_name = "npm|pypi|oci|remote")]
    pub prefer: Option<String>,
    /// A registry server whose URL is on this machine or a private network (a company's own
    /// server): let Portico reach it (`allow_private_network = true` in its entry).
    #[arg(long)]
    pub allow_private_network: bool,
    #[command(flatten)]
    pub standalone: crate::cli::Standalone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RemoteTransport {
    Http,
    Sse,
}

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// The server's name, as `portico servers` shows it.
    pub name: String,
    /// Keep printing new lines as the server writes them, until Ctrl-C.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N kept lines.
    #[arg(short = 'n', long = "lines", value_name = "N")]
    pub lines: Option<usize>,
    #[command(flatten)]
    pub standalone: crate::cli::RefusedStandalone,
}

#[derive(Debug, clap::Args)]
pub struct NameArg {
    /// The server's name, as `portico servers` shows it.
    pub name: String,
}

/// `portico add`.
pub async fn add(
    explicit: Option<&Path>,
    standalone: bool,
    args: AddArgs,
) -> anyhow::Result<ExitCode> {
    if args.url.is_none() && args.command.is_empty() && args.name.contains('/') {
        return crate::registry_cli::add(explicit, standalone, &args).await;
    }
    if args.entry_name.is_some() || args.prefer.is_some() || args.allow_private_network {
        bail!(
            "--as, --prefer and --allow-private-network are for a server from the MCP registry (`portico add io.github.owner/server`)"
        );
    }
    let server = new_entry(&args)?;
    add_entry(
        explicit,
        standalone,
        &server,
        &plain_text_secrets(&args),
        args.no_wait,
    )
    .await
}

/// Writes `server` into the config (the file the daemon follows), says so with `warnings`, then,
/// unless `no_wait`, waits for it and reports what it offers: `portico add`'s work once it has an
/// entry, whoever made it.
pub async fn add_entry(
    explicit: Option<&Path>,
    standalone: bool,
    server: &portico_config::import::ImportedServer,
    warnings: &[String],
    no_wait: bool,
) -> anyhow::Result<ExitCode> {
    let name = server.name.as_str();
    let place = Place::find(explicit, standalone).await?;
    let existing = place.read()?;
    let text = edit::add_server(&place.shown(), existing.as_deref(), server)?;
    let before = place.config_status().await;
    crate::import_cli::write_file(&place.target, &text, existing.is_some())?;
    println!("added `{name}` to {}", place.shown());
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    if no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    match &place.daemon {
        Some(daemon) => {
            wait_for_reload(daemon, &before, |servers| find(servers, name).is_some()).await?;
            let status = wait_started(daemon, name).await?;
            Ok(report(&status, Some(daemon), Some(&place.target)))
        }
        None => {
            let status = start_here(&place.target, name).await?;
            Ok(report(&status, None, Some(&place.target)))
        }
    }
}

/// `portico remove`.
pub async fn remove(
    explicit: Option<&Path>,
    standalone: bool,
    name: &str,
) -> anyhow::Result<ExitCode> {
    let place = Place::find(explicit, standalone).await?;
    let Some(text) = place.read()? else {
        bail!(
            "there is no config file at {}, so no server `{name}` to remove",
            place.shown()
        );
    };
    let removed = edit::remove_server(&place.shown(), &text, name)?;
    let before = place.config_status().await;
    crate::import_cli::write_file(&place.target, &removed.text, true)?;
    println!(
        "removed `{name}` ({}) from {}",
        edit::describe(&removed.server),
        place.shown()
    );
    if let Some(daemon) = &place.daemon {
        wait_for_reload(daemon, &before, |servers| find(servers, name).is_none()).await?;
        println!("{} stopped it", daemon.describe());
    }
    Ok(ExitCode::SUCCESS)
}

/// `portico enable` and `portico disable`.
pub async fn set_enabled(
    explicit: Option<&Path>,
    standalone: bool,
    name: &str,
    enabled: bool,
) -> anyhow::Result<ExitCode> {
    let place = Place::find(explicit, standalone).await?;
    let Some(text) = place.read()? else {
        bail!(
            "there is no config file at {}, so no server `{name}` to {}",
            place.shown(),
            if enabled { "enable" } else { "disable" }
        );
    };
    let word = if enabled { "enabled" } else { "disabled" };
    let before = place.config_status().await;
    match edit::set_enabled(&place.shown(), &text, name, enabled)? {
        Some(text) => {
            crate::import_cli::write_file(&place.target, &text, true)?;
            println!("{word} `{name}` in {}", place.shown());
        }
        None => println!("`{name}` is already {word} in {}", place.shown()),
    }
    match (&place.daemon, enabled) {
        (Some(daemon), false) => {
            let off = |servers: &[ServerStatus]| {
                find(servers, name).is_some_and(|s| s.state == ServerState::Disabled)
            };
            wait_for_reload(daemon, &before, off).await?;
            println!("{} stopped it", daemon.describe());
            Ok(ExitCode::SUCCESS)
        }
        (Some(daemon), true) => {
            enable_in_daemon(daemon, name).await?;
            let status = wait_started(daemon, name).await?;
            Ok(report(&status, Some(daemon), Some(&place.target)))
        }
        (None, false) => Ok(ExitCode::SUCCESS),
        (None, true) => {
            let status = start_here(&place.target, name).await?;
            Ok(report(&status, None, Some(&place.target)))
        }
    }
}

/// `portico restart`: only a daemon has a server running to restart.
pub async fn restart(standalone: bool, name: &str) -> anyhow::Result<ExitCode> {
    let daemon = needs_daemon(standalone, "restart").await?;
    let Some(daemon) = daemon else {
        bail!(
            "nothing is running to restart: no daemon runs (`portico serve` starts one). Without a daemon each command starts the servers it needs afresh (`portico tools --server {name}` connects `{name}` now)"
        );
    };
    let servers = crate::oneview_cli::daemon_servers(&daemon).await?;
    if find(&servers, name).is_none() {
        bail!(
            "{} has no server `{name}`; it has: {}",
            daemon.describe(),
            crate::output::names(servers.iter().map(|s| s.name.as_str()))
        );
    }
    let path = format!("/api/servers/{}/restart", path_segment(name));
    let (status, body) = daemon.send(reqwest::Method::POST, &path).await?;
    if status != 202 {
        bail!("{} did not restart `{name}`: {}", daemon.describe(), body);
    }
    println!("{} is restarting `{name}`", daemon.describe());
    let status = wait_started(&daemon, name).await?;
    Ok(report(&status, Some(&daemon), None))
}

/// `portico stop`: asks the daemon to stop as a first Ctrl-C does, and waits until its process has
/// exited. Without a daemon there is nothing to do, which is not an error: `stop` can be run
/// whatever the state.
pub async fn stop(standalone: bool) -> anyhow::Result<ExitCode> {
    let Some(daemon) = needs_daemon(standalone, "stop").await? else {
        println!("no daemon running");
        return Ok(ExitCode::SUCCESS);
    };
    let (status, body) = daemon.send(reqwest::Method::POST, "/api/shutdown").await?;
    if status == 404 {
        bail!(
            "{} has no /api/shutdown (an older Portico); stop it with `kill {}`",
            daemon.describe(),
            daemon.info.pid
        );
    }
    if status != 202 {
        bail!("{} did not stop: {body}", daemon.describe());
    }
    let stopping: portico_daemon::Stopping = serde_json::from_str(&body)
        .with_context(|| format!("{} answered /api/shutdown with {body}", daemon.describe()))?;
    if std::io::stderr().is_terminal() && !crate::oneview_cli::quiet() {
        eprintln!(
            "stopping {} (calls in progress finish first)…",
            daemon.describe()
        );
    }
    let info = portico_daemon::InfoFile::in_dir(&portico_config::data_dir());
    let started = Instant::now();
    while process_alive(stopping.pid) || info.read().is_some_and(|i| i.pid == stopping.pid) {
        if started.elapsed() > STOP_WAIT {
            bail!(
                "{} is still running after {} s; its log says what it waits for. `kill -9 {}` stops it at once",
                daemon.describe(),
                STOP_WAIT.as_secs(),
                stopping.pid
            );
        }
        tokio::time::sleep(POLL).await;
    }
    println!("stopped the daemon (pid {})", stopping.pid);
    Ok(ExitCode::SUCCESS)
}

/// `portico logs`: what the server wrote to stderr, as the daemon that runs it kept it.
pub async fn logs(standalone: bool, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    let Some(daemon) = needs_daemon(standalone, "logs").await? else {
        bail!(
            "no daemon is running, and a server's stderr is kept by the daemon that runs it: start one with `portico serve`, then `portico logs {name}` shows what `{name}` writes (`portico tools --server {name}` starts it once here, its stderr in the log with -v)"
        );
    };
    let mut query = Vec::new();
    if let Some(lines) = args.lines {
        query.push(format!("lines={lines}"));
    }
    if args.follow {
        query.push("follow=1".to_string());
    }
    let path = format!(
        "/api/mcp/servers/{}/logs{}{}",
        path_segment(name),
        if query.is_empty() { "" } else { "?" },
        query.join("&")
    );
    if !args.follow {
        let answer = daemon.get(&path, None).await?;
        let logs: portico_daemon::ServerLogs = serde_json::from_value(answer)
            .with_context(|| format!("the daemon's answer to {path} is not a server's log"))?;
        let mut out = String::new();
        for line in &logs.lines {
            out.push_str(&crate::output::printable(&line.text));
            out.push('\n');
        }
        crate::cli::print_now(out)?;
        if logs.lines.is_empty() && !crate::oneview_cli::quiet() {
            eprintln!(
                "`{name}` has written nothing to stderr in {}",
                daemon.describe()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    follow_logs(&daemon, name, &path).await
}

/// `portico logs -f`: the lines as they come, until the server is removed, the daemon stops, or
/// Ctrl-C.
async fn follow_logs(daemon: &Daemon, name: &str, path: &str) -> anyhow::Result<ExitCode> {
    // As long as the user watches: the stream ends with the server or the daemon.
    const FOLLOW_FOR: Duration = Duration::from_secs(365 * 24 * 60 * 60);
    let response = daemon
        .request(reqwest::Method::GET, path)
        .timeout(FOLLOW_FOR)
        .send()
        .await
        .with_context(|| format!("{} did not answer {path}", daemon.describe()))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let error = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("HTTP {status}"));
        bail!("{}: {error}", daemon.describe());
    }
    let mut events = portico_net::sse::ResponseEvents::from_response(
        response,
        portico_net::sse::SseLimits::default(),
    );
    while let Some(event) = events.next().await {
        let event =
            event.with_context(|| format!("reading {name}'s log from {}", daemon.describe()))?;
        match event.event.as_str() {
            portico_daemon::LOG_LINE_EVENT => {
                let line: portico_daemon::LogRecord = serde_json::from_str(&event.data)
                    .with_context(|| format!("a log line from {} is not one", daemon.describe()))?;
                crate::cli::print_now(format!("{}\n", crate::output::printable(&line.text)))?;
            }
            portico_daemon::LOG_MISSED_EVENT => {
                eprintln!(
                    "(some lines were skipped: `{name}` wrote faster than they could be shown)"
                );
            }
            portico_daemon::LOG_REMOVED_EVENT => {
                eprintln!("`{name}` was removed from the config");
                return Ok(ExitCode::SUCCESS);
            }
            _ => {}
        }
    }
    eprintln!("{} stopped", daemon.describe());
    Ok(ExitCode::SUCCESS)
}

/// The running daemon for a command that only a daemon can answer; `--standalone` is refused.
async fn needs_daemon(standalone: bool, command: &str) -> anyhow::Result<Option<Daemon>> {
    if standalone {
        bail!("`portico {command}` acts on the running daemon; it has no --standalone form");
    }
    Ok(Daemon::running().await)
}

/// The config file to edit and the daemon that follows it, if one runs.
struct Place {
    target: PathBuf,
    daemon: Option<Daemon>,
}

impl Place {
    async fn find(explicit: Option<&Path>, standalone: bool) -> anyhow::Result<Place> {
        let ours = portico_config::path_to_write(explicit);
        let daemon = match standalone {
            true => None,
            false => Daemon::running().await,
        };
        let Some(daemon) = daemon else {
            return Ok(Place {
                target: ours,
                daemon: None,
            });
        };
        let named =
            explicit.is_some() || std::env::var_os("PORTICO_CONFIG").is_some_and(|v| !v.is_empty());
        let theirs = crate::oneview_cli::daemon_config_source(&daemon).await;
        let target = match choose_file(theirs.as_deref(), &ours, named) {
            Choice::Ours => ours,
            Choice::Theirs(file) => {
                if !crate::oneview_cli::quiet() {
                    eprintln!(
                        "note: {} runs {}; editing that file (--standalone edits {} instead)",
                        daemon.describe(),
                        file.display(),
                        ours.display()
                    );
                }
                file
            }
            Choice::Refuse => bail!(
                "{} runs {}, not {}, and does not follow that file: an edit there would not reach it. Edit the daemon's file (--config with its path), or pass --standalone to edit {} alone",
                daemon.describe(),
                theirs.unwrap_or_default(),
                ours.display(),
                ours.display()
            ),
        };
        Ok(Place {
            target,
            daemon: Some(daemon),
        })
    }

    fn shown(&self) -> String {
        self.target.display().to_string()
    }

    /// The file's text, `None` when there is no file yet.
    fn read(&self) -> anyhow::Result<Option<String>> {
        match std::fs::read_to_string(&self.target) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", self.shown())),
        }
    }

    /// The daemon's config status before an edit, to tell its reaction to the edit apart.
    async fn config_status(&self) -> Option<ConfigStatus> {
        match &self.daemon {
            Some(daemon) => config_status(daemon).await.ok(),
            None => None,
        }
    }
}

/// Which file an edit goes to when a daemon runs.
#[derive(Debug, PartialEq)]
enum Choice {
    /// The command's own: the daemon follows it.
    Ours,
    /// The daemon's, as the user named no file.
    Theirs(PathBuf),
    /// The user named a file the daemon does not follow.
    Refuse,
}

/// `theirs`: the config the daemon says it runs (a path, or `<embedded default>`; `None` from a
/// daemon that does not say); `ours`: the file this command would write; `named`: whether the
/// user chose it (`--config`, `$PORTICO_CONFIG`).
fn choose_file(theirs: Option<&str>, ours: &Path, named: bool) -> Choice {
    let Some(theirs) = theirs else {
        return Choice::Ours;
    };
    if theirs == ConfigSource::Embedded.to_string() {
        // A daemon without a file follows the data dir's config.toml once it exists.
        return match same_file(ours, &portico_config::default_config_path()) {
            true => Choice::Ours,
            false => Choice::Refuse,
        };
    }
    if crate::oneview_cli::same_config(theirs, &ConfigSource::File(ours.to_path_buf())) {
        Choice::Ours
    } else if named {
        Choice::Refuse
    } else {
        Choice::Theirs(PathBuf::from(theirs))
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        p.parent()
            .and_then(|dir| std::fs::canonicalize(dir).ok())
            .map(|dir| dir.join(p.file_name().unwrap_or_default()))
    };
    a == b || (canonical(a).is_some() && canonical(a) == canonical(b))
}

async fn config_status(daemon: &Daemon) -> anyhow::Result<ConfigStatus> {
    let health = daemon.get("/api/health", None).await?;
    serde_json::from_value(health["config"].clone())
        .context("the daemon's /api/health has no config status")
}

/// Waits until the daemon's servers satisfy `applied`, or its reload of the edited file is refused.
async fn wait_for_reload(
    daemon: &Daemon,
    before: &Option<ConfigStatus>,
    applied: impl Fn(&[ServerStatus]) -> bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let servers = crate::oneview_cli::daemon_servers(daemon).await?;
        if applied(&servers) {
            return Ok(());
        }
        let now = config_status(daemon).await?;
        let refused_before = before.as_ref().and_then(|b| b.error.clone());
        if now.status == ConfigLoad::Refused && now.error != refused_before {
            bail!(
                "{} refused the edited {}: {}",
                daemon.describe(),
                now.file,
                now.error.unwrap_or_default()
            );
        }
        if started.elapsed() > RELOAD_WAIT {
            bail!(
                "{} has not applied the edited {} after {} s; its log says why (`portico servers` shows what it runs)",
                daemon.describe(),
                now.file,
                RELOAD_WAIT.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Clears a run-time disable (the dashboard's) once the daemon runs the file that enables the
/// server; a server that was not disabled at run time is left as it is.
async fn enable_in_daemon(daemon: &Daemon, name: &str) -> anyhow::Result<()> {
    let path = format!("/api/servers/{}/enable", path_segment(name));
    let started = Instant::now();
    loop {
        let (status, body) = daemon.send(reqwest::Method::POST, &path).await?;
        match status {
            202 => return Ok(()),
            // Still `enabled = false` in the config it runs: the edit is not applied yet.
            409 if started.elapsed() < RELOAD_WAIT => tokio::time::sleep(POLL).await,
            404 if started.elapsed() < RELOAD_WAIT => tokio::time::sleep(POLL).await,
            _ => bail!("{} did not enable `{name}`: {body}", daemon.describe()),
        }
    }
}

/// Waits until the daemon's first attempt at `name` is over: ready, failed, or waiting for a
/// login or a retry.
async fn wait_started(daemon: &Daemon, name: &str) -> anyhow::Result<ServerStatus> {
    let started = Instant::now();
    let show = std::io::stderr().is_terminal() && !crate::oneview_cli::quiet();
    let mut shown = false;
    loop {
        let servers = crate::oneview_cli::daemon_servers(daemon).await?;
        let Some(status) = find(&servers, name) else {
            bail!("{} no longer has a server `{name}`", daemon.describe());
        };
        if !starting(status.state) || started.elapsed() > START_WAIT {
            if shown {
                eprint!("\r\x1b[2K");
            }
            return Ok(status.clone());
        }
        if show {
            // A package runner's download line is what a slow start is waiting for.
            let last = status
                .last_stderr
                .as_deref()
                .map(|line| format!(": {}", crate::output::printable(line)))
                .unwrap_or_default();
            eprint!(
                "\r\x1b[2Kwaiting for `{name}` to start… {} s{last}",
                started.elapsed().as_secs()
            );
            shown = true;
        }
        tokio::time::sleep(POLL).await;
    }
}

fn starting(state: ServerState) -> bool {
    matches!(state, ServerState::Idle | ServerState::Starting)
}

/// Connects `name` from `file` in this process and stops it again: what it offers, or why not.
async fn start_here(file: &Path, name: &str) -> anyhow::Result<ServerStatus> {
    let hub = crate::cli::start_hub(Some(file), Some(name)).await?;
    let status = find(&hub.servers(), name).cloned();
    hub.shutdown().await;
    status.with_context(|| format!("{} has no server `{name}`", file.display()))
}

fn find<'a>(servers: &'a [ServerStatus], name: &str) -> Option<&'a ServerStatus> {
    servers.iter().find(|s| s.name == name)
}

/// What a server offers once started, or why it did not start; exit 1 when it did not.
/// `file`: where the entry is, for the hint when it failed.
fn report(status: &ServerStatus, daemon: Option<&Daemon>, file: Option<&Path>) -> ExitCode {
    let name = &status.name;
    let place_name = match daemon {
        Some(daemon) => format!(" in {}", daemon.describe()),
        None => String::new(),
    };
    match status.state {
        ServerState::Ready => {
            let transport = status
                .transport_detail
                .clone()
                .unwrap_or_else(|| status.transport.clone());
            let protocol = status
                .protocol_version
                .as_deref()
                .map(|v| format!(", protocol {v}"))
                .unwrap_or_default();
            println!(
                "`{name}` is ready{place_name}: {} ({transport}{protocol})",
                offers(status)
            );
            if daemon.is_none() {
                println!(
                    "(connected in this process to check it; `portico serve` runs it for your IDEs)"
                );
            }
            ExitCode::SUCCESS
        }
        ServerState::NeedsLogin => {
            println!(
                "`{name}` needs an OAuth login: `portico auth login {name}` opens the browser once"
            );
            ExitCode::SUCCESS
        }
        ServerState::NeedsSecret => {
            // Set later, it connects without a restart (the daemon watches the store).
            for secret in &status.missing_secrets {
                println!(
                    "`{name}` needs secret {secret}: `portico secret set {secret}` stores it, and it starts"
                );
            }
            ExitCode::SUCCESS
        }
        ServerState::Disabled => {
            println!("`{name}` is disabled{place_name}");
            ExitCode::SUCCESS
        }
        ServerState::Idle | ServerState::Starting => {
            println!(
                "`{name}` is still starting{place_name} after {} s; `portico servers` shows when it is ready",
                START_WAIT.as_secs()
            );
            ExitCode::SUCCESS
        }
        ServerState::Restarting | ServerState::Failed => {
            let error = status
                .last_error
                .as_deref()
                .unwrap_or("no reason was recorded");
            // The hub's errors start with the server's name, which this line already says.
            let error = error
                .strip_prefix(&format!("server `{name}`: "))
                .unwrap_or(error);
            eprintln!(
                "`{name}` did not start{place_name}: {}",
                crate::output::printable(error)
            );
            // Shown unless the error already quotes them.
            if !status
                .stderr_tail
                .iter()
                .all(|line| error.contains(line.as_str()))
            {
                for line in &status.stderr_tail {
                    eprintln!("  | {}", crate::output::printable(line));
                }
            }
            if let Some(file) = file {
                eprintln!(
                    "The entry is kept in {}: fix it there, or `portico remove {name}`.",
                    file.display()
                );
            }
            ExitCode::FAILURE
        }
    }
}

/// `12 tools, 3 prompts, 7 resources`, leaving out what it has none of (tools always said).
fn offers(status: &ServerStatus) -> String {
    let mut parts = vec![count(status.tools, "tool")];
    if status.prompts > 0 {
        parts.push(count(status.prompts, "prompt"));
    }
    let resources = status.resources + status.resource_templates;
    if resources > 0 {
        parts.push(count(resources, "resource"));
    }
    parts.join(", ")
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A server name as one URL path segment (names `add` writes need no escaping; older entries may).
fn path_segment(name: &str) -> String {
    url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The entry `portico add` writes, from its arguments; a mistake in them is an error before
/// anything is read or written.
fn new_entry(args: &AddArgs) -> anyhow::Result<portico_config::import::ImportedServer> {
    if let Some(why) = edit::server_name_problem(&args.name) {
        // Shown on a terminal: escaped, so a newline or a bidi override in it shows as such.
        bail!(
            "`{}` cannot be a server name: {why}; e.g. `github` or `my-files`",
            portico_core::text::log_safe(&args.name)
        );
    }
    let env = args
        .env
        .iter()
        .map(|item| env_item(item))
        .collect::<anyhow::Result<Vec<_>>>()?;
    match (&args.url, args.command.split_first()) {
        (Some(_), Some(_)) => bail!(
            "give either a URL or `-- COMMAND [ARGS...]`, not both: a server is remote or runs here"
        ),
        (None, None) => bail!(
            "give the server's URL (`portico add {0} https://example.com/mcp`) or the command that runs it after `--` (`portico add {0} -- npx -y @modelcontextprotocol/server-everything`)",
            args.name
        ),
        (None, Some((command, rest))) => {
            if !args.headers.is_empty() || args.transport.is_some() {
                bail!(
                    "--header and --transport are for a server at a URL; a stdio server takes --env"
                );
            }
            if command.trim().is_empty() {
                bail!("the command after `--` is empty");
            }
            Ok(edit::stdio_server(&args.name, command, rest, env))
        }
        (Some(url), None) => {
            if !env.is_empty() {
                bail!(
                    "--env is for a server Portico starts (after `--`); a server at a URL takes --header 'Name: value' (with ${{VAR}} for a secret)"
                );
            }
            let parsed = url::Url::parse(url).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some_and(|h| !h.is_empty())
            });
            if parsed.is_none() {
                bail!(
                    "`{url}` is not an http:// or https:// URL; for a server that runs here, put its command after `--`: `portico add {} -- {url} ...`",
                    args.name
                );
            }
            let headers = args
                .headers
                .iter()
                .map(|h| header_item(h))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let sse = args.transport == Some(RemoteTransport::Sse);
            Ok(edit::remote_server(&args.name, url, sse, headers, env))
        }
    }
}

/// `--env NAME` (its value from Portico's environment, as `${NAME}`) or `--env NAME=value`.
fn env_item(item: &str) -> anyhow::Result<(String, String)> {
    let (name, value) = match item.split_once('=') {
        Some((name, value)) => (name, value.to_string()),
        None => (item, format!("${{{item}}}")),
    };
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        bail!(
            "--env `{name}`: not an environment variable name (letters, digits and `_`, not starting with a digit)"
        );
    }
    Ok((name.to_string(), value))
}

/// `--header 'Name: value'`.
fn header_item(item: &str) -> anyhow::Result<(String, String)> {
    let Some((name, value)) = item.split_once(':') else {
        bail!("--header `{item}` is not 'Name: value'");
    };
    let (name, value) = (name.trim(), value.trim());
    let token = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
    if !token {
        bail!(
            "--header: `{name}` is not a header name (letters, digits and - only, e.g. X-Api-Key)"
        );
    }
    if value.is_empty() || value.chars().any(char::is_control) {
        bail!("--header {name}: the value is empty or has control characters");
    }
    Ok((name.to_string(), value.to_string()))
}

/// Warnings for literal credentials the command line put in the file.
fn plain_text_secrets(args: &AddArgs) -> Vec<String> {
    use portico_config::import::{is_secret_name, looks_like_secret_value};
    let mut warnings = Vec::new();
    for item in &args.env {
        if let Some((name, value)) = item.split_once('=')
            && !value.contains("${")
            && (is_secret_name(name) || looks_like_secret_value(value))
        {
            warnings.push(format!(
                "the value of {name} is now in the config file in plain text; `--env {name}` (no value) takes it from Portico's environment instead"
            ));
        }
    }
    for item in &args.headers {
        if let Some((name, value)) = item.split_once(':')
            && !value.contains("${")
            && (is_secret_name(name.trim()) || looks_like_secret_value(value.trim()))
        {
            warnings.push(format!(
                "header {} is now in the config file in plain text; write its value as ${{VAR}} to take it from Portico's environment instead",
                name.trim()
            ));
        }
    }
    warnings
}

/// Whether a process with this pid runs: a signal 0 reaches it (or it belongs to another user),
/// and, where `/proc` says, it is not a zombie (exited, waiting for its parent to reap it).
fn process_alive(pid: u32) -> bool {
    let Some(raw) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    if matches!(
        rustix::process::test_kill_process(raw),
        Err(rustix::io::Errno::SRCH)
    ) {
        return false;
    }
    // `/proc/PID/stat`: "pid (comm) S ...", the state after the last `)`.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        });
    !matches!(state, Some('Z' | 'X'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, url: Option<&str>, command: &[&str]) -> AddArgs {
        AddArgs {
            standalone: Default::default(),
            name: name.into(),
            url: url.map(Into::into),
            command: command.iter().map(|s| s.to_string()).collect(),
            transport: None,
            headers: Vec::new(),
            env: Vec::new(),
            no_wait: false,
            entry_name: None,
            prefer: None,
            allow_private_network: false,
        }
    }

    #[test]
    fn the_arguments_become_one_entry_or_say_what_is_wrong() {
        let mut stdio = args("e", None, &["npx", "-y", "pkg; rm -rf /"]);
        stdio.env = vec!["TOKEN".into(), "MODE=fast".into()];
        let entry = new_entry(&stdio).unwrap();
        assert_eq!(
            entry.env,
            vec![
                ("TOKEN".to_string(), "${TOKEN}".to_string()),
                ("MODE".to_string(), "fast".to_string())
            ]
        );
        match entry.transport {
            portico_config::import::ImportedTransport::Stdio { command, args, .. } => {
                assert_eq!(command, "npx");
                // Carried as one argv element, never through a shell.
                assert_eq!(args, ["-y", "pkg; rm -rf /"]);
            }
            other => panic!("{other:?}"),
        }
        let error = |a: &AddArgs| new_entry(a).unwrap_err().to_string();
        assert!(error(&args("e", None, &[])).starts_with("give the server's URL"));
        assert!(error(&args("e", Some("npx"), &[])).starts_with("`npx` is not an http://"));
        assert!(error(&args("e", Some("file:///x"), &[])).contains("not an http://"));
        assert!(error(&args("../e", Some("http://x"), &[])).contains("cannot be a server name"));
        assert_eq!(
            error(&args("bad\nname\u{202e}", Some("http://x"), &[])),
            "`bad\\nname\\u{202e}` cannot be a server name: only ASCII letters, digits, `-`, `_` and `.` are allowed; e.g. `github` or `my-files`"
        );
        let mut remote = args("r", Some("https://x.example/mcp"), &[]);
        remote.headers = vec!["Authorization: Bearer ${TOKEN}".into()];
        remote.transport = Some(RemoteTransport::Sse);
        let entry = new_entry(&remote).unwrap();
        assert!(!entry.allow_private_network);
        match entry.transport {
            portico_config::import::ImportedTransport::Remote { kind, headers, .. } => {
                assert_eq!(kind, "sse");
                assert_eq!(
                    headers,
                    [("Authorization".to_string(), "Bearer ${TOKEN}".to_string())]
                );
            }
            other => panic!("{other:?}"),
        }
        remote.headers = vec!["Bad Name: x".into()];
        assert!(error(&remote).contains("not a header name"));
        remote.headers = vec!["X: a\rb".into()];
        assert!(error(&remote).contains("control characters"));
        remote.headers = vec![];
        remote.env = vec!["A=b".into()];
        assert!(error(&remote).starts_with("--env is for a server Portico starts"));
        let mut bad_env = args("e", None, &["x"]);
        bad_env.env = vec!["1A=b".into()];
        assert!(error(&bad_env).contains("not an environment variable name"));
    }

    #[test]
    fn literal_credentials_are_warned_of() {
        let mut a = args("e", None, &["x"]);
        a.env = vec![
            "GITHUB_TOKEN=ghp_x".into(),
            "MODE=fast".into(),
            "API_KEY=${KEY}".into(),
        ];
        a.headers = vec!["Authorization: Bearer abc".into(), "Accept: x".into()];
        let warnings = plain_text_secrets(&a);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("GITHUB_TOKEN"));
        assert!(warnings[1].contains("Authorization"));
    }

    #[test]
    fn an_edit_goes_to_the_file_the_daemon_follows_or_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("config.toml");
        std::fs::write(&ours, "").unwrap();
        let theirs = dir.path().join("other.toml");
        let ours_text = ours.display().to_string();
        assert_eq!(choose_file(None, &ours, true), Choice::Ours);
        assert_eq!(choose_file(Some(&ours_text), &ours, true), Choice::Ours);
        let dotted = dir.path().join(".").join("config.toml");
        assert_eq!(
            choose_file(Some(&dotted.display().to_string()), &ours, true),
            Choice::Ours
        );
        let other = theirs.display().to_string();
        assert_eq!(
            choose_file(Some(&other), &ours, false),
            Choice::Theirs(theirs.clone())
        );
        assert_eq!(choose_file(Some(&other), &ours, true), Choice::Refuse);
        // A daemon on its embedded default follows only the data dir's config.toml.
        assert_eq!(
            choose_file(Some("<embedded default>"), &ours, true),
            Choice::Refuse
        );
    }

    #[test]
    fn names_go_into_paths_as_one_segment() {
        assert_eq!(path_segment("my-files.v2"), "my-files.v2");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }
}
