//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): the tools and the task store the
//! suite's `tasks-*` scenarios drive.
//!
//! rmcp 3.11 carries the wire (`CreateTaskResult`, `tasks/get`/`tasks/update`/`tasks/cancel`, the
//! `-32021` gate on undeclared clients); the fixture keeps the tasks. A task-supporting tool called by
//! a request that declared the extension answers at once with a `CreateTaskResult` (the task already
//! in the store, so an immediate `tasks/get` finds it) and runs on in the background; without the
//! extension, `slow_compute` runs inline and the tools that require tasks are refused with `-32021`.
//! Tasks live in one store per process (stateless clients poll from new connections), expire
//! `TASK_TTL` after creation, and the store holds at most `MAX_TASKS`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData as McpError;
use rmcp::model::{ClientCapabilities, CreateTaskResult, GetTaskResult, InputResponses};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::catalog::{self, wire};

/// How long a task stays readable through `tasks/get` (the `ttlMs` it advertises).
const TASK_TTL: Duration = Duration::from_secs(300);
/// The polling interval suggested to clients.
const POLL_INTERVAL_MS: u64 = 200;
/// Tasks kept at once; creating more first drops expired ones, then refuses.
const MAX_TASKS: usize = 1024;
/// Set (to anything) in the fixture's environment, its task ids are `task-0`, `task-1`, … with no
/// random part: tests of a gateway make two servers' ids meet with it, or name a task they never saw.
pub const SEQUENTIAL_TASK_IDS_ENV: &str = "CONFORMANCE_FIXTURE_SEQUENTIAL_TASK_IDS";
/// How long `failing_job` and `protocol_error_job` run before they fail.
const FAIL_AFTER: Duration = Duration::from_millis(500);

/// The tools of this module, for `tools/list`.
pub fn tools() -> Vec<Value> {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    vec![
        json!({"name": "greet", "description": "Sync-only: answers Hello, {name}! (tasks-*).",
               "inputSchema": object(json!({"name": {"type": "string"}}))}),
        json!({"name": "slow_compute", "description": "Task-supporting: sleeps `seconds`, then answers; cancellable while it sleeps (tasks-*).",
               "inputSchema": object(json!({"seconds": {"type": "number"}, "label": {"type": "string"}}))}),
        json!({"name": "failing_job", "description": "Requires tasks: completes with an isError result after ~0.5 s (tasks-*).",
               "inputSchema": object(json!({}))}),
        json!({"name": "protocol_error_job", "description": "Requires tasks: the task fails with a JSON-RPC error (tasks-lifecycle).",
               "inputSchema": object(json!({}))}),
        json!({"name": "confirm_delete", "description": "Requires tasks: the task waits for one elicitation answer, given through tasks/update (tasks-mrtr-input).",
               "inputSchema": object(json!({}))}),
        json!({"name": "multi_input", "description": "Requires tasks: the task waits for two elicitation answers at once (tasks-mrtr-input).",
               "inputSchema": object(json!({}))}),
        json!({"name": "test_tool_with_task", "description": "Requires tasks: asks user_name through input_required, then continues as a task (tasks-mrtr-composition).",
               "inputSchema": object(json!({}))}),
    ]
}

/// Whether `name` is one of this module's tools.
pub fn handles(name: &str) -> bool {
    matches!(
        name,
        "greet"
            | "slow_compute"
            | "failing_job"
            | "protocol_error_job"
            | "confirm_delete"
            | "multi_input"
            | "test_tool_with_task"
    )
}

/// What a call of one of this module's tools comes to.
pub enum Call {
    /// A plain result (sync tools).
    Done(Value),
    /// A plain result once the delay has passed: a task-supporting tool run inline, for a request
    /// that did not declare the extension.
    After(Duration, Value),
    /// An `input_required` round before the task exists (`test_tool_with_task`).
    Ask(Value),
    /// The task was created.
    Task(CreateTaskResult),
}

/// Builds a task's result from the answers to its input requests.
type Finish = fn(&Map<String, Value>) -> Value;

