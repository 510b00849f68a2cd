//! The seam between the store's queries and its two databases: the embedded SQLite file (the default)
//! and a shared PostgreSQL server (`[store] url`, for several replicas).
//!
//! Every query of the store is written once, in the SQL both databases accept, with SQLite's numbered
//! parameters (`?1`, `?2`); [`Db`] runs it on either. On PostgreSQL the parameters are renumbered
//! (`$1`) once per connection and statement, and each statement stays prepared on its connection.
//! Values cross the seam as [`Param`] (what a statement binds) and [`Column`] (what a row gives back):
//! integers, text, bytes and NULL, the types the schema uses, so both sides agree on what a column
//! holds (PostgreSQL's `BIGINT` for SQLite's `INTEGER`, see `migrations::postgres_ddl`).
//!
//! Written here rather than taken from a crate: no maintained crate offers one synchronous interface
//! over both rusqlite and tokio-postgres (sqlx's `Any` driver is async-only and would replace rusqlite,
//! whose group commit and WAL tuning the embedded store depends on).

pub(crate) mod pg;

use std::cell::Cell;

use rusqlite::types::{ToSqlOutput, ValueRef};

/// Which database a [`Db`] talks to, for the few statements whose text must differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// One value bound to a statement parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// Anything a statement can bind: integers, booleans (as 0 or 1, since SQLite has no boolean), text,
/// bytes, and `Option`s of them (NULL for `None`).
pub(crate) trait ToParam {
    fn to_param(&self) -> Param<'_>;
}

impl ToParam for i64 {
    fn to_param(&self) -> Param<'_> {
        Param::Int(*self)
    }
}

impl ToParam for i32 {
    fn to_param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}

impl ToParam for u32 {
    fn to_param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}

impl ToParam for bool {
    fn to_param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}

impl ToParam for str {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl ToParam for String {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl ToParam for [u8] {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}

impl ToParam for Vec<u8> {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}

impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Param<'_> {
        (**self).to_param()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> Param<'_> {
        match self {
            Some(value) => value.to_param(),
            None => Param::Null,
        }
    }
}

/// The parameters of one statement: `params![a, b]` for `?1` and `?2`.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::db::ToParam]
    };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::db::ToParam),+] as &[&dyn $crate::db::ToParam]
    };
}
pub(crate) use params;

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Null => ValueRef::Null,
            Param::Int(value) => ValueRef::Integer(value),
            Param::Text(text) => ValueRef::Text(text.as_bytes()),
            Param::Blob(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// A failure of one statement (or of reaching the database), before the store says which operation
/// it was part of (`StoreError::Database`).
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// Not a `source`: the message already says the cause, in plainer words than tokio-postgres's
    /// (which a chain printer would append after it).
    #[error("{}", pg::describe(.0))]
    Postgres(tokio_postgres::Error),
    #[error("the query returned no row where one was expected")]
    NoRows,
    #[error("column {index} holds {found}, not {expected}")]
    Column {
        index: usize,
        expected: &'static str,
        found: String,
    },
    #[error(
        "no PostgreSQL connection came free within {waited_secs} s (all {size} in use); raise [store] pool_size, or look for slow queries on the server"
    )]
    PoolExhausted { size: usize, waited_secs: u64 },
    #[error("the PostgreSQL connection pool is closed (the store is shutting down)")]
    PoolClosed,
}

impl From<tokio_postgres::Error> for DbError {
    fn from(error: tokio_postgres::Error) -> Self {
        DbError::Postgres(error)
    }
}

impl DbError {
    /// A write that lost a race with another transaction (PostgreSQL's serialization failure or
    /// deadlock): running the whole transaction again is the remedy. SQLite never reports one, since
    /// its writers take the one write lock in turn.
    pub(crate) fn is_retryable_conflict(&self) -> bool {
        match self {
            DbError::Postgres(error) => pg::is_retryable_conflict(error),
            _ => false,
        }
    }
}

/// What a row's column converts into: the types the schema stores.
pub(crate) trait Column: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> Result<Self, DbError>;
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self, DbError>;
}

