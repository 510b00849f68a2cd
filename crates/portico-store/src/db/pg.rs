//! PostgreSQL behind the store's synchronous interface: a bounded pool of tokio-postgres connections
//! whose sockets are driven by one thread of the store's own, so that a store method may block on a
//! query from any thread, a runtime's worker included.
//!
//! Why not the `postgres` crate (tokio-postgres made synchronous): each of its connections runs its own
//! runtime and blocks on it with `Runtime::block_on`, which panics when called from a thread that is
//! driving async tasks, as the store's callers often are. Here the caller blocks with
//! `futures::executor::block_on` on a tokio-postgres client future, which only waits on a channel to
//! the connection task; the connection tasks run on the pool's own thread, so nothing a caller blocks
//! can stall them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{DbError, Param, ToParam};

pub(crate) mod tls;

/// How long a store operation waits for a connection of a full pool before it fails saying so.
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);

/// Statements kept prepared per connection; past it the cache starts over (the store has about a
/// hundred distinct statements, so this bound is only reached by a bug that builds statement text).
const MAX_PREPARED: usize = 512;

/// How long connecting may take when the URL says nothing (`connect_timeout`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long data sent to the server may go unacknowledged before the connection is dropped.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

/// What every connection of the store sets for its session: no lock (the audit append lock, a
/// migration's) is waited for longer than 30 s, the server ends a session that sits in a
/// transaction doing nothing for a minute (a process stalled mid-batch), releasing its locks, and
/// its notices ("relation already exists, skipping") stay out of Portico's log.
const SESSION_SETTINGS: &str = "SET lock_timeout = '30s'; \
     SET idle_in_transaction_session_timeout = '60s'; SET client_min_messages = 'warning'";

/// The default pool size: every replica keeps at most this many connections.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// One connection, checked out of the pool by one thread at a time.
pub(crate) struct PgConn {
    client: Client,
    statements: RefCell<HashMap<String, Statement>>,
    /// Set between `BEGIN` and `COMMIT`/`ROLLBACK`, so that a connection given back mid-transaction
    /// (an error or a panic in between) is rolled back before anyone else uses it.
    in_transaction: Cell<bool>,
    /// Closed rather than given back to the pool (see [`PgConn::discard`]).
    discarded: Cell<bool>,
}

impl PgConn {
    fn statement(&self, sql: &str) -> Result<Statement, DbError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = block_on(self.client.prepare(&renumber_parameters(sql)))?;
        let mut statements = self.statements.borrow_mut();
        if statements.len() >= MAX_PREPARED {
            statements.clear();
        }
        statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> Result<usize, DbError> {
        let statement = self.statement(sql)?;
        let bound: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|p| p as _).collect();
        let changed = block_on(self.client.execute(&statement, &refs))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    pub(crate) fn query(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
    ) -> Result<Vec<tokio_postgres::Row>, DbError> {
        let statement = self.statement(sql)?;
        let bound: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|p| p as _).collect();
        Ok(block_on(self.client.query(&statement, &refs))?)
    }

    pub(crate) fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        // A transaction begun here (a read snapshot, say) is noted like one of `begin`'s, so that
        // the pool rolls it back if its connection comes back before it ended.
        let first_word = sql.split_whitespace().next().unwrap_or_default();
        if first_word.eq_ignore_ascii_case("BEGIN") || first_word.eq_ignore_ascii_case("START") {
            self.in_transaction.set(true);
        }
        let result = block_on(self.client.batch_execute(sql));
        if result.is_ok()
            && (first_word.eq_ignore_ascii_case("COMMIT")
                || first_word.eq_ignore_ascii_case("ROLLBACK")
                || first_word.eq_ignore_ascii_case("END"))
        {
            self.in_transaction.set(false);
        }
        Ok(result?)
    }

    /// Has the pool close this connection when it comes back instead of keeping it: its session
    /// holds something (a session lock) that could not be released, and only its end releases it.
    pub(crate) fn discard(&self) {
        self.discarded.set(true);
    }

    /// Starts a transaction in which every read and write behaves as if the store's transactions ran
    /// one at a time, as SQLite's do: a transaction that would break that fails with a serialization
    /// error at its next statement or at its commit, and is run again (`Store::in_transaction`).
    pub(crate) fn begin(&self) -> Result<(), DbError> {
        self.execute_batch("BEGIN ISOLATION LEVEL SERIALIZABLE")
    }

    /// Starts a `READ COMMITTED` transaction, for work whose first statement locks the one row that
    /// every writer of the same data locks first (a conversation's row, for its messages). Writers
    /// then queue on that lock instead of failing one another as `SERIALIZABLE` ones do (where all
    /// but one of N concurrent writers fail, and under steady contention one can keep losing), and
    /// each later statement reads everything committed before the lock was granted.
    pub(crate) fn begin_row_locked(&self) -> Result<(), DbError> {
        self.execute_batch("BEGIN ISOLATION LEVEL READ COMMITTED")
    }

    pub(crate) fn commit(&self) -> Result<(), DbError> {
        self.execute_batch("COMMIT")
    }

    pub(crate) fn rollback(&self) -> Result<(), DbError> {
        self.execute_batch("ROLLBACK")
    }
}

