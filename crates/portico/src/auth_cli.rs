//! `portico auth`: OAuth logins to protected MCP servers. The credentials go to the data dir's
//! `oauth/` (one 0600 file per server), where a running daemon and `portico mcp` read them at their
//! next request: no restart.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Subcommand;
use portico_config::{McpServerConfig, Transport};
use portico_hub::StopGrace;
use portico_mcp::Upstream;
use portico_mcp::oauth::{AuthStatus, Browser, OAuthHome, UpstreamAuth};

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Log in to an OAuth-protected server: the authorization page is opened with $BROWSER (else
    /// the desktop's opener; its URL is printed too), the redirect comes back to 127.0.0.1, and the
    /// token is stored in the data dir. A running daemon picks it up without a restart.
    Login {
        /// The server's name in the config.
        server: String,
    },
    /// Each HTTP server's OAuth state: logged in or not, scopes, expiry, refresh token.
    Status {
        /// Print the states as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget a server's stored OAuth credentials.
    Logout {
        /// The server's name in the config.
        server: String,
    },
}

pub async fn run(explicit: Option<&Path>, command: AuthCommand) -> anyhow::Result<ExitCode> {
    let (config, _source) = portico_config::load(explicit)?;
    let dir = portico_config::data_dir();
    match command {
        AuthCommand::Login { server } => {
            let server = find(&config.mcp_servers, &server)?;
            let vars = portico_secrets::Vars::with_store(portico_secrets::SecretStore::for_config(
                &config,
            ));
            login(server, &dir, &vars).await
        }
        AuthCommand::Status { json } => {
            let home = quiet_home(&dir);
            let mut statuses = Vec::new();
            for server in config.mcp_servers.iter() {
                if let Some(auth) = UpstreamAuth::for_server(server, &home) {
                    statuses.push(auth.status()?);
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&statuses)?);
            } else if statuses.is_empty() {
                println!("no HTTP servers that could use OAuth are configured");
            } else {
                print!("{}", status_table(&statuses));
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthCommand::Logout { server } => {
            let server = find(&config.mcp_servers, &server)?;
            let auth = auth_for(server, &quiet_home(&dir))?;
            if auth.logout().await? {
                println!(
                    "forgot the OAuth credentials of `{}` ({})",
                    server.name,
                    auth.token_file().path().display()
                );
            } else {
                println!("`{}` had no stored OAuth credentials", server.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Credentials in the data dir, no browser: for commands that only read or remove them.
fn quiet_home(data_dir: &Path) -> OAuthHome {
    OAuthHome {
        browser: None,
        ..OAuthHome::in_data_dir(data_dir)
    }
}

fn find<'a>(servers: &'a [McpServerConfig], name: &str) -> anyhow::Result<&'a McpServerConfig> {
    servers.iter().find(|s| s.name == name).with_context(|| {
        format!(
            "no server named `{name}` in the config; configured: {}",
            crate::output::names(servers.iter().map(|s| s.name.as_str()))
        )
    })
}

fn auth_for(server: &McpServerConfig, home: &OAuthHome) -> anyhow::Result<Arc<UpstreamAuth>> {
    if let Transport::Stdio { .. } = server.transport {
        bail!(
            "server `{}` is a stdio server; OAuth is for servers reached over HTTP",
            server.name
        );
    }
    UpstreamAuth::for_server(server, home).with_context(|| {
        format!(
            "server `{}` sends its own `Authorization` header (its transport's `headers`); remove it to log in with OAuth instead",
            server.name
        )
    })
}

/// Connects to the server without its stored token and lists its catalog, so whatever the server
/// challenges (on the handshake or on a listing) starts the login; a server that challenges nothing
/// gets a login from its published metadata.
async fn login(
    server: &McpServerConfig,
    data_dir: &Path,
    vars: &portico_secrets::Vars,
) -> anyhow::Result<ExitCode> {
    let home = OAuthHome {
        browser: Some(Browser::from_env().unwrap_or(Browser::Desktop)),
        every_server: true,
        print_url: true,
        ..OAuthHome::in_data_dir(data_dir)
    };
    let auth = auth_for(server, &home)?;
    auth.start_fresh();
    let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
    let connected =
        Upstream::connect_with_auth(server, events, StopGrace::BRIEF, Some(auth.clone()), vars)
            .await;
    let outcome = match connected {
        Ok((upstream, exit)) => {
            let listed = upstream.list_catalog().await;
            upstream.shutdown();
            exit.wait().await;
            listed
                .map(|catalog| catalog.tools.len())
                .map_err(|e| e.to_string())
        }
        Err(error) => Err(error.to_string()),
    };
    if auth.fresh_login_pending() {
        // The server let everything through without a token, or failed before it asked.
        if let Err(error) = &outcome {
            bail!("{error}");
        }
        auth.login(None, auth.login_scopes(Vec::new())?)
            .await
            .with_context(|| {
                format!(
                    "server `{}` answered without asking for authorization, and logging in from its published metadata failed",
                    server.name
                )
            })?;
    }
    let status = auth.status()?;
    let scopes = if status.scopes.is_empty() {
        "none named".to_string()
    } else {
        status.scopes.join(" ")
    };
    match outcome {
        Ok(tools) => {
            println!(
                "logged in to `{}` (scopes: {scopes}); it lists {tools} tool(s). A running daemon uses the new token at its next request.",
                server.name
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!(
                "logged in to `{}` (scopes: {scopes}), but the server still refuses: {error}",
                server.name
            );
            Ok(ExitCode::from(1))
        }
    }
}

fn status_table(statuses: &[AuthStatus]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut out = String::new();
    for status in statuses {
        let state = match (&status.needs_login, status.logged_in) {
            (Some(reason), _) => format!("needs login ({reason})"),
            (None, true) => "logged in".to_string(),
            (None, false) => "not logged in".to_string(),
        };
        let state = crate::output::printable(&state);
        out.push_str(&format!("{}: {state}\n", status.server));
        if status.logged_in {
            if !status.scopes.is_empty() {
                let scopes = crate::output::printable(&status.scopes.join(" "));
                out.push_str(&format!("  scopes: {scopes}\n"));
            }
            if let Some(expires_at) = status.expires_at {
                let when = if expires_at > now {
                    format!("in {}", duration_words(expires_at - now))
                } else {
                    "expired".to_string()
                };
                let refresh = if status.refreshable {
                    ", refreshed automatically"
                } else {
                    ", no refresh token: log in again then"
                };
                out.push_str(&format!("  token expires {when}{refresh}\n"));
            }
            if let Some(issuer) = &status.issuer {
                let issuer = crate::output::printable(issuer);
                out.push_str(&format!("  issuer: {issuer}\n"));
            }
        }
    }
    out
}

/// `2h 5m`, `12m`, `40s`.
fn duration_words(secs: u64) -> String {
    match (secs / 3600, (secs % 3600) / 60) {
        (0, 0) => format!("{secs}s"),
        (0, minutes) => format!("{minutes}m"),
        (hours, minutes) => format!("{hours}h {minutes}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_words() {
        assert_eq!(duration_words(40), "40s");
        assert_eq!(duration_words(12 * 60 + 5), "12m");
        assert_eq!(duration_words(2 * 3600 + 5 * 60), "2h 5m");
    }
}