macro_rules! sqlite_native_column {
    ($($ty:ty),+) => {$(
        impl Column for $ty {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> Result<Self, DbError> {
                Ok(row.get(index)?)
            }
            fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self, DbError> {
                pg::column(row, index)
            }
        }
    )+};
}
sqlite_native_column!(
    i64,
    Option<i64>,
    String,
    Option<String>,
    Vec<u8>,
    Option<Vec<u8>>
);

/// Counts and versions: integers that are never negative.
macro_rules! unsigned_column {
    ($($ty:ty),+) => {$(
        impl Column for $ty {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> Result<Self, DbError> {
                unsigned(index, i64::from_sqlite(row, index)?)
            }
            fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self, DbError> {
                unsigned(index, i64::from_postgres(row, index)?)
            }
        }
    )+};
}
unsigned_column!(u32, u64, usize);

fn unsigned<T: TryFrom<i64>>(index: usize, value: i64) -> Result<T, DbError> {
    T::try_from(value).map_err(|_| DbError::Column {
        index,
        expected: std::any::type_name::<T>(),
        found: value.to_string(),
    })
}

impl Column for bool {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> Result<Self, DbError> {
        Ok(i64::from_sqlite(row, index)? != 0)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self, DbError> {
        pg::bool_column(row, index)
    }
}

/// One row of a result, from either database.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// The column at `index` (0-based), converted.
    pub(crate) fn get<T: Column>(&self, index: usize) -> Result<T, DbError> {
        match self {
            Row::Sqlite(row) => T::from_sqlite(row, index),
            Row::Postgres(row) => T::from_postgres(row, index),
        }
    }
}

/// A connection, or a transaction on one, for the statements of one store operation.
pub(crate) struct Db<'c> {
    conn: Conn<'c>,
    /// Whether a statement run through this handle changed a row (the group commit's rollback test).
    /// On SQLite the connection counts changes itself (`total_changes`), which also sees statements
    /// run on it directly, and this is the count when the handle was made.
    changed: Cell<bool>,
    sqlite_changes_before: u64,
}

#[derive(Clone, Copy)]
enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c pg::PgConn),
}

impl<'c> Db<'c> {
    pub(crate) fn sqlite(conn: &'c rusqlite::Connection) -> Self {
        Db {
            conn: Conn::Sqlite(conn),
            changed: Cell::new(false),
            sqlite_changes_before: conn.total_changes(),
        }
    }

    pub(crate) fn postgres(conn: &'c pg::PgConn) -> Self {
        Db {
            conn: Conn::Postgres(conn),
            changed: Cell::new(false),
            sqlite_changes_before: 0,
        }
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.conn {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, checkpoints); `None` on PostgreSQL.
    pub(crate) fn as_sqlite(&self) -> Option<&'c rusqlite::Connection> {
        match self.conn {
            Conn::Sqlite(conn) => Some(conn),
            Conn::Postgres(_) => None,
        }
    }

    /// Whether a statement run through this handle changed a row so far.
    pub(crate) fn changed(&self) -> bool {
        match self.conn {
            Conn::Sqlite(conn) => conn.total_changes() != self.sqlite_changes_before,
            Conn::Postgres(_) => self.changed.get(),
        }
    }

