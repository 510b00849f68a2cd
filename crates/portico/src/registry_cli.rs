//! `portico search`: servers in the MCP registry of `[registry] url`, one line each.

use std::path::Path;
use std::process::ExitCode;

use std::io::{BufRead, IsTerminal, Write};

use anyhow::bail;
use portico_registry::{
    Found, InputNeed, ListQuery, MAX_LIMIT, Options, Registry, RunsAs, Translation,
};

use crate::lifecycle_cli::AddArgs;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Words to find in server names (the registry searches names for the longest; the others
    /// may be in the description too); none: list the registry.
    pub words: Vec<String>,
    /// Print the servers as JSON.
    #[arg(long)]
    pub json: bool,
    /// Show at most this many servers.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
}

/// The most `--limit` may ask for: ten pages of the registry's largest.
const MAX_SHOWN: usize = 10 * MAX_LIMIT;

pub async fn search(explicit: Option<&Path>, args: SearchArgs) -> anyhow::Result<ExitCode> {
    if args.limit == 0 || args.limit > MAX_SHOWN {
        anyhow::bail!("--limit must be from 1 to {MAX_SHOWN}");
    }
    let (config, _source) = portico_config::load(explicit)?;
    let registry = Registry::from_config(&config.registry)?;
    let words: Vec<String> = args
        .words
        .iter()
        .flat_map(|w| w.split_whitespace())
        .map(str::to_lowercase)
        .collect();
    let (found, more) = find(&registry, &words, args.limit).await?;
    let text = if args.json {
        serde_json::to_string_pretty(&found)? + "\n"
    } else if found.is_empty() {
        match words.is_empty() {
            true => format!("the registry at {} lists no servers\n", registry.url()),
            false => format!(
                "no server in the registry at {} matches `{}`\n",
                registry.url(),
                words.join(" ")
            ),
        }
    } else {
        let mut text = table(&found);
        if more {
            text.push_str(&format!(
                "(more match: add words, or raise --limit (now {}))\n",
                args.limit
            ));
        }
        text
    };
    crate::cli::print_now(text)?;
    Ok(ExitCode::SUCCESS)
}

/// Up to `limit` servers whose name or description holds every word, and whether there are more.
/// The API's `search` matches a substring of the name: it is asked for the longest word, and the
/// others are matched here.
async fn find(
    registry: &Registry,
    words: &[String],
    limit: usize,
) -> anyhow::Result<(Vec<Found>, bool)> {
    let mut query = ListQuery {
        search: words.iter().max_by_key(|w| w.len()).cloned(),
        // Pages as large as the answer needs, and one more server, to tell whether more match;
        // the registry's largest when words are matched here.
        limit: Some(if words.len() > 1 {
            MAX_LIMIT
        } else {
            (limit + 1).min(MAX_LIMIT)
        }),
        cursor: None,
    };
    let mut found = Vec::new();
    // Bounded, whatever the registry's cursors do.
    for _ in 0..(MAX_SHOWN / MAX_LIMIT) {
        let page = registry.list(&query).await?;
        for response in &page.servers {
            let server = Found::of(response);
            let text = format!("{} {}", server.name, server.description).to_lowercase();
            if words.iter().all(|w| text.contains(w.as_str())) {
                if found.len() == limit {
                    return Ok((found, true));
                }
                found.push(server);
            }
        }
        match page.next() {
            Some(cursor) if cursor != query.cursor.as_deref().unwrap_or_default() => {
                query.cursor = Some(cursor.to_string());
            }
            _ => return Ok((found, false)),
        }
    }
    Ok((found, true))
}

/// NAME, VERSION, RUNS AS, DESCRIPTION; the description is cut to keep a line a line.
fn table(found: &[Found]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "VERSION".into(),
        "RUNS AS".into(),
        "DESCRIPTION".into(),
    ]];
    for server in found {
        let runs_as = if server.runs_as.is_empty() {
            "-".to_string()
        } else {
            server.runs_as.join(",")
        };
        let mut description = cut(&server.description, 72);
        if server.runs_as.is_empty() {
            description = format!("(Portico cannot run it) {description}");
        }
        if server.status != "active" {
            description = format!("[{}] {description}", server.status);
        }
        rows.push([
            server.name.clone(),
            server.version.clone(),
            runs_as,
            description,
        ]);
    }
    let widths: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            if c < 3 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max - 1).collect();
        cut.push('…');
        cut
    }
}

