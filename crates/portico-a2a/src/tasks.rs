//! Tasks: stored durably before they are acknowledged, run by Portico's agents in the background,
//! streamed to whoever listens, cancelled for real, and visible only to the caller who created them.
//!
//! When a task is first stored depends on when its send is answered. A send answered at once (a
//! stream, `returnImmediately`) is acknowledged with the task as created, so the task is stored before
//! it runs and every status change after. A blocking send is acknowledged only when the task is
//! finished or waiting for input, and until then nobody knows the task's id; so the task is stored then,
//! in one write with the whole of its status history, and its intermediate states never reach the
//! store (they are not needed to recover anything: no one was told of them). Push notifications and
//! continued tasks, which others may read while they run, are stored as they go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing::Instrument;

use portico_a2a_client::protocol::v1;
use portico_core::{TaskState, ToolResult};
use portico_engine::Engine;
use portico_pipeline::{
    CallOutcome, PipelineError, Principal, ProgressEvent, ToolContext, model_text,
};
use portico_store::{
    BatchWriter, EarlierStatus, Store, StoreError, TaskHead, TaskLimits, TaskPage, TaskQuery,
    TaskRecord, TaskStatusUpdate, TaskUpdate,
};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::A2aError;
use crate::push::StoredPushConfig;

/// The artifact an agent's answer goes into.
pub const RESPONSE_ARTIFACT: &str = "response";

/// How long a cancel waits for the task's run to stop and store `TASK_STATE_CANCELED` itself. Past it,
/// the cancel stores it without the run (whose later writes are then dropped) and answers.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A task that is not finished: its cancel switch and its event stream. It is in the live table while
/// a run of this process drives the task or someone listens to it, and no longer.
struct Live {
    cancel: CancellationToken,
    /// The task has push notification configs: its status changes go to the pusher.
    push: std::sync::atomic::AtomicBool,
    /// A run of this process drives the task. Changed only under the live table's lock.
    running: AtomicBool,
    /// The task's event channel: made for its first listener and dropped with its last, so a task
    /// nobody listens to (a blocking send) costs no channel.
    events: Mutex<Option<broadcast::Sender<v1::StreamResponse>>>,
    /// The latest state, for waiters.
    state: watch::Sender<TaskState>,
    known: Mutex<Known>,
    /// The task as its listeners here last heard of it, when another replica runs it (see
    /// `follow`): what the next look at the store is compared with.
    followed: Mutex<Option<TaskHead>>,
}

/// What this process knows of a task it runs.
#[derive(Default)]
struct Known {
    /// The task as this process's run has it, kept in step with every write, so that a send is answered
    /// without reading the task back: what it last committed or, while `unstored`, what it will store.
    /// `None` when this process did not write the task (an entry made for a subscriber or a push config).
    task: Option<TaskRecord>,
    unstored: Option<Unstored>,
    /// Storing the task failed: its send fails with this.
    lost: Option<A2aError>,
    /// A terminal status was planned for the task: every later write is dropped, so a run that stops
    /// late (after its cancel gave up waiting) cannot undo the end of the task.
    finished: bool,
    /// The agent answered with a plain message before anyone heard of the task: the send is
    /// answered with it, and the task is never stored.
    message_answer: Option<v1::Message>,
}

/// A task that is not stored yet (see the module docs).
struct Unstored {
    /// The statuses it went through, for its status history.
    earlier: Vec<EarlierStatus>,
    /// When its current status was set.
    status_at_ms: i64,
    limits: TaskLimits,
}

/// How a change to a task reaches the store.
enum Write {
    /// Not yet: the task is not stored, and the change is kept with it.
    Held,
    /// The task's first write, with everything it went through.
    Create {
        task: TaskRecord,
        earlier: Vec<EarlierStatus>,
        limits: TaskLimits,
    },
    Update(TaskUpdate),
    /// Not at all: the task has finished.
    Dropped,
}

impl Live {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().expect("known task lock")
    }

    /// Decides how `update` is written. A task not stored yet keeps it, until a status that settles the
    /// task (finished, or waiting for input) makes it the task's first write. Nothing is written after
    /// a terminal status.
    fn plan(known: &mut Known, update: TaskUpdate) -> Write {
        if known.finished {
            return Write::Dropped;
        }
        if update
            .status
            .as_ref()
            .is_some_and(|change| change.state.is_terminal())
        {
            known.finished = true;
        }
        let Known { task, unstored, .. } = known;
        let (Some(task), Some(pending)) = (task.as_mut(), unstored.as_mut()) else {
            return Write::Update(update);
        };
        let now = portico_core::time::now_ms();
        let settles = update
            .status
            .as_ref()
            .is_some_and(|change| change.state.is_settled());
        if update.status.is_some() {
            pending.earlier.push(EarlierStatus {
                state: task.state,
                status: task.status.clone(),
                at_ms: pending.status_at_ms,
            });
            pending.status_at_ms = now;
        }
        task.apply(update, now);
        if !settles {
            return Write::Held;
        }
        let task = task.clone();
        let pending = unstored.take().expect("checked above");
        Write::Create {
            task,
            earlier: pending.earlier,
            limits: pending.limits,
        }
    }

    /// Records that `update` was committed to the task.
    fn committed(&self, update: TaskUpdate) {
        if let Some(task) = self.known().task.as_mut() {
            task.apply(update, portico_core::time::now_ms());
        }
    }

    /// Sends an event to the task's streams. It is built only when someone listens: nobody does for a
    /// blocking send, which answers with the task once it is done.
    fn publish(&self, event: impl FnOnce() -> v1::StreamResponse) {
        let events = self.events.lock().expect("task events lock");
        if let Some(sender) = events.as_ref()
            && sender.receiver_count() > 0
        {
            let _ = sender.send(event());
        }
    }

    fn has_listeners(&self) -> bool {
        self.events.lock().expect("task events lock").is_some()
    }
}

/// How many event streams (subscriptions and streamed sends) may be open at once: in all, and per
/// caller identity. Each holds a share of its task's event channel, so these also bound the channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    pub max_streams: usize,
    pub max_streams_per_client: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_streams: 1024,
            max_streams_per_client: 128,
        }
    }
}

/// The tasks this process runs or someone listens to, and the event streams open on them.
#[derive(Default)]
struct LiveTable {
    tasks: HashMap<String, Arc<Live>>,
    streams: usize,
    streams_by_owner: HashMap<String, usize>,
}

/// Room for one event stream, taken before anything is made for it and given back when dropped.
struct StreamPermit {
    inner: Arc<Inner>,
    owner: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut table = self.inner.live.lock().expect("live tasks lock");
        table.streams = table.streams.saturating_sub(1);
        if let Some(count) = table.streams_by_owner.get_mut(&self.owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                table.streams_by_owner.remove(&self.owner);
            }
        }
    }
}

/// One listener of a task's events. Dropping it (its client went away, or its stream ended) frees
/// its share of the channel; the last one frees the channel, and the live entry if no run needs it.
pub struct Subscription {
    receiver: Option<broadcast::Receiver<v1::StreamResponse>>,
    task_id: String,
    live: Arc<Live>,
    permit: StreamPermit,
}

impl Subscription {
    pub async fn recv(&mut self) -> Result<v1::StreamResponse, broadcast::error::RecvError> {
        match self.receiver.as_mut() {
            Some(receiver) => receiver.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.receiver.take());
        let mut table = self.permit.inner.live.lock().expect("live tasks lock");
        let mut events = self.live.events.lock().expect("task events lock");
        if events.as_ref().is_some_and(|s| s.receiver_count() == 0) {
            *events = None;
        }
        let idle = events.is_none() && !self.live.running.load(Ordering::Relaxed);
        drop(events);
        if idle
            && table
                .tasks
                .get(&self.task_id)
                .is_some_and(|live| Arc::ptr_eq(live, &self.live))
        {
            table.tasks.remove(&self.task_id);
        }
    }
}

/// When a send is answered, which decides when its task is first stored (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// At once with the task as created, then its events as they happen.
    Stream,
    /// At once with the task as created.
    AtOnce,
    /// When the task is finished or waiting for input.
    WhenSettled,
}

/// A task just sent: its id, its events from before its run started (for [`Answer::Stream`]), and a
/// view of its run.
pub struct Sent {
    pub task_id: String,
    pub events: Option<Subscription>,
    live: Arc<Live>,
}

impl Sent {
    /// Waits until the task is finished or waiting for input.
    pub async fn settled(&self) {
        let mut state = self.live.state.subscribe();
        // An error means the run is gone without saying so; the task is what the store says.
        let _ = state.wait_for(|state| state.is_settled()).await;
    }

    /// The message the agent answered with instead of a task (see `Known::message_answer`).
    pub fn message_answer(&self) -> Option<v1::Message> {
        self.live.known().message_answer.clone()
    }

