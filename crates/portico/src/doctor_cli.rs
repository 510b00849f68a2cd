//! `portico doctor`: one line per check of what a working setup needs (the config file, the
//! environment it needs, the listen port, the daemon, each server's handshake), each `ok`, `warn` or
//! `FAIL` with the fix; and `portico config check`, which reports the file's problems and warns of
//! what this environment lacks.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use portico_config::{Config, ConfigSource, DEFAULT_CONFIG, Finding, FindingKind, McpServerConfig};
use portico_daemon::{ConfigIdentity, DaemonInfo, InfoFile};
use portico_mcp::{StopGrace, Upstream};
use serde::Serialize;

use crate::stdio_door::{DaemonCheck, check_daemon};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON: {"ok": bool, "checks": [{"check", "status", "message", "fix"?, "millis"?}]}.
    #[arg(long)]
    pub json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Check {
    /// What was checked: `config`, `env`, `command`, `port`, `daemon`, `server`.
    check: &'static str,
    status: Status,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
    /// How long it took, for server handshakes.
    #[serde(skip_serializing_if = "Option::is_none")]
    millis: Option<u64>,
}

impl Check {
    fn new(check: &'static str, status: Status, message: impl Into<String>) -> Self {
        Check {
            check,
            status,
            message: message.into(),
            fix: None,
            millis: None,
        }
    }

    fn fix(mut self, fix: Option<String>) -> Self {
        self.fix = fix;
        self
    }

    fn line(&self) -> String {
        let label = match self.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        let mut line = format!("{label:<4}  {}", crate::output::printable(&self.message));
        if let Some(fix) = &self.fix {
            line.push_str("; fix: ");
            line.push_str(fix);
        }
        line
    }
}

pub async fn run(explicit: Option<&Path>, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let checks = checks(explicit).await;
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    let text = if args.json {
        serde_json::to_string_pretty(&serde_json::json!({
            "ok": failed == 0,
            "checks": checks,
        }))? + "\n"
    } else {
        let mut text: String = checks.iter().map(|c| c.line() + "\n").collect();
        text.push_str(&match (failed, warned) {
            (0, 0) => format!("all {} checks passed\n", checks.len()),
            _ => format!(
                "{} checks: {failed} failed, {warned} warning(s)\n",
                checks.len()
            ),
        });
        text
    };
    crate::cli::print_now(text)?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn checks(explicit: Option<&Path>) -> Vec<Check> {
    let mut checks = Vec::new();
    let source = portico_config::locate(explicit);
    let text = match config_text(&source) {
        Ok(text) => Some(text),
        Err(error) => {
            checks.push(
                Check::new("config", Status::Fail, format!("{error:#}")).fix(Some(
                    "create it, or point --config (or PORTICO_CONFIG) at an existing file".into(),
                )),
            );
            None
        }
    };
    let config = text
        .as_deref()
        .and_then(|text| config_checks(explicit, &source, text, &mut checks));
    let vars = config.as_ref().map(|config| {
        let store = portico_secrets::SecretStore::for_config(config);
        checks.push(secrets_check(&store));
        portico_secrets::Vars::with_store(store)
    });
    let findings = match (&vars, &text) {
        (Some(vars), Some(text)) => {
            portico_config::environment_findings(text, &|name| vars.get(name))
        }
        _ => Vec::new(),
    };
    for finding in &findings {
        checks.push(environment_check(&source, finding));
    }

    let daemon = InfoFile::in_dir(&portico_config::data_dir());
    let (daemon_check, proven) = daemon_checks(&daemon, &source, text.as_deref()).await;
    if let Some(config) = &config {
        checks.push(port_check(config, proven.as_ref()));
    }
    checks.push(daemon_check);

    if let (Some(config), Some(vars)) = (&config, &vars) {
        checks.extend(server_checks(config, &findings, vars).await);
    }
    portico_mcp::reap_dropped_children(Duration::from_secs(2)).await;
    checks
}

fn config_text(source: &ConfigSource) -> anyhow::Result<String> {
    match source {
        ConfigSource::File(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display())),
        ConfigSource::Embedded => Ok(DEFAULT_CONFIG.to_string()),
    }
}