/// The connections of one store: at most `size` open, idle ones kept for the next operation.
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    tls: MakeRustlsConnect,
    size: usize,
    state: Mutex<PoolState>,
    freed: Condvar,
    /// The pool's thread, which drives every connection's socket; it ends when the pool is dropped.
    runtime: tokio::runtime::Handle,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<PgConn>,
    /// Connections checked out, idle, or being opened.
    open: usize,
}

impl Pool {
    /// A pool for `config`, opening its first connection now so that a wrong URL, password or
    /// database fails at startup rather than at the first call.
    pub(crate) fn connect(
        mut config: Config,
        tls: MakeRustlsConnect,
        size: usize,
    ) -> Result<Pool, DbError> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        // A replica cut off from the server must not hold the audit lock (every replica's appends
        // wait on it) until the kernel gives up on the socket, hours later: probe idle sockets and
        // drop one whose data goes unacknowledged.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(SOCKET_TIMEOUT);
        }
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("portico-store-pg".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = handle_tx.send(Err(error));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(runtime.handle().clone()));
                // Dropping the runtime afterwards cancels the connection tasks: their sockets close.
                let _ = runtime.block_on(stop_rx);
            })
            .map_err(|_| DbError::PoolClosed)?;
        let runtime = handle_rx
            .recv()
            .map_err(|_| DbError::PoolClosed)?
            .map_err(|_| DbError::PoolClosed)?;
        let pool = Pool {
            shared: Arc::new(Shared {
                config,
                tls,
                size: size.max(1),
                state: Mutex::new(PoolState::default()),
                freed: Condvar::new(),
                runtime,
                stop: Mutex::new(Some(stop_tx)),
            }),
        };
        drop(pool.get()?);
        Ok(pool)
    }

    /// A connection for one operation: an idle one, a new one while fewer than the pool's size are
    /// open, or the first one given back within [`CHECKOUT_WAIT`].
    pub(crate) fn get(&self) -> Result<Pooled<'_>, DbError> {
        let deadline = Instant::now() + CHECKOUT_WAIT;
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(Pooled {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.shared.size {
                state.open += 1;
                drop(state);
                return match self.open_connection() {
                    Ok(conn) => Ok(Pooled {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(error) => {
                        self.lock().open -= 1;
                        self.shared.freed.notify_one();
                        Err(error)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DbError::PoolExhausted {
                    size: self.shared.size,
                    waited_secs: CHECKOUT_WAIT.as_secs(),
                });
            }
            state = self
                .shared
                .freed
                .wait_timeout(state, deadline - now)
                .map(|(state, _)| state)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }

    fn open_connection(&self) -> Result<PgConn, DbError> {
        let (config, tls) = (self.shared.config.clone(), self.shared.tls.clone());
        let task = self.shared.runtime.spawn(async move {
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(error = %describe(&error), "a PostgreSQL connection of the store ended");
                }
            });
            Ok::<_, tokio_postgres::Error>(client)
        });
        let client = block_on(task).map_err(|_| DbError::PoolClosed)??;
        block_on(client.batch_execute(SESSION_SETTINGS))?;
        Ok(PgConn {
            client,
            statements: RefCell::new(HashMap::new()),
            in_transaction: Cell::new(false),
            discarded: Cell::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Plain counters and a list: consistent even if a holder panicked.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn give_back(&self, conn: PgConn) {
        let reusable = !conn.client.is_closed()
            && !conn.discarded.get()
            && (!conn.in_transaction.get() || conn.rollback().is_ok());
        let mut state = self.lock();
        if reusable {
            state.idle.push(conn);
        } else {
            state.open -= 1;
        }
        drop(state);
        self.shared.freed.notify_one();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(stop) = self
            .stop
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
        {
            let _ = stop.send(());
        }
    }
}

/// A checked-out connection, given back to its pool when dropped.
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    conn: Option<PgConn>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = PgConn;
    fn deref(&self) -> &PgConn {
        self.conn
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}

/// The server and database `config` names, for operators: `postgres://USER@HOST:PORT/DATABASE`.
/// Built from the parsed config rather than edited out of the URL: a password can hold any
/// character (`/`, `?`, `@`), so no edit of the text can be trusted to remove it.
pub(crate) fn describe_target(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let user = config.get_user().unwrap_or("postgres");
    let database = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{}/{database}", hosts.join(","))
}

/// Waits for `future` on the calling thread without entering any tokio runtime.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

/// SQLite's numbered parameters (`?1`) as PostgreSQL's (`$1`); a bare `?` takes the next number, as in
/// SQLite. Quoted text and identifiers are left alone.
pub(crate) fn renumber_parameters(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    let mut next_bare = 0_u32;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '?' => {
                out.push('$');
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                if digits.is_empty() {
                    next_bare += 1;
                    out.push_str(&next_bare.to_string());
                } else {
                    next_bare = digits.parse().unwrap_or(next_bare);
                    out.push_str(&digits);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// An error from PostgreSQL with what the server said (tokio-postgres's own text is only "db error").
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!(
            "PostgreSQL said: {} (SQLSTATE {}{})",
            db.message(),
            db.code().code(),
            db.detail()
                .map(|detail| format!("; {detail}"))
                .unwrap_or_default()
        ),
        None if let Some(words) = tls::describe(error) => words,
        None => match error.source() {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}

pub(crate) fn is_retryable_conflict(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// The server's SQLSTATE, for advice.
pub(crate) fn sql_state(error: &tokio_postgres::Error) -> Option<&SqlState> {
    error.code()
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match *self {
            Param::Null => Ok(IsNull::Yes),
            // The schema's integers are BIGINT, but PostgreSQL types a parameter by where it stands
            // (`LIMIT $1` is BIGINT, a literal's neighbour may be INTEGER): fit the value to the type.
            Param::Int(value) => match *ty {
                Type::INT2 => i16::try_from(value)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(value)?.to_sql(ty, out),
                Type::BOOL => (value != 0).to_sql(ty, out),
                _ => value.to_sql(ty, out),
            },
            Param::Text(text) => text.to_sql(ty, out),
            Param::Blob(bytes) => bytes.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
            || <i32 as ToSql>::accepts(ty)
            || <i16 as ToSql>::accepts(ty)
            || <bool as ToSql>::accepts(ty)
            || <&str as ToSql>::accepts(ty)
            || <&[u8] as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// Any PostgreSQL integer as an `i64` (`count(*)` is BIGINT, a literal `0` is INTEGER).
struct AnyInt(i64);

impl<'a> FromSql<'a> for AnyInt {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(AnyInt(match *ty {
            Type::INT2 => i64::from(i16::from_sql(ty, raw)?),
            Type::INT4 => i64::from(i32::from_sql(ty, raw)?),
            Type::BOOL => i64::from(bool::from_sql(ty, raw)?),
            _ => i64::from_sql(ty, raw)?,
        }))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::INT2 | Type::INT4 | Type::INT8 | Type::BOOL)
    }
}

/// What the store reads from a PostgreSQL row: the types [`super::Column`] lists.
pub(crate) trait PgColumn: Sized {
    fn read(row: &tokio_postgres::Row, index: usize) -> Result<Self, tokio_postgres::Error>;
}

impl PgColumn for i64 {
    fn read(row: &tokio_postgres::Row, index: usize) -> Result<Self, tokio_postgres::Error> {
        row.try_get::<_, AnyInt>(index).map(|v| v.0)
    }
}

impl PgColumn for Option<i64> {
    fn read(row: &tokio_postgres::Row, index: usize) -> Result<Self, tokio_postgres::Error> {
        row.try_get::<_, Option<AnyInt>>(index)
            .map(|v| v.map(|v| v.0))
    }
}

macro_rules! native_pg_column {
    ($($ty:ty),+) => {$(
        impl PgColumn for $ty {
            fn read(row: &tokio_postgres::Row, index: usize) -> Result<Self, tokio_postgres::Error> {
                row.try_get(index)
            }
        }
    )+};
}
native_pg_column!(String, Option<String>, Vec<u8>, Option<Vec<u8>>);

pub(crate) fn column<T: PgColumn>(row: &tokio_postgres::Row, index: usize) -> Result<T, DbError> {
    T::read(row, index).map_err(|error| DbError::Column {
        index,
        expected: std::any::type_name::<T>(),
        found: row
            .columns()
            .get(index)
            .map(|c| format!("{} ({error})", c.type_()))
            .unwrap_or_else(|| format!("nothing: the row has {} columns", row.len())),
    })
}

pub(crate) fn bool_column(row: &tokio_postgres::Row, index: usize) -> Result<bool, DbError> {
    column::<i64>(row, index).map(|v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_names_user_hosts_and_database_but_never_the_password() {
        let target = |url: &str| describe_target(&url.parse::<Config>().unwrap());
        for (url, expected) in [
            (
                "postgres://portico:s3cr%2Ft@db:5433/app",
                "postgres://portico@db:5433/app",
            ),
            (
                "postgres://portico:ab/cd?e@db/app",
                "postgres://portico@db:5432/app",
            ),
            (
                "postgresql://u:pw@[::1]:6000/x?sslmode=disable",
                "postgres://u@[::1]:6000/x",
            ),
            (
                "postgres://u@%2Frun%2Fpostgresql/app",
                "postgres://u@/run/postgresql:5432/app",
            ),
            (
                "host=db user=u password='a b c' dbname=app",
                "postgres://u@db:5432/app",
            ),
        ] {
            let shown = target(url);
            assert_eq!(shown, expected, "{url}");
            for secret in ["s3cr", "ab/cd", "pw", "a b c"] {
                assert!(!shown.contains(secret), "{url} shows {shown}");
            }
        }
    }

    /// A connection whose session still holds a lock it could not release is closed, so that the
    /// session's end releases the lock; a kept connection is reused as it was.
    #[test]
    fn a_discarded_connection_is_closed_and_a_kept_one_reused() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let target = tls::target(&url).unwrap();
        let pool = Pool::connect(target.config, target.tls, 1).unwrap();
        let backend = |conn: &PgConn| -> i64 {
            super::super::Db::postgres(conn)
                .query_one("SELECT CAST(pg_backend_pid() AS BIGINT)", &[], |row| {
                    row.get(0)
                })
                .unwrap()
        };
        let first = backend(&pool.get().unwrap());
        assert_eq!(backend(&pool.get().unwrap()), first, "kept and reused");
        {
            let conn = pool.get().unwrap();
            conn.discard();
        }
        assert_ne!(backend(&pool.get().unwrap()), first, "a new session");
    }

    #[test]
    fn parameters_are_renumbered_outside_quotes() {
        assert_eq!(
            renumber_parameters(
                "SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?3' AND \"?4\" = ?2"
            ),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?3' AND \"?4\" = $2"
        );
        assert_eq!(
            renumber_parameters("VALUES (?, ?, ?)"),
            "VALUES ($1, $2, $3)"
        );
        assert_eq!(
            renumber_parameters("LIKE ?2 ESCAPE '\\'"),
            "LIKE $2 ESCAPE '\\'"
        );
    }
}