    /// The task as this process's run last stored it: `Ok(None)` if this process did not write it (read
    /// it from the store), an error if storing it failed.
    pub fn stored(&self) -> Result<Option<TaskRecord>, A2aError> {
        let mut known = self.live.known();
        if let Some(lost) = known.lost.take() {
            return Err(lost);
        }
        if known.unstored.is_some() {
            return Ok(None);
        }
        Ok(known.task.clone())
    }
}

/// Tasks of every agent. Cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    /// Task writes go through the store's group commit: concurrent tasks share transactions, and each
    /// write is awaited until its transaction has committed.
    writer: BatchWriter,
    limits: TaskLimits,
    pusher: Option<crate::push::Pusher>,
    live: Mutex<LiveTable>,
    stream_limits: StreamLimits,
}

/// A fresh id in the UUID layout, version 7 (RFC 9562): the time in milliseconds, then 74 random bits.
/// Clients and stores that expect UUIDs accept it, and ids that grow with time put a new task's rows at
/// the end of the store's indexes instead of on a random page of each.
fn random_id() -> String {
    use std::fmt::Write as _;
    let millis = u64::try_from(portico_core::time::now_ms()).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&rand::random::<[u8; 10]>());
    bytes[6] = 0x70 | (bytes[6] & 0x0f);
    bytes[8] = 0x80 | (bytes[8] & 0x3f);
    let mut id = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        let _ = write!(id, "{byte:02x}");
    }
    id
}

fn store_error(error: StoreError) -> A2aError {
    match error {
        StoreError::TasksFull { .. } => A2aError::Busy(error.to_string()),
        other => A2aError::Internal(other.to_string()),
    }
}

/// Runs `work` on `store` off the async runtime (see [`Store::run`]).
async fn blocking<T: Send + 'static>(
    store: Store,
    work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, A2aError> {
    store
        .run("reading or writing A2A tasks", work)
        .await
        .map_err(store_error)
}

/// A stored task as a 1.0 `Task`, its history cut to `history_length` (newest kept). What Portico
/// stored it wrote from these types; a message or artifact that does not read back (written by an
/// older Portico that passed client JSON through) is left out, and logged.
pub fn task_of(record: &TaskRecord, history_length: Option<usize>) -> v1::Task {
    fn typed<T: serde::de::DeserializeOwned>(task: &str, what: &str, value: &Value) -> Option<T> {
        serde_json::from_value(value.clone())
            .map_err(|e| {
                tracing::warn!("task {task}: a stored {what} does not read as A2A 1.0: {e}")
            })
            .ok()
    }
    let mut history = record.history.as_slice();
    if let Some(keep) = history_length
        && history.len() > keep
    {
        history = &history[history.len() - keep..];
    }
    let status = typed(&record.id, "status", &record.status).unwrap_or(v1::TaskStatus {
        state: record.state,
        message: None,
        timestamp: None,
    });
    let metadata = public_metadata(&record.metadata);
    v1::Task {
        id: record.id.clone(),
        context_id: record.context_id.clone(),
        status,
        artifacts: record
            .artifacts
            .iter()
            .filter_map(|a| typed(&record.id, "artifact", a))
            .collect(),
        history: history
            .iter()
            .filter_map(|m| typed(&record.id, "message", m))
            .collect(),
        metadata: (!metadata.is_empty()).then_some(metadata),
    }
}

/// The 1.0 JSON of a stored task (see [`task_of`]).
pub fn task_json(record: &TaskRecord, history_length: Option<usize>) -> Value {
    to_json(&task_of(record, history_length))
}

/// A protocol value as JSON: for the store, which keeps JSON. Serialising these types cannot fail
/// (string keys, no non-finite floats but what JSON already held).
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// Task metadata without Portico's own bookkeeping (which conversation the task continues).
fn public_metadata(metadata: &Value) -> v1::Struct {
    let mut metadata = metadata.as_object().cloned().unwrap_or_default();
    metadata.remove("portico");
    metadata
}

/// Portico's bookkeeping in a task's metadata: the agent conversation the task continues.
fn portico_metadata(conversation: Option<&str>) -> Value {
    json!({"portico": {"conversation_id": conversation}})
}