/// The file's problems, one line each; the loaded config when there are none.
fn config_checks(
    explicit: Option<&Path>,
    source: &ConfigSource,
    text: &str,
    checks: &mut Vec<Check>,
) -> Option<Config> {
    // Another client's JSON given as the config: one line naming `portico import`.
    if let Some(hint) = portico_config::json_config_hint(&source.to_string(), text) {
        checks.push(Check::new(
            "config",
            Status::Fail,
            format!("config: {hint}"),
        ));
        return None;
    }
    let problems = portico_config::check(text);
    if !problems.is_empty() {
        for problem in problems {
            let message = format!(
                "config: {source}:{}:{}: {}",
                problem.line, problem.column, problem.message
            );
            checks.push(Check::new("config", Status::Fail, message).fix(problem.hint));
        }
        return None;
    }
    // Loading also reads the agents directory, whose files have problems of their own.
    match portico_config::load(explicit) {
        Ok((config, _)) => {
            checks.push(Check::new(
                "config",
                Status::Ok,
                format!("config: {source}: no problems"),
            ));
            Some(config)
        }
        Err(error) => {
            checks.push(Check::new(
                "config",
                Status::Fail,
                format!("config: {error}"),
            ));
            None
        }
    }
}

/// Where secrets are kept, and how many: a line of its own.
fn secrets_check(store: &portico_secrets::SecretStore) -> Check {
    use portico_secrets::Backend;
    let stored = match store.names() {
        Ok(names) => names.len(),
        Err(error) => {
            return Check::new("secrets", Status::Fail, format!("secrets: {error}"));
        }
    };
    match store.backend() {
        Backend::Unusable { why } => Check::new(
            "secrets",
            Status::Fail,
            format!("secrets: [secrets] store = \"keyring\", but the OS keyring cannot be used here: {why}"),
        )
        .fix(Some(
            "set [secrets] store = \"auto\" (the keyring where usable, else a file) or \"file\"".into(),
        )),
        backend => Check::new(
            "secrets",
            Status::Ok,
            format!("secrets: kept in {backend}; {stored} stored"),
        ),
    }
}

fn environment_check(source: &ConfigSource, finding: &Finding) -> Check {
    // An unset `${VAR}` is a warning, as `config check` calls it: the server waits for the secret
    // (marked `needs secret`) and starts once it is set; a missing command never starts.
    let (check, status) = match finding.kind {
        FindingKind::UnsetVariable { .. } => ("env", Status::Warn),
        FindingKind::MissingCommand { .. } => ("command", Status::Fail),
    };
    let problem = &finding.problem;
    Check::new(
        check,
        status,
        format!(
            "{check}: {source}:{}:{}: {}",
            problem.line, problem.column, problem.message
        ),
    )
    .fix(problem.hint.clone())
}

/// Whether the listen address is free, or taken by the daemon this file names.
fn port_check(config: &Config, daemon: Option<&DaemonInfo>) -> Check {
    let Some(listen) = portico_config::listen_address(&config.server.listen) else {
        // `config check` has reported it.
        return Check::new(
            "port",
            Status::Fail,
            format!(
                "port: [server] listen `{}` is not an address",
                config.server.listen
            ),
        );
    };
    match std::net::TcpListener::bind(listen) {
        Ok(listener) => {
            drop(listener);
            Check::new("port", Status::Ok, format!("port: {listen} is free"))
        }
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => match daemon {
            Some(info) if info.address.port() == listen.port() => Check::new(
                "port",
                Status::Ok,
                format!(
                    "port: {listen} is in use by the running daemon (pid {})",
                    info.pid
                ),
            ),
            _ => Check::new(
                "port",
                Status::Fail,
                format!("port: {listen} is in use by another program (not a Portico daemon)"),
            )
            .fix(Some(
                "stop that program, or change [server] listen to a free port".into(),
            )),
        },
        Err(error) => Check::new(
            "port",
            Status::Fail,
            format!(
                "port: cannot listen on {listen}: {}",
                portico_net::root_cause(&error)
            ),
        )
        .fix(Some("change [server] listen".into())),
    }
}

