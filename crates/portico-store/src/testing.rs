//! Test support: the same test against both databases.
//!
//! A PostgreSQL store for a test is a fresh schema of the database at `PORTICO_TEST_POSTGRES_URL`
//! (which `scripts/test` starts, see `scripts/pg-test-cluster`), so tests sharing one server never see
//! each other's rows. Without that variable the PostgreSQL half of a test is skipped, saying so,
//! unless `PORTICO_REQUIRE_POSTGRES=1` (set by `scripts/test`) makes it fail instead.

use crate::Store;

/// The variable naming the test server.
pub const POSTGRES_URL_VAR: &str = "PORTICO_TEST_POSTGRES_URL";

/// How many connections the pool of a [`postgres_store`] opens at most.
pub const POSTGRES_TEST_POOL_SIZE: usize = 4;

/// A fresh store in a new schema of the test server, or `None` (the test is skipped) when no server
/// is configured and none is required.
pub fn postgres_store() -> Option<Store> {
    let url = postgres_test_url()?;
    Some(
        Store::open_postgres(&url, POSTGRES_TEST_POOL_SIZE)
            .unwrap_or_else(|error| panic!("opening the test store: {error}")),
    )
}

/// A URL for a fresh, empty schema of the test server (every connection made with it uses that
/// schema), or `None` when no server is configured and none is required.
pub fn postgres_test_url() -> Option<String> {
    let Ok(base) = std::env::var(POSTGRES_URL_VAR) else {
        assert!(
            std::env::var("PORTICO_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "PORTICO_REQUIRE_POSTGRES=1 but {POSTGRES_URL_VAR} is not set; run the tests through scripts/test, \
             or start a server with scripts/pg-test-cluster"
        );
        eprintln!(
            "skipped: {POSTGRES_URL_VAR} is not set (scripts/pg-test-cluster starts a server)"
        );
        return None;
    };
    let schema = format!("t_{:016x}", rand::random::<u64>());
    create_schema(&base, &schema);
    let separator = if base.contains('?') { '&' } else { '?' };
    Some(format!("{base}{separator}options=-csearch_path%3D{schema}"))
}

fn create_schema(base: &str, schema: &str) {
    std::thread::scope(|scope| {
        // A thread of its own, so that this works from inside a test's runtime too (where a runtime
        // may be neither entered nor dropped).
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for creating a test schema");
                runtime.block_on(async {
                    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
                        .await
                        .unwrap_or_else(|error| {
                            panic!("connecting to {POSTGRES_URL_VAR}: {error}")
                        });
                    let driver = tokio::spawn(connection);
                    client
                        .batch_execute(&format!("CREATE SCHEMA {schema}"))
                        .await
                        .expect("creating a test schema");
                    drop(client);
                    let _ = driver.await;
                })
            })
            .join()
            .expect("creating a test schema");
    });
}

/// A transaction of its own on the test server holding `LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`
/// on one table of a test schema, so that every statement of the store on that table waits (for
/// tests of a stalled database). Released by [`TableLock::release`] or when dropped.
pub struct TableLock {
    commands: std::sync::mpsc::Sender<LockCommand>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum LockCommand {
    /// Replies with how many sessions wait for a lock they were not granted.
    Waiting(std::sync::mpsc::Sender<i64>),
}

impl TableLock {
    /// Locks `table` of the schema `url` names (a [`postgres_test_url`]); returns once it is held.
    pub fn hold(url: &str, table: &str) -> TableLock {
        let (commands, received) = std::sync::mpsc::channel::<LockCommand>();
        let (locked_tx, locked) = std::sync::mpsc::channel::<()>();
        let (url, table) = (url.to_string(), table.to_string());
        // A thread and a runtime of its own: the lock holder must run whatever the test's
        // runtime (or the store under test) is doing.
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for a test lock");
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|error| panic!("connecting to {POSTGRES_URL_VAR}: {error}"));
                let driver = tokio::spawn(connection);
                client
                    .batch_execute(&format!(
                        "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
                    ))
                    .await
                    .expect("locking a test table");
                locked_tx.send(()).expect("the test waits for its lock");
                // Until the test lets go of its handle: answering how many wait on a lock. The
                // connection needs no driving while this thread waits for the next question.
                while let Ok(LockCommand::Waiting(reply)) = received.recv() {
                    let row = client
                        .query_one("SELECT count(*) FROM pg_locks WHERE NOT granted", &[])
                        .await
                        .expect("counting waiting sessions");
                    let _ = reply.send(row.get(0));
                }
                client
                    .batch_execute("COMMIT")
                    .await
                    .expect("releasing a test lock");
                drop(client);
                let _ = driver.await;
            });
        });
        locked
            .recv()
            .expect("the lock holder failed; see its panic");
        TableLock {
            commands,
            thread: Some(thread),
        }
    }

    /// How many sessions of the server wait for a lock now (the store's statements stalled on
    /// this one among them).
    pub fn waiting(&self) -> i64 {
        let (reply, answer) = std::sync::mpsc::channel();
        self.commands
            .send(LockCommand::Waiting(reply))
            .expect("the lock holder is gone");
        answer.recv().expect("the lock holder is gone")
    }

    /// Ends the lock's transaction, and waits until it has.
    pub fn release(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        let (closed, _) = std::sync::mpsc::channel();
        self.commands = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TableLock {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Defines a test twice, as a module with `sqlite` and `postgres` tests, `$store` being a fresh
/// store of each kind:
///
/// ```ignore
/// both_backends! {
///     fn memory_round_trips(store) {
///         store.memory_store("a", "k", "v").unwrap();
///     }
/// }
/// both_backends! {
///     async fn tasks_stream(store) { ... }
/// }
/// ```
#[cfg(test)]
macro_rules! both_backends {
    ($(#[$meta:meta])* fn $name:ident($store:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn case($store: $crate::Store) $body

            #[test]
            fn sqlite() {
                case($crate::Store::open_in_memory().unwrap());
            }

            #[test]
            fn postgres() {
                if let Some(store) = $crate::testing::postgres_store() {
                    case(store);
                }
            }
        }
    };
    ($(#[$meta:meta])* async fn $name:ident($store:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn case($store: $crate::Store) $body

            #[tokio::test]
            async fn sqlite() {
                case($crate::Store::open_in_memory().unwrap()).await;
            }

            #[tokio::test]
            async fn postgres() {
                if let Some(store) = $crate::testing::postgres_store() {
                    case(store).await;
                }
            }
        }
    };
}
#[cfg(test)]
pub(crate) use both_backends;