fn stored_conversation(metadata: &Value) -> Option<String> {
    metadata
        .get("portico")
        .and_then(|p| p.get("conversation_id"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn agent_message(task_id: &str, context_id: &str, text: &str) -> v1::Message {
    v1::Message {
        message_id: random_id(),
        context_id: Some(context_id.to_string()),
        task_id: Some(task_id.to_string()),
        role: v1::Role::Agent,
        parts: vec![v1::Part::text(text)],
        ..v1::Message::default()
    }
}

fn status_now(state: TaskState, message: Option<v1::Message>) -> v1::TaskStatus {
    v1::TaskStatus {
        state,
        message,
        timestamp: Some(portico_core::time::now_rfc3339()),
    }
}

fn text_artifact(name: &str, text: &str) -> v1::Artifact {
    v1::Artifact {
        artifact_id: name.to_string(),
        name: Some(name.to_string()),
        parts: vec![v1::Part::text(text)],
        ..v1::Artifact::default()
    }
}

impl Tasks {
    pub fn new(engine: Engine, limits: TaskLimits, pusher: Option<crate::push::Pusher>) -> Self {
        Self::with_stream_limits(engine, limits, pusher, StreamLimits::default())
    }

    pub fn with_stream_limits(
        engine: Engine,
        limits: TaskLimits,
        pusher: Option<crate::push::Pusher>,
        stream_limits: StreamLimits,
    ) -> Self {
        Tasks {
            inner: Arc::new(Inner {
                writer: engine.store().batch_writer(),
                engine,
                limits,
                pusher,
                live: Mutex::default(),
                stream_limits,
            }),
        }
    }

    fn store(&self) -> Store {
        self.inner.engine.store().clone()
    }

    /// Tasks left running by a process that died cannot be resumed (their agent run died with it):
    /// they are marked failed, saying so. Tasks waiting for input stay waiting. On a store of its
    /// own, that is every running task (a previous process of this one left them); on a shared store,
    /// those of replicas whose lease ran out (`Store::orphaned_tasks`), since the others' are
    /// running. Two replicas may find the same task: the second write is refused, the task being
    /// finished, and not counted.
    ///
    /// `at_start`: this process runs no task yet, so on a shared store the tasks recorded as run by
    /// its own replica name are its previous incarnation's, and are failed too.
    pub async fn recover(&self, at_start: bool) -> Result<usize, A2aError> {
        let store = self.store();
        let replica = self.inner.engine.replica();
        if replica.shared() && !replica.serving() {
            // Not a replica (an embedder's engine beside the replicas): it runs no task, and it
            // cannot tell a live replica's tasks from a dead one's.
            return Ok(0);
        }
        let shared = replica.shared();
        let restarted = at_start.then(|| replica.name().to_string());
        blocking(store, move |store| {
            let mut failed = 0;
            if shared {
                for task in store.orphaned_tasks(restarted.as_deref())? {
                    let message = agent_message(
                        &task.id,
                        &task.context_id,
                        "the Portico replica running this task stopped; send the message again",
                    );
                    let status = to_json(&status_now(TaskState::Failed, Some(message)));
                    if store.fail_orphaned_task(&task.id, restarted.as_deref(), &status)? {
                        failed += 1;
                    }
                }
                return Ok(failed);
            }
            for task in store.active_tasks()? {
                if task.state.is_interrupted() {
                    continue;
                }
                let message = agent_message(
                    &task.id,
                    &task.context_id,
                    "Portico restarted while this task was running; send the message again",
                );
                let status = to_json(&status_now(TaskState::Failed, Some(message)));
                match store.update_task_status(&task.id, TaskState::Failed, &status) {
                    Ok(_) => failed += 1,
                    Err(StoreError::TaskFinished { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            Ok(failed)
        })
        .await
    }

    /// On a shared store, follows what other replicas do to the tasks this one runs or streams, one
    /// look at the store every [`FOLLOW_EVERY`] (so an event reaches a listener here at most that
    /// much later than one on the replica running the task): events of a task another replica runs
    /// go to its listeners here, and a task this replica runs that another one finished (a cancel
    /// sent there) has its run stopped. Ends with the last clone of these tasks.
    pub fn follow_other_replicas(&self) {
        if !self.inner.engine.replica().serving() {
            return;
        }
        let tasks = Arc::downgrade(&self.inner);
        let stopping = self.inner.engine.replica().stopping();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(FOLLOW_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = every.tick() => {}
                }
                let Some(inner) = tasks.upgrade() else {
                    return;
                };
                Tasks { inner }.follow_once().await;
            }
        });
    }

    async fn follow_once(&self) {
        let entries: Vec<(String, Arc<Live>)> = self
            .table()
            .tasks
            .iter()
            .map(|(id, live)| (id.clone(), live.clone()))
            .collect();
        if entries.is_empty() {
            return;
        }
        let store = self.store();
        let ids: Vec<String> = entries.iter().map(|(id, _)| id.clone()).collect();
        let heads = blocking(store, move |store| store.task_heads(&ids)).await;
        let heads = match heads {
            Ok(heads) => heads,
            Err(error) => {
                tracing::warn!("could not follow A2A tasks other replicas run: {error}");
                return;
            }
        };
        let me = self.inner.engine.replica().name();
        for ((id, live), head) in entries.into_iter().zip(heads) {
            if let Some(head) = head {
                follow(&id, &live, head, me, self.inner.pusher.as_ref());
            }
        }
    }

    /// Loads a task the caller may see. Someone else's task is "not found", as if it did not exist.
    pub async fn get(&self, owner: &str, id: &str) -> Result<TaskRecord, A2aError> {
        let store = self.store();
        let lookup = id.to_string();
        let record = blocking(store, move |store| store.task(&lookup)).await?;
        match record {
            Some(record) if record.owner == owner => Ok(record),
            _ => Err(A2aError::TaskNotFound(id.to_string())),
        }
    }

    pub async fn list(&self, query: TaskQuery) -> Result<TaskPage, A2aError> {
        let store = self.store();
        blocking(store, move |store| store.list_tasks(&query)).await
    }

    fn table(&self) -> std::sync::MutexGuard<'_, LiveTable> {
        self.inner.live.lock().expect("live tasks lock")
    }

    /// The live entry of a task a run of this process is about to drive. It stays in the table until
    /// [`Tasks::run_ended`].
    fn live_for_run(&self, id: &str) -> Arc<Live> {
        let mut table = self.table();
        let live = Self::entry(&mut table, id);
        live.running.store(true, Ordering::Relaxed);
        live
    }

    fn entry(table: &mut LiveTable, id: &str) -> Arc<Live> {
        table
            .tasks
            .entry(id.to_string())
            .or_insert_with(|| {
                Arc::new(Live {
                    cancel: CancellationToken::new(),
                    push: AtomicBool::new(false),
                    running: AtomicBool::new(false),
                    events: Mutex::default(),
                    state: watch::channel(TaskState::Unspecified).0,
                    known: Mutex::default(),
                    followed: Mutex::default(),
                })
            })
            .clone()
    }

    /// A run of this process stopped driving the task. A finished task leaves the table (its
    /// listeners have had its last event); a task waiting for input stays only while someone listens.
    fn run_ended(&self, id: &str, live: &Arc<Live>) {
        let mut table = self.table();
        live.running.store(false, Ordering::Relaxed);
        let finished = live.state.borrow().is_terminal();
        if (finished || !live.has_listeners())
            && table
                .tasks
                .get(id)
                .is_some_and(|entry| Arc::ptr_eq(entry, live))
        {
            table.tasks.remove(id);
        }
    }

    /// Takes room for one event stream of `owner`'s, or says which bound is reached.
    fn reserve_stream(&self, owner: &str) -> Result<StreamPermit, A2aError> {
        let limits = self.inner.stream_limits;
        let mut table = self.table();
        if table.streams >= limits.max_streams {
            return Err(A2aError::TooManyStreams(format!(
                "Portico has {} A2A event streams open, its limit (`[a2a] max_streams`); close one, or poll the task with GetTask",
                table.streams
            )));
        }
        let mine = table.streams_by_owner.get(owner).copied().unwrap_or(0);
        if mine >= limits.max_streams_per_client {
            return Err(A2aError::TooManyStreams(format!(
                "this client has {mine} A2A event streams open, its limit (`[a2a] max_streams_per_client`); close one, or poll the task with GetTask"
            )));
        }
        table.streams += 1;
        *table.streams_by_owner.entry(owner.to_string()).or_default() += 1;
        Ok(StreamPermit {
            inner: self.inner.clone(),
            owner: owner.to_string(),
        })
    }

    /// Turns a permit into a listener of the task's events, making the task's channel if it has none.
    fn attach(&self, permit: StreamPermit, id: &str, live: Option<Arc<Live>>) -> Subscription {
        let mut table = self.table();
        let live = live.unwrap_or_else(|| Self::entry(&mut table, id));
        let receiver = live
            .events
            .lock()
            .expect("task events lock")
            .get_or_insert_with(|| broadcast::channel(1024).0)
            .subscribe();
        Subscription {
            receiver: Some(receiver),
            task_id: id.to_string(),
            live,
            permit,
        }
    }

    /// The task `id` of `owner`'s and its events from now on (the caller sends the task itself
    /// first). Nothing is held for a task the caller may not see or that has finished: the owner is
    /// checked before any room is taken.
    pub async fn subscribe(
        &self,
        owner: &str,
        id: &str,
        when_finished: &str,
    ) -> Result<(TaskRecord, Subscription), A2aError> {
        let finished =
            || A2aError::Unsupported(format!("task `{id}` has finished; {when_finished}"));
        let task = self.get(owner, id).await?;
        if task.state.is_terminal() {
            return Err(finished());
        }
        let permit = self.reserve_stream(owner)?;
        let subscription = self.attach(permit, id, None);
        // Read again now that events are caught: what happened since the check is in this copy or
        // in the events. A task that finished meanwhile frees its subscription here.
        let task = self.get(owner, id).await?;
        if task.state.is_terminal() {
            return Err(finished());
        }
        // What this listener has seen, for following a task another replica runs.
        subscription
            .live
            .followed
            .lock()
            .expect("followed task lock")
            .get_or_insert_with(|| head_of(&task));
        Ok((task, subscription))
    }

    /// How many tasks are in the live table, and how many event streams are open (for tests).
    #[doc(hidden)]
    pub fn live_counts(&self) -> (usize, usize) {
        let table = self.table();
        (table.tasks.len(), table.streams)
    }

    /// Starts a task for `message`, or continues the task it names. For a stream, the receiver of its
    /// events is taken before the work starts, so no event is missed.
    pub async fn send(
        &self,
        owner: &str,
        principal: &Principal,
        agent: &str,
        mut message: v1::Message,
        push: Option<(v1::TaskPushNotificationConfig, crate::wire::Version)>,
        answer: Answer,
    ) -> Result<Sent, A2aError> {
        // A stream's room is taken first: a stream refused for want of it leaves nothing behind.
        let permit = match answer {
            Answer::Stream => Some(self.reserve_stream(owner)?),
            Answer::AtOnce | Answer::WhenSettled => None,
        };
        let tool = self.check_send(agent, &message, push.as_ref())?;
        if !principal.may_use(&tool) {
            return Err(self.refused(principal, &tool).await);
        }
        let continued = message.task_id.clone().filter(|s| !s.is_empty());
        // Stored only when its send is answered: see the module docs.
        let store_later = answer == Answer::WhenSettled && push.is_none();
        let opened = match continued.as_deref() {
            Some(task_id) => {
                self.continue_task(owner, agent, task_id, &mut message)
                    .await?
            }
            None => {
                self.start_task(owner, agent, &mut message, store_later)
                    .await?
            }
        };
        let Opened {
            task_id,
            context_id,
            conversation,
            known,
        } = opened;
        let live = self
            .live_for_send(owner, &task_id, known, continued.is_some(), push)
            .await?;
        // A continued task still shows the state it waited in: waiters must see the new run instead.
        live.state.send_replace(TaskState::Submitted);
        let sent = Sent {
            task_id: task_id.clone(),
            events: permit.map(|permit| self.attach(permit, &task_id, Some(live.clone()))),
            live: live.clone(),
        };
        let this = self.clone();
        let run = Run {
            principal: principal.clone(),
            owner: owner.to_string(),
            agent: agent.to_string(),
            task_id,
            context_id,
            tool,
            text: message.text(),
            message_id: Some(message.message_id.clone()).filter(|id| !id.is_empty()),
            conversation,
            untrusted: untrusted_tool(&message),
            live,
        };
        // In the door's span: the agent's run is part of the request's trace.
        tokio::spawn(async move { this.run(run).await }.in_current_span());
        Ok(sent)
    }

    /// A send to an agent outside the caller's scope, refused before anything is stored: the
    /// pipeline refuses the agent's tool (so the refusal is audited like any other) and says why.
    async fn refused(&self, principal: &Principal, tool: &str) -> A2aError {
        let called = self
            .inner
            .engine
            .pipeline()
            .call(tool, None, &ToolContext::of(principal.clone()))
            .await;
        A2aError::PermissionDenied(match called {
            Ok(outcome) => model_text(&outcome.result),
            Err(error) => error.to_string(),
        })
    }

    /// Refuses a send before anything is stored: a webhook the SSRF rules refuse, a message without
    /// parts or id, an unknown agent. Returns the agent's tool.
    fn check_send(
        &self,
        agent: &str,
        message: &v1::Message,
        push: Option<&(v1::TaskPushNotificationConfig, crate::wire::Version)>,
    ) -> Result<String, A2aError> {
        if let Some((config, _)) = push {
            let pusher = self
                .inner
                .pusher
                .as_ref()
                .ok_or(A2aError::PushNotSupported)?;
            pusher.check_url(&config.url)?;
        }
        if message.parts.is_empty() {
            return Err(A2aError::InvalidParams("the message has no parts".into()));
        }
        if message.message_id.is_empty() {
            return Err(A2aError::InvalidParams(
                "the message has no messageId".into(),
            ));
        }
        self.inner
            .engine
            .agents()
            .published(agent)
            .map(|a| a.tool_name.clone())
            .ok_or_else(|| A2aError::InvalidParams(format!("no agent named `{agent}`")))
    }

    /// Continues `owner`'s interrupted task `task_id` with `message`, which is stored in it.
    async fn continue_task(
        &self,
        owner: &str,
        agent: &str,
        task_id: &str,
        message: &mut v1::Message,
    ) -> Result<Opened, A2aError> {
        let task = self.get(owner, task_id).await?;
        if task.agent != agent {
            return Err(A2aError::TaskNotFound(task_id.to_string()));
        }
        if !task.state.is_interrupted() {
            let reason = if task.state.is_terminal() {
                "has finished; send a new message without taskId (the same contextId continues the conversation)"
            } else {
                "is still working; wait for it, or cancel it"
            };
            return Err(A2aError::Unsupported(format!("task `{task_id}` {reason}")));
        }
        let conversation = stored_conversation(&task.metadata);
        message.context_id = Some(task.context_id.clone());
        let update = TaskUpdate {
            message: Some(to_json(message)),
            ..TaskUpdate::default()
        };
        self.inner
            .writer
            .update_task(task_id.to_string(), update.clone())
            .await
            .map_err(store_error)?;
        let context_id = task.context_id.clone();
        let mut known = task;
        known.apply(update, portico_core::time::now_ms());
        let known = Known {
            task: Some(known),
            ..Known::default()
        };
        Ok(Opened {
            task_id: task_id.to_string(),
            context_id,
            conversation,
            known,
        })
    }

    /// Starts a task for `message` (in its context, when it names one), stored now unless
    /// `store_later`.
    async fn start_task(
        &self,
        owner: &str,
        agent: &str,
        message: &mut v1::Message,
        store_later: bool,
    ) -> Result<Opened, A2aError> {
        let given_context = message.context_id.clone().filter(|s| !s.is_empty());
        // The same context continues the same conversation with the agent; a new context has
        // none to look up.
        let (context_id, conversation) = match given_context {
            Some(context_id) => {
                let conversation = self.context_conversation(owner, agent, &context_id).await?;
                (context_id, conversation)
            }
            None => (random_id(), None),
        };
        let task_id = random_id();
        message.context_id = Some(context_id.clone());
        message.task_id = Some(task_id.clone());
        let now = portico_core::time::now_ms();
        let record = TaskRecord {
            id: task_id.clone(),
            context_id: context_id.clone(),
            owner: owner.to_string(),
            agent: agent.to_string(),
            state: TaskState::Submitted,
            status: to_json(&status_now(TaskState::Submitted, None)),
            history: vec![to_json(message)],
            artifacts: Vec::new(),
            metadata: portico_metadata(conversation.as_deref()),
            created_at_ms: now,
            updated_at_ms: now,
        };
        let unstored = self.store_new_task(&record, store_later).await?;
        let known = Known {
            task: Some(record),
            unstored,
            ..Known::default()
        };
        Ok(Opened {
            task_id,
            context_id,
            conversation,
            known,
        })
    }

    /// Stores a new task now (durable before acknowledged), or, when `store_later`, checks that there
    /// will be room to store it when its send is answered.
    async fn store_new_task(
        &self,
        record: &TaskRecord,
        store_later: bool,
    ) -> Result<Option<Unstored>, A2aError> {
        let limits = self.inner.limits.clone();
        if store_later {
            // Refused now rather than after the agent ran, if there will be no room.
            self.inner
                .writer
                .check_room_for_task(limits.clone())
                .await
                .map_err(store_error)?;
            Ok(Some(Unstored {
                earlier: Vec::new(),
                status_at_ms: record.created_at_ms,
                limits,
            }))
        } else {
            // Durable before acknowledged: the task is committed once this returns.
            self.inner
                .writer
                .create_task(record.clone(), limits)
                .await
                .map_err(store_error)?;
            Ok(None)
        }
    }

    /// The live entry a send's run works through, knowing `known`, with the send's push config
    /// registered (a refused config ends the run before it starts).
    async fn live_for_send(
        &self,
        owner: &str,
        task_id: &str,
        known: Known,
        continued: bool,
        push: Option<(v1::TaskPushNotificationConfig, crate::wire::Version)>,
    ) -> Result<Arc<Live>, A2aError> {
        let live = self.live_for_run(task_id);
        *live.known() = known;
        if continued && self.inner.pusher.is_some() {
            // After a restart the live entry is new: whether to push comes from the store.
            let store = self.store();
            let id = task_id.to_string();
            if blocking(store, move |store| store.push_configs(&id))
                .await
                .is_ok_and(|c| !c.is_empty())
            {
                live.push.store(true, Ordering::Relaxed);
            }
        }
        if let Some((config, version)) = push {
            let registered = match crate::push::normalise_config(task_id, config, version) {
                Ok(config) => self.put_push_config(owner, task_id, config).await,
                Err(error) => Err(error),
            };
            if let Err(error) = registered {
                self.run_ended(task_id, &live);
                return Err(error);
            }
        }
        Ok(live)
    }

    /// The agent conversation that `owner`'s newest task in `context_id` continued, if that task was
    /// `agent`'s.
    async fn context_conversation(
        &self,
        owner: &str,
        agent: &str,
        context_id: &str,
    ) -> Result<Option<String>, A2aError> {
        let store = self.store();
        let query = TaskQuery {
            owner: owner.to_string(),
            context_id: Some(context_id.to_string()),
            state: None,
            updated_after_ms: None,
            page_size: 1,
            page_token: None,
        };
        let page = blocking(store, move |store| store.list_tasks(&query)).await?;
        Ok(page
            .tasks
            .into_iter()
            .filter(|t| t.agent == agent)
            .find_map(|t| stored_conversation(&t.metadata)))
    }

    /// Records a status change, tells listeners, and wakes waiters.
    async fn set_status(&self, run: &Run, state: TaskState, message: Option<v1::Message>) {
        self.set_status_with(run, state, message, TaskUpdate::default())
            .await;
    }

    /// [`Tasks::set_status`], writing `also` (artifacts, metadata) in the same transaction. Listeners
    /// hear of the change only once it is committed, so whatever they read back agrees with it.
    async fn set_status_with(
        &self,
        run: &Run,
        state: TaskState,
        message: Option<v1::Message>,
        also: TaskUpdate,
    ) {
        let status = status_now(state, message);
        let update = TaskUpdate {
            message: status.message.as_ref().map(to_json),
            status: Some(TaskStatusUpdate {
                state,
                status: to_json(&status),
            }),
            ..also
        };
        if !self.write(run, update, "its status").await {
            return;
        }
        self.inner
            .engine
            .events()
            .publish(portico_engine::EngineEvent::Task(
                portico_engine::TaskChange {
                    id: run.task_id.clone(),
                    agent: run.agent.clone(),
                    state,
                    owner: run.owner.clone(),
                },
            ));
        let event = || {
            v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: run.task_id.clone(),
                context_id: run.context_id.clone(),
                status: status.clone(),
                metadata: None,
            })
        };
        if run.live.push.load(std::sync::atomic::Ordering::Relaxed)
            && let Some(pusher) = &self.inner.pusher
        {
            pusher.notify(&run.task_id, event());
        }
        run.live.publish(event);
        run.live.state.send_replace(state);
    }

    async fn save_artifacts(&self, run: &Run, artifacts: &[v1::Artifact]) {
        let update = TaskUpdate {
            artifacts: Some(artifacts.iter().map(to_json).collect()),
            ..TaskUpdate::default()
        };
        self.write(run, update, "its artifacts").await;
    }

    /// Writes `update` to the task as [`Live::plan`] says; `what` names it in the log if that fails.
    /// False if it was dropped, the task having finished. The write is queued while the plan is held,
    /// so the writes of one task reach the store in the order they were planned.
    async fn write(&self, run: &Run, update: TaskUpdate, what: &str) -> bool {
        enum Queued<C, U> {
            Held,
            Create(C),
            Update(U, Box<TaskUpdate>),
        }
        let queued = {
            let mut known = run.live.known();
            match Live::plan(&mut known, update) {
                Write::Dropped => return false,
                Write::Held => Queued::Held,
                Write::Create {
                    task,
                    earlier,
                    limits,
                } => Queued::Create(
                    self.inner
                        .writer
                        .create_task_with_history(task, earlier, limits),
                ),
                Write::Update(update) => Queued::Update(
                    self.inner
                        .writer
                        .update_task(run.task_id.clone(), update.clone()),
                    Box::new(update),
                ),
            }
        };
        match queued {
            Queued::Held => {}
            Queued::Create(created) => {
                if let Err(error) = created.await {
                    tracing::warn!("task {}: could not store it: {error}", run.task_id);
                    run.live.known().lost = Some(store_error(error));
                }
            }
            Queued::Update(written, update) => match written.await {
                Ok(_) => run.live.committed(*update),
                Err(StoreError::TaskFinished { state, .. }) => {
                    // Finished elsewhere (a cancel through another replica): this run stops and
                    // writes nothing more.
                    tracing::debug!(
                        "task {}: finished elsewhere ({state}); its run stops",
                        run.task_id
                    );
                    run.live.known().finished = true;
                    run.live.cancel.cancel();
                    return false;
                }
                Err(error) => {
                    tracing::warn!("task {}: could not store {what}: {error}", run.task_id);
                }
            },
        }
        true
    }

    async fn run(&self, run: Run) {
        let (mut call, mut reports) = self.start_agent(&run);
        let abort = call.abort_handle();
        // The agent starts while `working` is being stored (its first write, the conversation, can
        // share that transaction); what it reports waits in `reports` until `working` is out.
        self.set_status(&run, TaskState::Working, None).await;
        let mut reported = Reported::default();
        let outcome = loop {
            tokio::select! {
                biased;
                _ = run.live.cancel.cancelled() => {
                    abort.abort();
                    // Wait for the run to be dropped, so nothing of it (a tool call, an audit
                    // record) happens after the task says it is canceled.
                    let _ = (&mut call).await;
                    break None;
                }
                Some(report) = reports.recv() => self.on_report(&run, &mut reported, report).await,
                joined = &mut call => break Some(joined),
            }
        };

        let outcome = match outcome {
            None => {
                self.set_status(&run, TaskState::Canceled, None).await;
                self.run_ended(&run.task_id, &run.live);
                return;
            }
            Some(Err(join)) => Err(format!("the agent's run failed: {join}")),
            Some(Ok(Err(error))) => Err(error.to_string()),
            Some(Ok(Ok(outcome))) if outcome.is_error() => Err(model_text(&outcome.result)),
            Some(Ok(Ok(outcome))) => Ok(outcome.result),
        };
        match outcome {
            Err(error) => {
                let message = agent_message(&run.task_id, &run.context_id, &error);
                self.set_status(&run, TaskState::Failed, Some(message))
                    .await;
            }
            Ok(result) => self.answered(&run, &result, reported).await,
        }
        self.run_ended(&run.task_id, &run.live);
    }

    /// Calls the run's agent on its own task; returns the call and the channel of what the agent
    /// reports while it runs (its text, streamed into the response artifact; the status and
    /// artifacts a scripted agent sets).
    fn start_agent(&self, run: &Run) -> (JoinHandle<AgentCall>, UnboundedReceiver<ProgressEvent>) {
        let mut arguments = json!({"message": run.text});
        if let Some(message_id) = &run.message_id {
            arguments["message_id"] = json!(message_id);
        }
        if let Some(conversation) = &run.conversation {
            arguments["conversation_id"] = json!(conversation);
        }
        let (progress, reports) = tokio::sync::mpsc::unbounded_channel::<ProgressEvent>();
        let mut context =
            ToolContext::of(run.principal.clone()).with_progress(Arc::new(move |event| {
                let _ = progress.send(event);
            }));
        // The sender acts for a tainted turn: the agent's run starts tainted, as a sub-agent's would.
        if let Some(tool) = &run.untrusted {
            let via = context.principal.label();
            context.turn = Some(Arc::new(portico_pipeline::TurnState::tainted(tool, &via)));
        }
        let pipeline = self.inner.engine.pipeline().clone();
        let tool = run.tool.clone();
        let call = tokio::spawn(
            async move {
                pipeline
                    .call(&tool, arguments.as_object().cloned(), &context)
                    .await
            }
            .in_current_span(),
        );
        (call, reports)
    }

    /// Acts on one report of the running agent: streams its text, records the states and artifacts
    /// it sets.
    async fn on_report(&self, run: &Run, reported: &mut Reported, report: ProgressEvent) {
        match report {
            ProgressEvent::Text(text) => {
                let append = reported.streamed;
                run.live.publish(|| {
                    artifact_update(run, text_artifact(RESPONSE_ARTIFACT, &text), append, false)
                });
                reported.streamed = true;
            }
            ProgressEvent::Status { state, message } => match TaskState::from_any_name(&state) {
                Some(state) if state.is_settled() => {
                    reported.requested = Some((state, message));
                }
                Some(state) => {
                    let message = message.map(|m| agent_message(&run.task_id, &run.context_id, &m));
                    self.set_status(run, state, message).await;
                }
                None => tracing::debug!("task {}: ignoring unknown state `{state}`", run.task_id),
            },
            ProgressEvent::Artifact {
                name,
                part,
                last_chunk,
            } => {
                let part = crate::parts::part_of(part);
                self.on_artifact(run, &mut reported.artifacts, &name, part, last_chunk)
                    .await
            }
            ProgressEvent::AnswerAsMessage => reported.as_message = true,
            ProgressEvent::ToolStarted { .. } | ProgressEvent::ToolFinished { .. } => {}
        }
    }

    /// A chunk of an artifact the agent set: kept for the task, published, and stored with its
    /// last chunk.
    async fn on_artifact(
        &self,
        run: &Run,
        artifacts: &mut Vec<v1::Artifact>,
        name: &str,
        part: v1::Part,
        last_chunk: bool,
    ) {
        let chunk = v1::Artifact {
            parts: vec![part.clone()],
            ..text_artifact(name, "")
        };
        let append = match artifacts.iter_mut().find(|a| a.artifact_id == name) {
            Some(existing) => {
                existing.parts.push(part);
                true
            }
            None => {
                artifacts.push(chunk.clone());
                false
            }
        };
        run.live
            .publish(|| artifact_update(run, chunk, append, last_chunk));
        if last_chunk {
            self.save_artifacts(run, artifacts).await;
        }
    }

    /// The agent answered: the run's end is one write of the conversation it continued (when new),
    /// its artifacts, the answer and the final status.
    async fn answered(&self, run: &Run, result: &ToolResult, reported: Reported) {
        let Reported {
            requested,
            mut artifacts,
            as_message,
            ..
        } = reported;
        let structured = result.structured_content.as_ref();
        let reply = structured
            .and_then(|s| s["reply"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| model_text(result));
        if as_message
            && requested.is_none()
            && artifacts.is_empty()
            && self.answer_with_message(run, &reply)
        {
            return;
        }
        let mut also = TaskUpdate::default();
        if let Some(conversation) = structured.and_then(|s| s["conversation_id"].as_str())
            && run.conversation.as_deref() != Some(conversation)
        {
            also.metadata = Some(portico_metadata(Some(conversation)));
        }
        let message = agent_message(&run.task_id, &run.context_id, &reply);
        match requested {
            // The agent asked for something (input, authorization) or ended the task itself: its
            // answer is the question or the reason.
            Some((state, _)) => {
                if !artifacts.is_empty() {
                    also.artifacts = Some(artifacts.iter().map(to_json).collect());
                }
                self.set_status_with(run, state, Some(message), also).await;
            }
            None => {
                let response = text_artifact(RESPONSE_ARTIFACT, &reply);
                run.live
                    .publish(|| artifact_update(run, response.clone(), false, true));
                artifacts.retain(|a| a.artifact_id != RESPONSE_ARTIFACT);
                artifacts.push(response);
                also.artifacts = Some(artifacts.iter().map(to_json).collect());
                self.set_status_with(run, TaskState::Completed, Some(message), also)
                    .await;
            }
        }
    }

    /// Answers the run's send with `reply` as a plain message, when nobody has heard of its task yet
    /// (a blocking send, stored only once settled): the task is then never stored. Otherwise (the
    /// task was acknowledged, or is continued) returns false and the task completes as usual.
    fn answer_with_message(&self, run: &Run, reply: &str) -> bool {
        let mut known = run.live.known();
        if known.unstored.is_none() || known.finished {
            return false;
        }
        known.unstored = None;
        known.finished = true;
        known.message_answer = Some(v1::Message {
            task_id: None,
            ..agent_message(&run.task_id, &run.context_id, reply)
        });
        drop(known);
        run.live.state.send_replace(TaskState::Completed);
        true
    }

    /// Registers a push notification config (already normalised) for a task the caller owns.
    pub async fn put_push_config(
        &self,
        owner: &str,
        task_id: &str,
        config: StoredPushConfig,
    ) -> Result<StoredPushConfig, A2aError> {
        let pusher = self
            .inner
            .pusher
            .as_ref()
            .ok_or(A2aError::PushNotSupported)?;
        pusher.check_url(&config.config.url)?;
        self.get(owner, task_id).await?;
        let store = self.store();
        let (id, stored) = (task_id.to_string(), to_json(&config));
        let config_id = config.id().to_string();
        blocking(store, move |store| {
            store.put_push_config(&id, &config_id, &stored)
        })
        .await?;
        // A run or a listener of this process has the task live; any later run reads the store.
        if let Some(live) = self.table().tasks.get(task_id) {
            live.push.store(true, Ordering::Relaxed);
        }
        Ok(config)
    }

    pub async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<StoredPushConfig>, A2aError> {
        self.get(owner, task_id).await?;
        let store = self.store();
        let id = task_id.to_string();
        Ok(blocking(store, move |store| store.push_configs(&id))
            .await?
            .into_iter()
            .filter_map(|(config_id, c)| {
                serde_json::from_value(c)
                    .map_err(|e| tracing::warn!("task {task_id}: push notification config {config_id} does not read: {e}"))
                    .ok()
            })
            .collect())
    }

    pub async fn delete_push_config(
        &self,
        owner: &str,
        task_id: &str,
        config_id: &str,
    ) -> Result<bool, A2aError> {
        self.get(owner, task_id).await?;
        let store = self.store();
        let (id, config) = (task_id.to_string(), config_id.to_string());
        blocking(store, move |store| store.delete_push_config(&id, &config)).await
    }

    /// Cancels a task: a running agent is stopped; a task waiting for input, or one no run of this
    /// process drives, is closed. A cancel answers within about [`CANCEL_GRACE`]: a run that has not
    /// stopped by then is left to stop on its own, and the task is stored canceled without it (the
    /// run's later writes are dropped).
    pub async fn cancel(&self, owner: &str, id: &str) -> Result<TaskRecord, A2aError> {
        let task = self.get(owner, id).await?;
        if task.state.is_terminal() {
            return Err(A2aError::TaskNotCancelable {
                id: id.to_string(),
                state: task.state.v03_name().to_string(),
            });
        }
        // Only a run moves a task on when cancelled: the table also holds tasks that someone merely
        // listens to, whose entries nothing drives.
        let running = self
            .table()
            .tasks
            .get(id)
            .filter(|live| live.running.load(Ordering::Relaxed))
            .cloned();
        match running {
            Some(live) => {
                let mut state = live.state.subscribe();
                live.cancel.cancel();
                // A run heeds its cancel switch only while its agent runs: one that has just
                // answered goes on to store its answer, and if that leaves the task waiting for
                // input, nothing will end the task but this cancel.
                let seen = tokio::time::timeout(CANCEL_GRACE, state.wait_for(|s| s.is_settled()))
                    .await
                    .ok()
                    .and_then(|seen| seen.ok().map(|state| *state));
                if !seen.is_some_and(TaskState::is_terminal) {
                    if seen.is_none() {
                        tracing::warn!(
                            "task {id}: its run did not stop within {CANCEL_GRACE:?} of being cancelled; storing it canceled without the run"
                        );
                    }
                    let run = closing_run(id, &task, live);
                    // The run takes its entry out of the table when it ends.
                    self.set_status(&run, TaskState::Canceled, None).await;
                }
                // The run's own terminal write, if it planned one first, is committed by now.
                self.inner.writer.flush().await;
            }
            None => {
                let run = closing_run(id, &task, self.live_for_run(id));
                self.set_status(&run, TaskState::Canceled, None).await;
                self.run_ended(id, &run.live);
            }
        }
        self.get(owner, id).await
    }
}

/// How often a replica looks at the tasks another one runs (see [`Tasks::follow_other_replicas`]):
/// how long an event of such a task may wait before it reaches a listener here, once a look takes
/// less (one query per 64 tasks followed). Changes between two looks arrive as one: the latest
/// status and the artifacts as they are then.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// What a listener has seen of `task`.
fn head_of(task: &TaskRecord) -> TaskHead {
    TaskHead {
        context_id: task.context_id.clone(),
        state: task.state,
        status: task.status.clone(),
        artifacts: task.artifacts.clone(),
        updated_at_ms: task.updated_at_ms,
        runner: None,
    }
}

/// One look at task `id` as the store has it (`head`), for its entry here (see
/// [`Tasks::follow_other_replicas`]). A run here whose task another replica finished has that end
/// pushed from here, where its push configs were registered.
fn follow(id: &str, live: &Live, head: TaskHead, me: &str, pusher: Option<&crate::push::Pusher>) {
    let mut followed = live.followed.lock().expect("followed task lock");
    if live.running.load(Ordering::Relaxed) {
        // This replica runs it and tells its listeners itself; only an end it did not write is news.
        let finished_elsewhere = head.state.is_terminal() && {
            let mut known = live.known();
            let news = !known.finished;
            known.finished = true;
            news
        };
        if finished_elsewhere {
            tracing::info!(
                "task {id}: finished through another replica ({}); stopping its run",
                head.state
            );
            live.cancel.cancel();
            if let Some(status) = typed_status(id, &head.status) {
                if live.push.load(Ordering::Relaxed)
                    && let Some(pusher) = pusher
                {
                    pusher.notify(id, status_event(id, &head, status.clone()));
                }
                live.publish(|| status_event(id, &head, status));
            }
            live.state.send_replace(head.state);
        }
        *followed = Some(head);
        return;
    }
    // Written last by this replica (a run that has just ended, a cancel sent here): its listeners
    // heard of it from the writer; only the baseline moves.
    if !live.has_listeners() || head.runner.as_deref() == Some(me) {
        *followed = Some(head);
        return;
    }
    let Some(seen) = followed.as_ref() else {
        *followed = Some(head);
        return;
    };
    if seen.updated_at_ms == head.updated_at_ms
        && seen.status == head.status
        && seen.artifacts == head.artifacts
    {
        return;
    }
    // Artifacts first: a listener's stream ends with the status that settles the task.
    for artifact in head
        .artifacts
        .iter()
        .filter(|a| !seen.artifacts.contains(a))
    {
        let Ok(artifact) = serde_json::from_value::<v1::Artifact>(artifact.clone()) else {
            tracing::warn!("task {id}: a stored artifact is not an A2A artifact; not streamed");
            continue;
        };
        live.publish(|| {
            v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: id.to_string(),
                context_id: head.context_id.clone(),
                artifact,
                append: false,
                last_chunk: true,
                metadata: None,
            })
        });
    }
    if seen.status != head.status
        && let Some(status) = typed_status(id, &head.status)
    {
        live.publish(|| status_event(id, &head, status));
    }
    live.state.send_replace(head.state);
    *followed = Some(head);
}