/// The daemon's state, and the daemon when one proved it wrote the info file.
async fn daemon_checks(
    file: &InfoFile,
    source: &ConfigSource,
    text: Option<&str>,
) -> (Check, Option<DaemonInfo>) {
    let Some(info) = file.read() else {
        return (
            Check::new("daemon", Status::Ok, "daemon: not running"),
            None,
        );
    };
    let at = format!("pid {} at {}", info.pid, info.base_url());
    match check_daemon(&info).await {
        DaemonCheck::NoAnswer => {
            return (
                Check::new(
                    "daemon",
                    Status::Ok,
                    format!(
                        "daemon: not running ({} is left from {at}, which does not answer)",
                        file.path().display()
                    ),
                ),
                None,
            );
        }
        DaemonCheck::Impostor(what) => {
            return (
                Check::new(
                    "daemon",
                    Status::Warn,
                    format!("daemon: {} names {at}, but {what}", file.path().display()),
                )
                .fix(Some(
                    "if the daemon is gone, remove that file; if it runs, restart it".into(),
                )),
                None,
            );
        }
        DaemonCheck::Proven => {}
    }
    let ours = text.map(|text| ConfigIdentity::of(source, text));
    let check = match (&info.config, &ours) {
        (None, _) => Check::new(
            "daemon",
            Status::Warn,
            format!("daemon: running ({at}), but it does not say which config it runs"),
        )
        .fix(Some(
            "restart it (`portico serve`) so doctor can compare".into(),
        )),
        (Some(theirs), Some(ours)) if !same_source(&theirs.source, &ours.source) => Check::new(
            "daemon",
            Status::Warn,
            format!(
                "daemon: running ({at}) with {}, not {}: it and the IDEs it serves see another config than this command",
                theirs.source, ours.source
            ),
        )
        .fix(Some(format!(
            "restart the daemon with this config, or pass --config {}",
            theirs.source
        ))),
        (Some(theirs), Some(ours)) if theirs.sha256 != ours.sha256 => Check::new(
            "daemon",
            Status::Warn,
            format!(
                "daemon: running ({at}) with {}, but the file changed since the daemon read it",
                theirs.source
            ),
        )
        .fix(Some(
            "the daemon reloads the file within a second of a save it can run; if this stays, `portico servers` says why it refused the edit".into(),
        )),
        (Some(theirs), _) => Check::new(
            "daemon",
            Status::Ok,
            format!(
                "daemon: running ({at}) with this config ({}, unchanged)",
                theirs.source
            ),
        ),
    };
    (check, Some(info))
}

fn same_source(a: &str, b: &str) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// The identity of the config `portico serve` loaded from `source` (read again: `load` does not
/// hand back its text; `None` if the file cannot be read now).
pub fn config_identity(source: &ConfigSource) -> Option<ConfigIdentity> {
    ConfigIdentity::read(source)
}

/// Each enabled server's handshake and listing, all at once, each within its
/// `startup_timeout_secs`.
/// Servers whose command is missing are left out: their line is above.
async fn server_checks(
    config: &Config,
    findings: &[Finding],
    vars: &portico_secrets::Vars,
) -> Vec<Check> {
    let missing = |server: &McpServerConfig| {
        findings.iter().any(|f| {
            matches!(&f.kind, FindingKind::MissingCommand { server: name, .. } if *name == server.name)
        })
    };
    // A server that waits only for these is reported once, by its `env` warning above.
    let unset: Vec<String> = findings
        .iter()
        .filter_map(|f| match &f.kind {
            FindingKind::UnsetVariable { name } => Some(name.clone()),
            FindingKind::MissingCommand { .. } => None,
        })
        .collect();
    let started = Instant::now();
    let running: Vec<_> = config
        .mcp_servers
        .iter()
        .filter(|server| !missing(server))
        .map(|server| {
            let log = portico_mcp::ServerLog::default();
            let task = server.enabled.then(|| {
                tokio::spawn(handshake(
                    server.clone(),
                    vars.clone(),
                    log.clone(),
                    unset.clone(),
                ))
            });
            (server.name.clone(), task, log)
        })
        .collect();
    let progress = show_starting(
        running
            .iter()
            .filter_map(|(name, task, log)| {
                let task = task.as_ref()?;
                Some((name.clone(), task.abort_handle(), log.clone()))
            })
            .collect(),
        started,
    );
    let mut checks = Vec::new();
    if config.mcp_servers.is_empty() {
        checks.push(
            Check::new("server", Status::Warn, "servers: none configured").fix(Some(
                "add [[mcp_servers]] entries to the config (see the README's Configure section)"
                    .into(),
            )),
        );
    }
    for (name, task, _) in running {
        checks.extend(match task {
            None => Some(Check::new(
                "server",
                Status::Ok,
                format!("server `{name}`: disabled"),
            )),
            Some(task) => task.await.unwrap_or_else(|error| {
                Some(Check::new(
                    "server",
                    Status::Fail,
                    format!("server `{name}`: the check itself failed: {error}"),
                ))
            }),
        });
    }
    progress.abort();
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    checks
}

