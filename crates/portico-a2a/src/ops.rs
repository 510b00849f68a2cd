//! The A2A operations, one function each, whatever the binding: JSON-RPC (1.0 and 0.3 method
//! names), HTTP+JSON (1.0, and 0.3 under `/v1`) and the early draft's `tasks/send` are thin adapters
//! that read their request into these types, call one of these, and write the answer in their form.
//! Requests and answers are the 1.0 protocol types; a 0.3 binding converts at its edge.

use portico_a2a_client::protocol::{TaskState, v1};
use portico_store::TaskQuery;

use crate::error::A2aError;
use crate::push::{StoredPushConfig, normalise_config};
use crate::server::{A2aState, Caller};
use crate::tasks::{Answer, Sent, Subscription, task_of};
use crate::wire::Version;

/// The largest `pageSize` of `ListTasks`.
const MAX_PAGE_SIZE: u32 = 100;
/// What `ListTasks` without a `pageSize` answers with.
const DEFAULT_PAGE_SIZE: u32 = 50;

/// `SendMessage`: the task, at once (`returnImmediately`) or, by default, once it is finished or
/// waiting for input; or, when the agent answered a blocking send with a plain message, that
/// message. `version` is the one the client spoke: its webhooks get that form.
pub(crate) async fn send_message(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    request: v1::SendMessageRequest,
    version: Version,
) -> Result<v1::SendMessageResponse, A2aError> {
    let immediately = request
        .configuration
        .as_ref()
        .is_some_and(|c| c.return_immediately);
    let answer = if immediately {
        Answer::AtOnce
    } else {
        Answer::WhenSettled
    };
    let (sent, history_length) = start(state, caller, agent, request, version, answer).await?;
    if answer == Answer::WhenSettled {
        sent.settled().await;
        if let Some(message) = sent.message_answer() {
            return Ok(v1::SendMessageResponse::Message(message));
        }
    }
    Ok(v1::SendMessageResponse::Task(
        sent_task(state, &caller.owner, &sent, history_length).await?,
    ))
}

/// `SendStreamingMessage`: the task as created, and its events from before its run started.
pub(crate) async fn send_streaming_message(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    request: v1::SendMessageRequest,
    version: Version,
) -> Result<(v1::Task, Subscription), A2aError> {
    let (mut sent, history_length) =
        start(state, caller, agent, request, version, Answer::Stream).await?;
    let events = sent
        .events
        .take()
        .ok_or_else(|| A2aError::Internal("a streamed task came without its events".into()))?;
    Ok((
        sent_task(state, &caller.owner, &sent, history_length).await?,
        events,
    ))
}

async fn start(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    request: v1::SendMessageRequest,
    version: Version,
    answer: Answer,
) -> Result<(Sent, Option<usize>), A2aError> {
    let mut message = request.message;
    // A message that names no role is the sender's, as Portico has always read it.
    if message.role == v1::Role::Unspecified {
        message.role = v1::Role::User;
    }
    let configuration = request.configuration.unwrap_or_default();
    let history_length = configuration.history_length.map(|n| n as usize);
    let push = configuration
        .task_push_notification_config
        .map(|config| (config, version));
    let sent = state
        .tasks
        .send(
            &caller.owner,
            &caller.principal,
            agent,
            message,
            push,
            answer,
        )
        .await?;
    Ok((sent, history_length))
}

/// The task of a send as its caller should see it: what this process's run stored, or else what
/// the store holds.
async fn sent_task(
    state: &A2aState,
    owner: &str,
    sent: &Sent,
    history_length: Option<usize>,
) -> Result<v1::Task, A2aError> {
    match sent.stored()? {
        Some(record) => Ok(task_of(&record, history_length)),
        None => Ok(task_of(
            &state.tasks.get(owner, &sent.task_id).await?,
            history_length,
        )),
    }
}

/// `GetTask`.
pub(crate) async fn get_task(
    state: &A2aState,
    owner: &str,
    request: &v1::GetTaskRequest,
) -> Result<v1::Task, A2aError> {
    let record = state.tasks.get(owner, &request.id).await?;
    Ok(task_of(&record, request.history_length.map(|n| n as usize)))
}