fn typed_status(id: &str, status: &Value) -> Option<v1::TaskStatus> {
    serde_json::from_value(status.clone())
        .inspect_err(|error| {
            tracing::warn!("task {id}: its stored status is not an A2A status: {error}")
        })
        .ok()
}

fn status_event(id: &str, head: &TaskHead, status: v1::TaskStatus) -> v1::StreamResponse {
    v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
        task_id: id.to_string(),
        context_id: head.context_id.clone(),
        status,
        metadata: None,
    })
}

/// A run that only closes `task` (a cancel): it writes through `live` and runs no agent.
fn closing_run(id: &str, task: &TaskRecord, live: Arc<Live>) -> Run {
    Run {
        // Calls nothing.
        principal: Principal::client("a2a"),
        owner: task.owner.clone(),
        agent: task.agent.clone(),
        task_id: id.to_string(),
        context_id: task.context_id.clone(),
        tool: String::new(),
        text: String::new(),
        message_id: None,
        conversation: None,
        untrusted: None,
        live,
    }
}

/// A task a send opened (started, or continued), before its run starts.
struct Opened {
    task_id: String,
    context_id: String,
    conversation: Option<String>,
    known: Known,
}

/// The tool whose untrusted output the sender's turn had read, as the message's metadata says.
fn untrusted_tool(message: &v1::Message) -> Option<String> {
    message
        .metadata
        .as_ref()?
        .get(crate::wire::UNTRUSTED_METADATA)?
        .as_str()
        .map(str::to_string)
}

