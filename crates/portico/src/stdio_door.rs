//! `portico mcp`: the stdio door for IDEs.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use portico_daemon::{DaemonInfo, InfoFile};
use portico_engine::Engine;
use portico_mcp::{StopGrace, Upstream, UpstreamEvent};
use portico_mcp_server::{Backend, DaemonLink, PorticoServer, ServerOptions};
use rmcp::ServiceExt;
use tokio::sync::{mpsc, watch};

pub async fn run(explicit: Option<&std::path::Path>, standalone: bool) -> anyhow::Result<ExitCode> {
    let (config, source) = portico_config::load(explicit)?;
    let options = ServerOptions::from_config(&config);
    // An explicit --config naming another file than the daemon runs means that file: served here.
    let other_config = explicit.is_some()
        && crate::oneview_cli::published_config_source()
            .is_some_and(|theirs| !crate::oneview_cli::same_config(&theirs, &source));
    let daemon = if standalone || other_config {
        None
    } else {
        connect_daemon().await
    };
    let (backend, engine) = match daemon {
        Some(link) => {
            tracing::info!("proxying to the running daemon");
            (Backend::Daemon(Arc::new(link)), None)
        }
        None => {
            tracing::info!("no daemon running; serving config {source} in-process");
            // The handshake is answered at once; servers join the catalog as they connect and clients
            // hear about it through list_changed.
            let engine = Engine::start(&config, crate::cli::engine_options_for(&config, &source))?;
            (Backend::Local(engine.clone()), Some(engine))
        }
    };
    let server = PorticoServer::new(
        backend,
        ServerOptions {
            door: "stdio".into(),
            ..options
        },
    );
    let transport = crate::stdio_transport::transport(&config);
    let outcome = match server.serve(transport).await {
        Ok(running) => {
            tokio::select! {
                _ = running.waiting() => {}
                _ = crate::cli::shutdown_signal() => {}
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e).context("MCP session on stdio ended before it started"),
    };
    if let Some(engine) = engine {
        engine.shutdown().await;
    }
    outcome
}

/// The environment variable with the `[[server.clients]]` token `portico mcp` presents to a daemon.
pub const CLIENT_TOKEN_ENV: &str = "PORTICO_CLIENT_TOKEN";

/// Finds a live daemon through its info file and opens an MCP session with it. A stale file (the daemon
/// died), a process on the recorded port that cannot prove it is the daemon, or a daemon that does not
/// answer means `None`: serve in-process instead. The token is sent only after the proof.
async fn connect_daemon() -> Option<DaemonLink> {
    let file = InfoFile::in_dir(&portico_config::data_dir());
    let info = file.read()?;
    match check_daemon(&info).await {
        DaemonCheck::Proven => {}
        DaemonCheck::NoAnswer => {
            tracing::debug!(
                "ignoring stale daemon info (pid {} at {}: nothing answers)",
                info.pid,
                info.address
            );
            return None;
        }
        DaemonCheck::Impostor(what) => {
            tracing::warn!(
                "{} names a daemon with pid {} at {}, but {what}; not sending it the token and serving in-process. If the daemon is gone, remove that file; if it runs, restart it",
                file.path().display(),
                info.pid,
                info.address
            );
            return None;
        }
    }
    // A `[[server.clients]]` token makes this door that client (its name, its scope); without
    // one, the daemon's own `[server] token` makes it `client:default`.
    let token = crate::daemon_client::client_token(&info);
    let config = crate::daemon_client::mcp_server_config(&info, token.as_deref());
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    // An HTTP session: there is no child to stop.
    let (upstream, _exit) = match Upstream::connect(&config, events_tx, StopGrace::PATIENT).await {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(
                "a daemon is running at {} but did not accept an MCP session ({e}); serving in-process",
                info.address
            );
            return None;
        }
    };
    let (changes_tx, changes) = watch::channel(0u64);
    let resource_updates = tokio::sync::broadcast::channel(256).0;
    let updates = resource_updates.clone();
    tokio::spawn(async move {
        while let Some(event) = events_rx.recv().await {
            match event {
                UpstreamEvent::ResourceUpdated(uri) => {
                    let _ = updates.send(uri);
                }
                _ => changes_tx.send_modify(|n| *n += 1),
            }
        }
    });
    Some(DaemonLink {
        upstream,
        changes,
        resource_updates,
    })
}

/// What answers at a daemon info file's address.
#[derive(Debug)]
pub(crate) enum DaemonCheck {
    /// The daemon that wrote the file: it answered a fresh challenge with the file's identity key.
    Proven,
    /// Nothing, or nothing that speaks HTTP: the usual stale file.
    NoAnswer,
    /// Something else, which must not see the token; says what was found.
    Impostor(String),
}

pub(crate) async fn check_daemon(info: &DaemonInfo) -> DaemonCheck {
    let Ok(client) = portico_net::SafeClient::builder()
        .policy(portico_net::NetPolicy::allow_private_network())
        .timeout(Duration::from_secs(2))
        .build()
    else {
        return DaemonCheck::NoAnswer;
    };
    // Fresh per check, so a recorded answer cannot be replayed.
    let challenge = portico_daemon::new_challenge();
    let url = format!("{}/api/health?challenge={challenge}", info.base_url());
    let Ok(response) = client.get(&url).await else {
        return DaemonCheck::NoAnswer;
    };
    let status = response.status();
    let Ok(health) = response.json::<serde_json::Value>().await else {
        return DaemonCheck::Impostor(format!(
            "what answers there is not a Portico daemon (HTTP {status}, no JSON health answer)"
        ));
    };
    if health["status"] != "ok" || health["pid"].as_u64() != Some(u64::from(info.pid)) {
        return DaemonCheck::Impostor(format!(
            "what answers there is another process (health says pid {}, status {})",
            health["pid"], health["status"]
        ));
    }
    let proof = health["proof"].as_str().unwrap_or_default();
    match info.verify_identity(&challenge, proof) {
        Ok(()) => DaemonCheck::Proven,
        Err(error) => {
            DaemonCheck::Impostor(format!("what answers there echoes the pid yet {error}"))
        }
    }
}
