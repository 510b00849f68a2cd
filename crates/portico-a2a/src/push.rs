//! Push notifications: a task's status changes POSTed to the webhooks its client registered.
//!
//! Webhook URLs are checked by the SSRF-safe client when they are registered and again on every
//! delivery (DNS may change). Each delivery carries the client's token (`X-A2A-Notification-Token`)
//! and, when configured, its credentials (`Authorization: {scheme} {credentials}`). Deliveries of one
//! task go out in order, each retried on connection failures, 429 and 5xx with jittered backoff, or
//! after the webhook's `Retry-After` when it sends one (capped); a webhook that keeps failing is
//! logged and skipped, never allowed to hold up the task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use portico_core::retry::RetryPolicy;
use portico_net::SafeClient;
use portico_store::Store;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::A2aError;
use crate::tasks::task_json;
use crate::wire::{self, Version, is_terminal};

/// Three retries from 0.25 s; a webhook's `Retry-After` is honoured up to 30 s, so one slow webhook
/// cannot hold a task's later notifications for long.
const RETRIES: RetryPolicy = RetryPolicy {
    max_retries: 3,
    base: Duration::from_millis(250),
    cap: Duration::from_secs(30),
};

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
        let mut retries = 0u32;
        loop {
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
            let (retryable, hint) = match self.inner.client.send(request).await {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => {
                    let status = response.status();
                    let retryable = status.is_server_error() || status.as_u16() == 429;
                    tracing::debug!("task {task_id}: push notification to {url}: HTTP {status}");
                    (
                        retryable,
                        portico_net::retry_after(response.headers(), SystemTime::now()),
                    )
                }
                Err(error) => {
                    tracing::debug!("task {task_id}: push notification to {url}: {error}");
                    (!matches!(error, portico_net::NetError::Blocked(_)), None)
                }
            };
            if !retryable || !RETRIES.allows_retry(retries) {
                tracing::warn!(
                    "task {task_id}: push notification to {url} failed after {} attempt(s)",
                    retries + 1
                );
                return;
            }
            tokio::time::sleep(RETRIES.delay(retries, hint)).await;
            retries += 1;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use axum::Router;
    use axum::extract::State;
    use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
    use axum::routing::post;
    use portico_net::NetPolicy;

    use super::*;

    /// A webhook that refuses its first delivery with `status` and `Retry-After: retry_after`,
    /// recording when each delivery arrived.
    async fn refusing_once(
        status: StatusCode,
        retry_after: String,
    ) -> (String, Arc<Mutex<Vec<Instant>>>) {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let hook = {
            let arrivals = arrivals.clone();
            move |State(()): State<()>| {
                let arrivals = arrivals.clone();
                let retry_after = retry_after.clone();
                async move {
                    let mut arrivals = arrivals.lock().unwrap();
                    arrivals.push(Instant::now());
                    if arrivals.len() > 1 {
                        return (StatusCode::OK, HeaderMap::new());
                    }
                    let mut headers = HeaderMap::new();
                    headers.insert(
                        header::RETRY_AFTER,
                        HeaderValue::from_str(&retry_after).unwrap(),
                    );
                    (status, headers)
                }
            }
        };
        let app = Router::new().route("/hook", post(hook)).with_state(());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, arrivals)
    }

    fn pusher() -> Pusher {
        let client = SafeClient::new(NetPolicy::allow_private_network()).unwrap();
        Pusher::new(client, Store::open_in_memory().unwrap())
    }

    async fn gap_before_the_retry(status: StatusCode, retry_after: String) -> Duration {
        let (url, arrivals) = refusing_once(status, retry_after).await;
        let (pusher, config, body) = (pusher(), json!({"url": url}), json!({}));
        let delivery = pusher.deliver("t", &config, &body);
        tokio::time::timeout(Duration::from_secs(20), delivery)
            .await
            .expect("delivery (test guard)");
        let arrivals = arrivals.lock().unwrap();
        assert_eq!(arrivals.len(), 2, "one refusal, then the retry");
        arrivals[1] - arrivals[0]
    }

    #[tokio::test]
    async fn a_503_retry_after_in_seconds_is_honoured() {
        // Backoff alone retries within 0.25 s.
        let gap = gap_before_the_retry(StatusCode::SERVICE_UNAVAILABLE, "2".into()).await;
        assert!(gap >= Duration::from_millis(1950), "{gap:?}");
    }

    #[tokio::test]
    async fn a_429_retry_after_as_an_http_date_is_honoured() {
        // HTTP-dates have whole seconds, so "in 3 s" is 2 to 3 s from when the test made it, and
        // the first delivery took a moment to arrive after that.
        let at = SystemTime::now() + Duration::from_secs(3);
        let gap =
            gap_before_the_retry(StatusCode::TOO_MANY_REQUESTS, httpdate::fmt_http_date(at)).await;
        assert!(gap >= Duration::from_millis(1500), "{gap:?}");
    }
}