fn artifact_update(
    run: &Run,
    artifact: v1::Artifact,
    append: bool,
    last_chunk: bool,
) -> v1::StreamResponse {
    v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
        task_id: run.task_id.clone(),
        context_id: run.context_id.clone(),
        artifact,
        append,
        last_chunk,
        metadata: None,
    })
}

/// What the running agent reported that the task's end needs.
#[derive(Default)]
struct Reported {
    /// A terminal or interrupted state the agent set, with its message: the run ends in it.
    requested: Option<(TaskState, Option<String>)>,
    artifacts: Vec<v1::Artifact>,
    /// Whether the response artifact has had text (later text appends to it).
    streamed: bool,
    /// The agent's answer is a plain message (see [`Tasks::answer_with_message`]).
    as_message: bool,
}

/// What the pipeline answers a call of the agent's tool.
type AgentCall = Result<CallOutcome, PipelineError>;

struct Run {
    /// Who the agent's run calls as: the sender's client, within its scope.
    principal: Principal,
    /// Whose task it is (see `Tasks::get`).
    owner: String,
    /// The Portico agent that runs it.
    agent: String,
    task_id: String,
    context_id: String,
    tool: String,
    text: String,
    /// The sender's `messageId`: the agent's scripted rules may match it.
    message_id: Option<String>,
    conversation: Option<String>,
    /// The sender's turn had read untrusted output from this tool (see `wire::UNTRUSTED_METADATA`).
    untrusted: Option<String>,
    live: Arc<Live>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_timestamps_have_the_usual_shapes() {
        let id = random_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "7", "{id}");
        assert!("89ab".contains(&id[19..20]), "{id}");
        let millis = u64::from_str_radix(&id[..8], 16).unwrap() << 16
            | u64::from_str_radix(&id[9..13], 16).unwrap();
        let now = portico_core::time::now_ms() as u64;
        assert!(millis <= now && now - millis < 60_000, "{id}");
        let ts = portico_core::time::now_rfc3339();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z') && ts.starts_with("20"), "{ts}");
    }

    const AGENT: &str = r#"
