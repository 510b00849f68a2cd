//! One view: when a daemon runs, `portico servers|tools|call|chat|agents|audit|conversations` ask it
//! (its `/api` routes, and `/mcp` for calls), so they show what its IDEs see; `--standalone` (or no
//! daemon) runs them in this process as before. `portico tools` lists the whole catalog the doors
//! serve, built-ins and agents too, each tool with its source.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use portico_config::ConfigSource;
use portico_core::ServerStatus;
use portico_engine::Engine;
use portico_pipeline::Principal;
use portico_store::{AuditEntry, ConversationCursor};
use serde_json::{Value, json};

use crate::cli::{Cli, Command, print_now};
use crate::daemon_client::Daemon;
use crate::output;

/// Flags every command takes.
#[derive(Debug, clap::Args)]
pub struct GlobalFlags {
    /// Print only errors on stderr: no progress, notes or warnings. PORTICO_LOG overrides.
    #[arg(short, long, global = true, conflicts_with = "verbose", help_heading = crate::cli::GLOBAL)]
    pub quiet: bool,
    /// How log lines on stderr are written: text, or json (one object per line). Default: text, or
    /// $PORTICO_LOG_FORMAT.
    #[arg(long, global = true, value_name = "FORMAT", value_enum, help_heading = crate::cli::GLOBAL)]
    pub log_format: Option<LogFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-q`: set once at start, read where the CLI prints notes and warnings itself.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Commands only a daemon answers have nothing to run standalone.
pub fn refuse_standalone(standalone: bool, command: &str) -> anyhow::Result<()> {
    if standalone {
        bail!(
            "`portico {command}` talks to the running daemon, which holds what it answers; it has no --standalone form"
        );
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum ConversationsCommand {
    /// List stored conversations, most recently active first: id, agent, messages, updated, title.
    List {
        /// Only this agent's.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// At most this many (1 to 200).
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
        /// Start after this point: a previous page's `next_cursor` (shown with --json).
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// Print {"conversations": [...], "next_cursor": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Show one conversation's messages in order. Without an id: the most recent conversations,
    /// to pick one from.
    Show {
        /// The conversation's id, as the list shows it (c_...).
        id: Option<String>,
        /// Print {"conversation": ..., "messages": [...]}.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `cli`'s command through the running daemon when it is one the daemon can answer, no
/// `--standalone` was given and a daemon runs; `None` means: run it in this process.
pub async fn through_daemon(cli: &Cli) -> anyhow::Result<Option<ExitCode>> {
    let answerable = matches!(
        &cli.command,
        Command::Servers { .. }
            | Command::Tools { .. }
            | Command::Call(_)
            | Command::Agents { .. }
            | Command::Chat { .. }
            | Command::Conversations { .. }
    ) || matches!(&cli.command, Command::Audit(args) if args.command.is_none());
    if cli.command.standalone() || !answerable {
        return Ok(None);
    }
    let Some(daemon) = Daemon::running().await else {
        return Ok(None);
    };
    if let Some(explicit) = cli.config.as_deref()
        && let Some(theirs) = daemon_config_source(&daemon).await
        && !same_config(&theirs, &ConfigSource::File(explicit.to_path_buf()))
    {
        // An explicit --config means that file: the daemon's answers would be another file's.
        if !quiet() {
            eprintln!(
                "note: {} runs config {theirs}; --config {} is another file, so this runs in this process on it",
                daemon.describe(),
                explicit.display()
            );
        }
        return Ok(None);
    }
    tracing::info!("asking {}", daemon.describe());
    warn_other_config(&daemon, cli.config.as_deref()).await;
    let code = match &cli.command {
        Command::Servers { json, .. } => servers(&daemon, *json).await?,
        Command::Tools { server, json, .. } => {
            let listed = daemon.get("/api/tools", None).await?;
            let servers = daemon_servers(&daemon).await.unwrap_or_default();
            if let Some(name) = server
                && !servers.iter().any(|s| &s.name == name)
            {
                bail!(
                    "no server named `{name}` in {}'s config; it has: {}",
                    daemon.describe(),
                    crate::output::names(servers.iter().map(|s| s.name.as_str()))
                );
            }
            print_tools(&listed, server.as_deref(), *json, &servers)?
        }
        Command::Call(args) => {
            crate::call_cli::through_daemon(&daemon, cli.config.as_deref(), args).await?
        }
        Command::Agents { json, .. } => {
            let listed = daemon.get("/api/agents", None).await?;
            let agents: Vec<portico_agents::AgentInfo> =
                serde_json::from_value(listed["agents"].clone())
                    .context("the daemon's /api/agents answer is not a list of agents")?;
            print_agents(&agents, *json)?
        }
        Command::Chat {
            agent,
            conversation,
            ..
        } => crate::chat::through_daemon(&daemon, agent, conversation.clone()).await?,
        Command::Audit(args) => audit(&daemon, args).await?,
        Command::Conversations { command, .. } => conversations_daemon(&daemon, command).await?,
        _ => return Ok(None),
    };
    Ok(Some(code))
}

/// Says in one line when the daemon runs another config file than this command would read: its
/// answers are then that file's servers and agents, not the one the user may have just edited.
async fn warn_other_config(daemon: &Daemon, explicit: Option<&std::path::Path>) {
    let Some(theirs) = daemon_config_source(daemon).await else {
        return;
    };
    let ours = portico_config::locate(explicit);
    if !same_config(&theirs, &ours) && !quiet() {
        eprintln!(
            "note: {} runs config {theirs}, not {ours}; showing the daemon's view (--standalone reads {ours})",
            daemon.describe()
        );
    }
}

/// Which config the daemon says it runs: `daemon.json`'s `config.source`, else `/api/health`'s
/// `config.file`; `None` from a daemon that says neither.
pub(crate) async fn daemon_config_source(daemon: &Daemon) -> Option<String> {
    let published = published_config_source();
    if published.is_some() {
        return published;
    }
    let health = daemon.get("/api/health", None).await.ok()?;
    health["config"]["file"].as_str().map(str::to_string)
}

/// The config the daemon's info file says it runs (`daemon.json`'s `config.source`).
pub(crate) fn published_config_source() -> Option<String> {
    let file = portico_daemon::InfoFile::in_dir(&portico_config::data_dir());
    std::fs::read(file.path())
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|info| info["config"]["source"].as_str().map(str::to_string))
}

/// Whether the daemon's config (as it names it) is the file `ours` would read.
pub(crate) fn same_config(theirs: &str, ours: &ConfigSource) -> bool {
    match ours {
        ConfigSource::Embedded => theirs == ours.to_string(),
        ConfigSource::File(path) => {
            let canonical = |p: &std::path::Path| std::fs::canonicalize(p).ok();
            let theirs = std::path::Path::new(theirs);
            theirs == path.as_path()
                || (canonical(theirs).is_some() && canonical(theirs) == canonical(path))
        }
    }
}

pub(crate) async fn daemon_servers(daemon: &Daemon) -> anyhow::Result<Vec<ServerStatus>> {
    let listed = daemon.get("/api/servers", None).await?;
    serde_json::from_value(listed["servers"].clone())
        .context("the daemon's /api/servers answer is not a list of server statuses")
}

async fn servers(daemon: &Daemon, json: bool) -> anyhow::Result<ExitCode> {
    let servers = daemon_servers(daemon).await?;
    print_now(if json {
        serde_json::to_string_pretty(&servers)? + "\n"
    } else {
        output::servers_table(&servers)
    })?;
    let Ok(health) = daemon.get("/api/health", None).await else {
        return Ok(ExitCode::SUCCESS);
    };
    let config = &health["config"];
    if let Some(pending) = config["restart_needed"].as_array() {
        let sections: Vec<&str> = pending.iter().filter_map(Value::as_str).collect();
        eprintln!(
            "the daemon runs {}'s servers and agents, but not its edited {}: those take effect when the daemon restarts (tokens and clients removed there still work until then)",
            config["file"].as_str().unwrap_or("?"),
            sections.join(", ")
        );
    }
    if config["status"] == "refused" {
        eprintln!(
            "the daemon refused the edited config {}, and runs the one it had: {}\nfix the file; the daemon reloads it when it is saved (`portico config check` shows the problems)",
            config["file"].as_str().unwrap_or("?"),
            config["error"].as_str().unwrap_or("no reason given"),
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `portico tools` in this process: the same catalog the doors would serve from this config, built
/// by the same code the daemon's `GET /api/tools` runs. With `only`, only that server is connected
/// and only its tools listed.
pub async fn tools_standalone(
    explicit: Option<&std::path::Path>,
    only: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (config, source) = portico_config::load(explicit)?;
    let configured: Vec<String> = config.mcp_servers.iter().map(|s| s.name.clone()).collect();
    if let Some(name) = only
        && !configured.iter().any(|s| s == name)
    {
        bail!(
            "no server named `{name}` in the config; configured: {}",
            if configured.is_empty() {
                "none".to_string()
            } else {
                configured.join(", ")
            }
        );
    }
    let engine = Engine::start(
        &config,
        crate::cli::engine_options_for(&config, &source).one_shot(),
    )?;
    match only {
        Some(name) => engine.upstreams().connect(&[name.to_string()]),
        None => engine.upstreams().connect(&configured),
    }
    crate::progress::until_settled(engine.upstreams()).await;
    let listed =
        portico_daemon::tool_catalog(&engine, &Principal::client("cli"), config.expose.tools).await;
    let printed = print_tools(&listed, only, json, &engine.upstreams().servers());
    engine.shutdown().await;
    printed
}

/// Prints a `{"tools": [...]}` catalog: `--json` as the array, else one line per tool,
/// `name  [source]  first line of its description`, where an upstream's tools show its name.
fn print_tools(
    listed: &Value,
    only: Option<&str>,
    json: bool,
    servers: &[ServerStatus],
) -> anyhow::Result<ExitCode> {
    let tools: Vec<&Value> = listed["tools"]
        .as_array()
        .map(|tools| tools.iter().collect())
        .unwrap_or_default();
    let tools: Vec<&Value> = tools
        .into_iter()
        .filter(|t| only.is_none_or(|name| t["server"].as_str() == Some(name)))
        .collect();
    if json {
        print_now(serde_json::to_string_pretty(&tools)? + "\n")?;
    } else if listed["exposed"] == false {
        print_now(
            "no tools: the config's [expose] tools = false hides them from MCP clients\n".into(),
        )?;
    } else {
        print_now(tools_text(&tools))?;
        output::warn_unready(servers);
    }
    Ok(ExitCode::SUCCESS)
}

fn tools_text(tools: &[&Value]) -> String {
    if tools.is_empty() {
        return "no tools\n".into();
    }
    let mut out = String::new();
    for tool in tools {
        let source = tool["server"]
            .as_str()
            .or(tool["source"].as_str())
            .unwrap_or("?");
        let description = tool["description"]
            .as_str()
            .and_then(|d| d.lines().next())
            .unwrap_or("");
        out.push_str(&format!(
            "{}  [{source}]  {description}\n",
            tool["name"].as_str().unwrap_or("?")
        ));
    }
    out
}

pub fn print_agents(agents: &[portico_agents::AgentInfo], json: bool) -> anyhow::Result<ExitCode> {
    print_now(if json {
        serde_json::to_string_pretty(agents)? + "\n"
    } else {
        output::agents_table(agents)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `portico audit` through the daemon's `/api/audit`, which writes out its queued records first.
async fn audit(daemon: &Daemon, args: &crate::audit_cli::AuditArgs) -> anyhow::Result<ExitCode> {
    if args.limit == 0 {
        bail!("--limit must be at least 1");
    }
    let mut query = vec![("limit", args.limit.to_string())];
    for (key, value) in [
        ("tool", &args.tool),
        ("principal", &args.principal),
        ("since", &args.since),
    ] {
        if let Some(value) = value {
            query.push((key, value.clone()));
        }
    }
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    let listed = daemon.get(&format!("/api/audit?{query}"), None).await?;
    let entries: Vec<AuditEntry> = serde_json::from_value(listed["records"].clone())
        .context("the daemon's /api/audit answer is not a list of records")?;
    crate::audit_cli::print_entries(&entries, args.json)?;
    Ok(ExitCode::SUCCESS)
}

async fn conversations_daemon(
    daemon: &Daemon,
    command: &ConversationsCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        ConversationsCommand::List {
            agent,
            limit,
            cursor,
            json,
        } => {
            let mut query = vec![("limit", limit.to_string())];
            if let Some(agent) = agent {
                query.push(("agent", agent.clone()));
            }
            if let Some(cursor) = cursor {
                query.push(("cursor", cursor.clone()));
            }
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(query)
                .finish();
            let listed = daemon
                .get(&format!("/api/conversations?{query}"), None)
                .await?;
            print_conversations(&listed, *json)
        }
        ConversationsCommand::Show { id: None, .. } => {
            let listed = daemon
                .get(&format!("/api/conversations?limit={PICK_FROM}"), None)
                .await?;
            pick_one(&listed)
        }
        ConversationsCommand::Show { id: Some(id), json } => {
            let id = checked_conversation_id(id)?;
            let shown = daemon
                .get(&format!("/api/conversations/{id}"), None)
                .await
                .map_err(|e| no_conversation(id, e))?;
            print_conversation(&shown, *json)
        }
    }
}

fn no_conversation(id: &str, error: anyhow::Error) -> anyhow::Error {
    if error.to_string() == "no such conversation" {
        anyhow::anyhow!(
            "no conversation `{id}`; `portico conversations` lists the ones you can read"
        )
    } else {
        error
    }
}

/// Ids go into a URL path: only the characters the store makes them of.
fn checked_conversation_id(id: &str) -> anyhow::Result<&str> {
    crate::daemon_client::checked_path_id(
        id,
        64,
        "a conversation id (ids look like c_...; `portico conversations` lists them)",
    )
}

/// `portico conversations` without a daemon: the store `[store]` names, read directly.
pub fn conversations_standalone(
    explicit: Option<&std::path::Path>,
    command: &ConversationsCommand,
) -> anyhow::Result<ExitCode> {
    let (config, _source) = portico_config::load(explicit)?;
    let data_dir = portico_config::data_dir();
    let store = portico_engine::open_store_to_read(&config, &data_dir)
        .context("cannot read the conversations")?;
    let Some(store) = store else {
        eprintln!(
            "no conversations yet: {} does not exist (PORTICO_HOME sets the data directory)",
            data_dir.join(portico_engine::STORE_FILE).display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let caller = Principal::client("cli");
    match command {
        ConversationsCommand::List {
            agent,
            limit,
            cursor,
            json,
        } => {
            if *limit == 0 || *limit > portico_store::MAX_CONVERSATION_PAGE {
                bail!(
                    "--limit must be 1 to {}",
                    portico_store::MAX_CONVERSATION_PAGE
                );
            }
            let after = match cursor {
                None => None,
                Some(text) => Some(ConversationCursor::decode(text).with_context(|| {
                    format!("--cursor `{text}` is not a next_cursor this command printed")
                })?),
            };
            let page = store.conversation_page(agent.as_deref(), after.as_ref(), *limit)?;
            let listed = portico_daemon::conversation_list(page, *limit, &caller);
            print_conversations(&listed, *json)
        }
        ConversationsCommand::Show { id: None, .. } => {
            let page = store.conversation_page(None, None, PICK_FROM)?;
            pick_one(&portico_daemon::conversation_list(page, PICK_FROM, &caller))
        }
        ConversationsCommand::Show { id: Some(id), json } => {
            let id = checked_conversation_id(id)?;
            let found = store
                .conversation(id)?
                .filter(|c| c.is_for(&caller.label()));
            let Some(conversation) = found else {
                return Err(no_conversation(id, anyhow::anyhow!("no such conversation")));
            };
            let messages = store.messages(&conversation.id)?;
            print_conversation(
                &json!({"conversation": conversation, "messages": messages}),
                *json,
            )
        }
    }
}

/// How many recent conversations `conversations show` without an id offers.
const PICK_FROM: usize = 10;

/// `conversations show` without an id: the most recent ones, and how to show one (exit 2: the
/// command did not show a conversation; 0 when there is none to show).
fn pick_one(listed: &Value) -> anyhow::Result<ExitCode> {
    let first = listed["conversations"][0]["id"].as_str().map(str::to_owned);
    let Some(first) = first else {
        eprintln!("no conversations yet; `portico chat AGENT` starts one");
        return Ok(ExitCode::SUCCESS);
    };
    let mut recent = listed.clone();
    recent["next_cursor"] = Value::Null;
    print_now(format!(
        "recent conversations (`portico conversations list` lists them all):\n{}",
        conversations_table(&recent)
    ))?;
    eprintln!(
        "which one? give its id, e.g. `portico conversations show {first}` (the most recent)"
    );
    Ok(ExitCode::from(2))
}

fn print_conversations(listed: &Value, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_now(serde_json::to_string_pretty(listed)? + "\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    print_now(conversations_table(listed))?;
    Ok(ExitCode::SUCCESS)
}

/// One line per conversation, the title last so it may run long; then how to see more.
fn conversations_table(listed: &Value) -> String {
    let conversations = listed["conversations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if conversations.is_empty() {
        return "no conversations\n".into();
    }
    let text = |v: &Value, key: &str| match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let mut rows = vec![[
        "ID".to_string(),
        "AGENT".into(),
        "MESSAGES".into(),
        "UPDATED".into(),
        "TITLE".into(),
    ]];
    for c in &conversations {
        rows.push([
            text(c, "id"),
            text(c, "agent"),
            text(c, "message_count"),
            text(c, "updated_at"),
            text(c, "title"),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            if c < 4 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    if let Some(cursor) = listed["next_cursor"].as_str() {
        out.push_str(&format!("more: --cursor {cursor}\n"));
    }
    out
}

fn print_conversation(shown: &Value, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_now(serde_json::to_string_pretty(shown)? + "\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = &shown["conversation"];
    let mut out = format!(
        "{}  agent {}  {} message(s)\n",
        c["id"].as_str().unwrap_or("?"),
        c["agent"].as_str().unwrap_or("?"),
        c["message_count"]
    );
    for message in shown["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("?");
        let content = &message["content"];
        let body = content["text"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| content.to_string());
        out.push_str(&format!("{role}> {body}\n"));
        for call in content["tool_calls"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  [called {}]\n",
                call["name"].as_str().unwrap_or("?")
            ));
        }
    }
    print_now(out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of every command, `[command path] --name`, that `--help` shows with no words.
    fn undescribed(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path} {}", arg.get_id()));
            }
        }
        for sub in command.get_subcommands() {
            if sub.get_about().is_none() && sub.get_name() != "help" {
                out.push(format!("{path} {} (the command itself)", sub.get_name()));
            }
            undescribed(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_command_and_argument_has_help() {
        use clap::CommandFactory;
        let mut missing = Vec::new();
        undescribed(&Cli::command(), "portico", &mut missing);
        assert_eq!(missing, Vec::<String>::new());
        Cli::command().debug_assert();
    }

    #[test]
    fn tools_show_their_server_or_their_kind_of_source() {
        let built_in =
            json!({"name": "system_time", "source": "built-in", "description": "The time.\nMore."});
        let upstream =
            json!({"name": "mcp_a_t1", "source": "server", "server": "a", "description": "T1"});
        let agent = json!({"name": "portico_agent_x", "source": "agent"});
        assert_eq!(
            tools_text(&[&built_in, &upstream, &agent]),
            "system_time  [built-in]  The time.\nmcp_a_t1  [a]  T1\nportico_agent_x  [agent]  \n"
        );
        assert_eq!(tools_text(&[]), "no tools\n");
    }

    #[test]
    fn the_same_file_by_another_spelling_is_the_same_config() {
        let dir = tempfile_dir();
        let file = dir.join("config.toml");
        std::fs::write(&file, "").unwrap();
        let ours = ConfigSource::File(file.clone());
        assert!(same_config(file.to_str().unwrap(), &ours));
        let dotted = dir.join(".").join("config.toml");
        assert!(same_config(dotted.to_str().unwrap(), &ours));
        assert!(!same_config("/elsewhere/config.toml", &ours));
        assert!(!same_config("<embedded default>", &ours));
        assert!(same_config(
            &ConfigSource::Embedded.to_string(),
            &ConfigSource::Embedded
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "portico-oneview-{}-{:x}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn rand_suffix() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    #[test]
    fn the_table_has_one_line_per_conversation_and_says_how_to_see_more() {
        let listed = json!({
            "conversations": [
                {"id": "c_1", "agent": "keeper", "message_count": 4, "updated_at": "2026-12-02T01:00:00Z", "title": "remember my colour"},
                {"id": "c_22", "agent": "k", "message_count": 0, "updated_at": "2026-12-02T00:00:00Z", "title": null}
            ],
            "next_cursor": "17.c_22"
        });
        assert_eq!(
            conversations_table(&listed),
            "ID    AGENT   MESSAGES  UPDATED               TITLE\n\
             c_1   keeper  4         2026-12-02T01:00:00Z  remember my colour\n\
             c_22  k       0         2026-12-02T00:00:00Z  -\n\
             more: --cursor 17.c_22\n"
        );
        assert_eq!(
            conversations_table(&json!({"conversations": [], "next_cursor": null})),
            "no conversations\n"
        );
    }

    #[test]
    fn conversation_ids_that_would_change_the_path_are_refused() {
        assert!(checked_conversation_id("c_0123abcdef").is_ok());
        for bad in ["", "../audit", "c_1/x", "c 1", "c_%2e"] {
            assert!(checked_conversation_id(bad).is_err(), "{bad}");
        }
    }
}
