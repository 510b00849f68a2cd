//! `portico audit`: the audit log, read from the store `[store]` names (the PostgreSQL store at
//! its `url`, else the file in the data directory), and `portico audit verify`, which walks its
//! hash chain. With a daemon running, the list comes from its `/api/audit` instead
//! (`oneview_cli`), which writes out the records it has queued first; `--standalone`, and `verify`
//! always, read the store directly (SQLite's WAL lets a reader beside the daemon's writer), where
//! records the daemon queued in the last few milliseconds may not be committed yet.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use portico_store::{AuditEntry, AuditQuery, AuditVerification, Store};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only calls of this tool (its exposed name, e.g. mcp_github_create_issue).
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
    /// Only calls by this principal, e.g. client:http or agent:planner.
    #[arg(long, value_name = "PRINCIPAL")]
    pub principal: Option<String>,
    /// Only records since then: a duration back from now (90s, 15m, 2h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "DURATION|RFC3339")]
    pub since: Option<String>,
    /// At most this many records, the newest.
    #[arg(long, value_name = "N", default_value_t = portico_store::DEFAULT_LIMIT)]
    pub limit: usize,
    /// One JSON object per record, one per line, as the store keeps it.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub standalone: crate::cli::Standalone,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the audit log's hash chain: ok with the count and range of records checked, or the
    /// first broken link (exit code 1).
    Verify {
        /// Print the verification as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(explicit: Option<&Path>, args: AuditArgs) -> anyhow::Result<ExitCode> {
    let (config, _source) = portico_config::load(explicit)?;
    let data_dir = portico_config::data_dir();
    // The store `[store]` names: a shared PostgreSQL store, never a stale local file beside it.
    let store = portico_engine::open_store_to_read(&config, &data_dir)
        .context("cannot read the audit log")?;
    let Some(store) = store else {
        eprint!("{}", no_store(&data_dir.join(portico_engine::STORE_FILE)));
        return Ok(ExitCode::SUCCESS);
    };
    match args.command {
        Some(AuditCommand::Verify { json }) => verify(&store, json),
        None => list(&store, &args),
    }
}

fn no_store(path: &Path) -> String {
    format!(
        "no audit log yet: {} does not exist (nothing has been called with this data directory; PORTICO_HOME sets it)\n",
        path.display()
    )
}

fn list(store: &Store, args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let since_ms = args
        .since
        .as_deref()
        .map(|since| portico_core::time::parse_since(since, portico_core::time::now_ms()))
        .transpose()
        .context("--since")?;
    if args.limit == 0 {
        bail!("--limit must be at least 1");
    }
    let query = AuditQuery {
        caller: args.principal.clone(),
        tool: args.tool.clone(),
        since_ms,
        limit: args.limit,
        ..AuditQuery::default()
    };
    let entries = store.audit_entries(&query)?;
    print_entries(&entries, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The records as `portico audit` prints them, read from the file or through the daemon.
pub(crate) fn print_entries(entries: &[AuditEntry], json: bool) -> anyhow::Result<()> {
    let text = if json {
        let mut text = String::new();
        for entry in entries {
            text.push_str(&serde_json::to_string(entry)?);
            text.push('\n');
        }
        text
    } else {
        table(entries)
    };
    crate::cli::print_now(text)
}

/// Newest first, one line each: id, time, principal, tool, outcome, duration, then the detail.
fn table(entries: &[AuditEntry]) -> String {
    if entries.is_empty() {
        return "no audit records match\n".into();
    }
    let mut rows = vec![[
        "ID".to_string(),
        "TIME".into(),
        "PRINCIPAL".into(),
        "TOOL".into(),
        "OUTCOME".into(),
        "DURATION".into(),
        "DETAIL".into(),
    ]];
    for entry in entries {
        let record = &entry.record;
        rows.push([
            entry.id.to_string(),
            portico_core::time::rfc3339(record.at_ms),
            record.caller.clone(),
            record.tool.clone(),
            record.outcome.clone(),
            format!("{}ms", record.duration_ms),
            // One line per record, whatever the detail holds.
            record
                .detail
                .as_deref()
                .map(|d| d.replace(['\n', '\r'], " "))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            if c < 6 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

fn verify(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let verification = store.verify_audit()?;
    let text = if json {
        serde_json::to_string_pretty(&verification)? + "\n"
    } else {
        verification_text(&verification)
    };
    crate::cli::print_now(text)?;
    Ok(if verification.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn verification_text(verification: &AuditVerification) -> String {
    let mut out = String::new();
    if verification.unchained > 0 {
        out.push_str(&format!(
            "{} record(s) from before the chain existed are not chained\n",
            verification.unchained
        ));
    }
    let range = match (verification.first_id, verification.last_id) {
        (Some(first), Some(last)) => format!("ids {first} to {last}"),
        _ => "none".into(),
    };
    let start = if verification.from_genesis || verification.first_id.is_none() {
        String::new()
    } else {
        format!(
            "; records before id {} were removed, so the chain is checked from there",
            verification.first_id.unwrap_or_default()
        )
    };
    match &verification.broken {
        None => {
            out.push_str(&format!(
                "ok: {} record(s) chained ({range}){start}\n",
                verification.checked
            ));
            if let Some(head) = &verification.head {
                out.push_str(&format!(
                    "head: {head} (keep it elsewhere to detect a later rewrite)\n"
                ));
            }
        }
        Some(broken) => {
            out.push_str(&format!("broken: {broken}\n"));
            out.push_str(&format!(
                "{} record(s) before it are whole ({range}){start}\n",
                verification.checked
            ));
        }
    }
    out
}
