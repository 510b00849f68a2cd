//! Push notifications: a task's status changes POSTed to the webhooks its client registered.
//!
//! Webhook URLs are checked by the SSRF-safe client when they are registered and again on every
//! delivery (DNS may change). Each delivery carries the client's token (`X-A2A-Notification-Token`)
//! and, when configured, its credentials (`Authorization: {scheme} {credentials}`). Deliveries of one
//! task go out in order, each retried on connection failures, 429 and 5xx with backoff; a webhook that
//! keeps failing is logged and skipped, never allowed to hold up the task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_net::SafeClient;
use portico_store::Store;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::A2aError;
use crate::tasks::task_json;
use crate::wire::{self, Version, is_terminal};

const ATTEMPTS: u32 = 4;
const FIRST_RETRY: Duration = Duration::from_millis(250);

#[derive(Clone)]
pub struct Pusher {
    inner: Arc<Inner>,
}

struct Inner {
    client: SafeClient,
    store: Store,
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
}

impl Pusher {
    pub fn new(client: SafeClient, store: Store) -> Self {
        Pusher {
            inner: Arc::new(Inner {
                client,
                store,
                queues: Mutex::default(),
            }),
        }
    }

    /// Refuses a webhook URL the SSRF rules forbid, saying which rule.
    pub fn check_url(&self, url: &str) -> Result<(), A2aError> {
        self.inner
            .client
            .check_url(url)
            .map(|_| ())
            .map_err(|e| A2aError::InvalidParams(format!("push notification url `{url}`: {e}")))
    }

    /// Queues a status update (1.0 `StreamResponse` form) for the task's webhooks.
    pub fn notify(&self, task_id: &str, event: Value) {
        let mut queues = self.inner.queues.lock().expect("push queues lock");
        let queue = queues.entry(task_id.to_string()).or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(self.clone().deliver_all(task_id.to_string(), receiver));
            sender
        });
        let _ = queue.send(event);
    }

    async fn deliver_all(self, task_id: String, mut events: mpsc::UnboundedReceiver<Value>) {
        while let Some(event) = events.recv().await {
            let store = self.inner.store.clone();
            let id = task_id.clone();
            let configs = tokio::task::spawn_blocking(move || {
                let configs = store.push_configs(&id)?;
                let task = store.task(&id)?;
                Ok::<_, portico_store::StoreError>((configs, task))
            })
            .await;
            let Ok(Ok((configs, task))) = configs else {
                tracing::warn!("task {task_id}: could not read its push notification configs");
                continue;
            };
            for (_, stored) in configs {
                let version = match stored["portico_version"].as_str() {
                    Some("0.3") => Version::V03,
                    _ => Version::V1,
                };
                let body = match (version, &task) {
                    (Version::V03, Some(task)) => wire::task_to_v03(&task_json(task, None)),
                    _ => event.clone(),
                };
                self.deliver(&task_id, &stored, &body).await;
            }
            let state = event["statusUpdate"]["status"]["state"]
                .as_str()
                .unwrap_or_default();
            if is_terminal(state) {
                break;
            }
        }
        self.inner
            .queues
            .lock()
            .expect("push queues lock")
            .remove(&task_id);
    }

    async fn deliver(&self, task_id: &str, config: &Value, body: &Value) {
        let Some(url) = config["url"].as_str() else {
            return;
        };
        let mut delay = FIRST_RETRY;
        for attempt in 1..=ATTEMPTS {
            let request = match self.inner.client.request(reqwest::Method::POST, url) {
                Ok(request) => request,
                Err(error) => {
                    tracing::warn!("task {task_id}: push notification to {url} refused: {error}");
                    return;
                }
            };
            let mut request = request.json(body).timeout(Duration::from_secs(10));
            if let Some(token) = config["token"].as_str().filter(|t| !t.is_empty()) {
                request = request.header("X-A2A-Notification-Token", token);
            }
            let auth = &config["authentication"];
            if let Some(credentials) = auth["credentials"].as_str() {
                let scheme = auth["scheme"]
                    .as_str()
                    .or_else(|| auth["schemes"][0].as_str())
                    .unwrap_or("Bearer");
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{scheme} {credentials}"),
                );
            }
            let retry = match self.inner.client.send(request).await {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => {
                    let status = response.status();
                    let retryable = status.is_server_error() || status.as_u16() == 429;
                    tracing::debug!("task {task_id}: push notification to {url}: HTTP {status}");
                    retryable
                }
                Err(error) => {
                    tracing::debug!("task {task_id}: push notification to {url}: {error}");
                    !matches!(error, portico_net::NetError::Blocked(_))
                }
            };
            if !retry || attempt == ATTEMPTS {
                tracing::warn!(
                    "task {task_id}: push notification to {url} failed after {attempt} attempt(s)"
                );
                return;
            }
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
}

/// A push config as a client sent it, normalised to the 1.0 fields (plus the version it came in).
pub fn normalise_config(
    task_id: &str,
    config: &Value,
    version: Version,
) -> Result<Value, A2aError> {
    let url = config["url"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| A2aError::InvalidParams("push notification config needs `url`".into()))?;
    let id = config["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    let mut normalised =
        json!({"id": id, "taskId": task_id, "url": url, "portico_version": version.label()});
    if let Some(token) = config["token"].as_str() {
        normalised["token"] = json!(token);
    }
    let auth = &config["authentication"];
    if auth.is_object() {
        let scheme = auth["scheme"]
            .as_str()
            .or_else(|| auth["schemes"][0].as_str())
            .unwrap_or("Bearer");
        normalised["authentication"] =
            json!({"scheme": scheme, "credentials": auth["credentials"]});
    }
    Ok(normalised)
}

/// A stored config as `version` shows it (credentials are the client's own; they are returned).
pub fn config_view(stored: &Value, version: Version) -> Value {
    let mut config = stored.clone();
    if let Some(map) = config.as_object_mut() {
        map.remove("portico_version");
    }
    match version {
        Version::V1 => config,
        Version::V03 => {
            let task_id = config["taskId"].clone();
            let mut inner = config.clone();
            if let Some(map) = inner.as_object_mut() {
                map.remove("taskId");
                if let Some(auth) = map.get("authentication").cloned() {
                    map.insert(
                        "authentication".into(),
                        json!({"schemes": [auth["scheme"]], "credentials": auth["credentials"]}),
                    );
                }
            }
            json!({"taskId": task_id, "pushNotificationConfig": inner})
        }
    }
}
