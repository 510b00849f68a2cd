//! What `--help` says beyond each flag's own line: one to three working examples for every command,
//! and where `serve` listens unless told otherwise. Kept in one table beside the derive (rather than
//! an attribute on each command across the CLI's modules) so a test can hold every command to it.

use clap::{CommandFactory, FromArgMatches};

use crate::cli::Cli;

/// The command tree `portico` parses: the derived one, with the examples and serve's defaults.
pub fn command() -> clap::Command {
    let listen_help = format!(
        "Listen here instead of [server] listen (default {}): IP:PORT or localhost:PORT",
        portico_config::DEFAULT_LISTEN
    );
    let root = Cli::command().mut_subcommand("serve", |serve| {
        serve
            .mut_arg("listen", |arg| arg.help(listen_help))
            .after_help(serve_address())
    });
    with_examples(root, "")
}

/// Parses the command line with [`command`]; on a usage error (or `--help`), prints and exits.
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

fn serve_address() -> String {
    format!(
        "Listens on http://{} (this machine only) unless the config's [server] listen says \
         otherwise; --listen ADDR overrides both for one run.",
        portico_config::DEFAULT_LISTEN
    )
}

fn with_examples(command: clap::Command, path: &str) -> clap::Command {
    let mut command = match examples(path) {
        Some(lines) => {
            // After what the command already says there (serve's address).
            let before = command
                .get_after_help()
                .map(|text| format!("{text}\n\n"))
                .unwrap_or_default();
            let examples = format!("{before}Examples:\n  {}", lines.join("\n  "));
            command.after_help(examples)
        }
        None => command,
    };
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        let inner = format!("{path} {name}").trim_start().to_string();
        command = command.mut_subcommand(&name, |sub| with_examples(sub, &inner));
    }
    command
}