[[agents]]
name = "echo"
tools = []
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^think" }, steps = [
      { status = { state = "working", message = "thinking" } },
      { reply = "thought" } ] },
  { when = { text = "^hang" }, steps = [ { wait_ms = 600000 }, { reply = "never" } ] },
  { when = { text = "^ask" }, steps = [
      { status = { state = "input-required", message = "which colour?" } },
      { reply = "which colour?" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]
"#;

    fn engine(dir: &std::path::Path) -> Engine {
        let config = portico_config::parse("test config", AGENT).unwrap();
        Engine::start(&config, portico_engine::EngineOptions::in_dir(dir)).unwrap()
    }

    fn message(text: &str) -> v1::Message {
        v1::Message {
            message_id: format!("m-{text}"),
            role: v1::Role::User,
            parts: vec![v1::Part::text(text)],
            ..v1::Message::default()
        }
    }

    fn states(store: &Store, id: &str) -> Vec<TaskState> {
        store
            .task_status_history(id)
            .unwrap()
            .into_iter()
            .map(|change| change.state)
            .collect()
    }

    #[tokio::test]
    async fn a_blocking_send_is_stored_once_settled_with_all_it_went_through() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tasks = Tasks::new(engine.clone(), TaskLimits::default(), None);
        let sent = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("think hard"),
                None,
                Answer::WhenSettled,
            )
            .await
            .unwrap();
        sent.settled().await;
        let answered = sent.stored().unwrap().expect("the run stored the task");
        // What the send answers with is what the store holds.
        assert_eq!(
            engine.store().task(&sent.task_id).unwrap(),
            Some(answered.clone())
        );
        assert_eq!(answered.state, TaskState::Completed);
        assert_eq!(text_of(&answered.artifacts[0]), "thought");
        // The request, the agent's "thinking" and its answer.
        assert_eq!(answered.history.len(), 3);
        let history = engine.store().task_status_history(&sent.task_id).unwrap();
        assert_eq!(
            states(engine.store(), &sent.task_id),
            [
                TaskState::Submitted,
                TaskState::Working,
                TaskState::Working,
                TaskState::Completed
            ]
        );
        assert_eq!(history[2].status["message"]["parts"][0]["text"], "thinking");
        assert!(history.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        assert_eq!(history[0].at_ms, answered.created_at_ms);
    }

    #[tokio::test]
    async fn a_send_answered_at_once_is_stored_before_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tasks = Tasks::new(engine.clone(), TaskLimits::default(), None);
        let sent = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("think"),
                None,
                Answer::AtOnce,
            )
            .await
            .unwrap();
        let created = engine
            .store()
            .task(&sent.task_id)
            .unwrap()
            .expect("stored at once");
        assert_eq!(
            created.history,
            [json!({
                "messageId": "m-think", "role": "ROLE_USER", "parts": [{"text": "think"}],
                "contextId": created.context_id, "taskId": sent.task_id,
            })]
        );
        sent.settled().await;
        let answered = sent.stored().unwrap().unwrap();
        let stored = engine.store().task(&sent.task_id).unwrap().unwrap();
        assert_eq!(task_json(&answered, None), task_json(&stored, None));
        assert_eq!(stored.state, TaskState::Completed);
        assert_eq!(
            states(engine.store(), &sent.task_id),
            [
                TaskState::Submitted,
                TaskState::Working,
                TaskState::Working,
                TaskState::Completed
            ]
        );
    }

    #[tokio::test]
    async fn a_blocking_send_without_room_is_refused_before_its_agent_runs() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tasks = Tasks::new(engine.clone(), TaskLimits { max_tasks: 1 }, None);
        let running = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("hang on"),
                None,
                Answer::AtOnce,
            )
            .await
            .unwrap();
        let refused = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("hello"),
                None,
                Answer::WhenSettled,
            )
            .await
            .err()
            .expect("no room: the only stored task is running");
        assert!(
            matches!(&refused, A2aError::Busy(m) if m.contains("max_tasks")),
            "{refused:?}"
        );
        // Only the running task's agent was ever started.
        let conversations = engine.store().conversations(None, 0).unwrap();
        assert!(conversations.len() <= 1, "{conversations:?}");
        assert_eq!(engine.store().task_count().unwrap(), (1, 1));
        assert!(engine.store().task(&running.task_id).unwrap().is_some());
    }

    #[tokio::test]
    async fn a_waiting_task_is_live_only_while_someone_listens() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tasks = Tasks::new(engine.clone(), TaskLimits::default(), None);
        let mut sent = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("ask me"),
                None,
                Answer::Stream,
            )
            .await
            .unwrap();
        assert_eq!(tasks.live_counts(), (1, 1));
        sent.settled().await;
        let events = sent.events.take().expect("a stream's events");
        // The run ended waiting for input; the stream still listens.
        let (id, finished) = (sent.task_id.clone(), "poll it");
        drop(sent);
        wait_for(&tasks, (1, 1)).await;
        drop(events);
        assert_eq!(tasks.live_counts(), (0, 0), "the last listener freed it");

        let (task, first) = tasks.subscribe("alice", &id, finished).await.unwrap();
        assert_eq!(task.state, TaskState::InputRequired);
        let (_, second) = tasks.subscribe("alice", &id, finished).await.unwrap();
        assert_eq!(tasks.live_counts(), (1, 2));
        let refused = tasks.subscribe("bob", &id, finished).await.err().unwrap();
        assert_eq!(refused, A2aError::TaskNotFound(id.clone()));
        assert_eq!(tasks.live_counts(), (1, 2));
        drop(first);
        assert_eq!(tasks.live_counts(), (1, 1));
        drop(second);
        assert_eq!(tasks.live_counts(), (0, 0));

        // A finished task is refused, and holds nothing.
        let mut done = message("red");
        done.task_id = Some(id.clone());
        let sent = tasks
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                done,
                None,
                Answer::WhenSettled,
            )
            .await
            .unwrap();
        sent.settled().await;
        drop(sent);
        wait_for(&tasks, (0, 0)).await;
        let refused = tasks.subscribe("alice", &id, finished).await.err().unwrap();
        assert_eq!(
            refused,
            A2aError::Unsupported(format!("task `{id}` has finished; poll it"))
        );
        assert_eq!(tasks.live_counts(), (0, 0));
    }

    /// A task stored as working, of alice's, that no run of this process drives.
    fn working_task(engine: &Engine, text: &str) -> String {
        let id = random_id();
        let now = portico_core::time::now_ms();
        let record = TaskRecord {
            id: id.clone(),
            context_id: random_id(),
            owner: "alice".into(),
            agent: "echo".into(),
            state: TaskState::Working,
            status: json!({"state": TaskState::Working}),
            history: vec![to_json(&message(text))],
            artifacts: Vec::new(),
            metadata: json!({}),
            created_at_ms: now,
            updated_at_ms: now,
        };
        engine
            .store()
            .create_task(&record, &TaskLimits::default())
            .unwrap();
        id
    }

    /// fuzz/findings `a2a_jsonrpc/timeout-*`: a cancel waited without a bound for the task to be
    /// moved on, which never happened when nothing drove its live entry (only a listener held it) or
    /// its run did not stop.
    #[tokio::test]
    async fn a_cancel_answers_even_when_no_run_moves_the_task_on() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tasks = Tasks::new(engine.clone(), TaskLimits::default(), None);
        // Listened to, and driven by no run.
        let listened = working_task(&engine, "listened");
        let (_, subscription) = tasks
            .subscribe("alice", &listened, "poll it")
            .await
            .unwrap();
        // Driven by a run that never stops (it ignores its cancel switch).
        let stuck = working_task(&engine, "stuck");
        let live = tasks.live_for_run(&stuck);
        // Driven by a run that has just answered and, missing the cancel, stores that it waits
        // for input.
        let settling = working_task(&engine, "settling");
        let settles = tasks.live_for_run(&settling);
        let run = closing_run(
            &settling,
            &engine.store().task(&settling).unwrap().unwrap(),
            settles.clone(),
        );
        let (this, asked) = (tasks.clone(), settling.clone());
        let answering = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            this.set_status(&run, TaskState::InputRequired, None).await;
            this.run_ended(&asked, &run.live);
        });
        let started = std::time::Instant::now();
        let answered = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            tasks.cancel("alice", &settling),
        )
        .await
        .expect("a cancel answers")
        .unwrap();
        assert!(started.elapsed() < CANCEL_GRACE, "{:?}", started.elapsed());
        assert_eq!(answered.state, TaskState::Canceled);
        answering.await.unwrap();
        assert_eq!(
            states(engine.store(), &settling),
            [
                TaskState::Working,
                TaskState::InputRequired,
                TaskState::Canceled
            ]
        );
        for id in [&listened, &stuck] {
            let answered = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                tasks.cancel("alice", id),
            )
            .await
            .expect("a cancel answers")
            .unwrap();
            assert_eq!(answered.state, TaskState::Canceled);
            let stored = engine.store().task(id).unwrap().unwrap();
            assert_eq!(stored.state, TaskState::Canceled);
        }
        // The stuck run's late update does not undo the cancel, in the store or for waiters.
        let task = engine.store().task(&stuck).unwrap().unwrap();
        let run = closing_run(&stuck, &task, live.clone());
        tasks.set_status(&run, TaskState::Working, None).await;
        tasks.inner.writer.flush().await;
        assert_eq!(
            engine.store().task(&stuck).unwrap().unwrap().state,
            TaskState::Canceled
        );
        assert_eq!(
            states(engine.store(), &stuck),
            [TaskState::Working, TaskState::Canceled]
        );
        assert_eq!(*live.state.borrow(), TaskState::Canceled);
        // Nothing is left behind once the listener and the run are gone.
        drop(subscription);
        tasks.run_ended(&stuck, &live);
        assert_eq!(tasks.live_counts(), (0, 0));
    }

    /// A replica of a store shared at `url` (PostgreSQL), named `name`.
    fn replica(dir: &std::path::Path, url: &str, name: &str) -> Engine {
        let text = format!("{AGENT}\n[store]\nurl = \"{url}\"\nreplica = \"{name}\"\n");
        let config = portico_config::parse("test config", &text).unwrap();
        Engine::start(
            &config,
            portico_engine::EngineOptions::in_dir(dir).as_replica(),
        )
        .unwrap()
    }

    async fn next_event(subscription: &mut Subscription) -> v1::StreamResponse {
        tokio::time::timeout(std::time::Duration::from_secs(10), subscription.recv())
            .await
            .expect("an event within 10 s (the follower looks every 250 ms)")
            .expect("the stream is open")
    }

    /// Two replicas on one PostgreSQL store: a task one runs is read, streamed and cancelled
    /// through the other, and the cancel stops the run that was running it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_run_by_one_replica_is_streamed_and_cancelled_through_another() {
        let Some(url) = portico_store::testing::postgres_test_url() else {
            return;
        };
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (
            replica(dir_a.path(), &url, "gw-a"),
            replica(dir_b.path(), &url, "gw-b"),
        );
        let tasks_a = Tasks::new(a.clone(), TaskLimits::default(), None);
        let tasks_b = Tasks::new(b.clone(), TaskLimits::default(), None);
        tasks_a.follow_other_replicas();
        tasks_b.follow_other_replicas();
        let sent = tasks_a
            .send(
                "alice",
                &Principal::client("a2a"),
                "echo",
                message("hang"),
                None,
                Answer::AtOnce,
            )
            .await
            .unwrap();
        let id = sent.task_id.clone();
        let (seen, mut subscription) = tasks_b.subscribe("alice", &id, "poll it").await.unwrap();
        assert!(!seen.state.is_terminal());
        assert_eq!(
            b.store().task_head(&id).unwrap().unwrap().runner.as_deref(),
            Some("gw-a")
        );

        // The run on A reports progress: B's listener hears of it.
        let run_a = tasks_a.table().tasks.get(&id).cloned().expect("A runs it");
        let progress = closing_run(&id, &seen, run_a.clone());
        tasks_a
            .save_artifacts(
                &progress,
                &[text_artifact(RESPONSE_ARTIFACT, "partial answer")],
            )
            .await;
        tasks_a
            .set_status(
                &progress,
                TaskState::Working,
                Some(agent_message(&id, &seen.context_id, "halfway")),
            )
            .await;
        // Its artifact and its status reach B (the run's own earlier status changes may come
        // first, in their own looks at the store).
        let (mut artifact, mut halfway) = (None, false);
        while artifact.is_none() || !halfway {
            match next_event(&mut subscription).await {
                v1::StreamResponse::ArtifactUpdate(update) => {
                    assert_eq!(
                        (update.task_id.as_str(), update.context_id.as_str()),
                        (id.as_str(), seen.context_id.as_str())
                    );
                    assert!(!update.append);
                    artifact = Some(to_json(&update.artifact)["parts"][0]["text"].clone());
                }
                v1::StreamResponse::StatusUpdate(update) => {
                    assert_eq!(update.status.state, TaskState::Working);
                    halfway |= to_json(&update.status)["message"]["parts"][0]["text"] == "halfway";
                }
                other => panic!("expected progress, got {other:?}"),
            }
        }
        assert_eq!(artifact, Some(json!("partial answer")));

        // Cancelled through B: B answers at once, A's run is stopped.
        let canceled = tasks_b.cancel("alice", &id).await.unwrap();
        assert_eq!(canceled.state, TaskState::Canceled);
        match next_event(&mut subscription).await {
            v1::StreamResponse::StatusUpdate(update) => {
                assert_eq!(update.status.state, TaskState::Canceled)
            }
            other => panic!("expected the cancel, got {other:?}"),
        }
        tokio::time::timeout(std::time::Duration::from_secs(10), run_a.cancel.cancelled())
            .await
            .expect("A's run is told within 10 s");
        drop(subscription);
        wait_for(&tasks_a, (0, 0)).await;
        // Whatever A's stopped run wrote last, the task stays cancelled.
        tasks_a.inner.writer.flush().await;
        let stored = a.store().task(&id).unwrap().unwrap();
        assert_eq!(stored.state, TaskState::Canceled);
        assert_eq!(
            states(a.store(), &id).last().copied(),
            Some(TaskState::Canceled)
        );
        assert_eq!(
            states(a.store(), &id)
                .iter()
                .filter(|s| s.is_terminal())
                .count(),
            1,
            "one end, the cancel"
        );
    }

    /// A replica whose lease runs out has its running tasks failed by another; one restarting under
    /// its name fails its last life's tasks at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_running_tasks_of_a_replica_that_stopped_are_failed_by_another() {
        let Some(url) = portico_store::testing::postgres_test_url() else {
            return;
        };
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (
            replica(dir_a.path(), &url, "gw-a"),
            replica(dir_b.path(), &url, "gw-b"),
        );
        let (tasks_a, tasks_b) = (
            Tasks::new(a.clone(), TaskLimits::default(), None),
            Tasks::new(b.clone(), TaskLimits::default(), None),
        );
        let on_a = working_task(&a, "on a");
        let on_b = working_task(&b, "on b");
        assert_eq!(tasks_b.recover(false).await.unwrap(), 0, "gw-a is alive");
        assert_eq!(
            tasks_a.recover(true).await.unwrap(),
            1,
            "gw-a starting again: its last life's task"
        );
        assert_eq!(
            a.store().task(&on_a).unwrap().unwrap().state,
            TaskState::Failed
        );
        assert_eq!(
            b.store().task(&on_b).unwrap().unwrap().state,
            TaskState::Working
        );

        // gw-b stops (its heartbeat ends and it leaves the store; a killed one's lease runs out
        // instead): A fails its tasks, once.
        let again = working_task(&b, "on b again");
        b.store()
            .replica_heartbeat("gw-b", "someone else")
            .expect_err("gw-b is alive, so its name is taken");
        b.shutdown().await;
        assert_eq!(tasks_a.recover(false).await.unwrap(), 2);
        assert_eq!(
            tasks_b.recover(false).await.unwrap(),
            0,
            "already failed by A"
        );
        for id in [&on_b, &again] {
            let task = a.store().task(id).unwrap().unwrap();
            assert_eq!(task.state, TaskState::Failed);
            assert!(
                task.status
                    .to_string()
                    .contains("replica running this task stopped"),
                "{}",
                task.status
            );
        }
    }

    /// The run leaves the live table just after it sets the state a waiter sees.
    async fn wait_for(tasks: &Tasks, counts: (usize, usize)) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while tasks.live_counts() != counts {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                tasks.live_counts()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn text_of(artifact: &Value) -> &str {
        artifact["parts"][0]["text"].as_str().unwrap_or_default()
    }
}
