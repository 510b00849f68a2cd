//! Live config: the daemon follows its config file and agents directory, and SIGHUP, and applies a
//! new config through [`Engine::reload`], which starts, stops or restarts only the servers that
//! changed. A config that does not load (it fails `config check`, or a file cannot be read) is
//! refused: the running one is kept, and the refusal is logged and shown by `/api/health` and
//! `/api/mcp/servers` until a config loads again.
//!
//! The files are polled rather than watched with inotify (the `notify` crate): it would be a new
//! dependency with a platform backend each, editors that save by renaming a new file over the old
//! one replace the watched inode (the watch has to be set again, on the directory), and an
//! agents directory that appears later needs watching its parent. Reading one small file and a
//! directory of small files twice a second costs nothing and handles every one of those cases.
//! A change is applied once two reads in a row agree, so a file written in several steps is
//! read whole.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_config::{Config, ConfigSource};
use portico_engine::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::info::{ConfigIdentity, DaemonInfo, InfoFile};

/// How often the config file and agents directory are read for changes.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// The `config` object of `/api/health` and `/api/mcp/servers`, as the CLI reads it back (without the
/// door's token, `/api/health` shows only `status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStatus {
    pub status: ConfigLoad,
    /// The file the daemon follows, or `<embedded default>`.
    #[serde(default)]
    pub file: String,
    /// How many reloads were applied since the daemon started.
    #[serde(default)]
    pub reloads: u64,
    /// Why the last reload was refused (the running config was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Sections of the file that wait for a restart to take effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_needed: Vec<String>,
}

/// Whether the file as it is now runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigLoad {
    Loaded,
    /// The last reload failed; the config before it still runs.
    Refused,
}

/// The config the daemon runs, where it comes from, and whether the last attempt to reload it
/// was refused. Cheap to clone.
#[derive(Clone)]
pub struct LiveConfig(Arc<Inner>);

struct Inner {
    /// `serve --listen`: it stands over the file's `[server] listen` in every config loaded, so
    /// that a reload never sees a `[server]` change that is only the flag.
    listen: Option<String>,
    /// `--config`, as `portico_config::load` takes it (else `$PORTICO_CONFIG`, the data dir's file).
    explicit: Option<PathBuf>,
    /// Whether the daemon follows its files at all (not for a router built from a fixed config).
    follows: bool,
    state: Mutex<State>,
    /// SIGHUP: reload now. `notify_one` keeps one request that comes while a reload runs.
    requested: Notify,
    /// `daemon.json` and what it says, once written: a reload updates the config it names, so
    /// that `portico doctor` compares the file with what the daemon runs now.
    published: Mutex<Option<(InfoFile, DaemonInfo)>>,
}

struct State {
    config: Arc<Config>,
    source: ConfigSource,
    refused: Option<String>,
    reloads: u64,
    /// The file's sections that differ from what runs and wait for a restart (`[server]`'s tokens
    /// and clients, the policies, …): shown wherever the config's status is, so that a revoked
    /// token or a tightened policy that is not in force yet is never reported as loaded and done.
    restart_needed: Vec<&'static str>,
}

impl LiveConfig {
    /// The config the daemon started with, loaded from `explicit` as `portico_config::load` does,
    /// followed for changes once the daemon serves.
    pub fn new(config: Config, source: ConfigSource, explicit: Option<PathBuf>) -> Self {
        Self::build(config, source, explicit, true)
    }

