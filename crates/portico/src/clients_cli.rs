//! `portico clients`: the HTTP door's named clients (`[[server.clients]]`). `add` makes a token and
//! prints it once with the config block to paste; it does not edit the config file, which may hold
//! comments and `${VAR}`s a rewrite would lose. `list` shows names and scopes, never tokens.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

/// Random bytes in a new token: 256 bits, from the operating system's generator.
const TOKEN_BYTES: usize = 32;

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Make a token for a new client: the token (once, on the first line of stdout) and the
    /// [[server.clients]] block with its token_sha256 to add to the config.
    Add {
        /// The client's name, `[a-z0-9_-]`: it calls as `client:{name}`.
        name: String,
        /// A glob over tool names the client may list and call (repeat for more); default: all.
        #[arg(long = "tools", value_name = "GLOB")]
        tools: Vec<String>,
    },
    /// The configured clients: name, how the token is given, and the tools scope (never tokens).
    List {
        /// Print the clients as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(explicit: Option<&Path>, command: ClientsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ClientsCommand::Add { name, tools } => {
            let (token, block) = new_client(&name, &tools)?;
            println!("{token}\n\n{block}");
            eprintln!(
                "The first line is client `{name}`'s token; it is shown only now. Add the block to the config ({}), restart `portico serve`, and give the client the token as `Authorization: Bearer <token>` (for `portico mcp`: PORTICO_CLIENT_TOKEN).",
                portico_config::locate(explicit)
            );
            Ok(ExitCode::SUCCESS)
        }
        ClientsCommand::List { json } => {
            let (config, _source) = portico_config::load(explicit)?;
            let clients = &config.server.clients;
            if json {
                let list: Vec<_> = clients
                    .iter()
                    .map(|c| {
                        json!({
                            "name": c.name,
                            "principal": format!("client:{}", c.name),
                            "token": if c.token_sha256.is_some() { "token_sha256" } else { "token" },
                            "tools": c.tools,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if clients.is_empty() {
                println!(
                    "no [[server.clients]] are configured; `portico clients add NAME` makes one"
                );
            } else {
                for client in clients {
                    let scope = match &client.tools {
                        Some(tools) => tools.join(", "),
                        None => "all tools".into(),
                    };
                    println!("client:{}  {scope}", client.name);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A fresh token and the config block that names its digest.
fn new_client(name: &str, tools: &[String]) -> anyhow::Result<(String, String)> {
    if !portico_config::is_client_name(name) {
        bail!("client name `{name}` must be 1 to 64 of `a-z`, `0-9`, `-` and `_`, e.g. `laptop`");
    }
    if let Some(whose) = portico_config::reserved_client_name(name) {
        bail!(
            "client name `{name}` is taken: `client:{name}` is {whose}; door names (default, \
             stdio, cli, http, api, a2a, mcp) are reserved, e.g. use `laptop`"
        );
    }
    portico_pipeline::ToolPatterns::new(tools).context("--tools")?;
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let token = format!("portico_{token}");
    let mut block = format!(
        "[[server.clients]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n",
        portico_config::token_sha256_hex(&token)
    );
    if !tools.is_empty() {
        let quoted: Vec<String> = tools
            .iter()
            .map(|t| serde_json::to_string(t).unwrap_or_default())
            .collect();
        block.push_str(&format!("tools = [{}]\n", quoted.join(", ")));
    }
    Ok((token, block))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_client_gets_a_fresh_token_and_a_block_config_check_accepts() {
        let (token, block) = new_client("laptop", &["time_*".into(), "file_\"x".into()]).unwrap();
        let (other, _) = new_client("laptop", &[]).unwrap();
        assert_ne!(token, other);
        assert_eq!(token.len(), "portico_".len() + 2 * TOKEN_BYTES);
        assert_eq!(
            block,
            format!(
                "[[server.clients]]\nname = \"laptop\"\ntoken_sha256 = \"{}\"\ntools = [\"time_*\", \"file_\\\"x\"]\n",
                portico_config::token_sha256_hex(&token)
            )
        );
        assert_eq!(portico_config::check(&block), Vec::new());
        let config = portico_config::parse("block", &block).unwrap();
        assert_eq!(
            config.server.clients[0].tools.as_deref(),
            Some(&["time_*".to_string(), "file_\"x".to_string()][..])
        );
        assert!(new_client("Laptop", &[]).is_err());
        assert!(new_client("default", &[]).is_err());
        assert!(new_client("x", &["[".into()]).is_err());
    }
}