/// On a terminal, which servers are still starting, for how long, and the last line the slowest
/// one wrote to stderr (a cold `npx -y` downloading), redrawn each second until every handshake is
/// done: a start that takes a minute is visibly busy, not hung.
fn show_starting(
    servers: Vec<(String, tokio::task::AbortHandle, portico_mcp::ServerLog)>,
    started: Instant,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if !std::io::stderr().is_terminal() || crate::oneview_cli::quiet() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let waiting: Vec<&(String, tokio::task::AbortHandle, portico_mcp::ServerLog)> = servers
                .iter()
                .filter(|(_, task, _)| !task.is_finished())
                .collect();
            let Some((_, _, slowest)) = waiting.first() else {
                return;
            };
            let names: Vec<&str> = waiting.iter().map(|(name, _, _)| name.as_str()).collect();
            let doing = slowest
                .last_line()
                .map(|line| format!(": {}", crate::output::printable(&line)))
                .unwrap_or_default();
            let line = format!(
                "starting {} ({}s){doing}",
                names.join(", "),
                started.elapsed().as_secs()
            );
            eprint!("\r\x1b[2K{}", crate::progress::fit_to_terminal(&line));
        }
    })
}

/// The server's check; `None` when it waits only for `unset` variables, already reported.
async fn handshake(
    server: McpServerConfig,
    vars: portico_secrets::Vars,
    log: portico_mcp::ServerLog,
    unset: Vec<String>,
) -> Option<Check> {
    let started = Instant::now();
    let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
    // With the stored OAuth token, if any; doctor never opens a browser.
    let home = portico_mcp::oauth::OAuthHome {
        browser: None,
        ..portico_mcp::oauth::OAuthHome::in_data_dir(&portico_config::data_dir())
    };
    let auth = portico_mcp::oauth::UpstreamAuth::for_server(&server, &home);
    let connected =
        Upstream::connect_logged(&server, events, StopGrace::BRIEF, auth, &vars, &log).await;
    let (upstream, exit) = match connected {
        Ok(pair) => pair,
        Err(portico_mcp::UpstreamError::NeedsSecret { names, .. })
            if names.iter().all(|name| unset.contains(name)) =>
        {
            return None;
        }
        Err(error) => {
            let millis = elapsed_millis(started);
            // The error says what failed and, where it can, what to do.
            let mut check = Check::new("server", Status::Fail, error.to_string());
            check.millis = Some(millis);
            return Some(check);
        }
    };
    let listed = upstream.list_catalog().await;
    let millis = elapsed_millis(started);
    let info = upstream.info().clone();
    upstream.shutdown();
    exit.wait().await;
    let mut check = match listed {
        Ok(catalog) => Check::new(
            "server",
            Status::Ok,
            format!(
                "server `{}`: ready in {millis} ms ({}, {}, {} tool(s))",
                server.name,
                info.transport,
                info.protocol_version,
                catalog.tools.len()
            ),
        ),
        Err(error) => Check::new("server", Status::Fail, error.to_string()),
    };
    check.millis = Some(millis);
    Some(check)
}

fn elapsed_millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// `portico config check`: every problem of the file (exit 2 when there is one), then what this
/// environment lacks for it as warnings (exit 0: the file is fine).
pub fn config_check(explicit: Option<&Path>) -> anyhow::Result<ExitCode> {
    let source = portico_config::locate(explicit);
    let origin = source.to_string();
    let text = config_text(&source)?;
    if let Some(hint) = portico_config::json_config_hint(&origin, &text) {
        println!("{hint}");
        return Ok(ExitCode::from(2));
    }
    let problems = portico_config::check(&text);
    if !problems.is_empty() {
        for problem in &problems {
            println!("{origin}:{problem}");
        }
        println!("{} problem(s) found", problems.len());
        return Ok(ExitCode::from(2));
    }
    // Unset variables the secret store has are no warning: a server finds them there.
    let vars = match portico_config::parse(&origin, &text) {
        Ok(config) => {
            portico_secrets::Vars::with_store(portico_secrets::SecretStore::for_config(&config))
        }
        Err(_) => portico_secrets::Vars::environment(),
    };
    let findings = portico_config::environment_findings(&text, &|name| vars.get(name));
    for finding in &findings {
        let problem = &finding.problem;
        let hint = problem
            .hint
            .as_deref()
            .map(|h| format!(" (hint: {h})"))
            .unwrap_or_default();
        println!(
            "{origin}:{}:{}: warning: {}{hint}",
            problem.line, problem.column, problem.message
        );
    }
    match findings.len() {
        0 => println!("{origin}: ok"),
        n => println!(
            "{origin}: ok, with {n} warning(s) about this environment (`portico doctor` checks more)"
        ),
    }
    Ok(ExitCode::SUCCESS)
}
