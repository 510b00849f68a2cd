//! Several Portico processes (replicas) sharing one store, on PostgreSQL: which replicas are alive
//! (each writes a heartbeat; one whose heartbeat is older than [`REPLICA_LEASE`] is dead, and the A2A
//! tasks it was running are failed by another, see `Store::fail_orphaned_tasks`), and the secrets
//! every replica must agree on (the audit digest key: an approval's grant binds the digest of the
//! call's arguments, so a call retried through another replica must digest to the same value).
//!
//! A replica's name is chosen by the operator (`[store] replica`) or made from the host name and the
//! process id; two live processes must not share one, so a heartbeat for a name another live process
//! (another incarnation) holds is refused.

use std::time::Duration;

use serde::Serialize;

use crate::db::{Db, DbError, Dialect, params};
use crate::{Store, StoreError, now_ms};

/// How often a replica writes its heartbeat.
pub const REPLICA_HEARTBEAT: Duration = Duration::from_secs(2);

/// How old a heartbeat may be before its replica counts as dead: five missed heartbeats, so a
/// replica stalled for a moment (a long GC-free pause, a slow disk on the server) keeps its tasks.
pub const REPLICA_LEASE: Duration = Duration::from_secs(10);

/// A replica as the store knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRecord {
    pub name: String,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// Whether its heartbeat is within [`REPLICA_LEASE`] of the time it was read.
    pub alive: bool,
}

impl Store {
    /// The 32-byte secret `name` that every process sharing this store uses: the stored one, or
    /// `candidate` when none is stored yet (the first process to ask stores its own).
    pub fn shared_secret(&self, name: &str, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        let stored = self.in_immediate_transaction("reading a shared secret", |db| {
            db.execute(
                "INSERT INTO shared_secrets (name, secret) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                params![name, candidate.to_vec()],
            )
            .map_err(self.sql_error("storing a shared secret"))?;
            db.query_one(
                "SELECT secret FROM shared_secrets WHERE name = ?1",
                params![name],
                |row| row.get::<Vec<u8>>(0),
            )
            .map_err(self.sql_error("reading a shared secret"))
        })?;
        <[u8; 32]>::try_from(stored.as_slice()).map_err(|_| StoreError::SharedSecret {
            path: self.label().to_path_buf(),
            name: name.to_string(),
            length: stored.len(),
        })
    }

    /// Writes the heartbeat of replica `name` in its `incarnation` (a value unique to this process),
    /// registering it if new. Refused while another incarnation under the same name is alive: two
    /// processes with one name would fail each other's tasks.
    pub fn replica_heartbeat(&self, name: &str, incarnation: &str) -> Result<(), StoreError> {
        self.in_heartbeat_transaction("writing a replica heartbeat", |db| {
            self.write_heartbeat(db, name, incarnation)
        })
    }

    fn write_heartbeat(
        &self,
        db: &Db<'_>,
        name: &str,
        incarnation: &str,
    ) -> Result<(), StoreError> {
        {
            let now = store_now_ms(db).map_err(self.sql_error("reading the store's clock"))?;
            let holder = db
                .query_opt(
                    "SELECT incarnation, heartbeat_at_ms FROM replicas WHERE name = ?1",
                    params![name],
                    |row| Ok((row.get::<String>(0)?, row.get::<i64>(1)?)),
                )
                .map_err(self.sql_error("reading a replica heartbeat"))?;
            if let Some((other, heartbeat)) = &holder
                && other != incarnation
                && now - heartbeat < lease_ms()
            {
                return Err(StoreError::ReplicaNameTaken {
                    path: self.label().to_path_buf(),
                    name: name.to_string(),
                    seen_ms_ago: now - heartbeat,
                });
            }
            db.execute(
                "INSERT INTO replicas (name, incarnation, started_at_ms, heartbeat_at_ms) \
                 VALUES (?1, ?2, ?3, ?3) \
                 ON CONFLICT (name) DO UPDATE SET \
                   incarnation = excluded.incarnation, heartbeat_at_ms = excluded.heartbeat_at_ms, \
                   started_at_ms = CASE WHEN replicas.incarnation = excluded.incarnation \
                                        THEN replicas.started_at_ms ELSE excluded.started_at_ms END",
                params![name, incarnation, now],
            )
            .map_err(self.sql_error("writing a replica heartbeat"))?;
            Ok(())
        }
    }

    /// Removes replica `name` (in `incarnation`) at a clean shutdown, so that the others need not
    /// wait for its lease to run out. Its running tasks must have been settled first.
    pub fn replica_leave(&self, name: &str, incarnation: &str) -> Result<(), StoreError> {
        self.with_db("removing a replica", |db| {
            db.execute(
                "DELETE FROM replicas WHERE name = ?1 AND incarnation = ?2",
                params![name, incarnation],
            )
            .map(|_| ())
        })
    }

