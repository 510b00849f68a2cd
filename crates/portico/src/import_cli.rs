//! `portico import`: the MCP servers Claude Desktop, Cursor or VS Code run, added to Portico's
//! config. The translation is `portico_config::import`; this finds and reads the files, writes the
//! config (or prints it with `--dry-run`) and says what the user has to do next.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use portico_config::import::{self, Client, Import, ImportError, OnClash, Places, SourceFile};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// `claude`, `cursor` or `vscode` (read from where that client keeps its servers), or a file's
    /// path. Default: every one of the three that is there.
    #[arg(value_name = "claude|cursor|vscode|PATH")]
    pub source: Option<String>,
    /// Print the TOML that would be added instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
    /// The file to write (merged into when it exists). Default: the config (--config,
    /// $PORTICO_CONFIG, else config.toml in the data dir).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// When the config has a different server of the same name, import it as NAME-2 instead of
    /// refusing.
    #[arg(long)]
    pub rename: bool,
}

/// The most a file to import may hold: client configs are a few KiB; this keeps `/dev/zero` or a
/// log file named by mistake from filling memory.
pub(crate) const MAX_IMPORT_BYTES: u64 = 4 * 1024 * 1024;

/// A client's config file, read whole: only a regular file (never a FIFO, a device or a directory,
/// which could block or never end) of at most [`MAX_IMPORT_BYTES`].
fn read_source(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let not_regular = |kind: &str| {
        anyhow::anyhow!(
            "cannot import {shown}: it is {kind}, not a regular file; name the client's JSON config file (or `claude`, `cursor`, `vscode`)"
        )
    };
    let metadata = std::fs::metadata(path).with_context(|| format!("cannot read {shown}"))?;
    if !metadata.is_file() {
        return Err(not_regular(file_kind(&metadata.file_type())));
    }
    let too_large = || {
        anyhow::anyhow!(
            "cannot import {shown}: it is larger than {} MiB, more than any client's config; name the client's JSON config file",
            MAX_IMPORT_BYTES / (1024 * 1024)
        )
    };
    if metadata.len() > MAX_IMPORT_BYTES {
        return Err(too_large());
    }
    // Without blocking, and checked again once open: the path may have been swapped for a FIFO
    // since it was looked at.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read {shown}"))?;
    let opened = file
        .metadata()
        .with_context(|| format!("cannot read {shown}"))?;
    if !opened.is_file() {
        return Err(not_regular(file_kind(&opened.file_type())));
    }
    let mut bytes = Vec::new();
    file.take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "cannot import {shown}: it is not UTF-8 text; name the client's JSON config file"
        )
    })
}

/// What a path that is not a regular file is, in words.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

