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

use portico_a2a_client::protocol::{v1, v03};
use portico_core::retry::RetryPolicy;
use portico_net::SafeClient;
use portico_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::A2aError;
use crate::tasks::task_of;
use crate::wire::Version;

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
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<v1::StreamResponse>>>,
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
            .map_err(|e| A2aError::InvalidParams(format!("push notification url `{url}`: {}", e)))
    }

    /// Queues a status update for the task's webhooks.
    pub fn notify(&self, task_id: &str, event: v1::StreamResponse) {
        let mut queues = self.inner.queues.lock().expect("push queues lock");
        let queue = queues.entry(task_id.to_string()).or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(self.clone().deliver_all(task_id.to_string(), receiver));
            sender
        });
        let _ = queue.send(event);
    }

    async fn deliver_all(
        self,
        task_id: String,
        mut events: mpsc::UnboundedReceiver<v1::StreamResponse>,
    ) {
        while let Some(event) = events.recv().await {
            let id = task_id.clone();
            let configs = self
                .inner
                .store
                .run("reading push notification configs", move |store| {
                    let configs = store.push_configs(&id)?;
                    let task = store.task(&id)?;
                    Ok::<_, portico_store::StoreError>((configs, task))
                })
                .await;
            let Ok((configs, task)) = configs else {
                tracing::warn!("task {task_id}: could not read its push notification configs");
                continue;
            };
            for (_, stored) in configs {
                let Ok(stored) = serde_json::from_value::<StoredPushConfig>(stored) else {
                    tracing::warn!(
                        "task {task_id}: skipping a push notification config that does not parse"
                    );
                    continue;
                };
                // A 0.3 webhook gets the whole task; a 1.0 one the event.
                let body = match (stored.version(), &task) {
                    (Version::V03, Some(task)) => {
                        serde_json::to_value(v03::Task::from(task_of(task, None)))
                    }
                    _ => serde_json::to_value(&event),
                };
                self.deliver(&task_id, &stored.config, &body.unwrap_or_default())
                    .await;
            }
            if event.state().is_some_and(|state| state.is_terminal()) {
                break;
            }
        }
        self.inner
            .queues
            .lock()
            .expect("push queues lock")
            .remove(&task_id);
    }

    async fn deliver(&self, task_id: &str, config: &v1::TaskPushNotificationConfig, body: &Value) {
        let url = config.url.as_str();
        let mut retries = 0u32;
        loop {
            let request = match self.inner.client.request(reqwest::Method::POST, url) {
                Ok(request) => request,
                Err(error) => {
                    tracing::warn!("task {task_id}: push notification not sent: {}", error);
                    return;
                }
            };
            let mut request = request.json(body).timeout(Duration::from_secs(10));
            if let Some(token) = config.token.as_deref().filter(|t| !t.is_empty()) {
                request = request.header("X-A2A-Notification-Token", token);
            }
            if let Some(auth) = &config.authentication
                && let Some(credentials) = &auth.credentials
            {
                let scheme = if auth.scheme.is_empty() {
                    "Bearer"
                } else {
                    &auth.scheme
                };
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{scheme} {credentials}"),
                );
            }
            let (retryable, hint, reason) = match self.inner.client.send(request).await {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => {
                    let status = response.status();
                    let retryable = status.is_server_error() || status.as_u16() == 429;
                    let reason = format!("the webhook answered HTTP {status}");
                    tracing::debug!("task {task_id}: push notification to {url}: {reason}");
                    (
                        retryable,
                        portico_net::retry_after(response.headers(), SystemTime::now()),
                        reason,
                    )
                }
                // A refusal by the SSRF rules is final: said once, at WARN, with the setting that
                // lifts it, since nothing else tells the operator why the webhook hears nothing.
                Err(error @ portico_net::NetError::Blocked(_)) => {
                    tracing::warn!("task {task_id}: push notification not sent: {}", error);
                    return;
                }
                Err(error) => {
                    let reason = portico_net::root_cause(&error);
                    tracing::debug!("task {task_id}: push notification to {url}: {reason}");
                    (true, None, reason)
                }
            };
            if !retryable || !RETRIES.allows_retry(retries) {
                tracing::warn!(
                    "task {task_id}: push notification to {url} failed after {} attempt(s): {reason}",
                    retries + 1
                );
                return;
            }
            tokio::time::sleep(RETRIES.delay(retries, hint)).await;
            retries += 1;
        }
    }
}

/// The network policy webhooks are POSTed under: public addresses only unless `allow_private`
/// (`[a2a] push_allow_private_network`), which a refusal names.
pub(crate) fn webhook_policy(allow_private: bool) -> portico_net::NetPolicy {
    portico_net::NetPolicy::private_network(allow_private).with_private_network_remedy(
        "; set push_allow_private_network = true in the config's [a2a] section to allow it",
    )
}

/// A push config as Portico keeps it: the 1.0 config with its task and id set, and the version
/// its client spoke (which shapes the webhook's body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPushConfig {
    #[serde(flatten)]
    pub config: v1::TaskPushNotificationConfig,
    pub portico_version: String,
}

impl StoredPushConfig {
    /// The config's id (set when it is registered).
    pub fn id(&self) -> &str {
        self.config.id.as_deref().unwrap_or_default()
    }

    pub fn version(&self) -> Version {
        match self.portico_version.as_str() {
            "0.3" => Version::V03,
            _ => Version::V1,
        }
    }

    /// The config as `version` shows it (credentials are the client's own; they are returned).
    pub fn view(&self, version: Version) -> Value {
        let shown = match version {
            Version::V1 => serde_json::to_value(&self.config),
            Version::V03 => {
                serde_json::to_value(v03::TaskPushNotificationConfig::from(self.config.clone()))
            }
        };
        shown.unwrap_or_default()
    }
}

/// A push config as a client sent it, with the task and an id (a fresh one if it has none).
pub fn normalise_config(
    task_id: &str,
    config: v1::TaskPushNotificationConfig,
    version: Version,
) -> Result<StoredPushConfig, A2aError> {
    if config.url.is_empty() {
        return Err(A2aError::InvalidParams(
            "push notification config needs `url`".into(),
        ));
    }
    let id = config
        .id
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    Ok(StoredPushConfig {
        config: v1::TaskPushNotificationConfig {
            tenant: None,
            id: Some(id),
            task_id: Some(task_id.to_string()),
            ..config
        },
        portico_version: version.label().to_string(),
    })
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
        let config = v1::TaskPushNotificationConfig {
            url,
            ..Default::default()
        };
        let (pusher, body) = (pusher(), serde_json::json!({}));
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