    /// Keeps `serve --listen`'s address over the file's in every config a reload loads.
    pub fn with_listen(mut self, listen: Option<String>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.listen = listen;
        }
        self
    }

    /// A config that never changes, for a router built without a daemon around it.
    pub(crate) fn fixed(config: Config) -> Self {
        Self::build(config, ConfigSource::Embedded, None, false)
    }

    fn build(
        config: Config,
        source: ConfigSource,
        explicit: Option<PathBuf>,
        follows: bool,
    ) -> Self {
        LiveConfig(Arc::new(Inner {
            listen: None,
            explicit,
            follows,
            state: Mutex::new(State {
                config: Arc::new(config),
                source,
                refused: None,
                restart_needed: Vec::new(),
                reloads: 0,
            }),
            requested: Notify::new(),
            published: Mutex::new(None),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().expect("live config lock")
    }

    /// The config running now.
    pub fn config(&self) -> Arc<Config> {
        self.state().config.clone()
    }

    /// Asks for a reload now (SIGHUP), whether or not the files changed.
    pub fn request_reload(&self) {
        self.0.requested.notify_one();
    }

    /// The `config` object of `/api/health` and `/api/mcp/servers`: `loaded` or `refused` (with the
    /// error), the file, and how many reloads were applied.
    pub(crate) fn status_json(&self) -> Value {
        serde_json::to_value(self.status()).unwrap_or(Value::Null)
    }

    pub(crate) fn status(&self) -> ConfigStatus {
        let state = self.state();
        ConfigStatus {
            status: if state.refused.is_some() {
                ConfigLoad::Refused
            } else {
                ConfigLoad::Loaded
            },
            file: state.source.to_string(),
            reloads: state.reloads,
            error: state.refused.clone(),
            restart_needed: state.restart_needed.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A fingerprint of what a reload would read: the located config file and the agents
    /// directory's `*.toml` files, names and contents. An unreadable file counts as its error, so
    /// that it is tried (and refused) once, not on every poll.
    fn fingerprint(&self) -> u64 {
        let (source, agents_dir) = {
            let state = self.state();
            let source = portico_config::locate(self.0.explicit.as_deref());
            let base = match &state.source {
                ConfigSource::File(path) => {
                    path.parent().map(Path::to_path_buf).unwrap_or_default()
                }
                ConfigSource::Embedded => portico_config::data_dir(),
            };
            let agents_dir = match &state.config.server.agents_dir {
                Some(dir) => base.join(dir),
                None => portico_config::data_dir().join("agents"),
            };
            (source, agents_dir)
        };
        let mut hasher = std::hash::DefaultHasher::new();
        match &source {
            ConfigSource::File(path) => {
                path.hash(&mut hasher);
                hash_file(path, &mut hasher);
            }
            ConfigSource::Embedded => 0u8.hash(&mut hasher),
        }
        if let Ok(entries) = std::fs::read_dir(&agents_dir) {
            let mut files: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
                .collect();
            files.sort();
            for file in files {
                file.hash(&mut hasher);
                hash_file(&file, &mut hasher);
            }
        }
        hasher.finish()
    }

    /// Loads the config again and applies it, or refuses it and keeps the running one. `why` is
    /// for the log.
    pub(crate) async fn reload(&self, engine: &Engine, why: &str) {
        let loaded = portico_config::load(self.0.explicit.as_deref());
        let (mut new, source) = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                let error = error.to_string();
                tracing::error!(
                    "config reload ({why}) refused, the running config is kept: {error}; fix the file (`portico config check` lists the problems) and save it again"
                );
                self.state().refused = Some(error);
                return;
            }
        };
        if let Some(listen) = &self.0.listen {
            new.server.listen.clone_from(listen);
        }
        let old = self.config();
        let reloaded = match engine.reload(&old, &new).await {
            Ok(reloaded) => reloaded,
            Err(error) => {
                let error = format!("{source}: {error}");
                tracing::error!(
                    "config reload ({why}) refused, the running config is kept: {error}"
                );
                self.state().refused = Some(error);
                return;
            }
        };
        for section in &reloaded.restart_needed {
            tracing::warn!(
                "config reload ({why}): {section} changed; restart needed for it to take effect (Portico keeps running with the old {section})"
            );
        }
        let servers = &reloaded.servers;
        let mut done = Vec::new();
        for (what, names) in [
            ("added", &servers.added),
            ("removed", &servers.removed),
            ("restarted", &servers.restarted),
        ] {
            if !names.is_empty() {
                done.push(format!("{what} {}", names.join(", ")));
            }
        }
        if done.is_empty() {
            done.push("no server changed".into());
        }
        let agents = &reloaded.agents;
        for (what, names) in [
            ("added agent", &agents.added),
            ("removed agent", &agents.removed),
            ("changed agent", &agents.changed),
        ] {
            if !names.is_empty() {
                done.push(format!("{what} {}", names.join(", ")));
            }
        }
        tracing::info!(
            "config reloaded ({why}) from {source}: {}; {} unchanged",
            done.join("; "),
            servers.unchanged.len()
        );
        let mut state = self.state();
        state.config = Arc::new(reloaded.running);
        state.source = source;
        state.refused = None;
        state.reloads += 1;
        state.restart_needed = reloaded.restart_needed.clone();
        // daemon.json names the file as running only when all of it is: with sections waiting
        // for a restart, `portico doctor` keeps saying the file differs from what runs.
        let identity = state
            .restart_needed
            .is_empty()
            .then(|| ConfigIdentity::read(&state.source))
            .flatten();
        drop(state);
        if identity.is_some() {
            self.republish(identity);
        }
    }

    /// Keeps `daemon.json` (written as `info` to `file`) in step with reloads.
    pub(crate) fn publish(&self, file: InfoFile, info: DaemonInfo) {
        *self.0.published.lock().unwrap_or_else(|e| e.into_inner()) = Some((file, info));
    }

    /// What `daemon.json` says now, if it was published here.
    pub(crate) fn published(&self) -> Option<DaemonInfo> {
        let published = self.0.published.lock().unwrap_or_else(|e| e.into_inner());
        published.as_ref().map(|(_, info)| info.clone())
    }

    fn republish(&self, identity: Option<ConfigIdentity>) {
        let mut published = self.0.published.lock().unwrap_or_else(|e| e.into_inner());
        let Some((file, info)) = published.as_mut() else {
            return;
        };
        if info.config.is_none() || info.config == identity {
            return;
        }
        info.config = identity;
        if let Err(error) = file.write(info) {
            tracing::warn!(
                "could not update {} after the reload: {error}; `portico doctor` may call the daemon's config stale",
                file.path().display()
            );
        }
    }
}

/// The most of a file the fingerprint reads; a larger one counts by its size and time.
const MAX_FINGERPRINT_BYTES: u64 = 1024 * 1024;

/// Only a regular file is read (a FIFO or a link to a device would block or never end), and only
/// up to [`MAX_FINGERPRINT_BYTES`].
fn hash_file(path: &Path, hasher: &mut impl Hasher) {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) => return error.kind().to_string().hash(hasher),
    };
    if !metadata.is_file() {
        return "not a regular file".hash(hasher);
    }
    if metadata.len() > MAX_FINGERPRINT_BYTES {
        metadata.len().hash(hasher);
        metadata.modified().ok().hash(hasher);
        return;
    }
    match std::fs::read(path) {
        Ok(bytes) => bytes.hash(hasher),
        Err(error) => error.kind().to_string().hash(hasher),
    }
}