/// `portico add REGISTRY_NAME`: the server's latest `server.json` from the registry, as an entry
/// (its version pinned, nothing run through a shell), with the values it needs: from `--env`,
/// else asked on a terminal (secret ones without echo, into the secret store, never the file),
/// else named with the command that sets them; then written and started as `portico add` does.
pub async fn add(
    explicit: Option<&Path>,
    standalone: bool,
    args: &AddArgs,
) -> anyhow::Result<ExitCode> {
    if !args.headers.is_empty() || args.transport.is_some() {
        bail!(
            "--header and --transport are for a server at a URL you give; a registry server's headers come from its server.json, their values from --env NAME=value"
        );
    }
    let (config, _source) = portico_config::load(explicit)?;
    let registry = Registry::from_config(&config.registry)?;
    let mut values = std::collections::BTreeMap::new();
    for item in &args.env {
        let Some((name, value)) = item.split_once('=') else {
            bail!(
                "--env `{item}`: a registry server takes its values as --env NAME=value (the names are in `portico add {}`'s list of what it needs)",
                args.name
            );
        };
        values.insert(name.trim().to_string(), value.to_string());
    }
    let prefer = match args.prefer.as_deref() {
        None => None,
        Some(wanted) => Some(
            RunsAs::ALL
                .into_iter()
                .find(|r| r.label() == wanted)
                .ok_or_else(|| {
                    anyhow::anyhow!("--prefer `{wanted}`: one of npm, pypi, oci, remote")
                })?,
        ),
    };
    let options = Options {
        name: args.entry_name.clone(),
        prefer,
        values,
        ..Options::default()
    };
    let mut translation = registry.resolve(&args.name, &options).await?;
    if std::io::stdin().is_terminal() {
        let answers = ask_missing(&translation)?;
        if !answers.is_empty() {
            translation = translation.with_values(answers)?;
        }
    }
    if !translation.writable() {
        let missing: Vec<String> = translation.missing().map(describe_need).collect();
        bail!(
            "`{}` needs values Portico cannot leave for later; give them with --env NAME=value:\n  {}",
            translation.registry_name,
            missing.join("\n  ")
        );
    }
    let mut server = translation.server.clone();
    server.allow_private_network = args.allow_private_network;
    let stored = store_secrets(&config, &translation)?;
    println!(
        "{} {} from {}: runs as {}",
        translation.registry_name,
        translation.version,
        registry.url(),
        translation.runs_as.label()
    );
    for note in &translation.notes {
        println!("note: {note}");
    }
    for name in &stored {
        println!("stored secret {name} in the secret store (not in the config file)");
    }
    let mut warnings = Vec::new();
    for need in translation.missing() {
        if let Some(variable) = &need.variable {
            warnings.push(format!(
                "{} has no value yet: `portico secret set {variable}` (or export {variable}) before it can start",
                describe_need(need)
            ));
        }
    }
    crate::lifecycle_cli::add_entry(explicit, standalone, &server, &warnings, args.no_wait).await
}

/// One missing value, in words: `WEATHER_API_KEY (secret environment variable): API key from ...`.
fn describe_need(need: &InputNeed) -> String {
    let secret = if need.secret { "secret " } else { "" };
    let about = need
        .description
        .as_deref()
        .map(|d| format!(": {}", crate::output::printable(d)))
        .unwrap_or_default();
    format!("{} ({secret}{}){about}", need.name, need.place.label())
}

/// Asks a person at a terminal for each missing value: defaults offered, secrets without echo.
fn ask_missing(translation: &Translation) -> anyhow::Result<Vec<(String, String)>> {
    let mut answers = Vec::new();
    let needs: Vec<&InputNeed> = translation.missing().collect();
    if needs.is_empty() {
        return Ok(answers);
    }
    println!("{} needs:", translation.registry_name);
    for need in needs {
        let prompt = match (&need.default, need.choices.is_empty()) {
            (Some(default), _) if !need.secret => format!("{} [{default}]: ", describe_need(need)),
            (_, false) => format!("{} ({}): ", describe_need(need), need.choices.join("|")),
            _ => format!("{}: ", describe_need(need)),
        };
        let value = if need.secret {
            crate::secret_cli::read_hidden(&prompt)?
        } else {
            print!("{prompt}");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            line.trim_end_matches(['\n', '\r']).to_string()
        };
        let value = match (value.is_empty(), &need.default) {
            (true, Some(default)) if !need.secret => default.clone(),
            (true, _) => continue,
            (false, _) => value,
        };
        answers.push((need.name.clone(), value));
    }
    Ok(answers)
}

/// Puts the secret values the user gave into the secret store; the entry refers to each as
/// `${VAR}`. The names stored.
fn store_secrets(
    config: &portico_config::Config,
    translation: &Translation,
) -> anyhow::Result<Vec<String>> {
    if translation.secrets.is_empty() {
        return Ok(Vec::new());
    }
    let store = portico_secrets::SecretStore::for_config(config);
    let mut stored = Vec::new();
    for secret in &translation.secrets {
        store.set(&secret.variable, &secret.value)?;
        stored.push(secret.variable.clone());
    }
    Ok(stored)
}
