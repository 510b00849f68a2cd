//! Sending: a message to a remote agent, streamed or polled until the task settles or the
//! deadline passes (then canceled), and what the caller hears on the way.

use std::time::Duration;

use portico_core::retry::RetryPolicy;
use portico_net::sse::{ResponseEvents, SseError, SseLimits};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::protocol::v1;
use crate::wire::{self, Version, is_interrupted};

use super::*;

/// Something that happened while the agent worked, in the order it was seen.
#[derive(Debug, Clone, PartialEq)]
pub enum A2aEvent {
    /// The task's status changed; `state` is the 1.0 name (`TASK_STATE_WORKING`), `text` the status
    /// message's text.
    Status {
        task_id: Option<String>,
        state: String,
        text: Option<String>,
    },
    /// Artifact text: a whole artifact, or the next chunk of one (`append`) being streamed.
    Artifact {
        task_id: Option<String>,
        artifact_id: String,
        name: String,
        text: String,
        append: bool,
        last_chunk: bool,
    },
    /// A message that is the agent's whole answer (no task was made).
    Message { text: String },
}

/// One message to send.
#[derive(Debug, Clone, Default)]
pub struct SendRequest {
    pub text: String,
    /// Continue this task (one waiting for input).
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// Overrides the client's timeout for this send.
    pub timeout: Option<Duration>,
    /// The turn this message is sent for had read untrusted output from this tool. It travels in the
    /// message's metadata (`portico/untrusted`), so a Portico at the other end starts its run tainted.
    pub untrusted: Option<String>,
}

impl SendRequest {
    pub fn new(text: impl Into<String>) -> Self {
        SendRequest {
            text: text.into(),
            ..SendRequest::default()
        }
    }
}

/// How a send ended: at a terminal or interrupted state, or with a message.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// The task in the 1.0 form (for a bare message answer, a task-shaped wrapper without an id).
    pub task: Value,
    /// `TASK_STATE_*`.
    pub state: String,
    /// The answer: the artifacts' text, else the status message's (for input-required, the
    /// question; for failed, the reason).
    pub text: String,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
}

impl SendOutcome {
    /// `completed`, `input-required`, ...
    pub fn state_label(&self) -> &'static str {
        wire::state_to_v03(&self.state)
    }

    /// Waiting for the caller: more input, or authorization.
    pub fn is_interrupted(&self) -> bool {
        is_interrupted(&self.state)
    }

    /// Failed or rejected.
    pub fn is_failure(&self) -> bool {
        matches!(
            self.state.as_str(),
            "TASK_STATE_FAILED" | "TASK_STATE_REJECTED"
        )
    }
}