/// `ListTasks`: the caller's tasks, newest first, without history or artifacts unless asked.
pub(crate) async fn list_tasks(
    state: &A2aState,
    owner: &str,
    request: &v1::ListTasksRequest,
) -> Result<v1::ListTasksResponse, A2aError> {
    let page_size = match request.page_size {
        None | Some(0) => DEFAULT_PAGE_SIZE,
        Some(n) if n <= MAX_PAGE_SIZE => n,
        Some(n) => {
            return Err(A2aError::InvalidParams(format!(
                "`pageSize` must be a number from 1 to {MAX_PAGE_SIZE}, not {n}"
            )));
        }
    };
    let updated_after_ms = match request.status_timestamp_after.as_deref() {
        None | Some("") => None,
        Some(text) => Some(portico_core::time::parse_rfc3339(text).ok_or_else(|| {
            A2aError::InvalidParams(format!(
                "`statusTimestampAfter` `{text}` is not an RFC 3339 timestamp"
            ))
        })?),
    };
    let query = TaskQuery {
        owner: owner.to_string(),
        context_id: request.context_id.clone().filter(|s| !s.is_empty()),
        state: request.status.filter(|s| *s != TaskState::Unspecified),
        updated_after_ms,
        page_size: page_size as usize,
        page_token: request.page_token.clone().filter(|s| !s.is_empty()),
    };
    let page = state.tasks.list(query).await.map_err(|e| match e {
        A2aError::Internal(m) if m.contains("page token") => A2aError::InvalidParams(m),
        other => other,
    })?;
    let history_length = request.history_length.unwrap_or(0) as usize;
    let include_artifacts = request.include_artifacts == Some(true);
    let tasks = page
        .tasks
        .iter()
        .map(|record| {
            let mut task = task_of(record, Some(history_length));
            if !include_artifacts {
                task.artifacts.clear();
            }
            task
        })
        .collect();
    Ok(v1::ListTasksResponse {
        tasks,
        next_page_token: page.next_page_token.unwrap_or_default(),
        page_size,
        total_size: u32::try_from(page.total_size).unwrap_or(u32::MAX),
    })
}

/// `CancelTask`.
pub(crate) async fn cancel_task(
    state: &A2aState,
    owner: &str,
    id: &str,
) -> Result<v1::Task, A2aError> {
    Ok(task_of(&state.tasks.cancel(owner, id).await?, None))
}

/// `SubscribeToTask`: the task, and its events from now on. An unknown (or someone else's) task
/// is TaskNotFound; a finished one cannot be subscribed to (`instead` says what to do).
pub(crate) async fn subscribe_to_task(
    state: &A2aState,
    owner: &str,
    id: &str,
    instead: &str,
) -> Result<(v1::Task, Subscription), A2aError> {
    let (record, subscription) = state.tasks.subscribe(owner, id, instead).await?;
    Ok((task_of(&record, None), subscription))
}

/// `CreateTaskPushNotificationConfig`.
pub(crate) async fn create_push_config(
    state: &A2aState,
    owner: &str,
    task_id: &str,
    config: v1::TaskPushNotificationConfig,
    version: Version,
) -> Result<StoredPushConfig, A2aError> {
    if task_id.is_empty() {
        return Err(A2aError::InvalidParams("`taskId` is required".into()));
    }
    let config = normalise_config(task_id, config, version)?;
    state.tasks.put_push_config(owner, task_id, config).await
}

/// `GetTaskPushNotificationConfig`; without an id (0.3 allows it), the task's first config.
pub(crate) async fn get_push_config(
    state: &A2aState,
    owner: &str,
    task_id: &str,
    id: Option<&str>,
) -> Result<StoredPushConfig, A2aError> {
    let configs = state.tasks.push_configs(owner, task_id).await?;
    let found = match id {
        Some(id) => configs.into_iter().find(|c| c.id() == id),
        None => configs.into_iter().next(),
    };
    found.ok_or_else(|| {
        A2aError::InvalidParams(format!(
            "task `{task_id}` has no push notification config{}",
            id.map(|id| format!(" `{id}`")).unwrap_or_default()
        ))
    })
}

/// `ListTaskPushNotificationConfigs`.
pub(crate) async fn list_push_configs(
    state: &A2aState,
    owner: &str,
    task_id: &str,
) -> Result<Vec<StoredPushConfig>, A2aError> {
    state.tasks.push_configs(owner, task_id).await
}

/// `DeleteTaskPushNotificationConfig`: idempotent, so deleting a config that is already gone
/// succeeds (the task must still be the caller's).
pub(crate) async fn delete_push_config(
    state: &A2aState,
    owner: &str,
    task_id: &str,
    id: &str,
) -> Result<(), A2aError> {
    state.tasks.delete_push_config(owner, task_id, id).await?;
    Ok(())
}

/// `GetExtendedAgentCard`: Portico has no extended card, so this is always its error.
pub(crate) fn get_extended_agent_card() -> A2aError {
    A2aError::ExtendedCardNotConfigured
}