    /// Runs one statement that returns no rows; the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> Result<usize, DbError> {
        let changed = match self.conn {
            Conn::Sqlite(conn) => conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(
                    params.iter().map(|p| p.to_param()),
                ))?,
            Conn::Postgres(conn) => conn.execute(sql, params)?,
        };
        if changed > 0 {
            self.changed.set(true);
        }
        Ok(changed)
    }

    /// Runs one statement and converts each row it returns with `each`, in order.
    pub(crate) fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        mut each: impl FnMut(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        let rows = match self.conn {
            Conn::Sqlite(conn) => {
                let mut statement = conn.prepare_cached(sql)?;
                let mut rows = statement.query(rusqlite::params_from_iter(
                    params.iter().map(|p| p.to_param()),
                ))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(each(&Row::Sqlite(row))?);
                }
                out
            }
            Conn::Postgres(conn) => conn
                .query(sql, params)?
                .iter()
                .map(|row| each(&Row::Postgres(row)))
                .collect::<Result<Vec<T>, DbError>>()?,
        };
        // An `UPDATE ... RETURNING` or `INSERT ... RETURNING` changes the rows it returns.
        if !rows.is_empty() && !is_read_only(sql) {
            self.changed.set(true);
        }
        Ok(rows)
    }

    /// The first row `sql` returns, converted; `None` when it returns none.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        each: impl FnOnce(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError> {
        let mut each = Some(each);
        let mut rows = self.query_map(sql, params, |row| match each.take() {
            Some(convert) => convert(row).map(Some),
            None => Ok(None),
        })?;
        Ok(if rows.is_empty() {
            None
        } else {
            rows.swap_remove(0)
        })
    }

    /// The first row `sql` returns, converted; [`DbError::NoRows`] when it returns none.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        each: impl FnOnce(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.query_opt(sql, params, each)?.ok_or(DbError::NoRows)
    }

    /// Runs statements without parameters, separated by `;` (schema changes, transaction control).
    pub(crate) fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        match self.conn {
            Conn::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Conn::Postgres(conn) => conn.execute_batch(sql),
        }
    }
}

/// A statement that cannot change rows: a `SELECT` (with or without a `WITH` before it, which the
/// store's statements never use to write).
fn is_read_only(sql: &str) -> bool {
    let start = sql.trim_start();
    start
        .get(..6)
        .is_some_and(|word| word.eq_ignore_ascii_case("select"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_bind_integers_text_bytes_and_null() {
        fn bound(params: &[&dyn ToParam]) -> Vec<String> {
            params
                .iter()
                .map(|p| format!("{:?}", p.to_param()))
                .collect()
        }
        let none: Option<&str> = None;
        assert_eq!(
            bound(params![7_i64, "x", true, none, Some(3_u32), vec![1_u8, 2]]),
            [
                "Int(7)",
                "Text(\"x\")",
                "Int(1)",
                "Null",
                "Int(3)",
                "Blob([1, 2])"
            ]
        );
    }

    #[test]
    fn sqlite_runs_statements_and_notes_changes() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let db = Db::sqlite(&conn);
        db.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER, b BLOB) STRICT")
            .unwrap();
        assert!(!db.changed());
        assert_eq!(
            db.query_opt("SELECT v FROM t WHERE k = ?1", params!["a"], |r| r
                .get::<i64>(0))
                .unwrap(),
            None
        );
        assert!(!db.changed(), "a SELECT changes nothing");
        db.execute(
            "INSERT INTO t (k, v, b) VALUES (?1, ?2, ?3)",
            params!["a", 5_i64, vec![9_u8]],
        )
        .unwrap();
        assert!(db.changed());
        let err = db
            .execute("INSERT INTO t (k, v) VALUES (?1, ?2)", params!["a", 6_i64])
            .unwrap_err();
        assert!(err.to_string().contains("UNIQUE"), "{err}");
        let rows = db
            .query_map("SELECT k, v, b FROM t", params![], |r| {
                Ok((r.get::<String>(0)?, r.get::<u32>(1)?, r.get::<Vec<u8>>(2)?))
            })
            .unwrap();
        assert_eq!(rows, vec![("a".to_string(), 5, vec![9])]);
        assert!(matches!(
            db.query_one("SELECT v FROM t WHERE k = ?1", params!["z"], |r| r
                .get::<i64>(0)),
            Err(DbError::NoRows)
        ));
        db.execute("UPDATE t SET v = -1", params![]).unwrap();
        assert!(matches!(
            db.query_one("SELECT v FROM t", params![], |r| r.get::<u64>(0)),
            Err(DbError::Column { index: 0, .. })
        ));
    }

    #[test]
    fn only_selects_are_read_only() {
        assert!(is_read_only("  SELECT 1"));
        assert!(is_read_only("select 1"));
        assert!(!is_read_only("UPDATE t SET v = 1 RETURNING v"));
        assert!(!is_read_only("DELETE FROM t RETURNING k"));
        assert!(!is_read_only(""));
    }
}