pub fn run(explicit: Option<&Path>, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let places = Places::current();
    let (files, chosen) = source_files(&places, args.source.as_deref())?;
    let mut imported = Import::default();
    let mut empty = Vec::new();
    for path in &files {
        let text = read_source(path)?;
        let origin = path.display().to_string();
        let workspace = import::workspace_of(path);
        let file = SourceFile {
            origin: &origin,
            text: &text,
            workspace: workspace.as_deref(),
            home: places.home.as_deref(),
        };
        match import::translate(&file) {
            Ok(found) => imported.extend(found),
            // A settings.json found by looking need not have MCP servers; a file the user named must.
            Err(ImportError::NoServers { .. }) if !chosen => empty.push(origin),
            Err(e) => return Err(e.into()),
        }
    }
    for origin in &empty {
        eprintln!("portico: no MCP servers in {origin}");
    }
    if imported.servers.is_empty() {
        bail!(
            "found no MCP servers to import in {}",
            files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let target = args
        .output
        .clone()
        .unwrap_or_else(|| portico_config::path_to_write(explicit));
    let existing = match std::fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", target.display())),
    };
    let shown = target.display().to_string();
    // `portico --config claude_desktop_config.json import` means to import that file, not into it.
    if let Some(text) = &existing
        && portico_config::json_config_hint(&shown, text).is_some()
    {
        bail!(
            "{shown} is JSON, not Portico's TOML config, so nothing is imported into it; to import its servers run `portico import {shown}`"
        );
    }
    let on_clash = if args.rename {
        OnClash::Rename
    } else {
        OnClash::Refuse
    };
    let merged = imported.merge(&shown, existing.as_deref(), on_clash)?;

    let mut report = String::new();
    if merged.added.is_empty() {
        report.push_str(&format!(
            "portico: nothing to import: {shown} already has every server\n"
        ));
    } else if args.dry_run {
        report.push_str(&format!(
            "portico: dry run, nothing written; {} would get {} server(s): {}\n",
            shown,
            merged.added.len(),
            merged.added.join(", ")
        ));
    } else {
        write_file(&target, &merged.text, existing.is_some())?;
        let verb = if existing.is_some() {
            "added to"
        } else {
            "wrote a new config,"
        };
        report.push_str(&format!(
            "portico: {verb} {shown}: {} server(s): {}\n",
            merged.added.len(),
            merged.added.join(", ")
        ));
    }
    for (name, kept) in &merged.unchanged {
        report.push_str(&format!(
            "  `{name}`: the config already has this server as `{kept}`; left as it is\n"
        ));
    }
    for (from, to) in &merged.renamed {
        report.push_str(&format!(
            "  `{from}` was imported as `{to}`: the config has a different server named `{from}`\n"
        ));
    }
    if !imported.exports.is_empty() {
        // Offered only once the servers are written, and only to someone at a terminal.
        let offer = !args.dry_run
            && !merged.added.is_empty()
            && std::io::stdin().is_terminal()
            && std::io::stderr().is_terminal();
        let store = offer
            .then(|| portico_config::parse(&shown, &merged.text).ok())
            .flatten()
            .map(|config| portico_secrets::SecretStore::for_config(&config));
        report.push_str(&secrets_report(
            &imported.exports,
            store.as_deref(),
            &mut ask,
        ));
    }
    if !imported.warnings.is_empty() {
        report.push_str("Not imported as it was:\n");
        for warning in &imported.warnings {
            report.push_str(&format!("  {warning}\n"));
        }
    }
    if !args.dry_run && !merged.added.is_empty() {
        report.push_str(
            "Next: `portico servers` shows them connect; `portico serve` serves them to your IDEs.\n",
        );
    }
    if args.dry_run {
        crate::cli::print_now(merged.added_text)?;
        eprint!("{report}");
    } else {
        crate::cli::print_now(report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What to do about the variables the imported servers refer to. With a store (on a terminal),
/// each literal secret the source held is offered for the store first (y/N, or all).
fn secrets_report(
    exports: &[import::Export],
    store: Option<&portico_secrets::SecretStore>,
    ask: &mut dyn FnMut(&str) -> Answer,
) -> String {
    let mut stored = Vec::new();
    let mut failed = Vec::new();
    if let Some(store) = store {
        let mut all = false;
        for export in exports {
            let Some(literal) = &export.literal else {
                continue;
            };
            if !all {
                match ask(&format!(
                    "Move {} into Portico's secret store, so an IDE-started Portico has it too? ({}) [y/N/a=all] ",
                    export.variable, export.reason
                )) {
                    Answer::Yes => {}
                    Answer::All => all = true,
                    Answer::No => continue,
                }
            }
            match store.set(&export.variable, literal.expose()) {
                Ok(place) => stored.push((
                    export.variable.clone(),
                    crate::secret_cli::place_words(store, place),
                )),
                Err(error) => failed.push(format!("  {}: {error}\n", export.variable)),
            }
        }
    }
    let mut report = String::new();
    for (variable, place) in &stored {
        report.push_str(&format!("Stored {variable} in {place}\n"));
    }
    if !failed.is_empty() {
        report.push_str("Could not store:\n");
        report.extend(failed);
    }
    let left: Vec<&import::Export> = exports
        .iter()
        .filter(|e| !stored.iter().any(|(v, _)| v == &e.variable))
        .collect();
    if !left.is_empty() {
        report.push_str(
            "Set these before starting Portico (the secret store keeps them where an IDE-started Portico finds them too; an exported variable works as well):\n",
        );
        for export in left {
            report.push_str(&format!(
                "  portico secret set {}   # {}\n",
                export.variable, export.reason
            ));
        }
    }
    report
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Yes,
    No,
    All,
}

/// A question on stderr, its answer read from the terminal; anything but yes or all is no.
fn ask(question: &str) -> Answer {
    use std::io::BufRead;
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Answer::No;
    }
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Yes,
        "a" | "all" => Answer::All,
        _ => Answer::No,
    }
}

/// The files to read, and whether the user named them (rather than Portico looking).
fn source_files(places: &Places, source: Option<&str>) -> anyhow::Result<(Vec<PathBuf>, bool)> {
    let clients: Vec<Client> = match source {
        None => Client::ALL.to_vec(),
        Some("claude") => vec![Client::ClaudeDesktop],
        Some("cursor") => vec![Client::Cursor],
        Some("vscode") => vec![Client::VsCode],
        Some(path) => return Ok((vec![PathBuf::from(path)], true)),
    };
    let looked: Vec<PathBuf> = clients.iter().flat_map(|c| places.of(*c)).collect();
    let found: Vec<PathBuf> = looked.iter().filter(|p| p.is_file()).cloned().collect();
    if found.is_empty() {
        let labels: Vec<&str> = clients.iter().map(|c| c.label()).collect();
        bail!(
            "found no {} config; looked for:\n{}\nname the file instead: `portico import PATH`",
            labels.join(", "),
            looked
                .iter()
                .map(|p| format!("  {}", p.display()))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok((found, false))
}

/// Writes a whole file (the config, an IDE's config) through a temporary file and a rename, so
/// nothing (a daemon or an IDE watching the file, a crash half-way) ever sees half of it. An existing
/// file keeps its permissions (and stays where a symlink to it points); a new one is readable by its
/// owner only.
pub(crate) fn write_file(target: &Path, text: &str, exists: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let target = if exists {
        target
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", target.display()))?
    } else {
        target.to_path_buf()
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    portico_config::create_private_dir_all(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.toml".into());
    // Created new (O_CREAT|O_EXCL, which never follows a link): in a shared directory a link
    // another user planted under this name makes the write fail instead of following it.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let temporary = dir.join(format!(
        ".{file_name}.portico-{}-{nonce}",
        std::process::id()
    ));
    let mode = if exists {
        std::fs::metadata(&target)
            .map(|m| m.permissions().mode())
            .unwrap_or(0o600)
    } else {
        0o600
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, &target));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e).with_context(|| format!("cannot write {}", target.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENTINEL: &str = "ghp_import-sentinel-31d9";

    fn exports() -> Vec<import::Export> {
        let text = format!(
            r#"{{"mcpServers": {{
                "one": {{"command": "a", "env": {{"ONE_TOKEN": "{SENTINEL}-1"}}}},
                "two": {{"command": "b", "env": {{"TWO_TOKEN": "{SENTINEL}-2"}}}},
                "three": {{"command": "c", "env": {{"THREE_TOKEN": "{SENTINEL}-3"}}}}
            }}}}"#
        );
        let file = import::SourceFile {
            origin: "claude.json",
            text: &text,
            workspace: None,
            home: None,
        };
        import::translate(&file).unwrap().exports
    }

    fn store() -> (
        tempfile::TempDir,
        std::sync::Arc<portico_secrets::SecretStore>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            portico_secrets::SecretStore::open(dir.path(), portico_config::SecretStoreChoice::File);
        (dir, store)
    }

    #[test]
    fn each_literal_secret_is_offered_and_stored_only_when_the_user_says_so() {
        let (_dir, store) = store();
        let mut answers = vec![Answer::No, Answer::Yes, Answer::No].into_iter();
        let mut asked = Vec::new();
        let report = secrets_report(&exports(), Some(&store), &mut |question| {
            asked.push(question.to_string());
            answers.next().unwrap()
        });
        assert_eq!(asked.len(), 3);
        assert!(
            asked[0].starts_with("Move ONE_TOKEN into Portico's secret store"),
            "{asked:?}"
        );
        assert_eq!(
            store.names().unwrap(),
            vec![("TWO_TOKEN".to_string(), portico_secrets::Place::File)]
        );
        assert_eq!(
            store.get("TWO_TOKEN").unwrap().unwrap(),
            format!("{SENTINEL}-2")
        );
        assert!(report.contains("Stored TWO_TOKEN in "), "{report}");
        assert!(
            report.contains("  portico secret set ONE_TOKEN   # server `one`"),
            "{report}"
        );
        assert!(
            report.contains("  portico secret set THREE_TOKEN   # server `three`"),
            "{report}"
        );
        assert!(!report.contains("portico secret set TWO_TOKEN"), "{report}");
        assert!(
            !report.contains(SENTINEL) && !asked.concat().contains(SENTINEL),
            "{report}"
        );
    }

    #[test]
    fn all_stores_this_secret_and_every_one_after_it_without_asking_again() {
        let (_dir, store) = store();
        let mut asked = 0;
        let report = secrets_report(&exports(), Some(&store), &mut |_| {
            asked += 1;
            if asked == 1 { Answer::No } else { Answer::All }
        });
        assert_eq!(asked, 2);
        let names: Vec<String> = store.names().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["THREE_TOKEN", "TWO_TOKEN"]);
        assert!(report.contains("portico secret set ONE_TOKEN"), "{report}");
        assert!(!report.contains(SENTINEL), "{report}");
    }

    #[test]
    fn only_regular_files_up_to_the_bound_are_read_for_import() {
        let dir = tempfile::tempdir().unwrap();
        let fine = dir.path().join("claude.json");
        std::fs::write(&fine, r#"{"mcpServers": {}}"#).unwrap();
        assert_eq!(read_source(&fine).unwrap(), r#"{"mcpServers": {}}"#);

        let big = dir.path().join("big.json");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_IMPORT_BYTES + 1).unwrap();
        let error = read_source(&big).unwrap_err().to_string();
        assert!(error.contains("is larger than 4 MiB"), "{error}");
        let at_bound = dir.path().join("at.json");
        std::fs::write(&at_bound, vec![b' '; MAX_IMPORT_BYTES as usize]).unwrap();
        assert_eq!(
            read_source(&at_bound).unwrap().len() as u64,
            MAX_IMPORT_BYTES
        );

        // A device that never ends, a directory and a FIFO nobody writes to: refused at once.
        let error = read_source(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(
            error,
            "cannot import /dev/zero: it is a device, not a regular file; name the client's JSON config file (or `claude`, `cursor`, `vscode`)"
        );
        let error = read_source(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("it is a directory, not a regular file"),
            "{error}"
        );
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let error = read_source(&fifo).unwrap_err().to_string();
        assert!(
            error.contains("it is a named pipe (FIFO), not a regular file"),
            "{error}"
        );
    }

    #[test]
    fn off_a_terminal_nothing_is_asked_and_the_commands_are_printed() {
        let report = secrets_report(&exports(), None, &mut |_| panic!("asked off a terminal"));
        assert!(
            report.starts_with("Set these before starting Portico"),
            "{report}"
        );
        assert_eq!(
            report.matches("  portico secret set ").count(),
            3,
            "{report}"
        );
        assert!(!report.contains(SENTINEL), "{report}");
    }
}