    /// Every replica the store knows, by name.
    pub fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        self.with_heartbeat_db("listing replicas", |db| {
            let now = store_now_ms(db).map_err(self.sql_error("reading the store's clock"))?;
            db.query_map(
                "SELECT name, started_at_ms, heartbeat_at_ms FROM replicas ORDER BY name",
                params![],
                |row| {
                    let heartbeat_at_ms = row.get::<i64>(2)?;
                    Ok(ReplicaRecord {
                        name: row.get(0)?,
                        started_at_ms: row.get(1)?,
                        heartbeat_at_ms,
                        alive: now - heartbeat_at_ms < lease_ms(),
                    })
                },
            )
            .map_err(self.sql_error("listing replicas"))
        })
    }
}

/// Now, in milliseconds since the Unix epoch, by the database's clock on PostgreSQL: heartbeats and
/// the leases read from them are compared on one clock, whatever the replicas' own clocks say. On
/// SQLite (one machine) the process's clock.
pub(crate) fn store_now_ms(db: &Db<'_>) -> Result<i64, DbError> {
    match db.dialect() {
        Dialect::Sqlite => Ok(now_ms()),
        Dialect::Postgres => db.query_one(
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            params![],
            |row| row.get(0),
        ),
    }
}

pub(crate) fn lease_ms() -> i64 {
    i64::try_from(REPLICA_LEASE.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::both_backends;

    both_backends! {
        fn the_first_secret_stored_is_everyones(store) {
            let first = store.shared_secret("audit", [1; 32]).unwrap();
            assert_eq!(first, [1; 32]);
            assert_eq!(store.shared_secret("audit", [2; 32]).unwrap(), [1; 32]);
            assert_eq!(store.shared_secret("other", [3; 32]).unwrap(), [3; 32]);
        }
    }

    both_backends! {
        fn a_live_replica_keeps_its_name_and_a_dead_ones_name_is_reused(store) {
            store.replica_heartbeat("gw-1", "a").unwrap();
            store.replica_heartbeat("gw-1", "a").unwrap();
            let err = store.replica_heartbeat("gw-1", "b").unwrap_err();
            assert!(matches!(&err, StoreError::ReplicaNameTaken { name, .. } if name == "gw-1"), "{err}");
            assert!(err.to_string().contains("[store] replica"), "{err}");
            let listed = store.replicas().unwrap();
            assert_eq!(listed.len(), 1);
            assert!(listed[0].alive);

            // Its heartbeat runs out (as if it died long ago): the name is free.
            store
                .with_db("ageing a heartbeat", |db| {
                    db.execute("UPDATE replicas SET heartbeat_at_ms = heartbeat_at_ms - ?1", params![lease_ms() + 1])
                })
                .unwrap();
            assert!(!store.replicas().unwrap()[0].alive);
            store.replica_heartbeat("gw-1", "b").unwrap();
            assert!(store.replicas().unwrap()[0].alive);

            store.replica_leave("gw-1", "a").unwrap();
            assert_eq!(store.replicas().unwrap().len(), 1, "only its own incarnation may remove it");
            store.replica_leave("gw-1", "b").unwrap();
            assert_eq!(store.replicas().unwrap(), vec![]);
        }
    }

    /// Replicas starting together wrote their first heartbeats in transactions that conflicted, and
    /// the loser failed to start: a heartbeat that loses a race is run again.
    #[test]
    fn replicas_beating_at_once_all_succeed() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let stores: Vec<Store> = (0..4)
            .map(|_| Store::open_postgres(&url, 2).unwrap())
            .collect();
        let start = std::sync::Barrier::new(stores.len());
        std::thread::scope(|scope| {
            for (i, store) in stores.iter().enumerate() {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    for _ in 0..10 {
                        store
                            .replica_heartbeat(&format!("gw-{i}"), &format!("life-{i}"))
                            .unwrap();
                    }
                });
            }
        });
        assert_eq!(
            stores[0]
                .replicas()
                .unwrap()
                .iter()
                .filter(|r| r.alive)
                .count(),
            4
        );
    }

    #[test]
    fn two_handles_on_one_postgres_schema_share_secrets_and_see_each_other() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let first = Store::open_postgres(&url, 2).unwrap();
        let second = Store::open_postgres(&url, 2).unwrap();
        first.replica_heartbeat("gw-1", "a").unwrap();
        second.replica_heartbeat("gw-2", "b").unwrap();
        let names: Vec<String> = second
            .replicas()
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["gw-1", "gw-2"]);
        let secret = first.shared_secret("audit", [7; 32]).unwrap();
        assert_eq!(second.shared_secret("audit", [9; 32]).unwrap(), secret);
    }
}
