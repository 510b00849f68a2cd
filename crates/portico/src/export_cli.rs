//! `portico export IDE`: points Claude Desktop, Cursor or VS Code at `portico mcp`. Without `--write`
//! it prints the entry to paste and names the entries Portico now serves; with `--write` it edits
//! the IDE's file (`portico_config::export` makes the new text), after a backup, and prints the diff.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, anyhow};
use portico_config::Config;
use portico_config::export::{self, EntryChange, Exported, Launch, Served};
use portico_config::import::{self, Client, Places, SourceFile};

/// An IDE to point at `portico mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Ide {
    Claude,
    Cursor,
    Vscode,
}

impl Ide {
    fn client(self) -> Client {
        match self {
            Ide::Claude => Client::ClaudeDesktop,
            Ide::Cursor => Client::Cursor,
            Ide::Vscode => Client::VsCode,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Ide::Claude => "claude",
            Ide::Cursor => "cursor",
            Ide::Vscode => "vscode",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The IDE to point at Portico.
    #[arg(value_enum)]
    pub ide: Ide,
    /// Edit the IDE's config file: add the `portico` entry, remove the entries Portico serves
    /// now, keep everything else. Writes a timestamped backup next to it first and prints the diff.
    #[arg(long)]
    pub write: bool,
    /// Print the diff --write would make; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The IDE config file to edit or check instead of the user's own (Claude Desktop's
    /// claude_desktop_config.json, ~/.cursor/mcp.json, VS Code's user mcp.json), e.g. a project's
    /// .vscode/mcp.json.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

pub fn run(explicit: Option<&Path>, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let launch = launch(explicit)?;
    let client = args.ide.client();
    let places = Places::current();
    let target = match &args.file {
        Some(file) => std::path::absolute(file)
            .with_context(|| format!("cannot make {} absolute", file.display()))?,
        None => export::user_file(&places, client).with_context(|| {
            format!(
                "cannot tell where {} keeps its config (no home directory); name the file with --file PATH",
                client.label()
            )
        })?,
    };
    if args.write || args.dry_run {
        write(&places, args.ide, &target, explicit, &launch, args.dry_run)
    } else {
        print_snippet(
            &places,
            args.ide,
            &target,
            explicit,
            &launch,
            args.file.is_some(),
        )
    }
}

/// This very executable running `mcp`, with the config it was given (absolute, as an IDE starts it
/// from anywhere).
fn launch(explicit: Option<&Path>) -> anyhow::Result<Launch> {
    let exe = std::env::current_exe().context("cannot tell where this portico executable is")?;
    let mut args = Vec::new();
    if let Some(config) = explicit {
        let config = std::path::absolute(config)
            .with_context(|| format!("cannot make {} absolute", config.display()))?;
        args.push("--config".to_string());
        args.push(config.display().to_string());
    }
    args.push("mcp".to_string());
    Ok(Launch {
        command: exe.display().to_string(),
        args,
    })
}

/// Without `--write`: the entry on stdout; where it goes, and what to remove, on stderr.
fn print_snippet(
    places: &Places,
    ide: Ide,
    target: &Path,
    explicit: Option<&Path>,
    launch: &Launch,
    named: bool,
) -> anyhow::Result<ExitCode> {
    let client = ide.client();
    let snippet = export::snippet(client, launch);
    crate::cli::print_now(serde_json::to_string_pretty(&snippet)? + "\n")?;
    let key = client.servers_key();
    let shown = target.display();
    let mut told = match (client, named) {
        (Client::ClaudeDesktop, false) => format!(
            "Add it to Claude Desktop's config ({shown}) under \"{key}\", then restart Claude Desktop.\n"
        ),
        (Client::Cursor, false) => {
            format!("Add it to {shown} (or a project's .cursor/mcp.json) under \"{key}\".\n")
        }
        (Client::VsCode, false) => {
            format!("Add it to {shown} (or a project's .vscode/mcp.json) under \"{key}\".\n")
        }
        (_, true) => format!("Add it to {shown} under \"{key}\".\n"),
    };
    // What `--write` would do to the file: which of its entries Portico serves (each would run
    // twice if left), and whether it has the entry already.
    let checked = read_optional(target).and_then(|text| {
        let Some(text) = text else {
            return Ok(None);
        };
        let config = portico_config(explicit)?;
        let opened = Opened::new(target, text);
        Ok(Some(export::export(
            client,
            Some(&opened.source(places)),
            &config,
            launch,
        )?))
    });
    match checked {
        Ok(Some(exported)) if exported.entry == EntryChange::Unchanged && exported.removed.is_empty() => {
            eprintln!(
                "{shown} has this entry already, and Portico serves none of its other entries."
            );
            return Ok(ExitCode::SUCCESS);
        }
        Ok(Some(exported)) if !exported.removed.is_empty() => told.push_str(&format!(
            "Remove these entries from {shown}, Portico serves them now (else they run twice): {}\n",
            entries(&exported.removed)
        )),
        Ok(_) => {}
        Err(e) => told.push_str(&format!(
            "(Cannot tell which of its entries Portico serves: {e:#}.)\n"
        )),
    }
    let file = if named {
        format!(
            " --file {}",
            import::shell_word(&target.display().to_string())
        )
    } else {
        String::new()
    };
    told.push_str(&format!(
        "Or run `portico export {}{file} --write`: it makes the change (after a backup) and shows the diff.\n",
        ide.word()
    ));
    eprint!("{told}");
    Ok(ExitCode::SUCCESS)
}

/// `--write` and `--dry-run`.
fn write(
    places: &Places,
    ide: Ide,
    target: &Path,
    explicit: Option<&Path>,
    launch: &Launch,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let client = ide.client();
    let config = portico_config(explicit)?;
    let before = read_optional(target)?.map(|text| Opened::new(target, text));
    let shown = target.display().to_string();
    let source = before.as_ref().map(|opened| opened.source(places));
    let exported = export::export(client, source.as_ref(), &config, launch).map_err(|e| {
        anyhow!("{e}; nothing was written. Fix the file (or move it away) and run this again")
    })?;
    let mut report = String::new();
    let before = before.map(|opened| opened.text);
    if before.as_deref() == Some(exported.text.as_str()) {
        report.push_str(&format!(
            "portico: {shown} is already up to date: it starts Portico, and Portico serves none of its other entries\n"
        ));
    } else {
        crate::cli::print_now(diff(before.as_deref(), &exported.text, &shown))?;
        if dry_run {
            eprintln!("portico: dry run, nothing was written to {shown}");
            return Ok(ExitCode::SUCCESS);
        }
        let backup = match &before {
            Some(old) => Some(backup(target, old, SystemTime::now())?),
            None => None,
        };
        crate::import_cli::write_file(target, &exported.text, before.is_some())?;
        report.push_str(&summary(&shown, &exported, before.is_none()));
        if let Some(backup) = backup {
            report.push_str(&format!("Backup of the old file: {}\n", backup.display()));
        }
        report.push_str(&format!("Restart {} to use it.\n", client.label()));
    }
    // The client's other files (a project's, VS Code's settings.json) also start servers; the
    // ones that start servers Portico serves are named, not edited.
    for other in places.of(client).into_iter().filter(|p| p != target) {
        if let Ok(Some(text)) = read_optional(&other)
            && let Ok(served) =
                export::served(client, &Opened::new(&other, text).source(places), &config)
            && !served.is_empty()
        {
            report.push_str(&format!(
                "{} has entries Portico serves too ({}); `portico export {} --file {} --write` removes them.\n",
                other.display(),
                entries(&served),
                ide.word(),
                import::shell_word(&other.display().to_string())
            ));
        }
    }
    crate::cli::print_now(report)?;
    Ok(ExitCode::SUCCESS)
}

fn summary(shown: &str, exported: &Exported, created: bool) -> String {
    if created {
        return format!("portico: wrote {shown} with the `portico` entry\n");
    }
    let mut done = Vec::new();
    match exported.entry {
        EntryChange::Added => done.push("added the `portico` entry".to_string()),
        EntryChange::Replaced => {
            done.push("replaced the `portico` entry (it started Portico another way)".to_string())
        }
        EntryChange::Unchanged => {}
    }
    if !exported.removed.is_empty() {
        done.push(format!(
            "removed {}, which Portico serves now",
            entries(&exported.removed)
        ));
    }
    format!("portico: updated {shown}: {}\n", done.join("; "))
}

/// `github, memory`, and the name in Portico's config where it differs.
fn entries(served: &[Served]) -> String {
    served
        .iter()
        .map(|s| {
            if s.entry == s.server {
                s.entry.clone()
            } else {
                format!("{} (Portico's `{}`)", s.entry, s.server)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn portico_config(explicit: Option<&Path>) -> anyhow::Result<Config> {
    portico_config::load(explicit)
        .map(|(config, _)| config)
        .map_err(|e| anyhow!("cannot read Portico's config to tell which servers it serves: {e}"))
}

/// A client's file as read, with what the translation needs to know about it.
struct Opened {
    origin: String,
    workspace: Option<PathBuf>,
    text: String,
}

impl Opened {
    fn new(path: &Path, text: String) -> Opened {
        Opened {
            origin: path.display().to_string(),
            workspace: import::workspace_of(path),
            text,
        }
    }

    fn source<'a>(&'a self, places: &'a Places) -> SourceFile<'a> {
        SourceFile {
            origin: &self.origin,
            text: &self.text,
            workspace: self.workspace.as_deref(),
            home: places.home.as_deref(),
        }
    }
}

/// The file's text; `None` when there is no file.
fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The change as a unified diff, both sides named by the file's path (`/dev/null` before a new
/// file).
fn diff(before: Option<&str>, after: &str, shown: &str) -> String {
    similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .context_radius(3)
        .header(if before.is_some() { shown } else { "/dev/null" }, shown)
        .to_string()
}

/// Writes `old` to `FILE.portico-backup-YYYYMMDDTHHMMSSZ` next to the file (where a symlink to it
/// points), with the file's permissions, never over another file.
fn backup(target: &Path, old: &str, now: SystemTime) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let real = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let mode = std::fs::metadata(&real)
        .map(|m| m.permissions().mode())
        .unwrap_or(0o600);
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stamp = backup_stamp(portico_core::time::unix_ms(now));
    for attempt in 1.. {
        let suffix = if attempt == 1 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let path = real.with_file_name(format!("{name}.portico-backup-{stamp}{suffix}"));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path);
        match opened {
            Ok(mut file) => {
                file.write_all(old.as_bytes())
                    .and_then(|()| file.sync_all())
                    .with_context(|| format!("cannot write the backup {}", path.display()))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot write the backup {}", path.display()));
            }
        }
    }
    unreachable!("the attempts are unbounded")
}

/// `20261207T153000Z`: UTC, to the second, sortable, with no character a file name may not have.
fn backup_stamp(unix_ms: i64) -> String {
    let rfc3339 = portico_core::time::rfc3339(unix_ms);
    let to_second = rfc3339.get(..19).unwrap_or(&rfc3339);
    to_second.replace(['-', ':'], "") + "Z"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backup_stamp_is_utc_to_the_second() {
        // 2026-12-07T15:30:00.999Z
        assert_eq!(backup_stamp(1_796_657_400_999), "20261207T153000Z");
    }

    #[test]
    fn a_new_file_is_diffed_against_nothing() {
        assert_eq!(
            diff(None, "{\n}\n", "/x/mcp.json"),
            "--- /dev/null\n+++ /x/mcp.json\n@@ -0,0 +1,2 @@\n+{\n+}\n"
        );
    }
}
