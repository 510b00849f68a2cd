//! `portico serve`'s signals: SIGHUP reloads the config; SIGINT or SIGTERM stops the daemon (calls in
//! progress get their grace, idle sessions and streams none), and a second one stops it at once, its
//! servers' processes killed and the daemon info file removed.

use std::future::Future;

use portico_daemon::{InfoFile, LiveConfig};
use portico_engine::Engine;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// The exit status of a daemon stopped by a second signal: 128 + SIGINT, as a shell reports it.
const STOPPED_AT_ONCE: i32 = 130;

/// The daemon's signal handlers, installed before anything starts: a signal that comes while
/// the config loads or the servers start is then handled, not the default (which kills the process
/// and, for SIGHUP, left a stale `daemon.json`).
pub(crate) struct ServeSignals {
    /// True once the first stop signal came.
    stop: watch::Sender<bool>,
    hangup: Signal,
    interrupt: Signal,
    terminate: Signal,
}

impl ServeSignals {
    pub(crate) fn install() -> anyhow::Result<ServeSignals> {
        let handler = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| anyhow::anyhow!("cannot install the {name} handler: {e}"))
        };
        Ok(ServeSignals {
            stop: watch::channel(false).0,
            hangup: handler(SignalKind::hangup(), "SIGHUP")?,
            interrupt: handler(SignalKind::interrupt(), "SIGINT")?,
            terminate: handler(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    /// Resolves on the first SIGINT or SIGTERM (once [`ServeSignals::follow`] runs).
    pub(crate) fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopped = self.stop.subscribe();
        async move {
            // An error means the sender is gone, which only happens when the process exits.
            let _ = stopped.wait_for(|stopped| *stopped).await;
        }
    }

    /// Handles the signals from now on: SIGHUP asks `live` to reload; the first stop signal
    /// resolves [`ServeSignals::stopped`]; the second kills the engine's children and exits.
    pub(crate) fn follow(self, live: LiveConfig, engine: Engine, info_file: InfoFile) {
        let ServeSignals {
            stop,
            mut hangup,
            mut interrupt,
            mut terminate,
        } = self;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(()) = hangup.recv() => {
                        tracing::info!("SIGHUP: reloading the config");
                        live.request_reload();
                        continue;
                    }
                    Some(()) = interrupt.recv() => {}
                    Some(()) = terminate.recv() => {}
                }
                if !*stop.borrow() {
                    stop.send_replace(true);
                    continue;
                }
                eprintln!(
                    "portico: second stop signal; stopping now, killing the servers' processes"
                );
                engine.kill_children_now();
                if info_file
                    .read()
                    .is_some_and(|info| info.pid == std::process::id())
                {
                    let _ = std::fs::remove_file(info_file.path());
                }
                std::process::exit(STOPPED_AT_ONCE);
            }
        });
    }
}