/// [`LiveConfig::fingerprint`] off the async workers: it reads files.
async fn fingerprint(live: &LiveConfig) -> u64 {
    let live = live.clone();
    tokio::task::spawn_blocking(move || live.fingerprint())
        .await
        .unwrap_or_default()
}

/// Follows the files and SIGHUP until `stop`, reloading on each change.
pub(crate) async fn follow(live: LiveConfig, engine: Engine, stop: CancellationToken) {
    if !live.0.follows {
        return;
    }
    let mut last = fingerprint(&live).await;
    // A changed fingerprint seen once; applied when the next read agrees.
    let mut pending: Option<u64> = None;
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = live.0.requested.notified() => {
                // Read before the reload: an edit saved while it runs is then still a change.
                let before = fingerprint(&live).await;
                live.reload(&engine, "SIGHUP").await;
                last = before;
                pending = None;
            }
            _ = tick.tick() => {
                let now = fingerprint(&live).await;
                if now == last {
                    pending = None;
                } else if pending == Some(now) {
                    live.reload(&engine, "file changed").await;
                    last = now;
                    pending = None;
                } else {
                    pending = Some(now);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fingerprint_follows_the_file_and_the_agents_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[server]\nagents_dir = \"agents\"\n").unwrap();
        let config = portico_config::parse("t", "[server]\nagents_dir = \"agents\"\n").unwrap();
        let live = LiveConfig::new(config, ConfigSource::File(file.clone()), Some(file.clone()));
        let first = live.fingerprint();
        assert_eq!(live.fingerprint(), first, "nothing changed");
        std::fs::write(&file, "[server]\nagents_dir = \"agents\"\n# edited\n").unwrap();
        let edited = live.fingerprint();
        assert_ne!(edited, first);
        std::fs::create_dir(dir.path().join("agents")).unwrap();
        std::fs::write(dir.path().join("agents/notes.txt"), "not an agent").unwrap();
        assert_eq!(live.fingerprint(), edited, "only *.toml files are agents");
        std::fs::write(dir.path().join("agents/a.toml"), "name = \"a\"\n").unwrap();
        assert_ne!(live.fingerprint(), edited);
        let with_agent = live.fingerprint();
        std::fs::remove_file(&file).unwrap();
        assert_ne!(live.fingerprint(), with_agent, "a missing file is a change");
        // A FIFO named like an agent file is never opened (opening it would block the follower).
        let fifo = dir.path().join("agents/fifo.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let with_fifo = live.fingerprint();
        assert_eq!(live.fingerprint(), with_fifo);
        let config = portico_config::parse("t", "[server]\nagents_dir = \"agents\"\n").unwrap();
        let mut loaded = config.clone();
        let error = portico_config::load_agents_dir(&mut loaded, dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }

    #[test]
    fn the_status_says_loaded_or_refused_with_the_error() {
        let live = LiveConfig::new(
            Config::default(),
            ConfigSource::File("/etc/portico.toml".into()),
            None,
        );
        assert_eq!(
            live.status_json(),
            json!({"status": "loaded", "file": "/etc/portico.toml", "reloads": 0})
        );
        live.state().refused = Some("bad key".into());
        assert_eq!(
            live.status_json(),
            json!({"status": "refused", "file": "/etc/portico.toml", "reloads": 0, "error": "bad key"})
        );
    }
}
