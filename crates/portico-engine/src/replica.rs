//! This process as one replica of its store: which store it opens (`[store]`), the name it goes by
//! there, and, on a shared (PostgreSQL) store, the heartbeat that is its lease on the A2A tasks it
//! runs. A replica whose heartbeat stops for [`portico_store::REPLICA_LEASE`] is dead to the others,
//! which then settle its tasks.

use std::path::Path;
use std::sync::Arc;

use portico_config::{StoreSection, replica_name_problem};
use portico_store::{REPLICA_HEARTBEAT, Store};
use tokio_util::sync::CancellationToken;

use crate::{EngineError, EnvLookup, STORE_FILE};

/// Who this process is among the replicas of its store.
#[derive(Debug, Clone)]
pub struct Replica {
    inner: Arc<ReplicaInner>,
}

#[derive(Debug)]
struct ReplicaInner {
    name: String,
    /// Unique to this process: tells a restarted replica of the same name from a live duplicate.
    incarnation: String,
    /// Whether the store is shared with other processes (PostgreSQL).
    shared: bool,
    /// Whether this process is one of the store's replicas (`portico serve`), with a heartbeat.
    serving: bool,
    /// Ends the heartbeat, and what follows other replicas, at shutdown.
    stop: CancellationToken,
    /// The heartbeat's task, awaited before this replica leaves the store (so a heartbeat in
    /// flight cannot write the row back after it is deleted).
    beating: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// What the last heartbeat saw (see [`Replica::view`]).
    view: std::sync::Mutex<Option<StoreView>>,
}

/// The store as this replica's last heartbeat saw it: what `/api/health` shows, read there without
/// a query of its own (a flood of health checks cannot load the database).
#[derive(Debug, Clone)]
pub struct StoreView {
    /// When the heartbeat was last written; `None` before the first one succeeded.
    pub beat_at: Option<std::time::Instant>,
    /// The replicas sharing the store, as of the last heartbeat.
    pub replicas: Vec<portico_store::ReplicaRecord>,
    /// Why the last heartbeat failed, if it did.
    pub error: Option<String>,
}

impl StoreView {
    /// Whether this replica still holds its lease: its last heartbeat was written within
    /// [`portico_store::REPLICA_LEASE`]. Past it, the others may fail the tasks it runs.
    pub fn holds_lease(&self) -> bool {
        self.error.is_none()
            && self
                .beat_at
                .is_some_and(|at| at.elapsed() < portico_store::REPLICA_LEASE)
    }
}

impl Replica {
    /// This replica's name: `[store] replica` (expanded) or the host name and process id.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether other processes share the store (PostgreSQL).
    pub fn shared(&self) -> bool {
        self.inner.shared
    }

    /// Whether this process serves as one of the replicas of a shared store: it has a heartbeat,
    /// owns the A2A tasks it runs, and its MCP session ids carry its name.
    pub fn serving(&self) -> bool {
        self.inner.shared && self.inner.serving
    }

    /// The store as the last heartbeat saw it; `None` when this process is not a replica of a
    /// shared store (there is no heartbeat).
    pub fn view(&self) -> Option<StoreView> {
        self.inner
            .view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Cancelled when this replica leaves the store (at shutdown): work that follows the other
    /// replicas ends with it.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    fn record(&self, view: StoreView) {
        *self
            .inner
            .view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(view);
    }

    /// One heartbeat, and a look at the other replicas, on the store's heartbeat connection.
    async fn beat(&self, store: &Store) {
        let (name, incarnation) = (self.name().to_string(), self.inner.incarnation.clone());
        let written = store
            .run_heartbeat("writing a replica heartbeat", move |store| {
                store.replica_heartbeat(&name, &incarnation)?;
                store.replicas()
            })
            .await;
        let previous = self.view();
        let was_failing = previous.as_ref().is_some_and(|v| v.error.is_some());
        let view = match written {
            Ok(replicas) => StoreView {
                beat_at: Some(std::time::Instant::now()),
                replicas,
                error: None,
            },
            Err(error) => StoreView {
                beat_at: previous.as_ref().and_then(|v| v.beat_at),
                replicas: previous.map(|v| v.replicas).unwrap_or_default(),
                error: Some(error.to_string()),
            },
        };
        if let Some(error) = &view.error {
            tracing::error!(replica = %self.name(), %error, "the replica's heartbeat was not written; once its lease runs out the other replicas fail its running A2A tasks, and /api/health answers 503");
        } else if was_failing {
            tracing::info!(replica = %self.name(), "the replica's heartbeat is written again");
        }
        self.record(view);
    }

    /// The name under `[store]`, checked, or the default one.
    fn named(
        section: &StoreSection,
        env: &EnvLookup,
        shared: bool,
        serving: bool,
    ) -> Result<Replica, EngineError> {
        let name = match &section.replica {
            Some(raw) => portico_config::expand_vars(raw, env).map_err(|error| {
                EngineError::Replica(format!("[store] replica `{raw}`: {error}"))
            })?,
            None => default_name(),
        };
        if let Some(problem) = replica_name_problem(&name) {
            return Err(EngineError::Replica(format!(
                "[store] replica `{name}` {problem}; use letters, digits, `-` and `_`, at most 32"
            )));
        }
        Ok(Replica {
            inner: Arc::new(ReplicaInner {
                name,
                incarnation: format!("{:032x}", rand::random::<u128>()),
                shared,
                serving,
                stop: CancellationToken::new(),
                beating: std::sync::Mutex::default(),
                view: std::sync::Mutex::default(),
            }),
        })
    }

