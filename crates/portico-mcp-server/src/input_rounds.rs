//! Requests to 2026-07-28 clients, which cannot receive them mid-call: multi round-trip requests.
//!
//! From protocol 2026-07-28 on, a server may not send a client requests (sampling, elicitation, roots)
//! while it handles one of the client's calls. It answers the call with an `input_required` result that
//! lists what it needs and an opaque `requestState`; the client fulfils the requests and calls again
//! with the answers and the same `requestState`.
//!
//! Portico's work does not fit that shape by itself: an agent loop or a handshake-era upstream asks its
//! [`Caller`] for a completion in the middle of running. So for such clients the call runs in a task of
//! its own, with an [`InputRoundsCaller`] that turns each request into an event. The handler answers the
//! client with whichever comes first: the call's result, or `input_required` for the requests pending.
//! In the second case the running call is parked under a random handle (the `requestState`, which
//! carries no data and so need not be trusted); the client's retry finds it, hands each answer to the
//! request waiting for it, and the handler waits again. A parked call nobody resumes is dropped after
//! [`PARKED_FOR`], which fails its pending requests and so ends it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portico_core::JsonObject;
use portico_core::relay::{BoxFuture, Caller, RelayError, methods};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, InputRequest, InputRequiredResult, InputResponses};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// How long a parked call waits for the client to come back with answers.
pub const PARKED_FOR: Duration = Duration::from_secs(300);

type Answer = oneshot::Sender<Result<JsonObject, RelayError>>;

/// What a running call reports to the handler.
pub(crate) enum CallEvent {
    /// The call needs the client to answer a request.
    Input {
        method: String,
        params: JsonObject,
        answer: Answer,
    },
    Done(Result<CallToolResponse, McpError>),
}

/// A call waiting for its client's answers.
struct Parked {
    tool: String,
    events: mpsc::UnboundedReceiver<CallEvent>,
    pending: BTreeMap<String, Answer>,
    next_key: u64,
    until: Instant,
}

/// Calls parked between rounds, shared by every session of a server.
#[derive(Default, Clone)]
pub(crate) struct ParkedCalls {
    calls: Arc<Mutex<HashMap<String, Parked>>>,
}

impl ParkedCalls {
    /// Starts the rounds for a new call: `events` is the receiving end of the call's
    /// [`InputRoundsCaller`] and of its completion.
    pub(crate) async fn first_round(
        &self,
        tool: &str,
        events: mpsc::UnboundedReceiver<CallEvent>,
    ) -> Result<CallToolResponse, McpError> {
        let parked = Parked {
            tool: tool.to_string(),
            events,
            pending: BTreeMap::new(),
            next_key: 0,
            until: Instant::now() + PARKED_FOR,
        };
        self.drive(parked).await
    }

    /// Resumes a parked call with the client's answers.
    pub(crate) async fn next_round(
        &self,
        tool: &str,
        request_state: &str,
        responses: Option<InputResponses>,
    ) -> Result<CallToolResponse, McpError> {
        let parked = self
            .calls
            .lock()
            .expect("parked calls lock")
            .remove(request_state);
        let Some(mut parked) = parked else {
            return Err(McpError::invalid_params(
                "requestState does not name a call waiting for input (it finished, expired after 5 minutes, or was already resumed); call the tool again without it",
                None,
            ));
        };
        if parked.tool != tool {
            let message = format!(
                "requestState belongs to a call of `{}`, not `{tool}`",
                parked.tool
            );
            // Put it back: the right retry may still come.
            self.calls
                .lock()
                .expect("parked calls lock")
                .insert(request_state.to_string(), parked);
            return Err(McpError::invalid_params(message, None));
        }
        let mut responses = responses.unwrap_or_default();
        for (key, answer) in std::mem::take(&mut parked.pending) {
            let reply = match responses.remove(&key) {
                Some(Value::Object(result)) => Ok(result),
                Some(other) => Err(RelayError {
                    code: -32602,
                    message: format!(
                        "the client's answer to input request `{key}` is not an object: {other}"
                    ),
                }),
                None => Err(RelayError {
                    code: -32602,
                    message: format!("the client retried without answering input request `{key}`"),
                }),
            };
            let _ = answer.send(reply);
        }
        parked.until = Instant::now() + PARKED_FOR;
        self.drive(parked).await
    }