/// One task: its wire fields and what `tasks/get` inlines.
struct Entry {
    created_at: String,
    last_updated_at: String,
    expires: Instant,
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    status: &'static str,
    /// `result`, `error` or `inputRequests`, as `tasks/get` inlines them.
    payload: Map<String, Value>,
    /// Answers gathered for an `input_required` task.
    answers: Map<String, Value>,
    /// What finishes the task once every input request is answered.
    on_answers: Option<Finish>,
    cancel: CancellationToken,
}

/// Every task of the process.
#[derive(Default)]
pub struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    next: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each operation leaves the map consistent; poison from a panic elsewhere is moot.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(wire(
        json!({"extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}}),
    ))
}

fn unknown_task(task_id: &str) -> McpError {
    McpError::invalid_params(
        format!("no task {task_id}: it never existed or expired"),
        None,
    )
}

impl Tasks {
    /// Runs one call of a tool of this module. `declared` is the request's capabilities.
    pub fn call(
        self: &std::sync::Arc<Self>,
        name: &str,
        arguments: &Map<String, Value>,
        capabilities: &ClientCapabilities,
        responses: Option<&InputResponses>,
    ) -> Result<Call, McpError> {
        let declared = capabilities.supports_tasks();
        let text = |key: &str| arguments.get(key).and_then(Value::as_str).unwrap_or("");
        match name {
            "greet" => Ok(Call::Done(catalog::text_result(&format!(
                "Hello, {}!",
                text("name")
            )))),
            "slow_compute" => {
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
                    .unwrap_or(0.0)
                    .min(TASK_TTL.as_secs_f64());
                let done = catalog::text_result(&format!(
                    "slow_compute {} finished after {seconds} s",
                    text("label")
                ));
                if !declared {
                    return Ok(Call::After(Duration::from_secs_f64(seconds), done));
                }
                let (task, cancel) = self.create("working", Map::new(), None)?;
                let tasks = std::sync::Arc::clone(self);
                let id = task.task.task_id.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                            tasks.finish(&id, "completed", "result", done);
                        }
                        _ = cancel.cancelled() => {}
                    }
                });
                Ok(Call::Task(task))
            }
            "failing_job" | "protocol_error_job" => {
                if !declared {
                    return Err(tasks_required());
                }
                let (task, _cancel) = self.create("working", Map::new(), None)?;
                let tasks = std::sync::Arc::clone(self);
                let id = task.task.task_id.clone();
                let protocol = name == "protocol_error_job";
                tokio::spawn(async move {
                    tokio::time::sleep(FAIL_AFTER).await;
                    if protocol {
                        let error = json!({"code": -32603, "message": "protocol_error_job failed inside the server, as it always does"});
                        tasks.finish(&id, "failed", "error", error);
                    } else {
                        let result = catalog::error_result(
                            "failing_job ran and reported an error, as it always does",
                        );
                        tasks.finish(&id, "completed", "result", result);
                    }
                });
                Ok(Call::Task(task))
            }
            "confirm_delete" | "multi_input" => {
                if !declared {
                    return Err(tasks_required());
                }
                let elicit = |message: &str| {
                    json!({"method": "elicitation/create", "params": {
                        "mode": "form",
                        "message": message,
                        "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
                    }})
                };
                let (requests, finish): (Map<String, Value>, Finish) = if name == "confirm_delete" {
                    let mut requests = Map::new();
                    requests.insert("confirm_delete".into(), elicit("Delete the item?"));
                    (requests, |answers| {
                        catalog::text_result(&format!(
                            "confirm_delete: answered {}",
                            answers["confirm_delete"]["action"]
                        ))
                    })
                } else {
                    let mut requests = Map::new();
                    requests.insert("first".into(), elicit("First question?"));
                    requests.insert("second".into(), elicit("Second question?"));
                    (requests, |answers| {
                        catalog::text_result(&format!(
                            "multi_input: both answered ({}, {})",
                            answers["first"]["action"], answers["second"]["action"]
                        ))
                    })
                };
                let mut payload = Map::new();
                payload.insert("inputRequests".into(), Value::Object(requests));
                let (task, _cancel) = self.create("input_required", payload, Some(finish))?;
                Ok(Call::Task(task))
            }
            "test_tool_with_task" => {
                if !declared {
                    return Err(tasks_required());
                }
                let answer = responses.and_then(|responses| responses.get("user_name"));
                let Some(answer) = answer else {
                    return Ok(Call::Ask(json!({
                        "resultType": "input_required",
                        "inputRequests": {"user_name": {"method": "elicitation/create", "params": {
                            "mode": "form",
                            "message": "What is your name?",
                            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
                        }}}
                    })));
                };
                let user = answer["content"]["name"].as_str().unwrap_or("").to_owned();
                let (task, cancel) = self.create("working", Map::new(), None)?;
                let tasks = std::sync::Arc::clone(self);
                let id = task.task.task_id.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(FAIL_AFTER) => {
                            let result = catalog::text_result(&format!("Hello, {user}! (finished as a task)"));
                            tasks.finish(&id, "completed", "result", result);
                        }
                        _ = cancel.cancelled() => {}
                    }
                });
                Ok(Call::Task(task))
            }
            _ => Err(McpError::invalid_params(
                format!("unknown tool: {name}"),
                None,
            )),
        }
    }

    fn create(
        &self,
        status: &'static str,
        payload: Map<String, Value>,
        on_answers: Option<Finish>,
    ) -> Result<(CreateTaskResult, CancellationToken), McpError> {
        let now = Instant::now();
        let mut entries = lock(&self.entries);
        entries.retain(|_, entry| entry.expires > now);
        if entries.len() >= MAX_TASKS {
            return Err(McpError::internal_error(
                format!("the fixture already holds {MAX_TASKS} tasks; wait for some to expire"),
                None,
            ));
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let task_id = if std::env::var_os(SEQUENTIAL_TASK_IDS_ENV).is_some() {
            format!("task-{number}")
        } else {
            format!("task-{number}-{:08x}", rand::random::<u32>())
        };
        let stamp = iso8601_now();
        let cancel = CancellationToken::new();
        entries.insert(
            task_id.clone(),
            Entry {
                created_at: stamp.clone(),
                last_updated_at: stamp.clone(),
                expires: now + TASK_TTL,
                status,
                payload,
                answers: Map::new(),
                on_answers,
                cancel: cancel.clone(),
            },
        );
        let created: CreateTaskResult = wire(json!({
            "resultType": "task",
            "taskId": task_id,
            "status": status,
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "ttlMs": TASK_TTL.as_millis() as u64,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }));
        Ok((created, cancel))
    }

    /// Moves a non-terminal task to a terminal `status` with `key` (`result` or `error`) inlined.
    fn finish(&self, task_id: &str, status: &'static str, key: &str, value: Value) {
        if let Some(entry) = lock(&self.entries).get_mut(task_id)
            && !is_terminal(entry.status)
        {
            entry.status = status;
            entry.payload = Map::new();
            entry.payload.insert(key.into(), value);
            entry.last_updated_at = iso8601_now();
        }
    }

    /// `tasks/get`: the task with its status-specific payload inlined.
    pub fn get(&self, task_id: &str) -> Result<GetTaskResult, McpError> {
        let now = Instant::now();
        let entries = lock(&self.entries);
        let entry = entries
            .get(task_id)
            .filter(|entry| entry.expires > now)
            .ok_or_else(|| unknown_task(task_id))?;
        let remaining = entry.expires.saturating_duration_since(now).as_millis() as u64;
        let mut detailed = json!({
            "resultType": "complete",
            "taskId": task_id,
            "status": entry.status,
            "createdAt": entry.created_at,
            "lastUpdatedAt": entry.last_updated_at,
            "ttlMs": remaining,
            "pollIntervalMs": POLL_INTERVAL_MS,
        });
        if let Some(object) = detailed.as_object_mut() {
            object.extend(entry.payload.clone());
        }
        Ok(wire(detailed))
    }

    /// `tasks/update`: answers some of an `input_required` task's requests; the task completes once
    /// none is pending.
    pub fn update(&self, task_id: &str, responses: &InputResponses) -> Result<(), McpError> {
        let mut entries = lock(&self.entries);
        let entry = entries
            .get_mut(task_id)
            .ok_or_else(|| unknown_task(task_id))?;
        if entry.status != "input_required" {
            // Late or repeated answers change nothing; the ack is the same.
            return Ok(());
        }
        let Some(Value::Object(pending)) = entry.payload.get_mut("inputRequests") else {
            return Ok(());
        };
        for (key, answer) in responses {
            if pending.remove(key).is_some() {
                if !answer.is_object() {
                    return Err(McpError::invalid_params(
                        format!("inputResponses.{key} must be a result object, got {answer}"),
                        None,
                    ));
                }
                entry.answers.insert(key.clone(), answer.clone());
            }
        }
        if pending.is_empty() {
            let result = entry.on_answers.map_or_else(
                || catalog::text_result("answered"),
                |finish| finish(&entry.answers),
            );
            entry.status = "completed";
            entry.payload = Map::new();
            entry.payload.insert("result".into(), result);
        }
        entry.last_updated_at = iso8601_now();
        Ok(())
    }

    /// `tasks/cancel`: a running task settles as `cancelled`; a terminal one stays as it is.
    pub fn cancel(&self, task_id: &str) -> Result<(), McpError> {
        let mut entries = lock(&self.entries);
        let entry = entries
            .get_mut(task_id)
            .ok_or_else(|| unknown_task(task_id))?;
        if !is_terminal(entry.status) {
            entry.cancel.cancel();
            entry.status = "cancelled";
            entry.payload = Map::new();
            entry.last_updated_at = iso8601_now();
        }
        Ok(())
    }
}

fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn iso8601_now() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    iso8601(since_epoch)
}

fn iso8601(since_epoch: Duration) -> String {
    let seconds = since_epoch.as_secs();
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
        since_epoch.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_formats_known_instants() {
        assert_eq!(iso8601(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        // 2026-12-01T22:49:13.250Z
        assert_eq!(
            iso8601(Duration::from_millis(1_796_165_353_250)),
            "2026-12-01T22:49:13.250Z"
        );
        // A leap day.
        assert_eq!(
            iso8601(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[tokio::test]
    async fn an_input_required_task_completes_once_every_key_is_answered() {
        let tasks = std::sync::Arc::new(Tasks::default());
        let declared: ClientCapabilities =
            wire(json!({"extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}}));
        let Call::Task(created) = tasks
            .call("multi_input", &Map::new(), &declared, None)
            .unwrap()
        else {
            panic!("multi_input did not create a task")
        };
        let id = created.task.task_id.clone();
        let first = serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(first["status"], "input_required");
        assert_eq!(first["inputRequests"].as_object().unwrap().len(), 2);

        let answer: InputResponses =
            wire(json!({"first": {"action": "accept", "content": {"confirm": true}}}));
        tasks.update(&id, &answer).unwrap();
        let partial = serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(partial["status"], "input_required");
        let pending: Vec<&String> = partial["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(pending, ["second"]);

        let answer: InputResponses = wire(json!({"second": {"action": "decline"}}));
        tasks.update(&id, &answer).unwrap();
        let done = serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(done["status"], "completed");
        assert_eq!(
            done["result"]["content"][0]["text"],
            "multi_input: both answered (\"accept\", \"decline\")"
        );
        assert!(tasks.get("task-unknown").is_err());
    }

    #[test]
    fn required_task_tools_refuse_clients_without_the_extension() {
        let tasks = std::sync::Arc::new(Tasks::default());
        let Err(error) = tasks.call(
            "failing_job",
            &Map::new(),
            &ClientCapabilities::default(),
            None,
        ) else {
            panic!("failing_job ran without the tasks extension")
        };
        assert_eq!(
            error.code,
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        );
        assert_eq!(
            error.data.unwrap()["requiredCapabilities"],
            json!({"extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}})
        );
    }
}
