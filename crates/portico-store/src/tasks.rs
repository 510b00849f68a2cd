//! A2A tasks: every task Portico's A2A server acknowledges, with its message history, its status history
//! and its push-notification configs, so that tasks survive the process being killed.
//!
//! The store is bounded by [`TaskLimits::max_tasks`]. Creating a task in a full store evicts the oldest
//! finished (terminal) tasks to make room; active tasks, including those waiting for input or
//! authentication, are never evicted, so when every stored task is active creation fails with
//! [`StoreError::TasksFull`].
//!
//! Status, messages, artifacts, metadata and push configs are kept as opaque JSON. Only the state is
//! interpreted, to tell finished tasks from active ones: it is core's `TaskState`, stored as its 1.0
//! enum name (the same column values as before the type existed). The store does not police
//! transitions (a finished task can be written to); that is the server's business.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use portico_core::TaskState;

use crate::db::{Db, DbError, Dialect, Row, ToParam, params};
use crate::{Store, StoreError, now_ms};

/// The states from which a task never moves on; only tasks in these states are ever evicted.
const TERMINAL_SQL: &str =
    "('TASK_STATE_COMPLETED', 'TASK_STATE_CANCELED', 'TASK_STATE_FAILED', 'TASK_STATE_REJECTED')";

/// A task whose run died with its replica (see [`Store::orphaned_tasks`]): `?1` is the oldest
/// heartbeat of a live replica, `?2` the name of a replica starting again (or NULL).
const ORPHANED_SQL: &str = "state IN ('TASK_STATE_UNSPECIFIED', 'TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING') \
     AND (runner IS NULL OR runner = ?2 OR runner NOT IN \
          (SELECT name FROM replicas WHERE heartbeat_at_ms >= ?1))";

/// The states that are not terminal, as an SQL list (a test keeps both lists in step with
/// [`TaskState`]). Counting these through the state index touches only the active tasks, where
/// counting the terminal ones (or testing every row) would read the whole table on every creation.
const ACTIVE_SQL: &str = "('TASK_STATE_UNSPECIFIED', 'TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', \
                          'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')";

/// The default of [`TaskLimits::max_tasks`].
pub const DEFAULT_MAX_TASKS: usize = 10_000;
/// What a [`TaskQuery::page_size`] of 0 means.
pub const DEFAULT_TASK_PAGE_SIZE: usize = 50;
/// The largest page [`Store::list_tasks`] returns; larger page sizes are lowered to it.
pub const MAX_TASK_PAGE_SIZE: usize = 100;

/// How many tasks [`Store::task_heads`] reads per query.
pub const HEADS_PER_QUERY: usize = 64;

/// A task head's columns as read: state, status, artifacts, updated_at_ms, runner, context_id.
type RawHead = (String, String, String, i64, Option<String>, String);

/// A task's state, status and artifacts without its history ([`Store::task_head`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHead {
    pub context_id: String,
    pub state: TaskState,
    pub status: serde_json::Value,
    pub artifacts: Vec<serde_json::Value>,
    pub updated_at_ms: i64,
    /// The replica that last wrote it (see [`Store::orphaned_tasks`]).
    pub runner: Option<String>,
}

/// A stored A2A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub context_id: String,
    /// The caller identity that created the task; only it may see the task.
    pub owner: String,
    /// The Portico agent that runs the task.
    pub agent: String,
    /// The current state (stored as its 1.0 enum name, e.g. `TASK_STATE_WORKING`).
    pub state: TaskState,
    /// The latest `TaskStatus` as JSON (state, message?, timestamp).
    pub status: serde_json::Value,
    /// `Message`s, in order.
    pub history: Vec<serde_json::Value>,
    /// `Artifact`s, in order. Merging a chunk into an existing artifact is the caller's job; the store
    /// replaces the whole list ([`Store::set_task_artifacts`]).
    pub artifacts: Vec<serde_json::Value>,
    pub metadata: serde_json::Value,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl TaskRecord {
    /// Applies `update` to this copy of the task as [`Store::update_task`] applies it to the stored one
    /// (`now_ms` standing for the time of the write), so a caller that wrote the update can keep its
    /// copy in step instead of reading the task back.
    pub fn apply(&mut self, update: TaskUpdate, now_ms: i64) {
        if let Some(message) = update.message {
            self.history.push(message);
        }
        if let Some(artifacts) = update.artifacts {
            self.artifacts = artifacts;
        }
        if let Some(metadata) = update.metadata {
            self.metadata = metadata;
        }
        if let Some(change) = update.status {
            self.state = change.state;
            self.status = change.status;
        }
        self.updated_at_ms = self.updated_at_ms.max(now_ms);
    }
}

/// One entry of a task's status history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusChange {
    pub task_id: String,
    /// 1 for the status the task was created with, then consecutive.
    pub seq: i64,
    pub state: TaskState,
    pub status: serde_json::Value,
    pub at_ms: i64,
}

/// A change of a task's status: the A2A 1.0 enum name of the new state, and the `TaskStatus` JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatusUpdate {
    pub state: TaskState,
    pub status: serde_json::Value,
}

/// Changes to one task, written together in one transaction ([`Store::update_task`]): whatever is set is
/// written, the rest is left as it is. Any change marks the task updated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskUpdate {
    /// A message appended to the task's history.
    pub message: Option<serde_json::Value>,
    /// The whole artifact list, replacing the stored one.
    pub artifacts: Option<Vec<serde_json::Value>>,
    /// The metadata, replacing the stored metadata.
    pub metadata: Option<serde_json::Value>,
    /// The new status, also appended to the status history.
    pub status: Option<TaskStatusUpdate>,
}

impl TaskUpdate {
    pub fn status(state: TaskState, status: serde_json::Value) -> Self {
        TaskUpdate {
            status: Some(TaskStatusUpdate { state, status }),
            ..TaskUpdate::default()
        }
    }
}

/// A status a task had before the one it is stored with, and when it was set; see
/// [`Store::create_task_with_history`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierStatus {
    pub state: TaskState,
    pub status: serde_json::Value,
    pub at_ms: i64,
}

/// Bounds on the task store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskLimits {
    /// Most tasks stored at once, finished or not. Taken literally: 0 stores nothing.
    pub max_tasks: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            max_tasks: DEFAULT_MAX_TASKS,
        }
    }
}

/// Which tasks [`Store::list_tasks`] returns: always only `owner`'s, newest updated first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskQuery {
    pub owner: String,
    pub context_id: Option<String>,
    /// Only tasks in this state. A2A's `TASK_STATE_UNSPECIFIED` filter means no filter and should be
    /// passed as `None`.
    pub state: Option<TaskState>,
    /// Only tasks updated at or after this time (A2A's `status_timestamp_after` is inclusive). Any write to
    /// a task (status, message, artifacts, metadata) counts as an update.
    pub updated_after_ms: Option<i64>,
    /// 0 means [`DEFAULT_TASK_PAGE_SIZE`]; more than [`MAX_TASK_PAGE_SIZE`] means that.
    pub page_size: usize,
    /// `next_page_token` of the previous page; `None` or empty for the first page.
    pub page_token: Option<String>,
}

/// One page of [`Store::list_tasks`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    /// `None` on the last page.
    pub next_page_token: Option<String>,
    /// How many tasks match the query's filters, across all pages.
    pub total_size: usize,
}

const TASK_COLUMNS: &str = "id, context_id, owner, agent, state, status, artifacts, metadata, \
                            created_at_ms, updated_at_ms";

/// The task id as the cursors, eviction and listings order it: byte by byte on both databases, so
/// that a page token means the same position whichever replica (and database) reads it. SQLite
/// compares text bytewise already (and its indexes are built so); PostgreSQL would use the
/// database's collation, which depends on the locale the server was initialised with.
fn ordered_id(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "id",
        Dialect::Postgres => "id COLLATE \"C\"",
    }
}

/// A task row and its messages as stored, so that JSON is parsed after the connection is released.
struct RawTask {
    id: String,
    context_id: String,
    owner: String,
    agent: String,
    state: String,
    status: String,
    artifacts: String,
    metadata: String,
    created_at_ms: i64,
    updated_at_ms: i64,
    history: Vec<(i64, String)>,
}

fn raw_task_from_row(row: &Row<'_>) -> Result<RawTask, DbError> {
    Ok(RawTask {
        id: row.get(0)?,
        context_id: row.get(1)?,
        owner: row.get(2)?,
        agent: row.get(3)?,
        state: row.get(4)?,
        status: row.get(5)?,
        artifacts: row.get(6)?,
        metadata: row.get(7)?,
        created_at_ms: row.get(8)?,
        updated_at_ms: row.get(9)?,
        history: Vec::new(),
    })
}

/// The tasks `FROM a2a_tasks {selection}` selects (`selection` being what follows the table name:
/// filters, order, limit), each with its messages. The messages of all of them are read in one
/// statement rather than one per task, since on PostgreSQL every statement is a round trip.
fn select_tasks(
    db: &Db<'_>,
    selection: &str,
    params: &[&dyn ToParam],
) -> Result<Vec<RawTask>, DbError> {
    let mut tasks = db.query_map(
        &format!("SELECT {TASK_COLUMNS} FROM a2a_tasks{selection}"),
        params,
        raw_task_from_row,
    )?;
    if tasks.is_empty() {
        return Ok(tasks);
    }
    let mut messages: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    for (task_id, seq, message) in db.query_map(
        &format!(
            "SELECT task_id, seq, message FROM a2a_task_messages \
             WHERE task_id IN (SELECT id FROM a2a_tasks{selection}) ORDER BY task_id, seq"
        ),
        params,
        |row| Ok((row.get::<String>(0)?, row.get(1)?, row.get(2)?)),
    )? {
        messages.entry(task_id).or_default().push((seq, message));
    }
    for task in &mut tasks {
        task.history = messages.remove(&task.id).unwrap_or_default();
    }
    Ok(tasks)
}