    /// Waits for the call to finish or to need input; in the second case parks it and answers
    /// `input_required` with every request pending.
    async fn drive(&self, mut parked: Parked) -> Result<CallToolResponse, McpError> {
        let mut requests = BTreeMap::new();
        let first = parked.events.recv().await;
        let mut next = first;
        loop {
            match next {
                None => {
                    return Err(McpError::internal_error(
                        "the call ended without a result",
                        None,
                    ));
                }
                Some(CallEvent::Done(result)) => return result,
                Some(CallEvent::Input {
                    method,
                    params,
                    answer,
                }) => {
                    parked.next_key += 1;
                    let key = format!("portico-{}", parked.next_key);
                    match serde_json::from_value::<InputRequest>(
                        json!({"method": method, "params": params}),
                    ) {
                        Ok(request) => {
                            requests.insert(key.clone(), request);
                            parked.pending.insert(key, answer);
                        }
                        Err(e) => {
                            let _ = answer.send(Err(RelayError {
                                code: -32602,
                                message: format!("`{method}` cannot be put to the client: {e}"),
                            }));
                        }
                    }
                }
            }
            // Requests made together (parallel tool calls) go out in one round.
            match parked.events.try_recv() {
                Ok(event) => next = Some(event),
                Err(_) if requests.is_empty() => next = parked.events.recv().await,
                Err(_) => break,
            }
        }
        let state = random_handle();
        let result = InputRequiredResult::new(Some(requests), Some(state.clone()));
        let mut calls = self.calls.lock().expect("parked calls lock");
        let now = Instant::now();
        // Dropping an expired call fails its pending requests, which ends it.
        calls.retain(|_, p| p.until > now);
        calls.insert(state, parked);
        Ok(result.into())
    }
}

fn random_handle() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The client of a 2026-07-28 call as the rest of Portico sees it: requests become input rounds;
/// notifications still go straight to the client.
pub(crate) struct InputRoundsCaller {
    pub(crate) inner: Arc<dyn Caller>,
    pub(crate) events: mpsc::UnboundedSender<CallEvent>,
}

impl Caller for InputRoundsCaller {
    fn accepts(&self, method: &str) -> bool {
        self.inner.accepts(method)
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        Box::pin(async move {
            if !matches!(
                method,
                methods::SAMPLING | methods::ELICITATION | methods::ROOTS
            ) {
                return Err(RelayError {
                    code: -32601,
                    message: format!("Portico does not relay `{method}` to clients"),
                });
            }
            let (answer, reply) = oneshot::channel();
            self.events
                .send(CallEvent::Input {
                    method: method.to_string(),
                    params,
                    answer,
                })
                .map_err(|_| gone())?;
            reply.await.map_err(|_| gone())?
        })
    }

    fn notify<'a>(&'a self, method: &'a str, params: JsonObject) -> BoxFuture<'a, ()> {
        self.inner.notify(method, params)
    }
}