/// The examples of the command at `path` (its words after `portico`; "" is `portico` itself).
/// Lines starting with `#` say what the next line does.
fn examples(path: &str) -> Option<&'static [&'static str]> {
    Some(match path {
        "" => &["portico tools", "portico call system_time", "portico serve"],
        "serve" => &[
            "# Run the daemon: MCP at http://127.0.0.1:4200/mcp, the dashboard at /",
            "portico serve",
            "portico serve --listen 127.0.0.1:4300",
        ],
        "mcp" => &[
            "# What an IDE runs (`portico export` writes it into the IDE's config)",
            "portico mcp",
            "portico mcp --standalone --config ./project.toml",
        ],
        "servers" => &["portico servers", "portico servers --json"],
        "tools" => &[
            "portico tools",
            "portico tools --server github",
            "portico tools --json | jq -r '.[].name'",
        ],
        "call" => &[
            "portico call system_time",
            "portico call file_list --args '{\"path\": \".\", \"recursive\": true}'",
            "portico call mcp_github_search_repositories --args '{\"query\": \"mcp\"}' --json",
        ],
        "agents" => &["portico agents", "portico agents --json"],
        "chat" => &[
            "portico chat assistant",
            "portico chat assistant --conversation c_0123abcd",
        ],
        "conversations" => &[
            "portico conversations list",
            "portico conversations show c_0123abcd",
        ],
        "conversations list" => &[
            "portico conversations list",
            "portico conversations list --agent assistant --limit 10",
        ],
        "conversations show" => &[
            "portico conversations show c_0123abcd",
            "portico conversations show c_0123abcd --json",
        ],
        "a2a" => &[
            "portico a2a discover https://agent.example.com",
            "portico a2a send https://agent.example.com 'What is on my calendar today?'",
        ],
        "a2a discover" => &[
            "portico a2a discover https://agent.example.com",
            "portico a2a discover https://agent.example.com/.well-known/agent-card.json --json",
        ],
        "a2a send" => &[
            "portico a2a send planner 'Plan a trip to Lisbon'",
            "portico a2a send https://agent.example.com 'Yes, book it' --task TASK_ID",
        ],
        "auth" => &["portico auth login notion", "portico auth status"],
        "auth login" => &["portico auth login notion"],
        "auth status" => &["portico auth status", "portico auth status --json"],
        "auth logout" => &["portico auth logout notion"],
        "clients" => &["portico clients add ci", "portico clients list"],
        "clients add" => &[
            "portico clients add ci",
            "portico clients add reader --tools 'mcp_github_get_*' --tools system_time",
        ],
        "clients list" => &["portico clients list", "portico clients list --json"],
        "approvals" => &[
            "portico approvals list",
            "portico approvals approve apr_0123abcd",
        ],
        "approvals list" => &[
            "portico approvals list",
            "portico approvals list --status all --limit 20",
        ],
        "approvals show" => &["portico approvals show apr_0123abcd"],
        "approvals approve" => &["portico approvals approve apr_0123abcd"],
        "approvals deny" => &["portico approvals deny apr_0123abcd --reason 'not on main'"],
        "audit" => &[
            "portico audit --since 1h",
            "portico audit --tool mcp_github_create_issue --limit 20",
            "portico audit verify",
        ],
        "audit verify" => &["portico audit verify", "portico audit verify --json"],
        "doctor" => &["portico doctor", "portico doctor --json"],
        "init" => &["portico init", "portico init --config ./portico.toml"],
        "secret" => &["portico secret set GITHUB_TOKEN", "portico secret list"],
        "secret set" => &[
            "# Asks for the value without echoing it",
            "portico secret set GITHUB_TOKEN",
            "printf %s \"$TOKEN\" | portico secret set GITHUB_TOKEN",
        ],
        "secret list" => &["portico secret list"],
        "secret rm" => &["portico secret rm GITHUB_TOKEN"],
        "import" => &[
            "portico import",
            "portico import claude --dry-run",
            "portico import ./mcp.json --rename",
        ],
        "search" => &["portico search github", "portico search --limit 50"],
        "export" => &[
            "portico export claude",
            "portico export cursor --write",
            "portico export vscode --file .vscode/mcp.json --dry-run",
        ],
        "add" => &[
            "portico add everything -- npx -y @modelcontextprotocol/server-everything",
            "portico add docs https://mcp.example.com/mcp --header 'Authorization: Bearer ${DOCS_TOKEN}'",
            "portico add io.github.github/github-mcp-server --as github",
        ],
        "remove" => &["portico remove everything"],
        "enable" => &["portico enable everything"],
        "disable" => &["portico disable everything"],
        "restart" => &["portico restart everything"],
        "logs" => &[
            "portico logs everything",
            "portico logs everything -f -n 50",
        ],
        "stop" => &["portico stop"],
        "completions" => &[
            "portico completions bash > ~/.local/share/bash-completion/completions/portico",
            "portico completions zsh > ~/.zfunc/_portico",
        ],
        "config" => &["portico config check", "portico config path"],
        "config check" => &[
            "portico config check",
            "portico config check --config ./portico.toml",
        ],
        "config path" => &["portico config path"],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command but clap's own `help`, with its path after `portico` ("" for the root).
    fn every_command(command: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.to_string(), command.clone()));
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                let inner = format!("{path} {}", sub.get_name())
                    .trim_start()
                    .to_string();
                every_command(sub, &inner, out);
            }
        }
    }

    fn built() -> Vec<(String, clap::Command)> {
        let mut root = command();
        root.build();
        let mut all = Vec::new();
        every_command(&root, "", &mut all);
        all
    }

    /// The command lines of a help text's Examples section: from `portico` to a shell operator.
    fn example_lines(help: &str) -> Vec<Vec<String>> {
        let section = help.split_once("Examples:\n").map_or("", |(_, rest)| rest);
        section
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| {
                let words = shlex::split(line).unwrap_or_else(|| panic!("unquoted: {line}"));
                let start = words
                    .iter()
                    .position(|word| word == "portico")
                    .unwrap_or_else(|| panic!("no `portico` in the example {line}"));
                words[start..]
                    .iter()
                    .take_while(|word| !matches!(word.as_str(), "|" | ">" | ">>" | "&&"))
                    .cloned()
                    .collect()
            })
            .collect()
    }

    /// A help text's option lists (its own, then the global ones), without the about and commands.
    fn options(help: &str) -> &str {
        help.split_once("\nOptions:\n")
            .map_or("", |(_, options)| options)
    }

    #[test]
    fn every_command_has_examples_and_they_parse() {
        for (path, mut command) in built() {
            let help = command.render_help().to_string();
            let examples = example_lines(&help);
            assert!(
                (1..=3).contains(&examples.len()),
                "`portico {path} --help` has {} examples:\n{help}",
                examples.len()
            );
            for words in examples {
                let matches = super::command()
                    .try_get_matches_from(&words)
                    .unwrap_or_else(|e| {
                        panic!("example of `{path}` does not parse: {words:?}\n{e}")
                    });
                Cli::from_arg_matches(&matches)
                    .unwrap_or_else(|e| panic!("example of `{path}`: {words:?}\n{e}"));
                let named: Vec<&str> = words[1..]
                    .iter()
                    .take(path.split(' ').filter(|w| !w.is_empty()).count())
                    .map(String::as_str)
                    .collect();
                assert_eq!(
                    named.join(" "),
                    path,
                    "an example of `{path}` runs another command"
                );
            }
        }
    }

    #[test]
    fn standalone_is_shown_only_where_it_changes_something() {
        let takes_it = [
            "mcp",
            "servers",
            "tools",
            "call",
            "agents",
            "chat",
            "conversations",
            "conversations list",
            "conversations show",
            "a2a send",
            "audit",
            "add",
            "remove",
            "enable",
            "disable",
        ];
        let mut shown = Vec::new();
        for (path, mut command) in built() {
            if options(&command.render_help().to_string()).contains("--standalone") {
                shown.push(path);
            }
        }
        assert_eq!(shown, takes_it);
        for words in [
            &["portico", "init"][..],
            &["portico", "export", "claude"],
            &["portico", "completions", "bash"],
            &["portico", "serve"],
            &["portico", "config", "check"],
        ] {
            let parsed = command().try_get_matches_from(words.iter().chain(&["--standalone"]));
            assert_eq!(
                parsed.err().map(|e| e.kind()),
                Some(clap::error::ErrorKind::UnknownArgument),
                "{words:?} --standalone"
            );
        }
        // The daemon-only commands still take it, to refuse it in words.
        let cli = Cli::from_arg_matches(
            &command()
                .try_get_matches_from(["portico", "approvals", "list", "--standalone"])
                .unwrap(),
        )
        .unwrap();
        assert!(cli.command.standalone());
    }

    #[test]
    fn global_options_are_listed_apart_from_each_commands_own() {
        for (path, mut command) in built() {
            let help = command.render_help().to_string();
            let (own, global) = options(&help)
                .split_once("Global options:\n")
                .unwrap_or_else(|| {
                    panic!("`portico {path} --help` has no Global options:\n{help}")
                });
            // A flag's own line starts with it (after its short form, `-v, `).
            let lists = |section: &str, flag: &str| {
                section.lines().map(str::trim_start).any(|line| {
                    line.starts_with(flag) || line.get(4..).is_some_and(|l| l.starts_with(flag))
                })
            };
            for flag in ["--config", "--verbose", "--quiet", "--log-format"] {
                assert!(
                    !lists(own, flag),
                    "`portico {path} --help`: {flag} with its own:\n{help}"
                );
                assert!(
                    lists(global, flag),
                    "`portico {path} --help` lacks {flag}:\n{help}"
                );
            }
        }
    }

    #[test]
    fn serve_says_where_it_listens_and_how_to_change_it() {
        let mut root = command();
        let help = root
            .find_subcommand_mut("serve")
            .unwrap()
            .render_help()
            .to_string();
        assert!(
            help.contains("Listens on http://127.0.0.1:4200 (this machine only)"),
            "{help}"
        );
        assert!(help.contains("--listen <ADDR>"), "{help}");
        assert!(help.contains("(default 127.0.0.1:4200)"), "{help}");
        assert!(
            help.contains("portico serve --listen 127.0.0.1:4300"),
            "{help}"
        );
    }
}