    /// Writes the first heartbeat (refused if a live process already goes by this name), then one
    /// every [`REPLICA_HEARTBEAT`] in the background until [`Replica::leave`].
    fn start_heartbeat(&self, store: &Store) -> Result<(), EngineError> {
        if !self.serving() {
            return Ok(());
        }
        store.replica_heartbeat(self.name(), &self.inner.incarnation)?;
        self.record(StoreView {
            beat_at: Some(std::time::Instant::now()),
            replicas: store.replicas()?,
            error: None,
        });
        let replica = self.clone();
        let store = store.clone();
        let beating = tokio::spawn(async move {
            let mut every = tokio::time::interval(REPLICA_HEARTBEAT);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                tokio::select! {
                    () = replica.inner.stop.cancelled() => return,
                    _ = every.tick() => {}
                }
                replica.beat(&store).await;
            }
        });
        *self
            .inner
            .beating
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(beating);
        Ok(())
    }

    /// Stops the heartbeat and removes this replica from the store, at a clean shutdown (after its
    /// tasks are settled), so the others need not wait for its lease to run out.
    pub(crate) async fn leave(&self, store: &Store) {
        self.inner.stop.cancel();
        if !self.serving() {
            return;
        }
        let beating = self
            .inner
            .beating
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(beating) = beating {
            let _ = beating.await;
        }
        let (name, incarnation) = (self.name().to_string(), self.inner.incarnation.clone());
        let left = store
            .run("removing a replica", move |store| {
                store.replica_leave(&name, &incarnation)
            })
            .await;
        if let Err(error) = left {
            tracing::warn!(%error, "could not remove this replica from the store; the others will find its lease run out");
        }
    }
}

/// Opens the store `[store]` names (PostgreSQL at `url`, or the SQLite file in `data_dir`) and,
/// when `serving`, makes this process a replica of it, writing its first heartbeat on a shared store.
pub(crate) fn open_store(
    section: &StoreSection,
    data_dir: &Path,
    env: &EnvLookup,
    serving: bool,
) -> Result<(Store, Replica), EngineError> {
    let store = match &section.url {
        Some(raw) => Store::open_postgres(&expanded_url(raw, env)?, section.pool_size())?,
        None => Store::open(&data_dir.join(STORE_FILE))?,
    };
    let replica = Replica::named(section, env, section.url.is_some(), serving)?;
    replica.start_heartbeat(&store)?;
    if replica.serving() {
        store.set_replica(replica.name());
    }
    Ok((store, replica))
}

/// `[store] url` with its `${VAR}`s filled in from `env`.
fn expanded_url(raw: &str, env: &EnvLookup) -> Result<String, EngineError> {
    // The expansion's own error could quote the URL, password and all.
    portico_config::expand_vars(raw, env).map_err(|error| match error {
        portico_config::ExpandError::Missing(var) => EngineError::Replica(format!(
            "[store] url refers to ${{{var}}}, which is set neither in the environment nor in the secret store; run `portico secret set {var}` (or export it) before starting Portico"
        )),
        _ => EngineError::Replica("[store] url has an unterminated `${`; write `${NAME}`".to_string()),
    })
}

/// How many connections a command that only reads the store opens at most.
const READER_POOL_SIZE: usize = 2;

/// The store `[store]` names, opened by a command that only reads it (`portico audit`,
/// `portico conversations --standalone`): PostgreSQL at `url`, else the SQLite file in `data_dir`.
/// `Ok(None)` when that file does not exist: reading never creates a store. It is never a replica,
/// so it writes no heartbeat.
pub fn open_store_to_read(
    config: &portico_config::Config,
    data_dir: &Path,
) -> Result<Option<Store>, EngineError> {
    match &config.store.url {
        Some(raw) => {
            let vars = portico_secrets::Vars::from_fn(
                |name| std::env::var(name).ok(),
                Some(portico_secrets::SecretStore::open(
                    data_dir,
                    config.secrets.store,
                )),
            );
            let env: EnvLookup = Box::new(move |name| vars.get(name));
            let url = expanded_url(raw, &env)?;
            Ok(Some(Store::open_postgres(&url, READER_POOL_SIZE)?))
        }
        None => {
            let path = data_dir.join(STORE_FILE);
            if !path.exists() {
                return Ok(None);
            }
            Ok(Some(Store::open(&path)?))
        }
    }
}

/// The host name (its first label, cut to 20 characters, other characters than letters, digits,
/// `-` and `_` dropped) and the process id: unique among the processes of a host, and telling
/// which host a replica runs on.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let host: String = host
        .trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(20)
        .collect();
    let host = if host.is_empty() {
        "portico".to_string()
    } else {
        host
    };
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_is_a_valid_one_with_the_pid() {
        let name = default_name();
        assert_eq!(replica_name_problem(&name), None, "{name}");
        assert!(
            name.ends_with(&format!("-{}", std::process::id())),
            "{name}"
        );
    }

    #[test]
    fn a_configured_name_is_expanded_and_checked() {
        let env: EnvLookup = Box::new(|var| (var == "POD").then(|| "gw-7".to_string()));
        let section = StoreSection {
            replica: Some("${POD}".into()),
            ..StoreSection::default()
        };
        assert_eq!(
            Replica::named(&section, &env, true, true).unwrap().name(),
            "gw-7"
        );
        let bad = StoreSection {
            replica: Some("gw 7".into()),
            ..StoreSection::default()
        };
        let err = Replica::named(&bad, &env, true, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[store] replica `gw 7` may hold only"),
            "{err}"
        );
    }

    #[test]
    fn a_store_url_naming_a_missing_variable_is_refused_without_echoing_it() {
        let env: EnvLookup = Box::new(|_| None);
        let section = StoreSection {
            url: Some("postgres://portico:hunter2@db/${DB}".into()),
            ..StoreSection::default()
        };
        let err = open_store(&section, Path::new("/nonexistent"), &env, true)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("${DB}"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
