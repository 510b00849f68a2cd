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
