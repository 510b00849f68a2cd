//! `portico search`: servers in the MCP registry of `[registry] url`, one line each.

use std::path::Path;
use std::process::ExitCode;

use portico_registry::{Found, ListQuery, MAX_LIMIT, Registry};

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
