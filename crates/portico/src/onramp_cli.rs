//! The first-run commands: `portico init` (a commented starter config), `portico completions`, and
//! what a first run is told (`portico export` is in `export_cli`).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: e.g. `portico completions bash > ~/.local/share/bash-completion/completions/portico`,
    /// `portico completions zsh > ~/.zfunc/_portico`, `portico completions fish >
    /// ~/.config/fish/completions/portico.fish`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `portico init`: writes [`portico_config::STARTER_CONFIG`] where the config is read from, never over
/// an existing file.
pub fn init(explicit: Option<&Path>) -> anyhow::Result<ExitCode> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = portico_config::path_to_write(explicit);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        portico_config::create_private_dir_all(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // `create_new`: refused by the file system when it exists, so a config is never overwritten,
    // even by two `init`s at once.
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists, and `portico init` never overwrites a config; edit it (then `portico config check`), or move it away and run `portico init` again",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", path.display())),
    };
    file.write_all(portico_config::STARTER_CONFIG.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut told = format!(
        "portico: wrote a starter config to {}\n\
         It has the built-in tools and the default agent `assistant`, and no MCP servers yet. Next:\n\
         \x20 portico import           add the MCP servers of Claude Desktop, Cursor or VS Code\n\
         \x20 portico config check     check the file after you edit it\n\
         \x20 portico export claude    the JSON that points Claude Desktop (or cursor, vscode) at Portico\n\
         \x20 portico serve            run the daemon: MCP at http://127.0.0.1:4200/mcp\n",
        path.display()
    );
    if explicit.is_some() && path != portico_config::default_config_path() {
        told.push_str(&format!(
            "Portico reads this file when given `--config {0}` (or PORTICO_CONFIG={0}).\n",
            path.display()
        ));
    }
    crate::cli::print_now(told)?;
    Ok(ExitCode::SUCCESS)
}

/// What `portico serve` says when there is no config file.
pub fn no_config_file() -> String {
    format!(
        "no config file; run `portico init` to create one at {} (running on the embedded defaults: the built-in tools and the `assistant` agent)",
        portico_config::default_config_path().display()
    )
}

/// `portico completions SHELL`: the shell's completion script for every command and option.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "portico", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&script)
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}
