//! `portico secret set|list|rm`: the secret store (`portico_secrets`) from the command line. A value
//! is read from the terminal without echo, or from stdin when it is piped, and is never printed.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Subcommand;
use portico_config::{Config, EnvEntry, Transport};
use portico_secrets::{Backend, Place, SecretStore};

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Store a secret. Its value is read from the terminal without echo, or from stdin when piped
    /// (`printf %s "$TOKEN" | portico secret set NAME`). `${NAME}` in servers' env values and
    /// headers, and a bare NAME in `env = [...]`, then resolve to it wherever Portico runs (an
    /// IDE-started `portico mcp` too), unless Portico's environment sets NAME.
    Set {
        /// The variable name, as `${NAME}` refers to it: letters, digits and `_`.
        name: String,
    },
    /// The stored secrets' names (never their values), each with where it is kept.
    List {
        /// Print them as JSON: [{"name", "in"}].
        #[arg(long)]
        json: bool,
    },
    /// Remove a stored secret.
    Rm {
        /// The name it was stored under.
        name: String,
    },
}

pub fn run(explicit: Option<&Path>, command: SecretCommand) -> anyhow::Result<ExitCode> {
    let (config, _source) = portico_config::load(explicit)?;
    let store = SecretStore::for_config(&config);
    match command {
        SecretCommand::Set { name } => set(&config, &store, &name),
        SecretCommand::List { json } => list(&store, json),
        SecretCommand::Rm { name } => remove(&store, &name),
    }
}

fn set(config: &Config, store: &Arc<SecretStore>, name: &str) -> anyhow::Result<ExitCode> {
    // A bad name is refused before the value is asked for.
    portico_secrets::check_name(name)?;
    let value = if std::io::stdin().is_terminal() {
        read_hidden(&format!("value for {name} (not shown): "))?
    } else {
        read_piped()?
    };
    let place = store.set(name, &value)?;
    crate::cli::print_now(format!(
        "portico: stored {name} in {}\n{}",
        place_words(store, place),
        usage_note(config, name)
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Where a secret went, in words.
pub(crate) fn place_words(store: &SecretStore, place: Place) -> String {
    match (place, store.backend()) {
        (Place::Keyring, Backend::Keyring { what }) => format!("the OS keyring ({what})"),
        (Place::Keyring, _) => "the OS keyring".into(),
        (Place::File, _) => format!("{} (readable by you only)", store.path().display()),
    }
}

/// Which configured servers refer to `name`, and what they do now.
fn usage_note(config: &Config, name: &str) -> String {
    let users = servers_using(config, name);
    if users.is_empty() {
        return format!(
            "no configured server refers to ${{{name}}} yet; refer to it in a server's env or headers\n"
        );
    }
    format!(
        "used by {}; a running daemon connects {} within a second\n",
        users
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if users.len() == 1 { "it" } else { "them" }
    )
}

/// The servers whose `env` or `headers` name `name` (as `${name}`, or passed through bare).
pub(crate) fn servers_using(config: &Config, name: &str) -> Vec<String> {
    let reference = format!("${{{name}}}");
    config
        .mcp_servers
        .iter()
        .filter(|server| {
            let in_env = server.env.iter().any(|entry| match entry {
                EnvEntry::PassThrough(passed) => passed == name,
                EnvEntry::Literal { value, .. } => value.contains(&reference),
            });
            let in_headers = match &server.transport {
                Transport::Http { headers, .. } | Transport::Sse { headers, .. } => {
                    headers.values().any(|v| v.contains(&reference))
                }
                Transport::Stdio { .. } => false,
            };
            in_env || in_headers
        })
        .map(|server| server.name.clone())
        .collect()
}

fn list(store: &SecretStore, json: bool) -> anyhow::Result<ExitCode> {
    let names = store.names()?;
    if json {
        let listed: Vec<serde_json::Value> = names
            .iter()
            .map(|(name, place)| serde_json::json!({ "name": name, "in": place }))
            .collect();
        crate::cli::print_now(serde_json::to_string_pretty(&listed)? + "\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    if names.is_empty() {
        eprintln!("portico: no secrets stored; `portico secret set NAME` stores one");
        return Ok(ExitCode::SUCCESS);
    }
    let width = names.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let text: String = names
        .iter()
        .map(|(name, place)| format!("{name:<width$}  {place}\n"))
        .collect();
    crate::cli::print_now(text)?;
    Ok(ExitCode::SUCCESS)
}

fn remove(store: &SecretStore, name: &str) -> anyhow::Result<ExitCode> {
    if !store.remove(name)? {
        bail!("no secret named {name} is stored; `portico secret list` shows the names");
    }
    crate::cli::print_now(format!("portico: removed {name}\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// The value piped in: all of stdin, one trailing line break dropped (as `echo` adds one).
fn read_piped() -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(portico_secrets::MAX_SECRET_BYTES as u64 + 3)
        .read_to_end(&mut bytes)
        .context("cannot read the value from stdin")?;
    let mut value = String::from_utf8(bytes).context("the value on stdin is not UTF-8 text")?;
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    Ok(value)
}

/// One line read from the terminal with echo off; the terminal is put back as it was.
pub(crate) fn read_hidden(prompt: &str) -> anyhow::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let original = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
    let mut hidden = original.clone();
    hidden.local_modes.remove(LocalModes::ECHO);
    // The line break the user types is still shown, so the next output starts on a new line.
    hidden.local_modes.insert(LocalModes::ECHONL);
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{prompt}");
    let _ = stderr.flush();
    tcsetattr(&stdin, OptionalActions::Flush, &hidden)
        .context("cannot turn the terminal's echo off")?;
    // Ctrl-C while the line is read must not leave the terminal without echo.
    let interrupted = {
        let original = original.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &original);
                eprintln!();
                std::process::exit(130);
            }
        })
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    interrupted.abort();
    let restored = tcsetattr(&stdin, OptionalActions::Now, &original);
    read.context("cannot read the value from the terminal")?;
    restored.context("cannot restore the terminal's settings")?;
    let value = line.trim_end_matches(['\n', '\r']).to_string();
    Ok(value)
}