fn gone() -> RelayError {
    RelayError {
        code: -32603,
        message: "the client did not come back with an answer to Portico's input request (the call was abandoned or expired)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    struct Silent;
    impl Caller for Silent {
        fn accepts(&self, _: &str) -> bool {
            true
        }
        fn request<'a>(
            &'a self,
            _: &'a str,
            _: JsonObject,
        ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
            Box::pin(async { unreachable!("input rounds never reach the inner caller's requests") })
        }
        fn notify<'a>(&'a self, _: &'a str, _: JsonObject) -> BoxFuture<'a, ()> {
            Box::pin(async {})
        }
    }

    fn sampling_params(text: &str) -> JsonObject {
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 10})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[tokio::test]
    async fn a_call_that_asks_twice_takes_two_rounds_and_gets_each_answer() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::unbounded_channel();
        let caller = InputRoundsCaller {
            inner: Arc::new(Silent),
            events: events.clone(),
        };
        let work = tokio::spawn(async move {
            let first = caller
                .request(methods::SAMPLING, sampling_params("one"))
                .await
                .unwrap();
            let second = caller
                .request(methods::SAMPLING, sampling_params("two"))
                .await
                .unwrap();
            let text = format!("{} {}", first["n"], second["n"]);
            let _ = events.send(CallEvent::Done(Ok(CallToolResult::success(vec![
                rmcp::model::ContentBlock::text(text),
            ])
            .into())));
        });

        let round = |response: CallToolResponse| match response {
            CallToolResponse::InputRequired(result) => {
                let requests = result.input_requests.unwrap();
                assert_eq!(requests.len(), 1);
                let (key, request) = requests.into_iter().next().unwrap();
                let request = serde_json::to_value(request).unwrap();
                assert_eq!(request["method"], "sampling/createMessage");
                (key, request, result.request_state.unwrap())
            }
            other => panic!("expected input_required, got {other:?}"),
        };
        let (key, request, state) = round(parked.first_round("t", receiver).await.unwrap());
        assert_eq!(request["params"]["messages"][0]["content"]["text"], "one");
        assert_eq!(state.len(), 32);

        // The wrong tool, or an unknown handle, is refused and leaves the call parked.
        let wrong = parked.next_round("other", &state, None).await.unwrap_err();
        assert!(
            wrong.message.contains("belongs to a call of `t`"),
            "{wrong:?}"
        );
        let unknown = parked.next_round("t", "nope", None).await.unwrap_err();
        assert!(
            unknown
                .message
                .contains("does not name a call waiting for input")
        );

        let answers: InputResponses = [(key, json!({"n": 1}))].into_iter().collect();
        let (key, request, state_2) =
            round(parked.next_round("t", &state, Some(answers)).await.unwrap());
        assert_eq!(request["params"]["messages"][0]["content"]["text"], "two");
        assert_ne!(state, state_2, "each round gets a fresh handle");
        assert!(
            parked.next_round("t", &state, None).await.is_err(),
            "a handle is used once"
        );

        let answers: InputResponses = [(key, json!({"n": 2}))].into_iter().collect();
        let CallToolResponse::Complete(done) = parked
            .next_round("t", &state_2, Some(answers))
            .await
            .unwrap()
        else {
            panic!("expected the result");
        };
        assert_eq!(
            serde_json::to_value(&done.content).unwrap()[0]["text"],
            "1 2"
        );
        work.await.unwrap();
    }

    #[tokio::test]
    async fn a_request_that_is_not_valid_mcp_fails_at_once() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::unbounded_channel();
        let caller = InputRoundsCaller {
            inner: Arc::new(Silent),
            events: events.clone(),
        };
        let work = tokio::spawn(async move {
            let error = caller
                .request(methods::ELICITATION, JsonObject::new())
                .await;
            let message = match error {
                Err(e) => e.message,
                Ok(_) => "answered".into(),
            };
            let _ = events.send(CallEvent::Done(Ok(CallToolResult::error(vec![
                rmcp::model::ContentBlock::text(message),
            ])
            .into())));
        });
        // An elicitation without valid params cannot be put to the client: it fails at once.
        let CallToolResponse::Complete(done) = parked.first_round("t", receiver).await.unwrap()
        else {
            panic!("expected the result");
        };
        let text = serde_json::to_value(&done.content).unwrap()[0]["text"].clone();
        assert!(
            text.as_str()
                .unwrap()
                .contains("cannot be put to the client"),
            "{text}"
        );
        work.await.unwrap();
    }

    #[tokio::test]
    async fn a_retry_without_the_answer_fails_the_request_it_left_out() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::unbounded_channel();
        let caller = InputRoundsCaller {
            inner: Arc::new(Silent),
            events: events.clone(),
        };
        let work = tokio::spawn(async move {
            let answer = caller
                .request(methods::SAMPLING, sampling_params("q"))
                .await;
            let message = answer
                .map(|_| "answered".to_string())
                .unwrap_or_else(|e| e.message);
            let _ = events.send(CallEvent::Done(Ok(CallToolResult::error(vec![
                rmcp::model::ContentBlock::text(message),
            ])
            .into())));
        });
        let CallToolResponse::InputRequired(round) =
            parked.first_round("t", receiver).await.unwrap()
        else {
            panic!("expected input_required");
        };
        let state = round.request_state.unwrap();
        let CallToolResponse::Complete(done) = parked
            .next_round("t", &state, Some(InputResponses::new()))
            .await
            .unwrap()
        else {
            panic!("expected the result");
        };
        let text = serde_json::to_value(&done.content).unwrap()[0]["text"].clone();
        assert_eq!(
            text,
            "the client retried without answering input request `portico-1`"
        );
        work.await.unwrap();
    }
}