impl A2aClient {
    /// Sends a message and follows the task to a terminal or interrupted state, reporting what
    /// happens on the way through `on_event`. On timeout the task is canceled.
    pub async fn send(
        &self,
        card: &AgentCard,
        request: &SendRequest,
        on_event: &(dyn Fn(A2aEvent) + Send + Sync),
    ) -> Result<SendOutcome, ClientError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let message = v1::Message {
            message_id: message_id(),
            context_id: request.context_id.clone(),
            task_id: request.task_id.clone(),
            role: v1::Role::User,
            parts: vec![v1::Part::text(request.text.clone())],
            metadata: request.untrusted.as_ref().map(|tool| {
                v1::Struct::from_iter([(
                    wire::UNTRUSTED_METADATA.to_string(),
                    Value::from(tool.as_str()),
                )])
            }),
            ..v1::Message::default()
        };
        let message = serde_json::to_value(&message).unwrap_or_default();
        let mut tracker = Tracker::new(on_event);
        tracker.continuing = request.task_id.is_some();
        let run = self.run(card, &message, &mut tracker);
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(())) => Ok(tracker.outcome()),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                let task_id = tracker.task_id();
                let cancel = match &task_id {
                    Some(id) => Some(
                        match tokio::time::timeout(
                            CANCEL_TIMEOUT,
                            self.cancel_task(&card.endpoint, id),
                        )
                        .await
                        {
                            Ok(Ok(_)) => Ok(()),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(_) => {
                                Err(format!("no answer within {}s", CANCEL_TIMEOUT.as_secs()))
                            }
                        },
                    ),
                    None => None,
                };
                Err(ClientError::Timeout {
                    url: card.endpoint.url.clone(),
                    limit: timeout,
                    task_id,
                    cancel,
                })
            }
        }
    }

    pub(crate) async fn run(
        &self,
        card: &AgentCard,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let endpoint = &card.endpoint;
        if card.streaming {
            match self.stream(endpoint, message, tracker).await {
                Ok(()) => {}
                Err(error) if tracker.is_empty() && streaming_unsupported(&error) => {
                    tracing::debug!(
                        "{}: streaming refused ({error}); sending without it",
                        endpoint.url
                    );
                    self.send_once(endpoint, message, tracker).await?;
                }
                Err(error) => return Err(error),
            }
        } else {
            self.send_once(endpoint, message, tracker).await?;
        }
        if tracker.settled() {
            return Ok(());
        }
        // Not streamed, or the stream ended early: poll.
        let Some(task_id) = tracker.task_id() else {
            return Err(ClientError::Protocol {
                url: endpoint.url.clone(),
                reason: "the answer carried neither a task nor a message".into(),
            });
        };
        self.poll(endpoint, &task_id, tracker).await
    }

    /// SendMessage, answering at once; the first state of the task.
    pub(crate) async fn send_once(
        &self,
        endpoint: &Endpoint,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let method = Self::method(endpoint.version, "SendMessage", "message/send");
        let configuration = match endpoint.version {
            Version::V1 => json!({"returnImmediately": true}),
            Version::V03 => json!({"blocking": false}),
        };
        let params = json!({
            "message": Self::wire_message(endpoint, message),
            "configuration": configuration,
        });
        let result = match endpoint.binding {
            Binding::JsonRpc => self.rpc(endpoint, method, params).await?,
            Binding::HttpJson => {
                self.rest(
                    endpoint,
                    Method::POST,
                    "/message:send",
                    method,
                    Some(&params),
                )
                .await?
            }
        };
        let event = normalize_event(&result).ok_or_else(|| ClientError::Protocol {
            url: endpoint.url.clone(),
            reason: format!(
                "the {method} answer is neither a task nor a message: {}",
                snippet(result.to_string().as_bytes())
            ),
        })?;
        tracker.absorb(&event);
        // Answering at once, a server may still show the continued task as it was: poll for what
        // our message did.
        if tracker.continuing && tracker.state().is_some_and(is_interrupted) {
            tracker.stale = true;
        }
        Ok(())
    }

    /// GetTask with capped exponential backoff until the task settles. A failed poll (the
    /// connection dropped, or the agent answered 429 or 503) is retried after at least the
    /// agent's `Retry-After`, up to [`POLL_RETRIES`] in a row; an A2A error ends it. The send's
    /// deadline bounds it all.
    pub(crate) async fn poll(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let schedule = RetryPolicy::unlimited(self.poll_first, self.poll_max);
        let failed = RetryPolicy {
            max_retries: POLL_RETRIES,
            base: self.poll_first,
            cap: POLL_RETRY_CAP,
        };
        let mut attempt = 0u32;
        let mut failures = 0u32;
        let mut wait = schedule.backoff(attempt);
        loop {
            tokio::time::sleep(wait).await;
            attempt = attempt.saturating_add(1);
            match self.get_task(endpoint, task_id).await {
                Ok(task) => {
                    failures = 0;
                    tracker.absorb(&json!({"task": task}));
                    if tracker.settled() {
                        return Ok(());
                    }
                    wait = schedule.backoff(attempt);
                }
                Err(error) if error.is_transient() && failed.allows_retry(failures) => {
                    wait = failed.delay(failures, error.retry_after());
                    failures += 1;
                    tracing::debug!(
                        "polling task {task_id}: {error}; trying again in {wait:?} ({failures} of {POLL_RETRIES})"
                    );
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// SendStreamingMessage: reads events until the task settles or the stream ends.
    pub(crate) async fn stream(
        &self,
        endpoint: &Endpoint,
        message: &Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let method = Self::method(endpoint.version, "SendStreamingMessage", "message/stream");
        let wire_message = Self::wire_message(endpoint, message);
        let (url, body) = match endpoint.binding {
            Binding::JsonRpc => {
                let mut params = json!({"message": wire_message});
                if let Some(tenant) = &endpoint.tenant {
                    params["tenant"] = json!(tenant);
                }
                (
                    endpoint.url.clone(),
                    json!({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}),
                )
            }
            Binding::HttpJson => (
                Self::rest_url(endpoint, "/message:stream"),
                json!({"message": wire_message}),
            ),
        };
        let response = self
            .request(
                Method::POST,
                &url,
                endpoint.version,
                Some(&body),
                "text/event-stream",
            )
            .await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        if !is_event_stream(&response) {
            // One JSON answer instead of a stream: an error, or a single result.
            let bytes = read_body(&url, response).await?;
            let value = serde_json::from_slice::<Value>(&bytes).ok();
            return match value {
                Some(value)
                    if endpoint.binding == Binding::JsonRpc
                        && (value.get("error").is_some() || value.get("result").is_some()) =>
                {
                    self.stream_event(endpoint, &url, method, value, tracker)
                }
                Some(value) if status.is_success() => {
                    self.stream_event(endpoint, &url, method, value, tracker)
                }
                _ if !status.is_success() => {
                    Err(rest_error(&url, method, status, retry_after, &bytes))
                }
                _ => Err(ClientError::Protocol {
                    url: url.clone(),
                    reason: format!(
                        "the {method} answer is neither an event stream nor JSON: {}",
                        snippet(&bytes)
                    ),
                }),
            };
        }
        if !status.is_success() {
            return Err(ClientError::Status {
                url,
                status: status.as_u16(),
                detail: String::new(),
                retry_after,
            });
        }
        let mut events = ResponseEvents::from_response(
            response,
            SseLimits::with_max_event_bytes(MAX_BODY_BYTES).dispatching_unterminated(),
        );
        while let Some(event) = events.next().await {
            let data = match event {
                Ok(event) => event.data,
                Err(SseError::Body(error)) => return Err(net_error(&url, error.into())),
                Err(too_large) => {
                    return Err(ClientError::Protocol {
                        url,
                        reason: too_large.to_string(),
                    });
                }
            };
            // Keep-alives and priming events carry no data.
            if data.trim().is_empty() {
                continue;
            }
            let value = match serde_json::from_str::<Value>(&data) {
                Ok(value) => value,
                // What a stream left unterminated at its end is read only if it is whole.
                Err(_) if events.body_ended() => break,
                Err(e) => {
                    return Err(ClientError::Protocol {
                        url: url.clone(),
                        reason: format!(
                            "a {method} event is not JSON ({e}): {}",
                            snippet(data.as_bytes())
                        ),
                    });
                }
            };
            self.stream_event(endpoint, &url, method, value, tracker)?;
            if tracker.settled() {
                return Ok(());
            }
        }
        Ok(())
    }

    pub(crate) fn stream_event(
        &self,
        endpoint: &Endpoint,
        url: &str,
        method: &str,
        value: Value,
        tracker: &mut Tracker<'_>,
    ) -> Result<(), ClientError> {
        let payload = match endpoint.binding {
            Binding::JsonRpc => rpc_payload(url, method, value, StatusCode::OK, None)?,
            Binding::HttpJson => {
                if let Some(error) = value.get("error").filter(|e| e.is_object()) {
                    return Err(ClientError::Remote {
                        url: url.to_string(),
                        operation: method.to_string(),
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    });
                }
                value
            }
        };
        match normalize_event(&payload) {
            Some(event) => tracker.absorb_streamed(&event),
            None => tracing::debug!(
                "{url}: skipping an event that is none of task, message, statusUpdate, artifactUpdate: {payload}"
            ),
        }
        Ok(())
    }
}