/// (all tasks, active tasks). A bare `count(*)` is answered from the b-tree's page counts and the
/// active count from the state index's active ranges, so this stays cheap however many finished tasks
/// are stored.
fn count_tasks(db: &Db<'_>) -> Result<(usize, usize), DbError> {
    db.query_one(
        &format!(
            "SELECT (SELECT count(*) FROM a2a_tasks), \
                    (SELECT count(*) FROM a2a_tasks WHERE state IN {ACTIVE_SQL})"
        ),
        params![],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

fn count_to_sql(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Deletes the `excess` oldest finished tasks. The count is part of the SQL, not a parameter: with a
/// bound LIMIT SQLite prepared the statement again at every execution. It is nearly always 1, so the
/// statement cache holds one or two of these.
fn eviction_sql(dialect: Dialect, excess: usize) -> String {
    let id = ordered_id(dialect);
    format!(
        "DELETE FROM a2a_tasks WHERE id IN (\
           SELECT id FROM a2a_tasks WHERE state IN {TERMINAL_SQL} \
           ORDER BY updated_at_ms, {id} LIMIT {excess})"
    )
}

/// The next `seq` of the task's rows in `table`. Read and used within the writer's transaction, which
/// on PostgreSQL is SERIALIZABLE: two replicas appending to one task at once cannot both commit the
/// same number (one is run again and reads the other's row).
fn next_seq(db: &Db<'_>, table: &str, task_id: &str) -> Result<i64, DbError> {
    db.query_one(
        &format!("SELECT coalesce(max(seq), 0) + 1 FROM {table} WHERE task_id = ?1"),
        params![task_id],
        |row| row.get(0),
    )
}

/// The page token for continuing after the task updated at `updated_at_ms` with `id`: the hex digits of
/// `"{updated_at_ms}:{id}"`. Deterministic, so the same listing always yields the same tokens.
fn encode_page_token(updated_at_ms: i64, id: &str) -> String {
    use std::fmt::Write as _;
    let raw = format!("{updated_at_ms}:{id}");
    let mut token = String::with_capacity(raw.len() * 2);
    for byte in raw.bytes() {
        let _ = write!(token, "{byte:02x}");
    }
    token
}

fn decode_page_token(token: &str) -> Option<(i64, String)> {
    if !token.len().is_multiple_of(2) || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let raw = String::from_utf8(bytes).ok()?;
    let (updated_at_ms, id) = raw.split_once(':')?;
    Some((updated_at_ms.parse().ok()?, id.to_string()))
}

impl Store {
    /// Stores a new task, its messages and its first status-history entry (`seq` 1, at
    /// `task.updated_at_ms`) in one transaction. Timestamps are taken from `task` as given.
    ///
    /// If the store already holds `limits.max_tasks` tasks, the oldest terminal tasks (by `updated_at_ms`,
    /// then id) are evicted first, with their histories and push configs. Active tasks are never evicted:
    /// if evicting every terminal task would not make room, nothing is written and the result is
    /// [`StoreError::TasksFull`]. A duplicate id is a database constraint error.
    pub fn create_task(&self, task: &TaskRecord, limits: &TaskLimits) -> Result<(), StoreError> {
        self.create_task_with_history(task, &[], limits)
    }

    /// [`Store::create_task`] for a task that is stored only once it has come some way: its status
    /// history starts with `earlier` (oldest first, each at its own time), then its current status.
    pub fn create_task_with_history(
        &self,
        task: &TaskRecord,
        earlier: &[EarlierStatus],
        limits: &TaskLimits,
    ) -> Result<(), StoreError> {
        self.in_immediate_transaction("creating an A2A task", |db| {
            self.insert_task(db, task, earlier, limits)
        })
    }

    /// Whether [`Store::create_task`] would find room for one more task (evicting finished ones if need
    /// be): [`StoreError::TasksFull`] if not. Nothing is written.
    pub fn check_room_for_task(&self, limits: &TaskLimits) -> Result<(), StoreError> {
        self.with_db_store_error("counting A2A tasks", |db| {
            self.room_for_task(db, limits).map(|_| ())
        })
    }

    /// How many finished tasks must be evicted to store one more, or [`StoreError::TasksFull`].
    pub(crate) fn room_for_task(
        &self,
        db: &Db<'_>,
        limits: &TaskLimits,
    ) -> Result<usize, StoreError> {
        let (total, active) = count_tasks(db).map_err(self.sql_error("counting A2A tasks"))?;
        // Room for one more, even if the limit was lowered below what is stored.
        let excess = (total + 1).saturating_sub(limits.max_tasks);
        if excess > total - active {
            return Err(StoreError::TasksFull {
                path: self.label().to_path_buf(),
                limit: limits.max_tasks,
                active,
            });
        }
        Ok(excess)
    }

    /// [`Store::create_task_with_history`] inside the caller's transaction, which must be `IMMEDIATE`
    /// on SQLite (SERIALIZABLE on PostgreSQL): counting, evicting and inserting must not interleave
    /// with another process's create, or two replicas could each see room for the last task.
    pub(crate) fn insert_task(
        &self,
        db: &Db<'_>,
        task: &TaskRecord,
        earlier: &[EarlierStatus],
        limits: &TaskLimits,
    ) -> Result<(), StoreError> {
        let artifacts = self.encode_json(&task.artifacts, || {
            format!("the artifacts of new A2A task {:?}", task.id)
        })?;
        let error = || self.sql_error("creating an A2A task");
        let excess = self.room_for_task(db, limits)?;
        if excess > 0 {
            // Messages, status history and push configs go with their task (ON DELETE CASCADE).
            let evicted = db
                .execute(&eviction_sql(db.dialect(), excess), params![])
                .map_err(error())?;
            tracing::debug!(
                path = %self.label().display(),
                evicted,
                limit = limits.max_tasks,
                "evicted the oldest finished A2A tasks to make room"
            );
        }
        let status = task.status.to_string();
        db.execute(
            "INSERT INTO a2a_tasks \
               (id, context_id, owner, agent, state, status, artifacts, metadata, created_at_ms, updated_at_ms, runner) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                task.id,
                task.context_id,
                task.owner,
                task.agent,
                task.state.v1_name(),
                status,
                artifacts,
                task.metadata.to_string(),
                task.created_at_ms,
                task.updated_at_ms,
                self.replica(),
            ],
        )
        .map_err(error())?;
        for (seq, message) in (1_i64..).zip(&task.history) {
            db.execute(
                "INSERT INTO a2a_task_messages (task_id, seq, message) VALUES (?1, ?2, ?3)",
                params![task.id, seq, message.to_string()],
            )
            .map_err(error())?;
        }
        let insert_status = |seq: i64, state: TaskState, status: &str, at_ms: i64| {
            db.execute(
                "INSERT INTO a2a_task_status (task_id, seq, state, status, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![task.id, seq, state.v1_name(), status, at_ms],
            )
            .map_err(error())
        };
        for (seq, past) in (1_i64..).zip(earlier) {
            insert_status(seq, past.state, &past.status.to_string(), past.at_ms)?;
        }
        insert_status(
            count_to_sql(earlier.len() + 1),
            task.state,
            &status,
            task.updated_at_ms,
        )?;
        Ok(())
    }

    /// Writes `update` to the task in one transaction (see [`TaskUpdate`]): the message is appended to
    /// the history, artifacts and metadata replace the stored ones, a status change sets the state and
    /// status and is appended to the status history; `updated_at_ms` becomes now (never moving
    /// backwards). Returns the new status-history entry's `seq` when the update had a status.
    pub fn update_task(&self, id: &str, update: &TaskUpdate) -> Result<Option<i64>, StoreError> {
        self.in_immediate_transaction("updating an A2A task", |db| {
            self.apply_task_update(db, id, update)
        })
    }

    /// [`Store::update_task`] inside the caller's transaction.
    pub(crate) fn apply_task_update(
        &self,
        db: &Db<'_>,
        id: &str,
        update: &TaskUpdate,
    ) -> Result<Option<i64>, StoreError> {
        let artifacts = update
            .artifacts
            .as_ref()
            .map(|artifacts| {
                self.encode_json(artifacts, || {
                    format!("the new artifacts of A2A task {id:?}")
                })
            })
            .transpose()?;
        let status = update
            .status
            .as_ref()
            .map(|change| change.status.to_string());
        let error = || self.sql_error("updating an A2A task");
        // `CASE` rather than SQLite's two-argument `max` (PostgreSQL's `greatest`): the same text on both.
        // A finished task takes no write, whichever process makes it: on a shared store, the replica
        // running a task may learn only after the fact that another one cancelled it (or, its lease
        // run out, failed it), and its run's late writes must not undo that. The writer is the
        // task's runner from now on.
        let at_ms: Option<i64> = db
            .query_opt(
                &format!(
                    "UPDATE a2a_tasks SET \
                       state = coalesce(?2, state), status = coalesce(?3, status), \
                       artifacts = coalesce(?4, artifacts), metadata = coalesce(?5, metadata), \
                       updated_at_ms = CASE WHEN updated_at_ms > ?6 THEN updated_at_ms ELSE ?6 END, \
                       runner = coalesce(?7, runner) \
                     WHERE id = ?1 AND state NOT IN {TERMINAL_SQL} RETURNING updated_at_ms"
                ),
                params![
                    id,
                    update.status.as_ref().map(|change| change.state.v1_name()),
                    status,
                    artifacts,
                    update.metadata.as_ref().map(|m| m.to_string()),
                    now_ms(),
                    self.replica(),
                ],
                |row| row.get(0),
            )
            .map_err(error())?;
        let Some(at_ms) = at_ms else {
            let state = db
                .query_opt(
                    "SELECT state FROM a2a_tasks WHERE id = ?1",
                    params![id],
                    |row| row.get::<String>(0),
                )
                .map_err(error())?;
            return Err(match state {
                Some(state) => StoreError::TaskFinished {
                    path: self.label().to_path_buf(),
                    id: id.to_string(),
                    state,
                },
                None => self.task_not_found(id),
            });
        };
        if let Some(message) = &update.message {
            let seq = next_seq(db, "a2a_task_messages", id).map_err(error())?;
            db.execute(
                "INSERT INTO a2a_task_messages (task_id, seq, message) VALUES (?1, ?2, ?3)",
                params![id, seq, message.to_string()],
            )
            .map_err(error())?;
        }
        let Some(change) = &update.status else {
            return Ok(None);
        };
        let seq = next_seq(db, "a2a_task_status", id).map_err(error())?;
        db.execute(
            "INSERT INTO a2a_task_status (task_id, seq, state, status, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, seq, change.state.v1_name(), status, at_ms],
        )
        .map_err(error())?;
        Ok(Some(seq))
    }

    /// Records a status change: sets the task's state, status and `updated_at_ms` (now, never moving
    /// backwards) and appends to its status history, in one transaction. Returns the new entry's `seq`.
    pub fn update_task_status(
        &self,
        id: &str,
        state: TaskState,
        status: &serde_json::Value,
    ) -> Result<i64, StoreError> {
        let seq = self.update_task(id, &TaskUpdate::status(state, status.clone()))?;
        Ok(seq.unwrap_or_default())
    }

    /// Appends `message` to the task's history and marks the task updated, in one transaction.
    pub fn append_task_message(
        &self,
        id: &str,
        message: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let update = TaskUpdate {
            message: Some(message.clone()),
            ..TaskUpdate::default()
        };
        self.update_task(id, &update).map(|_| ())
    }

    /// Replaces the task's artifacts with `artifacts` and marks the task updated.
    pub fn set_task_artifacts(
        &self,
        id: &str,
        artifacts: &[serde_json::Value],
    ) -> Result<(), StoreError> {
        let update = TaskUpdate {
            artifacts: Some(artifacts.to_vec()),
            ..TaskUpdate::default()
        };
        self.update_task(id, &update).map(|_| ())
    }

    /// Replaces the task's metadata and marks the task updated.
    pub fn set_task_metadata(
        &self,
        id: &str,
        metadata: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let update = TaskUpdate {
            metadata: Some(metadata.clone()),
            ..TaskUpdate::default()
        };
        self.update_task(id, &update).map(|_| ())
    }

    /// The task with its full history; `None` if it was never stored or has been evicted.
    pub fn task(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let raw = self.read_snapshot("reading an A2A task", |db| {
            select_tasks(db, " WHERE id = ?1", params![id])
        })?;
        raw.into_iter()
            .next()
            .map(|raw| self.parse_task(raw))
            .transpose()
    }

    /// The task's status history, oldest first; empty for an unknown task.
    pub fn task_status_history(&self, id: &str) -> Result<Vec<StatusChange>, StoreError> {
        let rows = self.with_db("reading an A2A task's status history", |db| {
            db.query_map(
                "SELECT seq, state, status, at_ms FROM a2a_task_status WHERE task_id = ?1 ORDER BY seq",
                params![id],
                |row| {
                    Ok((
                        row.get::<i64>(0)?,
                        row.get::<String>(1)?,
                        row.get::<String>(2)?,
                        row.get::<i64>(3)?,
                    ))
                },
            )
        })?;
        rows.into_iter()
            .map(|(seq, state, status, at_ms)| {
                Ok(StatusChange {
                    task_id: id.to_string(),
                    seq,
                    status: self
                        .decode_json(&status, || format!("status {seq} of A2A task {id:?}"))?,
                    state: self.parse_state(&state)?,
                    at_ms,
                })
            })
            .collect()
    }

    /// One page of `query.owner`'s tasks matching the query, newest updated first (ties: greater id
    /// first, ids compared byte by byte), each with its full history (trimming to `history_length` is
    /// the caller's job).
    ///
    /// Paging is by position (the last task's `updated_at_ms` and id), so inserts between pages neither
    /// repeat nor skip tasks; a task updated between pages moves to the front and may be missed or seen
    /// twice. A token that this store did not issue is [`StoreError::BadPageToken`]. Tokens are the
    /// same on every replica of a shared store.
    pub fn list_tasks(&self, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let page_size = match query.page_size {
            0 => DEFAULT_TASK_PAGE_SIZE,
            n => n.min(MAX_TASK_PAGE_SIZE),
        };
        let after = match query.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => {
                Some(
                    decode_page_token(token).ok_or_else(|| StoreError::BadPageToken {
                        path: self.label().to_path_buf(),
                    })?,
                )
            }
        };
        let state = query.state.map(TaskState::v1_name);
        // One more than the page, to learn whether there is a next page.
        let limit = count_to_sql(page_size + 1);

        // Only the filters that are set appear in the SQL, so the database can pick the matching index.
        let mut filters = String::from(" WHERE owner = ?");
        let mut values: Vec<&dyn ToParam> = vec![&query.owner];
        if let Some(context_id) = &query.context_id {
            filters.push_str(" AND context_id = ?");
            values.push(context_id);
        }
        if let Some(state) = &state {
            filters.push_str(" AND state = ?");
            values.push(state);
        }
        if let Some(updated_after_ms) = &query.updated_after_ms {
            filters.push_str(" AND updated_at_ms >= ?");
            values.push(updated_after_ms);
        }
        let filter_count = values.len();
        if let Some((updated_at_ms, id)) = &after {
            values.push(updated_at_ms);
            values.push(id);
        }
        values.push(&limit);

        let (total, mut raw) = self.read_snapshot("listing A2A tasks", |db| {
            let id = ordered_id(db.dialect());
            let mut selection = filters.clone();
            if after.is_some() {
                selection.push_str(&format!(" AND (updated_at_ms, {id}) < (?, ?)"));
            }
            selection.push_str(&format!(" ORDER BY updated_at_ms DESC, {id} DESC LIMIT ?"));
            let total: usize = db.query_one(
                &format!("SELECT count(*) FROM a2a_tasks{filters}"),
                &values[..filter_count],
                |row| row.get(0),
            )?;
            Ok((total, select_tasks(db, &selection, &values)?))
        })?;
        let next_page_token = if raw.len() > page_size {
            raw.truncate(page_size);
            raw.last()
                .map(|last| encode_page_token(last.updated_at_ms, &last.id))
        } else {
            None
        };
        Ok(TaskPage {
            tasks: raw
                .into_iter()
                .map(|raw| self.parse_task(raw))
                .collect::<Result<_, _>>()?,
            next_page_token,
            total_size: total,
        })
    }

    /// Every task not in a terminal state, least recently updated first: at start, these are the tasks
    /// that were in flight when the process stopped (on a shared store, those of every replica).
    pub fn active_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let raw = self.read_snapshot("reading active A2A tasks", |db| {
            let id = ordered_id(db.dialect());
            select_tasks(
                db,
                &format!(" WHERE state NOT IN {TERMINAL_SQL} ORDER BY updated_at_ms, {id}"),
                params![],
            )
        })?;
        raw.into_iter().map(|raw| self.parse_task(raw)).collect()
    }

    /// The tasks whose run died with its replica: not finished, not waiting for the client (nothing
    /// runs for those), and written last by a replica whose heartbeat is older than
    /// [`crate::REPLICA_LEASE`] or that left (or by no replica: stored before replicas were
    /// recorded). Least recently updated first. On a shared store the other replicas fail these
    /// (`portico-a2a`), as a restart fails its own. With `restarted`, also the tasks that replica
    /// ran: a process starting under that name runs none of them yet, so they are its previous
    /// incarnation's, whose lease its own first heartbeat has just renewed.
    pub fn orphaned_tasks(&self, restarted: Option<&str>) -> Result<Vec<TaskRecord>, StoreError> {
        let raw = self.read_snapshot("reading A2A tasks of dead replicas", |db| {
            let cutoff = crate::replicas::store_now_ms(db)? - crate::replicas::lease_ms();
            let id = ordered_id(db.dialect());
            select_tasks(
                db,
                &format!(" WHERE {ORPHANED_SQL} ORDER BY updated_at_ms, {id}"),
                params![cutoff, restarted],
            )
        })?;
        raw.into_iter().map(|raw| self.parse_task(raw)).collect()
    }

    /// Marks task `id` failed with `status` if it is still orphaned (see
    /// [`Store::orphaned_tasks`]), checked in the same transaction as the write: a replica whose
    /// heartbeat came back, or another replica that failed or finished the task first, keeps it as
    /// it is. `true` if this call failed it.
    pub fn fail_orphaned_task(
        &self,
        id: &str,
        restarted: Option<&str>,
        status: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        self.in_immediate_transaction("failing an A2A task of a dead replica", |db| {
            let error = || self.sql_error("failing an A2A task of a dead replica");
            let cutoff =
                crate::replicas::store_now_ms(db).map_err(error())? - crate::replicas::lease_ms();
            let orphaned = db
                .query_opt(
                    &format!("SELECT 1 FROM a2a_tasks WHERE id = ?3 AND {ORPHANED_SQL}"),
                    params![cutoff, restarted, id],
                    |_| Ok(()),
                )
                .map_err(error())?
                .is_some();
            if !orphaned {
                return Ok(false);
            }
            self.apply_task_update(
                db,
                id,
                &TaskUpdate::status(TaskState::Failed, status.clone()),
            )?;
            Ok(true)
        })
    }

    /// [`Store::task_head`] of each of `ids`, in order (`None` for a task that is not stored), in
    /// one query per [`HEADS_PER_QUERY`] ids: a replica follows every task it streams at once.
    pub fn task_heads(&self, ids: &[String]) -> Result<Vec<Option<TaskHead>>, StoreError> {
        let mut found: HashMap<String, TaskHead> = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(HEADS_PER_QUERY) {
            // Padded to a power of two by repeating the last id, so at most a few statement texts
            // are ever prepared.
            let size = chunk.len().next_power_of_two();
            let padded: Vec<&String> = chunk
                .iter()
                .chain(std::iter::repeat(
                    chunk.last().expect("chunks are never empty"),
                ))
                .take(size)
                .collect();
            let placeholders = (1..=size)
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let values: Vec<&dyn ToParam> = padded.iter().map(|id| *id as &dyn ToParam).collect();
            let rows = self.with_db("reading A2A tasks' states", |db| {
                db.query_map(
                    &format!(
                        "SELECT id, state, status, artifacts, updated_at_ms, runner, context_id \
                         FROM a2a_tasks WHERE id IN ({placeholders})"
                    ),
                    &values,
                    |row| {
                        Ok((
                            row.get::<String>(0)?,
                            (
                                row.get::<String>(1)?,
                                row.get::<String>(2)?,
                                row.get::<String>(3)?,
                                row.get::<i64>(4)?,
                                row.get::<Option<String>>(5)?,
                                row.get::<String>(6)?,
                            ),
                        ))
                    },
                )
            })?;
            for (id, raw) in rows {
                let head = self.parse_head(&id, raw)?;
                found.insert(id, head);
            }
        }
        Ok(ids.iter().map(|id| found.remove(id)).collect())
    }

    fn parse_head(
        &self,
        id: &str,
        (state, status, artifacts, updated_at_ms, runner, context_id): RawHead,
    ) -> Result<TaskHead, StoreError> {
        let corrupt = |what: String| {
            move |source| StoreError::CorruptJson {
                path: self.label().to_path_buf(),
                what,
                source,
            }
        };
        Ok(TaskHead {
            context_id,
            state: self.parse_state(&state)?,
            status: serde_json::from_str(&status)
                .map_err(corrupt(format!("the status of A2A task {id:?}")))?,
            artifacts: serde_json::from_str(&artifacts)
                .map_err(corrupt(format!("the artifacts of A2A task {id:?}")))?,
            updated_at_ms,
            runner,
        })
    }

    /// Where task `id` stands now, cheaply (no history): its state, status, artifacts, context,
    /// `updated_at_ms` and runner; `None` if there is no such task. For following a task another
    /// replica runs.
    pub fn task_head(&self, id: &str) -> Result<Option<TaskHead>, StoreError> {
        Ok(self.task_heads(&[id.to_string()])?.pop().flatten())
    }

    /// The most recently updated tasks of every owner, or only `owner`'s, filtered by agent and
    /// state, newest first, at most `limit` (at most [`MAX_TASK_PAGE_SIZE`]; 0 means
    /// [`DEFAULT_TASK_PAGE_SIZE`]): an operator's view across clients (the dashboard's).
    pub fn recent_tasks(
        &self,
        owner: Option<&str>,
        agent: Option<&str>,
        state: Option<TaskState>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let limit = count_to_sql(match limit {
            0 => DEFAULT_TASK_PAGE_SIZE,
            n => n.min(MAX_TASK_PAGE_SIZE),
        });
        let state = state.map(TaskState::v1_name);
        let mut filters = Vec::new();
        let mut values: Vec<&dyn ToParam> = Vec::new();
        for (column, value) in [("owner", &owner), ("agent", &agent), ("state", &state)] {
            if let Some(value) = value {
                filters.push(format!("{column} = ?"));
                values.push(value);
            }
        }
        let filters = if filters.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", filters.join(" AND "))
        };
        values.push(&limit);
        let raw = self.read_snapshot("listing recent A2A tasks", |db| {
            let id = ordered_id(db.dialect());
            select_tasks(
                db,
                &format!("{filters} ORDER BY updated_at_ms DESC, {id} DESC LIMIT ?"),
                &values,
            )
        })?;
        raw.into_iter().map(|raw| self.parse_task(raw)).collect()
    }

    /// (stored tasks, of which active).
    pub fn task_count(&self) -> Result<(usize, usize), StoreError> {
        self.with_db("counting A2A tasks", count_tasks)
    }

    /// How many stored tasks are in each state (states with none left out), for `/metrics`.
    pub fn task_counts_by_state(&self) -> Result<Vec<(TaskState, usize)>, StoreError> {
        let rows = self.with_db("counting A2A tasks by state", |db| {
            db.query_map(
                "SELECT state, count(*) FROM a2a_tasks GROUP BY state",
                params![],
                |row| Ok((row.get::<String>(0)?, row.get::<usize>(1)?)),
            )
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|(state, count)| Some((TaskState::from_v1_name(&state)?, count)))
            .collect())
    }

    /// Stores `config` as the task's push-notification config `config_id`, replacing any config with that
    /// id (which keeps its place in [`Store::push_configs`]).
    pub fn put_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        config: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let config = config.to_string();
        let operation = "storing an A2A push-notification config";
        self.in_immediate_transaction(operation, |db| {
            // Checked first rather than left to the foreign key, so that a missing task is
            // `TaskNotFound` on both databases (and PostgreSQL's transaction is not aborted).
            let exists = db
                .query_opt(
                    "SELECT id FROM a2a_tasks WHERE id = ?1",
                    params![task_id],
                    |_| Ok(()),
                )
                .map_err(self.sql_error(operation))?
                .is_some();
            if !exists {
                return Err(self.task_not_found(task_id));
            }
            db.execute(
                "INSERT INTO a2a_push_configs (task_id, config_id, config) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config",
                params![task_id, config_id, config],
            )
            .map_err(self.sql_error(operation))?;
            Ok(())
        })
    }

    /// The task's push-notification config `config_id`, if there is one.
    pub fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let text = self.with_db("reading an A2A push-notification config", |db| {
            db.query_opt(
                "SELECT config FROM a2a_push_configs WHERE task_id = ?1 AND config_id = ?2",
                params![task_id, config_id],
                |row| row.get::<String>(0),
            )
        })?;
        text.map(|text| {
            self.decode_json(&text, || {
                format!("push config {config_id:?} of A2A task {task_id:?}")
            })
        })
        .transpose()
    }

    /// The task's push-notification configs as (config id, config), in order of first registration;
    /// empty for an unknown task.
    pub fn push_configs(
        &self,
        task_id: &str,
    ) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        let rows = self.with_db("reading A2A push-notification configs", |db| {
            db.query_map(
                "SELECT config_id, config FROM a2a_push_configs WHERE task_id = ?1 ORDER BY id",
                params![task_id],
                |row| Ok((row.get::<String>(0)?, row.get::<String>(1)?)),
            )
        })?;
        rows.into_iter()
            .map(|(config_id, text)| {
                let config = self.decode_json(&text, || {
                    format!("push config {config_id:?} of A2A task {task_id:?}")
                })?;
                Ok((config_id, config))
            })
            .collect()
    }

    /// Removes the task's push-notification config `config_id`; `true` if it was there.
    pub fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        self.with_db("deleting an A2A push-notification config", |db| {
            db.execute(
                "DELETE FROM a2a_push_configs WHERE task_id = ?1 AND config_id = ?2",
                params![task_id, config_id],
            )
            .map(|deleted| deleted > 0)
        })
    }

    /// A stored state name as the state it names; anything else was not written by this store.
    fn parse_state(&self, state: &str) -> Result<TaskState, StoreError> {
        TaskState::from_v1_name(state).ok_or_else(|| StoreError::UnknownTaskState {
            path: self.label().to_path_buf(),
            state: state.to_string(),
        })
    }

    fn task_not_found(&self, id: &str) -> StoreError {
        StoreError::TaskNotFound {
            path: self.label().to_path_buf(),
            id: id.to_string(),
        }
    }

    fn encode_json<T: Serialize>(
        &self,
        value: &T,
        what: impl FnOnce() -> String,
    ) -> Result<String, StoreError> {
        serde_json::to_string(value).map_err(|source| StoreError::CorruptJson {
            path: self.label().to_path_buf(),
            what: what(),
            source,
        })
    }

    fn decode_json<T: DeserializeOwned>(
        &self,
        text: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|source| StoreError::CorruptJson {
            path: self.label().to_path_buf(),
            what: what(),
            source,
        })
    }

    fn parse_task(&self, raw: RawTask) -> Result<TaskRecord, StoreError> {
        let id = raw.id;
        let history = raw
            .history
            .into_iter()
            .map(|(seq, text)| {
                self.decode_json(&text, || format!("message {seq} of A2A task {id:?}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(TaskRecord {
            status: self.decode_json(&raw.status, || format!("the status of A2A task {id:?}"))?,
            artifacts: self.decode_json(&raw.artifacts, || {
                format!("the artifacts of A2A task {id:?}")
            })?,
            metadata: self
                .decode_json(&raw.metadata, || format!("the metadata of A2A task {id:?}"))?,
            history,
            id,
            context_id: raw.context_id,
            owner: raw.owner,
            agent: raw.agent,
            state: self.parse_state(&raw.state)?,
            created_at_ms: raw.created_at_ms,
            updated_at_ms: raw.updated_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use rusqlite::Connection;
    use serde_json::json;

    use super::*;
    use crate::both_backends;
    use crate::migrations::{MIGRATIONS, migrate, user_version};

    const SUBMITTED: TaskState = TaskState::Submitted;
    const WORKING: TaskState = TaskState::Working;
    const COMPLETED: TaskState = TaskState::Completed;
    const FAILED: TaskState = TaskState::Failed;
    const INPUT_REQUIRED: TaskState = TaskState::InputRequired;
    const AUTH_REQUIRED: TaskState = TaskState::AuthRequired;

    fn status(state: TaskState, text: Option<&str>) -> serde_json::Value {
        match text {
            Some(text) => json!({
                "state": state,
                "message": {"messageId": format!("m-{text}"), "role": "ROLE_AGENT", "parts": [{"text": text}]},
                "timestamp": "2026-01-02T03:04:05Z"
            }),
            None => json!({"state": state, "timestamp": "2026-01-02T03:04:05Z"}),
        }
    }

    fn user_message(id: &str, text: &str) -> serde_json::Value {
        json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
    }

    fn task(id: &str, owner: &str, context_id: &str, state: TaskState, at_ms: i64) -> TaskRecord {
        TaskRecord {
            id: id.to_string(),
            context_id: context_id.to_string(),
            owner: owner.to_string(),
            agent: "planner".to_string(),
            state,
            status: status(state, None),
            history: vec![user_message(&format!("{id}-m1"), "hello")],
            artifacts: Vec::new(),
            metadata: json!({}),
            created_at_ms: at_ms,
            updated_at_ms: at_ms,
        }
    }

    fn unlimited() -> TaskLimits {
        TaskLimits::default()
    }

    both_backends! {
        fn a_finished_task_takes_no_write_from_any_process(store) {
            store.set_replica("gw-a");
            store
                .create_task(&task("t1", "client:a", "c1", TaskState::Working, 10), &unlimited())
                .unwrap();
            store
                .update_task_status("t1", TaskState::Canceled, &status(TaskState::Canceled, None))
                .unwrap();
            // The run that was cancelled elsewhere finishes late: its answer is refused, not stored.
            let late = TaskUpdate {
                artifacts: Some(vec![json!({"artifactId": "a", "parts": []})]),
                ..TaskUpdate::status(TaskState::Completed, status(TaskState::Completed, None))
            };
            let err = store.update_task("t1", &late).unwrap_err();
            assert!(
                matches!(&err, StoreError::TaskFinished { id, state, .. }
                    if id == "t1" && state == "TASK_STATE_CANCELED"),
                "{err}"
            );
            let stored = store.task("t1").unwrap().unwrap();
            assert_eq!((stored.state, stored.artifacts.len()), (TaskState::Canceled, 0));
            assert_eq!(store.task_status_history("t1").unwrap().len(), 2);
            assert!(matches!(
                store.update_task("missing", &late),
                Err(StoreError::TaskNotFound { .. })
            ));
        }
    }

    both_backends! {
        fn orphaned_tasks_are_the_active_ones_of_replicas_whose_lease_ran_out(store) {
            store.set_replica("gw-a");
            store.replica_heartbeat("gw-a", "one").unwrap();
            store
                .create_task(&task("running", "client:a", "c1", TaskState::Working, 10), &unlimited())
                .unwrap();
            store
                .create_task(&task("waiting", "client:a", "c2", TaskState::InputRequired, 11), &unlimited())
                .unwrap();
            store
                .create_task(&task("done", "client:a", "c3", TaskState::Completed, 12), &unlimited())
                .unwrap();
            let ids = |tasks: Vec<TaskRecord>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
            assert_eq!(ids(store.orphaned_tasks(None).unwrap()), Vec::<String>::new());
            assert_eq!(store.task_head("running").unwrap().unwrap().runner.as_deref(), Some("gw-a"));
            // gw-a starting again runs none of them: its running one is its last life's.
            assert_eq!(ids(store.orphaned_tasks(Some("gw-a")).unwrap()), ["running"]);
            assert_eq!(ids(store.orphaned_tasks(Some("gw-b")).unwrap()), Vec::<String>::new());

            // gw-a's heartbeat runs out: only its running task is orphaned.
            store
                .with_db("ageing a heartbeat", |db| {
                    db.execute(
                        "UPDATE replicas SET heartbeat_at_ms = heartbeat_at_ms - ?1",
                        params![crate::replicas::lease_ms() + 1],
                    )
                })
                .unwrap();
            assert_eq!(ids(store.orphaned_tasks(None).unwrap()), ["running"]);

            // A task no replica is recorded for (stored before replicas were) is orphaned too.
            let legacy = Store::open_in_memory().unwrap();
            legacy
                .create_task(&task("old", "client:a", "c4", TaskState::Submitted, 1), &unlimited())
                .unwrap();
            assert_eq!(ids(legacy.orphaned_tasks(None).unwrap()), ["old"]);
        }
    }

    both_backends! {
        fn heads_of_many_tasks_come_in_order_with_none_for_the_missing(store) {
            let ids: Vec<String> = (0..70).map(|i| format!("t{i:02}")).collect();
            for (i, id) in ids.iter().enumerate() {
                store
                    .create_task(&task(id, "client:a", "c", TaskState::Working, i as i64), &unlimited())
                    .unwrap();
            }
            let mut asked: Vec<String> = ids.iter().rev().cloned().collect();
            asked.insert(3, "missing".into());
            let heads = store.task_heads(&asked).unwrap();
            assert_eq!(heads.len(), 71);
            assert!(heads[3].is_none());
            let times: Vec<i64> = heads.iter().flatten().map(|h| h.updated_at_ms).collect();
            assert_eq!(times, (0..70).rev().collect::<Vec<i64>>());
            assert_eq!(store.task_heads(&[]).unwrap(), vec![]);
        }
    }

    both_backends! {
        fn the_head_of_a_task_is_its_state_status_and_artifacts(store) {
            let mut record = task("t1", "client:a", "c1", TaskState::Working, 10);
            record.artifacts = vec![json!({"artifactId": "r", "parts": [{"text": "hi"}]})];
            store.create_task(&record, &unlimited()).unwrap();
            let head = store.task_head("t1").unwrap().unwrap();
            assert_eq!(
                (head.context_id.as_str(), head.state, head.status, head.artifacts, head.updated_at_ms, head.runner),
                ("c1", TaskState::Working, status(TaskState::Working, None), record.artifacts, 10, None)
            );
            assert_eq!(store.task_head("nope").unwrap(), None);
        }
    }

    both_backends! {
        fn recent_tasks_are_every_owners_newest_first_and_filter_by_owner_agent_and_state(store) {
            let mut other_agent = task("t3", "client:b", "c3", TaskState::Working, 30);
            other_agent.agent = "writer".into();
            for record in [
                task("t1", "client:a", "c1", TaskState::Completed, 10),
                task("t2", "client:b", "c2", TaskState::Working, 20),
                other_agent,
            ] {
                store.create_task(&record, &unlimited()).unwrap();
            }
            let ids = |owner, agent, state, limit| -> Vec<String> {
                store
                    .recent_tasks(owner, agent, state, limit)
                    .unwrap()
                    .into_iter()
                    .map(|t| t.id)
                    .collect()
            };
            assert_eq!(ids(None, None, None, 0), ["t3", "t2", "t1"]);
            assert_eq!(ids(None, None, None, 2), ["t3", "t2"]);
            assert_eq!(ids(Some("client:b"), None, None, 0), ["t3", "t2"]);
            assert_eq!(ids(None, Some("planner"), None, 0), ["t2", "t1"]);
            assert_eq!(ids(None, None, Some(TaskState::Working), 0), ["t3", "t2"]);
            assert_eq!(
                ids(Some("client:a"), None, Some(TaskState::Working), 0),
                Vec::<String>::new()
            );
            // With its history.
            assert_eq!(
                store.recent_tasks(None, None, None, 1).unwrap()[0]
                    .history
                    .len(),
                1
            );
        }
    }

    fn limit(max_tasks: usize) -> TaskLimits {
        TaskLimits { max_tasks }
    }

    fn stored_ids(store: &Store) -> BTreeSet<String> {
        store
            .with_db("test", |db| {
                db.query_map("SELECT id FROM a2a_tasks", params![], |row| row.get(0))
            })
            .unwrap()
            .into_iter()
            .collect()
    }

    /// Runs `sql` (a write, or a read of one text column) behind the store's back.
    fn sql(store: &Store, sql: &str) -> Option<String> {
        store
            .with_db("test", |db| db.query_opt(sql, params![], |row| row.get(0)))
            .unwrap()
    }

    /// The SQLite connection under `store`, for tests of SQLite's own behaviour.
    fn with_sqlite<T>(store: &Store, work: impl FnOnce(&Connection) -> T) -> T {
        store
            .with_db("test", |db| {
                Ok(work(db.as_sqlite().expect("a SQLite store")))
            })
            .unwrap()
    }

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| id.to_string()).collect()
    }

    fn rows(store: &Store, table: &str, task_id: &str) -> i64 {
        store
            .with_db("test", |db| {
                db.query_one(
                    &format!("SELECT count(*) FROM {table} WHERE task_id = ?1"),
                    params![task_id],
                    |row| row.get(0),
                )
            })
            .unwrap()
    }

    fn query(owner: &str) -> TaskQuery {
        TaskQuery {
            owner: owner.to_string(),
            ..TaskQuery::default()
        }
    }

    fn ids(page: &TaskPage) -> Vec<&str> {
        page.tasks.iter().map(|t| t.id.as_str()).collect()
    }

    both_backends! {
        fn tasks_are_counted_by_state(store) {
            assert_eq!(store.task_counts_by_state().unwrap(), []);
            for (id, state) in [
                ("a", WORKING),
                ("b", WORKING),
                ("c", COMPLETED),
                ("d", FAILED),
            ] {
                store
                    .create_task(&task(id, "o", "ctx", state, 1), &unlimited())
                    .unwrap();
            }
            let mut counts = store.task_counts_by_state().unwrap();
            counts.sort_by_key(|(state, _)| state.v1_name());
            assert_eq!(counts, [(COMPLETED, 1), (FAILED, 1), (WORKING, 2)]);
        }
    }

    both_backends! {
        async fn with_metrics_every_group_commit_is_timed_with_its_writes(store) {
            let metrics = portico_metrics::Metrics::new();
            store.set_metrics(metrics.clone());
            let writer = store.batch_writer();
            writer
                .create_task(task("a", "o", "ctx", WORKING, 1), unlimited())
                .await
                .unwrap();
            let text = metrics.encode(&portico_metrics::State::default());
            assert!(
                text.contains("\nportico_store_commit_duration_seconds_count 1\n"),
                "{text}"
            );
            assert!(text.contains("\nportico_store_writes_total 1\n"), "{text}");
        }
    }

    #[test]
    fn terminal_states_and_their_sql_agree() {
        for state in TaskState::ALL {
            let quoted = format!("'{}'", state.v1_name());
            assert_eq!(
                TERMINAL_SQL.contains(&quoted),
                state.is_terminal(),
                "{state}"
            );
            assert_eq!(
                ACTIVE_SQL.contains(&quoted),
                !state.is_terminal(),
                "{state}"
            );
        }
        assert_eq!(TERMINAL_SQL.matches('\'').count(), 2 * 4);
        assert_eq!(ACTIVE_SQL.matches('\'').count(), 2 * 5);
        assert_eq!(TaskLimits::default().max_tasks, 10_000);
    }

    both_backends! {
        fn create_and_get_round_trip(store) {
            let record = TaskRecord {
                id: "t1".to_string(),
                context_id: "ctx".to_string(),
                owner: "alice".to_string(),
                agent: "coder".to_string(),
                state: WORKING,
                status: status(WORKING, Some("on it")),
                history: vec![
                    user_message("m1", "fix the bug"),
                    json!({"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"data": {"k": [1, 2.5, null]}}]}),
                ],
                artifacts: vec![
                    json!({"artifactId": "a1", "name": "patch", "parts": [{"text": "diff"}]}),
                    json!({"artifactId": "a2", "parts": [{"url": "https://example.invalid/x", "mediaType": "text/plain"}]}),
                ],
                metadata: json!({"portico": {"conversation_id": "c_1"}, "z": 1, "a": 2}),
                created_at_ms: 1_000,
                updated_at_ms: 1_500,
            };
            store.create_task(&record, &unlimited()).unwrap();
            let read = store.task("t1").unwrap().unwrap();
            assert_eq!(read, record);
            // Key order inside JSON objects survives (serde_json's preserve_order).
            assert_eq!(read.metadata.to_string(), record.metadata.to_string());
            assert_eq!(store.task("t2").unwrap(), None);
            assert_eq!(
                store.task_status_history("t1").unwrap(),
                vec![StatusChange {
                    task_id: "t1".to_string(),
                    seq: 1,
                    state: WORKING,
                    status: status(WORKING, Some("on it")),
                    at_ms: 1_500,
                }]
            );
            assert_eq!(store.task_count().unwrap(), (1, 1));
        }
    }

    both_backends! {
        fn an_update_applied_to_a_copy_matches_the_stored_task(store) {
            let mut copy = task("t1", "alice", "c", SUBMITTED, 1_000);
            store.create_task(&copy, &unlimited()).unwrap();
            let updates = [
                TaskUpdate::status(WORKING, status(WORKING, Some("on it"))),
                TaskUpdate {
                    artifacts: Some(vec![json!({"artifactId": "a1", "parts": [{"text": "x"}]})]),
                    ..TaskUpdate::default()
                },
                TaskUpdate {
                    message: Some(user_message("m2", "done")),
                    artifacts: Some(vec![json!({"artifactId": "a2", "parts": [{"text": "y"}]})]),
                    metadata: Some(json!({"portico": {"conversation_id": "c_9"}})),
                    status: Some(TaskStatusUpdate {
                        state: COMPLETED,
                        status: status(COMPLETED, Some("done")),
                    }),
                },
            ];
            for update in updates {
                store.update_task("t1", &update).unwrap();
                let stored = store.task("t1").unwrap().unwrap();
                copy.apply(update, stored.updated_at_ms);
                assert_eq!(copy, stored);
            }
            assert_eq!(copy.history.len(), 2);
            assert_eq!(copy.state, COMPLETED);
        }
    }

    both_backends! {
        fn a_task_stored_late_keeps_the_statuses_it_went_through(store) {
            let mut done = task("t1", "alice", "c", COMPLETED, 3_000);
            done.status = status(COMPLETED, Some("done"));
            let earlier = [
                EarlierStatus {
                    state: SUBMITTED,
                    status: status(SUBMITTED, None),
                    at_ms: 1_000,
                },
                EarlierStatus {
                    state: WORKING,
                    status: status(WORKING, Some("on it")),
                    at_ms: 2_000,
                },
            ];
            store
                .create_task_with_history(&done, &earlier, &unlimited())
                .unwrap();
            assert_eq!(store.task("t1").unwrap().unwrap(), done);
            let history: Vec<(i64, TaskState, i64)> = store
                .task_status_history("t1")
                .unwrap()
                .into_iter()
                .map(|c| (c.seq, c.state, c.at_ms))
                .collect();
            assert_eq!(
                history,
                [
                    (1, SUBMITTED, 1_000),
                    (2, WORKING, 2_000),
                    (3, COMPLETED, 3_000)
                ]
            );
            // Finished: no later status joins the history.
            assert!(matches!(
                store.update_task_status("t1", FAILED, &status(FAILED, None)),
                Err(StoreError::TaskFinished { .. })
            ));
            assert_eq!(store.task_status_history("t1").unwrap().len(), 3);
        }
    }

    both_backends! {
        fn room_is_checked_without_writing(store) {
            let limits = limit(2);
            store.check_room_for_task(&limits).unwrap();
            store
                .create_task(&task("done", "alice", "c", COMPLETED, 1), &limits)
                .unwrap();
            store
                .create_task(&task("w1", "alice", "c", WORKING, 2), &limits)
                .unwrap();
            // Full, but a finished task could go.
            store.check_room_for_task(&limits).unwrap();
            assert_eq!(stored_ids(&store), set(&["done", "w1"]));
            store
                .create_task(&task("w2", "alice", "c", WORKING, 3), &limits)
                .unwrap();
            let err = store.check_room_for_task(&limits).unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::TasksFull {
                        limit: 2,
                        active: 2,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(stored_ids(&store), set(&["w1", "w2"]));
        }
    }

    both_backends! {
        fn duplicate_id_is_refused_and_the_original_kept(store) {
            store
                .create_task(&task("t1", "alice", "c", SUBMITTED, 1), &unlimited())
                .unwrap();
            let err = store
                .create_task(&task("t1", "bob", "c", SUBMITTED, 2), &unlimited())
                .unwrap_err();
            assert!(matches!(err, StoreError::Database { .. }), "{err}");
            assert_eq!(store.task("t1").unwrap().unwrap().owner, "alice");
            assert_eq!(store.task_status_history("t1").unwrap().len(), 1);
        }
    }

    both_backends! {
        fn status_history_is_kept_in_order(store) {
            store
                .create_task(&task("t1", "alice", "c", SUBMITTED, 1_000), &unlimited())
                .unwrap();
            let changes = [
                (WORKING, None),
                (INPUT_REQUIRED, Some("which branch?")),
                (WORKING, None),
                (COMPLETED, Some("done")),
            ];
            for (i, (state, text)) in changes.iter().enumerate() {
                let seq = store
                    .update_task_status("t1", *state, &status(*state, *text))
                    .unwrap();
                assert_eq!(seq, i as i64 + 2);
            }
            let history = store.task_status_history("t1").unwrap();
            let summary: Vec<(i64, TaskState, serde_json::Value)> = history
                .iter()
                .map(|c| (c.seq, c.state, c.status.clone()))
                .collect();
            assert_eq!(
                summary,
                vec![
                    (1, SUBMITTED, status(SUBMITTED, None)),
                    (2, WORKING, status(WORKING, None)),
                    (
                        3,
                        INPUT_REQUIRED,
                        status(INPUT_REQUIRED, Some("which branch?"))
                    ),
                    (4, WORKING, status(WORKING, None)),
                    (5, COMPLETED, status(COMPLETED, Some("done"))),
                ]
            );
            assert!(history.iter().all(|c| c.task_id == "t1"));
            assert_eq!(history[0].at_ms, 1_000);
            assert!(history.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));

            let read = store.task("t1").unwrap().unwrap();
            assert_eq!(read.state, COMPLETED);
            assert_eq!(read.status, status(COMPLETED, Some("done")));
            assert_eq!(read.updated_at_ms, history[4].at_ms);
            assert_eq!(read.created_at_ms, 1_000);
            assert_eq!(store.task_count().unwrap(), (1, 0));
            assert_eq!(store.task_status_history("nope").unwrap(), vec![]);
        }
    }

    both_backends! {
        fn updated_at_never_moves_backwards(store) {
            // A task stamped in the future (a clock that stepped back since).
            let future = now_ms() + 3_600_000;
            store
                .create_task(&task("t1", "alice", "c", SUBMITTED, future), &unlimited())
                .unwrap();
            store
                .update_task_status("t1", WORKING, &status(WORKING, None))
                .unwrap();
            store
                .append_task_message("t1", &user_message("m2", "more"))
                .unwrap();
            assert_eq!(store.task("t1").unwrap().unwrap().updated_at_ms, future);
            assert_eq!(store.task_status_history("t1").unwrap()[1].at_ms, future);
        }
    }

    both_backends! {
        fn messages_artifacts_and_metadata_are_written(store) {
            store
                .create_task(&task("t1", "alice", "c", SUBMITTED, 1_000), &unlimited())
                .unwrap();
            store
                .append_task_message("t1", &user_message("m2", "second"))
                .unwrap();
            store
                .append_task_message("t1", &user_message("m3", "third"))
                .unwrap();
            let artifacts = vec![
                json!({"artifactId": "a1", "parts": [{"text": "one"}]}),
                json!({"artifactId": "a2", "parts": [{"text": "two"}]}),
            ];
            store.set_task_artifacts("t1", &artifacts).unwrap();
            // Replaced, not appended.
            let merged =
                vec![json!({"artifactId": "a1", "parts": [{"text": "one"}, {"text": " more"}]})];
            store.set_task_artifacts("t1", &merged).unwrap();
            store.set_task_metadata("t1", &json!({"k": "v"})).unwrap();

            let read = store.task("t1").unwrap().unwrap();
            assert_eq!(
                read.history,
                vec![
                    user_message("t1-m1", "hello"),
                    user_message("m2", "second"),
                    user_message("m3", "third"),
                ]
            );
            assert_eq!(read.artifacts, merged);
            assert_eq!(read.metadata, json!({"k": "v"}));
            assert!(read.updated_at_ms >= now_ms() - 60_000);
            // Only status changes enter the status history.
            assert_eq!(store.task_status_history("t1").unwrap().len(), 1);

            store.set_task_artifacts("t1", &[]).unwrap();
            assert_eq!(
                store.task("t1").unwrap().unwrap().artifacts,
                Vec::<serde_json::Value>::new()
            );
        }
    }

    both_backends! {
        fn writes_to_a_missing_task_fail_and_write_nothing(store) {
            let not_found = |err: StoreError| {
                assert!(
                    matches!(&err, StoreError::TaskNotFound { id, .. } if id == "ghost"),
                    "{err}"
                );
                assert!(err.to_string().contains("\"ghost\""), "{err}");
                assert!(
                err.to_string()
                    .contains(&store.location().display().to_string()),
                "{err}"
            );
            };
            not_found(
                store
                    .update_task_status("ghost", WORKING, &status(WORKING, None))
                    .unwrap_err(),
            );
            not_found(store.append_task_message("ghost", &json!({})).unwrap_err());
            not_found(store.set_task_artifacts("ghost", &[json!({})]).unwrap_err());
            not_found(store.set_task_metadata("ghost", &json!({})).unwrap_err());
            not_found(
                store
                    .put_push_config("ghost", "p1", &json!({}))
                    .unwrap_err(),
            );
            for table in ["a2a_task_status", "a2a_task_messages", "a2a_push_configs"] {
                assert_eq!(rows(&store, table, "ghost"), 0, "{table}");
            }
            assert_eq!(store.task_count().unwrap(), (0, 0));
        }
    }

    both_backends! {
        fn every_state_is_stored_as_its_1_0_name_and_read_back(store) {
            for (i, state) in TaskState::ALL.into_iter().enumerate() {
                let id = format!("t{i}");
                store
                    .create_task(&task(&id, "alice", "c", state, 1), &unlimited())
                    .unwrap();
                let column = sql(&store, &format!("SELECT state FROM a2a_tasks WHERE id = '{id}'"));
                assert_eq!(column.as_deref(), Some(state.v1_name()));
                assert_eq!(store.task(&id).unwrap().unwrap().state, state);
            }
        }
    }

    both_backends! {
        fn a_stored_state_this_store_never_writes_is_reported_when_read(store) {
            store
                .create_task(&task("t1", "alice", "c", SUBMITTED, 1), &unlimited())
                .unwrap();
            // The column keeps the 1.0 name, as before `TaskState` existed: no migration.
            let stored = sql(&store, "SELECT state FROM a2a_tasks WHERE id = 't1'");
            assert_eq!(stored.as_deref(), Some("TASK_STATE_SUBMITTED"));
            sql(&store, "UPDATE a2a_tasks SET state = 'completed' WHERE id = 't1'");
            let err = store.task("t1").unwrap_err();
            assert!(
                matches!(&err, StoreError::UnknownTaskState { state, .. } if state == "completed"),
                "{err}"
            );
            assert!(err.to_string().contains("TASK_STATE_COMPLETED"), "{err}");
        }
    }

    both_backends! {
        fn listing_filters_by_owner_context_state_and_time(store) {
            for record in [
                task("a1", "alice", "ctx1", SUBMITTED, 100),
                task("a2", "alice", "ctx1", COMPLETED, 200),
                task("a3", "alice", "ctx2", WORKING, 300),
                task("a4", "alice", "ctx2", COMPLETED, 400),
                task("b1", "bob", "ctx1", COMPLETED, 500),
            ] {
                store.create_task(&record, &unlimited()).unwrap();
            }

            let page = store.list_tasks(&query("alice")).unwrap();
            assert_eq!(ids(&page), ["a4", "a3", "a2", "a1"]);
            assert_eq!(
                (page.total_size, page.next_page_token.as_deref()),
                (4, None)
            );
            assert_eq!(page.tasks[0], task("a4", "alice", "ctx2", COMPLETED, 400));

            let page = store.list_tasks(&query("bob")).unwrap();
            assert_eq!((ids(&page), page.total_size), (vec!["b1"], 1));
            let page = store.list_tasks(&query("mallory")).unwrap();
            assert_eq!((ids(&page), page.total_size), (vec![], 0));
            assert_eq!(page.next_page_token, None);
            // Another owner's context and state filters never reach across owners.
            let page = store
                .list_tasks(&TaskQuery {
                    context_id: Some("ctx1".to_string()),
                    state: Some(COMPLETED),
                    ..query("mallory")
                })
                .unwrap();
            assert_eq!((ids(&page), page.total_size), (vec![], 0));

            let by_context = |context: &str| TaskQuery {
                context_id: Some(context.to_string()),
                ..query("alice")
            };
            let page = store.list_tasks(&by_context("ctx1")).unwrap();
            assert_eq!((ids(&page), page.total_size), (vec!["a2", "a1"], 2));
            let page = store.list_tasks(&by_context("ctx3")).unwrap();
            assert_eq!((ids(&page), page.total_size), (vec![], 0));

            let page = store
                .list_tasks(&TaskQuery {
                    state: Some(COMPLETED),
                    ..query("alice")
                })
                .unwrap();
            assert_eq!((ids(&page), page.total_size), (vec!["a4", "a2"], 2));

            let page = store
                .list_tasks(&TaskQuery {
                    state: Some(COMPLETED),
                    ..by_context("ctx2")
                })
                .unwrap();
            assert_eq!((ids(&page), page.total_size), (vec!["a4"], 1));

            // Inclusive, as A2A's status_timestamp_after.
            let page = store
                .list_tasks(&TaskQuery {
                    updated_after_ms: Some(200),
                    ..query("alice")
                })
                .unwrap();
            assert_eq!((ids(&page), page.total_size), (vec!["a4", "a3", "a2"], 3));

            // An update moves a task to the front.
            store
                .append_task_message("a1", &user_message("m", "bump"))
                .unwrap();
            let page = store.list_tasks(&query("alice")).unwrap();
            assert_eq!(ids(&page), ["a1", "a4", "a3", "a2"]);
        }
    }

    both_backends! {
        fn paging_is_stable_across_three_pages_with_equal_timestamps(store) {
            // Seven of alice's tasks, all updated in the same millisecond, in scrambled creation order.
            for id in ["t3", "t7", "t1", "t5", "t2", "t6", "t4"] {
                store
                    .create_task(&task(id, "alice", "c", WORKING, 1_000), &unlimited())
                    .unwrap();
            }
            store
                .create_task(&task("x1", "bob", "c", WORKING, 1_000), &unlimited())
                .unwrap();

            let page_of = |token: Option<String>| {
                store
                    .list_tasks(&TaskQuery {
                        page_size: 3,
                        page_token: token,
                        ..query("alice")
                    })
                    .unwrap()
            };
            let first = page_of(None);
            assert_eq!(ids(&first), ["t7", "t6", "t5"]);
            assert_eq!(first.total_size, 7);
            // The token is deterministic: the hex of "1000:t5".
            assert_eq!(first.next_page_token.as_deref(), Some("313030303a7435"));
            assert_eq!(page_of(None), first);

            let second = page_of(first.next_page_token.clone());
            assert_eq!(ids(&second), ["t4", "t3", "t2"]);
            assert_eq!(second.total_size, 7);

            // A task created between pages that sorts before the cursor (same millisecond, greater id) does
            // not shift what comes after it; one that sorts after the cursor (smaller id) is still reached.
            store
                .create_task(&task("t9", "alice", "c", WORKING, 1_000), &unlimited())
                .unwrap();
            store
                .create_task(&task("t0", "alice", "c", WORKING, 1_000), &unlimited())
                .unwrap();
            let third = page_of(second.next_page_token.clone());
            assert_eq!(ids(&third), ["t1", "t0"]);
            assert_eq!(third.next_page_token, None);
            assert_eq!(third.total_size, 9);

            // The same token gives the same page again.
            assert_eq!(
                ids(&page_of(first.next_page_token.clone())),
                ["t4", "t3", "t2"]
            );
        }
    }

    both_backends! {
        fn a_page_that_ends_exactly_at_the_last_task_has_no_next_token(store) {
            for (id, at) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
                store
                    .create_task(&task(id, "alice", "c", WORKING, at), &unlimited())
                    .unwrap();
            }
            let first = store
                .list_tasks(&TaskQuery {
                    page_size: 2,
                    ..query("alice")
                })
                .unwrap();
            assert_eq!(ids(&first), ["d", "c"]);
            let second = store
                .list_tasks(&TaskQuery {
                    page_size: 2,
                    page_token: first.next_page_token,
                    ..query("alice")
                })
                .unwrap();
            assert_eq!(ids(&second), ["b", "a"]);
            assert_eq!(second.next_page_token, None);
        }
    }

    both_backends! {
        fn page_size_defaults_to_50_and_is_capped_at_100(store) {
            for i in 0..120 {
                store
                    .create_task(
                        &task(&format!("t{i:03}"), "alice", "c", WORKING, i),
                        &unlimited(),
                    )
                    .unwrap();
            }
            let page = store.list_tasks(&query("alice")).unwrap();
            assert_eq!(page.tasks.len(), 50);
            assert_eq!(
                (page.tasks[0].id.as_str(), page.tasks[49].id.as_str()),
                ("t119", "t070")
            );
            assert_eq!(page.total_size, 120);
            let page = store
                .list_tasks(&TaskQuery {
                    page_size: 1_000,
                    ..query("alice")
                })
                .unwrap();
            assert_eq!(page.tasks.len(), 100);
            let rest = store
                .list_tasks(&TaskQuery {
                    page_size: 1_000,
                    page_token: page.next_page_token,
                    ..query("alice")
                })
                .unwrap();
            assert_eq!(rest.tasks.len(), 20);
            assert_eq!(rest.tasks[19].id, "t000");
            assert_eq!(rest.next_page_token, None);
        }
    }

    both_backends! {
        fn bad_page_tokens_are_refused_and_empty_means_first_page(store) {
            store
                .create_task(&task("t1", "alice", "c", WORKING, 1), &unlimited())
                .unwrap();
            let with_token = |token: &str| {
                store.list_tasks(&TaskQuery {
                    page_token: Some(token.to_string()),
                    ..query("alice")
                })
            };
            for bad in [
                "zz", "313",      // odd length
                "3130",     // "10": no separator
                "613a7431", // "a:t1": not a number
                "ff3a7431", // not UTF-8
                "+31a",     // a sign is not a hex digit
                "é1",
            ] {
                let err = with_token(bad).unwrap_err();
                assert!(
                    matches!(err, StoreError::BadPageToken { .. }),
                    "{bad}: {err}"
                );
                assert!(err.to_string().contains("without a page token"), "{err}");
            }
            assert_eq!(ids(&with_token("").unwrap()), ["t1"]);
            // Upper-case hex of "1:t1" (the position of t1 itself) is accepted: nothing comes after it.
            assert_eq!(ids(&with_token("313A7431").unwrap()), Vec::<&str>::new());
            // "2:t1" is a position before t1.
            assert_eq!(ids(&with_token("323a7431").unwrap()), ["t1"]);
        }
    }

    #[test]
    fn page_tokens_round_trip() {
        for (at, id) in [
            (0, "t"),
            (-5, "a:b:c"),
            (i64::MAX, "ünïcode"),
            (1_700_000_000_000, ""),
        ] {
            let token = encode_page_token(at, id);
            assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
            assert_eq!(decode_page_token(&token), Some((at, id.to_string())));
        }
    }

    #[test]
    fn tasks_and_history_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        let store = Store::open(&path).unwrap();
        store
            .create_task(&task("t1", "alice", "c", SUBMITTED, 1_000), &unlimited())
            .unwrap();
        store
            .update_task_status("t1", WORKING, &status(WORKING, None))
            .unwrap();
        store
            .append_task_message("t1", &user_message("m2", "more"))
            .unwrap();
        store
            .put_push_config("t1", "p1", &json!({"url": "https://example.invalid/hook"}))
            .unwrap();
        let before = store.task("t1").unwrap().unwrap();
        let history_before = store.task_status_history("t1").unwrap();
        drop(store);

        let store = Store::open(&path).unwrap();
        assert_eq!(store.task("t1").unwrap(), Some(before.clone()));
        assert_eq!(store.task_status_history("t1").unwrap(), history_before);
        assert_eq!(history_before.len(), 2);
        assert_eq!(before.history.len(), 2);
        assert_eq!(
            store.push_config("t1", "p1").unwrap(),
            Some(json!({"url": "https://example.invalid/hook"}))
        );
        assert_eq!(store.active_tasks().unwrap(), vec![before]);

        // Not closed at all (as after kill -9): what was committed is still there.
        store
            .update_task_status("t1", COMPLETED, &status(COMPLETED, None))
            .unwrap();
        std::mem::forget(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.task("t1").unwrap().unwrap().state, COMPLETED);
        assert_eq!(store.task_status_history("t1").unwrap().len(), 3);
        assert_eq!(store.active_tasks().unwrap(), vec![]);
    }

    both_backends! {
        fn a_full_store_evicts_the_oldest_terminal_tasks_first(store) {
            let limits = limit(3);
            for (id, at) in [("t1", 1_000), ("t2", 2_000), ("t3", 3_000)] {
                store
                    .create_task(&task(id, "alice", "c", WORKING, at), &limits)
                    .unwrap();
            }
            // t2 finishes before t1, so t2 is the older terminal task although t1 was created first.
            store
                .update_task_status("t2", COMPLETED, &status(COMPLETED, None))
                .unwrap();
            std::thread::sleep(Duration::from_millis(3));
            store
                .update_task_status("t1", FAILED, &status(FAILED, None))
                .unwrap();
            assert_eq!(store.task_count().unwrap(), (3, 1));

            store
                .create_task(&task("t4", "alice", "c", SUBMITTED, 4_000), &limits)
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["t1", "t3", "t4"]));
            store
                .create_task(&task("t5", "alice", "c", SUBMITTED, 5_000), &limits)
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["t3", "t4", "t5"]));
            assert_eq!(store.task_count().unwrap(), (3, 3));
            assert_eq!(store.task("t1").unwrap(), None);
            assert_eq!(store.task_status_history("t2").unwrap(), vec![]);

            // All three active: nothing can be evicted, and nothing is written.
            let history_before = store.task_status_history("t3").unwrap();
            let err = store
                .create_task(&task("t6", "alice", "c", SUBMITTED, 6_000), &limits)
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::TasksFull {
                        limit: 3,
                        active: 3,
                        ..
                    }
                ),
                "{err}"
            );
            let message = err.to_string();
            assert!(
                message.contains("the limit is 3 tasks and 3 stored tasks are still active"),
                "{message}"
            );
            assert!(
                message.contains("raise [a2a] max_tasks or wait for tasks to finish"),
                "{message}"
            );
            assert_eq!(store.task("t6").unwrap(), None);
            assert_eq!(rows(&store, "a2a_task_messages", "t6"), 0);
            assert_eq!(rows(&store, "a2a_task_status", "t6"), 0);
            assert_eq!(stored_ids(&store), set(&["t3", "t4", "t5"]));
            assert_eq!(store.task_status_history("t3").unwrap(), history_before);

            // Once one finishes, there is room again.
            store
                .update_task_status("t4", COMPLETED, &status(COMPLETED, None))
                .unwrap();
            store
                .create_task(&task("t6", "alice", "c", SUBMITTED, 6_000), &limits)
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["t3", "t5", "t6"]));
        }
    }

    /// SQLite only: what it checks is SQLite's statement cache.
    #[test]
    fn eviction_reuses_its_prepared_statement() {
        let store = Store::open_in_memory().unwrap();
        let limits = limit(2);
        for i in 0..10 {
            store
                .create_task(&task(&format!("t{i}"), "alice", "c", COMPLETED, i), &limits)
                .unwrap();
        }
        assert_eq!(store.task_count().unwrap(), (2, 0));
        with_sqlite(&store, |conn| {
            let eviction = conn
                .prepare_cached(&eviction_sql(Dialect::Sqlite, 1))
                .unwrap();
            // Eight creations evicted one task each, through the cached statement (its runs include
            // the cascades to messages, status history and push configs).
            assert!(eviction.get_status(rusqlite::StatementStatus::Run) >= 8);
            assert_eq!(eviction.get_status(rusqlite::StatementStatus::RePrepare), 0);
        });
    }

    both_backends! {
        fn interrupted_tasks_are_never_evicted(store) {
            let limits = limit(3);
            store
                .create_task(&task("waiting", "alice", "c", INPUT_REQUIRED, 1), &limits)
                .unwrap();
            store
                .create_task(&task("auth", "alice", "c", AUTH_REQUIRED, 2), &limits)
                .unwrap();
            store
                .create_task(&task("done", "alice", "c", COMPLETED, 3), &limits)
                .unwrap();
            // The two interrupted tasks are older, but only the finished one goes.
            store
                .create_task(&task("new", "alice", "c", SUBMITTED, 4), &limits)
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["waiting", "auth", "new"]));
            let err = store
                .create_task(&task("newer", "alice", "c", SUBMITTED, 5), &limits)
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::TasksFull {
                        limit: 3,
                        active: 3,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(stored_ids(&store), set(&["waiting", "auth", "new"]));
            let active: Vec<String> = store
                .active_tasks()
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(active, ["waiting", "auth", "new"]);
        }
    }

    both_backends! {
        fn a_lowered_limit_evicts_down_to_it_or_fails_without_evicting(store) {
            for (id, state, at) in [
                ("f1", COMPLETED, 1),
                ("f2", COMPLETED, 2),
                ("f3", COMPLETED, 3),
                ("w1", WORKING, 4),
                ("w2", WORKING, 5),
            ] {
                store
                    .create_task(&task(id, "alice", "c", state, at), &unlimited())
                    .unwrap();
            }
            // Limit 3 with 5 stored: three must go for the new one to fit, but only f1..f3 may.
            store
                .create_task(&task("n1", "alice", "c", SUBMITTED, 6), &limit(3))
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["w1", "w2", "n1"]));

            // Limit 2 with 3 active: fails, and no terminal task is evicted in passing.
            store
                .create_task(&task("f4", "alice", "c", COMPLETED, 7), &unlimited())
                .unwrap();
            let err = store
                .create_task(&task("n2", "alice", "c", SUBMITTED, 8), &limit(2))
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::TasksFull {
                        limit: 2,
                        active: 3,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(stored_ids(&store), set(&["w1", "w2", "n1", "f4"]));
        }
    }

    both_backends! {
        fn push_config_crud(store) {
            store
                .create_task(&task("t1", "alice", "c", WORKING, 1), &unlimited())
                .unwrap();
            store
                .create_task(&task("t2", "alice", "c", WORKING, 2), &unlimited())
                .unwrap();
            let config = |url: &str| json!({"url": url, "token": "tok"});

            assert_eq!(store.push_config("t1", "p1").unwrap(), None);
            assert_eq!(store.push_configs("t1").unwrap(), vec![]);
            store
                .put_push_config("t1", "p2", &config("https://b"))
                .unwrap();
            store
                .put_push_config("t1", "p1", &config("https://a"))
                .unwrap();
            store
                .put_push_config("t2", "p1", &config("https://other"))
                .unwrap();
            assert_eq!(
                store.push_config("t1", "p1").unwrap(),
                Some(config("https://a"))
            );
            // Registration order, not id order.
            assert_eq!(
                store.push_configs("t1").unwrap(),
                vec![
                    ("p2".to_string(), config("https://b")),
                    ("p1".to_string(), config("https://a")),
                ]
            );

            // Replacing keeps the config's place.
            store
                .put_push_config("t1", "p2", &config("https://b2"))
                .unwrap();
            assert_eq!(
                store.push_configs("t1").unwrap(),
                vec![
                    ("p2".to_string(), config("https://b2")),
                    ("p1".to_string(), config("https://a")),
                ]
            );

            assert!(store.delete_push_config("t1", "p2").unwrap());
            assert!(!store.delete_push_config("t1", "p2").unwrap());
            assert!(!store.delete_push_config("nope", "p1").unwrap());
            assert_eq!(
                store.push_configs("t1").unwrap(),
                vec![("p1".to_string(), config("https://a"))]
            );
            assert_eq!(
                store.push_config("t2", "p1").unwrap(),
                Some(config("https://other"))
            );
            assert_eq!(store.push_configs("nope").unwrap(), vec![]);
        }
    }

    both_backends! {
        fn eviction_removes_push_configs_and_histories(store) {
            let limits = limit(2);
            store
                .create_task(&task("old", "alice", "c", WORKING, 1), &limits)
                .unwrap();
            store
                .create_task(&task("keep", "alice", "c", WORKING, 2), &limits)
                .unwrap();
            store
                .put_push_config("old", "p1", &json!({"url": "https://a"}))
                .unwrap();
            store
                .put_push_config("keep", "p1", &json!({"url": "https://k"}))
                .unwrap();
            store
                .append_task_message("old", &user_message("m2", "x"))
                .unwrap();
            store
                .update_task_status("old", COMPLETED, &status(COMPLETED, None))
                .unwrap();
            assert_eq!(rows(&store, "a2a_push_configs", "old"), 1);

            store
                .create_task(&task("new", "alice", "c", SUBMITTED, 3), &limits)
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["keep", "new"]));
            assert_eq!(store.push_config("old", "p1").unwrap(), None);
            assert_eq!(store.push_configs("old").unwrap(), vec![]);
            for table in ["a2a_push_configs", "a2a_task_messages", "a2a_task_status"] {
                assert_eq!(rows(&store, table, "old"), 0, "{table}");
            }
            assert_eq!(
                store.push_configs("keep").unwrap(),
                vec![("p1".to_string(), json!({"url": "https://k"}))]
            );
        }
    }

    both_backends! {
        fn active_tasks_and_counts(store) {
            for (id, state, at) in [
                ("w", WORKING, 30),
                ("done", COMPLETED, 10),
                ("s", SUBMITTED, 20),
                ("i", INPUT_REQUIRED, 40),
                ("r", TaskState::Rejected, 50),
                ("x", TaskState::Canceled, 60),
            ] {
                store
                    .create_task(&task(id, "alice", "c", state, at), &unlimited())
                    .unwrap();
            }
            assert_eq!(store.task_count().unwrap(), (6, 3));
            let active = store.active_tasks().unwrap();
            let summary: Vec<(&str, TaskState)> =
                active.iter().map(|t| (t.id.as_str(), t.state)).collect();
            assert_eq!(
                summary,
                [("s", SUBMITTED), ("w", WORKING), ("i", INPUT_REQUIRED)]
            );
            assert_eq!(active[0].history, vec![user_message("s-m1", "hello")]);
        }
    }

    both_backends! {
        fn corrupt_json_is_reported_with_its_location(store) {
            store
                .create_task(&task("t1", "alice", "c", WORKING, 1), &unlimited())
                .unwrap();
            sql(&store, "UPDATE a2a_task_messages SET message = 'nope'");
            let err = store.task("t1").unwrap_err();
            assert!(
                err.to_string().contains("message 1 of A2A task \"t1\""),
                "{err}"
            );
            let err = store.list_tasks(&query("alice")).unwrap_err();
            assert!(matches!(err, StoreError::CorruptJson { .. }), "{err}");
        }
    }

    #[test]
    fn a_version_1_database_is_migrated_with_its_data_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            migrate(&mut conn, &path, &MIGRATIONS[..1]).unwrap();
            assert_eq!(user_version(&conn).unwrap(), 1);
            conn.execute_batch(
                "INSERT INTO conversations (id, agent, created_at_ms, updated_at_ms, message_count) \
                   VALUES ('c_old', 'planner', 10, 20, 1);
                 INSERT INTO messages VALUES ('c_old', 1, 'user', '\"hi\"', 3, 0, 20);
                 INSERT INTO memory VALUES ('planner', 'goal', 'ship', 30);
                 INSERT INTO audit (at_ms, caller, tool, arguments_digest, outcome, duration_ms) \
                   VALUES (40, 'ide', 'git_status', 'sha256:0', 'ok', 5);",
            )
            .unwrap();
            let tables: i64 = conn
                .query_row(
                    "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'a2a_%'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(tables, 0);
        }

        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
        assert!(MIGRATIONS.len() >= 2);
        let conversation = store.conversation("c_old").unwrap().unwrap();
        assert_eq!(
            (
                conversation.agent.as_str(),
                conversation.updated_at_ms,
                conversation.message_count
            ),
            ("planner", 20, 1)
        );
        let messages = store.messages("c_old").unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].content, json!("hi"));
        assert_eq!(
            store.memory_get("planner", "goal").unwrap().unwrap().value,
            "ship"
        );
        let audit = store.audit(&crate::AuditQuery::default()).unwrap();
        assert_eq!(
            audit
                .iter()
                .map(|r| (r.at_ms, r.tool.as_str()))
                .collect::<Vec<_>>(),
            [(40, "git_status")]
        );

        // And the new tables work.
        store
            .create_task(&task("t1", "alice", "c", WORKING, 1), &unlimited())
            .unwrap();
        assert_eq!(store.task_count().unwrap(), (1, 1));
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
        assert_eq!(store.task("t1").unwrap().unwrap().id, "t1");
    }

    /// SQLite only: the plans of SQLite's query planner.
    #[test]
    fn listing_uses_the_owner_index() {
        let store = Store::open_in_memory().unwrap();
        let selection = " WHERE owner = ?1 AND (updated_at_ms, id) < (?2, ?3) \
                         ORDER BY updated_at_ms DESC, id DESC LIMIT 10";
        let plan = |sql: String| -> String {
            with_sqlite(&store, |conn| {
                conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                    .unwrap()
                    .query_map(rusqlite::params!["alice", 1, "t"], |row| {
                        row.get::<_, String>(3)
                    })
                    .unwrap()
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .unwrap()
                    .join("\n")
            })
        };
        let page = plan(format!("SELECT {TASK_COLUMNS} FROM a2a_tasks{selection}"));
        assert!(page.contains("a2a_tasks_by_owner"), "{page}");
        assert!(!page.contains("TEMP B-TREE"), "{page}");
        // The page's messages are found through their primary key, not by reading them all.
        let messages = plan(format!(
            "SELECT task_id, seq, message FROM a2a_task_messages \
             WHERE task_id IN (SELECT id FROM a2a_tasks{selection}) ORDER BY task_id, seq"
        ));
        assert!(!messages.contains("SCAN a2a_task_messages"), "{messages}");
    }

    both_backends! {
        fn ids_are_ordered_byte_by_byte_whatever_the_collation(store) {
            if store.backend_name() == "postgres" {
                // As on a server initialised with a locale other than C, where "a" sorts before "B".
                sql(&store, "ALTER TABLE a2a_tasks ALTER COLUMN id TYPE TEXT COLLATE \"und-x-icu\"");
            }
            for id in ["a", "B", "c", "D"] {
                store
                    .create_task(&task(id, "alice", "x", COMPLETED, 1_000), &unlimited())
                    .unwrap();
            }
            let mut token = None;
            let mut listed = Vec::new();
            loop {
                let page = store
                    .list_tasks(&TaskQuery {
                        page_size: 1,
                        page_token: token,
                        ..query("alice")
                    })
                    .unwrap();
                listed.extend(page.tasks.into_iter().map(|t| t.id));
                token = page.next_page_token;
                if token.is_none() {
                    break;
                }
            }
            assert_eq!(listed, ["c", "a", "D", "B"]);
            let recent: Vec<String> = store
                .recent_tasks(None, None, None, 0)
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(recent, ["c", "a", "D", "B"]);
            // The token of "a" means the same position on every replica: "D" and "B" come after it.
            let after_a = store
                .list_tasks(&TaskQuery {
                    page_token: Some(encode_page_token(1_000, "a")),
                    ..query("alice")
                })
                .unwrap();
            assert_eq!(ids(&after_a), ["D", "B"]);
            // The oldest finished task by (time, id) goes first: "B", then "D".
            store
                .create_task(&task("e", "alice", "x", WORKING, 2_000), &limit(4))
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["a", "c", "D", "e"]));
            store
                .create_task(&task("f", "alice", "x", WORKING, 2_000), &limit(4))
                .unwrap();
            assert_eq!(stored_ids(&store), set(&["a", "c", "e", "f"]));
            for id in ["b", "A"] {
                store
                    .create_task(&task(id, "alice", "x", WORKING, 500), &unlimited())
                    .unwrap();
            }
            let active: Vec<String> = store
                .active_tasks()
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(active, ["A", "b", "e", "f"]);
        }
    }

    /// Two handles on one PostgreSQL schema are two replicas of `portico serve`: what one writes,
    /// the other reads, updates and lists, with nothing cached in either.
    #[test]
    fn a_task_created_on_one_replica_is_read_updated_and_listed_on_the_other() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let one = Store::open_postgres(&url, 2).unwrap();
        let two = Store::open_postgres(&url, 2).unwrap();
        let created = task("t1", "alice", "c", SUBMITTED, 1_000);
        one.create_task(&created, &unlimited()).unwrap();
        one.put_push_config("t1", "p1", &json!({"url": "https://a"}))
            .unwrap();
        assert_eq!(two.task("t1").unwrap(), Some(created));
        assert_eq!(
            two.push_configs("t1").unwrap(),
            vec![("p1".to_string(), json!({"url": "https://a"}))]
        );

        let seq = two
            .update_task(
                "t1",
                &TaskUpdate {
                    message: Some(user_message("m2", "more")),
                    ..TaskUpdate::status(WORKING, status(WORKING, Some("on it")))
                },
            )
            .unwrap();
        assert_eq!(seq, Some(2));
        // The numbering continues on whichever replica writes next.
        assert_eq!(
            one.update_task_status("t1", INPUT_REQUIRED, &status(INPUT_REQUIRED, None))
                .unwrap(),
            3
        );
        one.append_task_message("t1", &user_message("m3", "answer"))
            .unwrap();
        let on_one = one.task("t1").unwrap().unwrap();
        assert_eq!(two.task("t1").unwrap().as_ref(), Some(&on_one));
        assert_eq!(on_one.state, INPUT_REQUIRED);
        assert_eq!(on_one.history.len(), 3);
        assert_eq!(on_one.history[2], user_message("m3", "answer"));
        assert_eq!(
            two.task_status_history("t1").unwrap(),
            one.task_status_history("t1").unwrap()
        );
        assert_eq!(two.task_status_history("t1").unwrap().len(), 3);

        // A page token issued by one replica continues on the other.
        for (id, at) in [("t2", 2_000), ("t3", 3_000)] {
            two.create_task(&task(id, "alice", "c", WORKING, at), &unlimited())
                .unwrap();
        }
        let first = one
            .list_tasks(&TaskQuery {
                page_size: 2,
                ..query("alice")
            })
            .unwrap();
        assert_eq!(ids(&first), ["t1", "t3"]);
        assert_eq!(first.total_size, 3);
        let rest = two
            .list_tasks(&TaskQuery {
                page_size: 2,
                page_token: first.next_page_token.clone(),
                ..query("alice")
            })
            .unwrap();
        assert_eq!(ids(&rest), ["t2"]);
        assert_eq!(rest.next_page_token, None);
        let recovered: Vec<String> = one
            .active_tasks()
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(recovered, ["t2", "t3", "t1"]);

        // One replica's finished task makes room for the other's new one.
        one.update_task_status("t2", COMPLETED, &status(COMPLETED, None))
            .unwrap();
        two.create_task(&task("t4", "alice", "c", SUBMITTED, 4_000), &limit(3))
            .unwrap();
        assert_eq!(one.task("t2").unwrap(), None);
        assert_eq!(one.task_count().unwrap(), (3, 3));
        assert!(two.delete_push_config("t1", "p1").unwrap());
        assert_eq!(one.push_config("t1", "p1").unwrap(), None);
    }

    /// (stored, refused as full) by each replica.
    type Outcomes = Vec<(usize, usize)>;

    /// Three replicas (handles on one fresh schema) each create `rounds` tasks in `state`, all three
    /// at the same moment each round.
    fn create_at_once(
        state: TaskState,
        rounds: i64,
        limits: &TaskLimits,
    ) -> Option<(Vec<Store>, Outcomes)> {
        let url = crate::testing::postgres_test_url()?;
        let replicas: Vec<Store> = (0..3)
            .map(|_| Store::open_postgres(&url, 2).unwrap())
            .collect();
        let together = std::sync::Barrier::new(replicas.len());
        let outcomes = std::thread::scope(|scope| {
            let threads: Vec<_> = replicas
                .iter()
                .enumerate()
                .map(|(r, replica)| {
                    let together = &together;
                    scope.spawn(move || {
                        let (mut stored, mut full) = (0, 0);
                        for n in 0..rounds {
                            let id = format!("r{r}-{n}");
                            together.wait();
                            match replica.create_task(&task(&id, "alice", "c", state, n), limits) {
                                Ok(()) => stored += 1,
                                Err(StoreError::TasksFull { .. }) => full += 1,
                                Err(error) => panic!("{id}: {error}"),
                            }
                        }
                        (stored, full)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        Some((replicas, outcomes))
    }

    /// Replicas creating tasks at the same moment each count, evict and insert in one SERIALIZABLE
    /// transaction: together they never store more than the limit, and none of them fails other
    /// than with `TasksFull` (a lost race is run again, not reported).
    #[test]
    fn replicas_creating_at_once_never_exceed_the_limit() {
        let Some((replicas, outcomes)) = create_at_once(WORKING, 8, &limit(10)) else {
            return;
        };
        let stored: usize = outcomes.iter().map(|(stored, _)| stored).sum();
        assert_eq!(stored, 10, "{outcomes:?}");
        assert_eq!(replicas[0].task_count().unwrap(), (10, 10));
        // Each task kept its whole history (no half-written task from a retried transaction).
        for task in replicas[1].active_tasks().unwrap() {
            assert_eq!(task.history.len(), 1, "{}", task.id);
            assert_eq!(replicas[2].task_status_history(&task.id).unwrap().len(), 1);
        }

        // Finished tasks: every creation past the limit evicts one, and two replicas evicting at
        // once must neither both evict the same task nor both insert into one free place.
        let Some((replicas, outcomes)) = create_at_once(COMPLETED, 12, &limit(10)) else {
            return;
        };
        assert!(
            outcomes.iter().all(|&(stored, _)| stored == 12),
            "{outcomes:?}"
        );
        assert_eq!(replicas[0].task_count().unwrap(), (10, 0));
        // The ten newest by (time, id): rounds 9 to 11, and the greatest id of round 8.
        let newest: BTreeSet<String> = (0..3)
            .flat_map(|r| (9..12).map(move |n| format!("r{r}-{n}")))
            .chain(["r2-8".to_string()])
            .collect();
        assert_eq!(stored_ids(&replicas[1]), newest);
    }
}
