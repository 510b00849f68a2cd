//! Requests to 2026-07-28 clients, which cannot receive them mid-call: multi round-trip requests.
//!
//! From protocol 2026-07-28 on, a server may not send a client requests (sampling, elicitation, roots)
//! while it handles one of the client's calls. It answers the call with an `input_required` result that
//! lists what it needs and an opaque `requestState`; the client fulfils the requests and calls again
//! with the answers and the same `requestState`.
//!
//! Portico's work does not fit that shape by itself: an agent loop or a handshake-era upstream asks its
//! [`Caller`] for a completion in the middle of running. So for such clients the call runs with an
//! [`InputRoundsCaller`] that turns each request into an event, and the handler answers the client with
//! whichever comes first: the call's result, or `input_required` for the requests pending. The call
//! runs in the handler's own task until it asks (most never do, and so cost no task and no channel
//! hand-off); from its first request on it runs in a task of its own, and the running call is parked under a random handle (the `requestState`, which
//! carries no data and so need not be trusted, and is bound to the client identity that started the
//! call: another client's retry with it finds nothing; and to the call's tool and arguments: a retry
//! that differs is refused); the client's retry finds it, hands each answer to the
//! request waiting for it, and the handler waits again. A parked call nobody resumes is dropped after
//! [`PARKED_FOR`], which fails its pending requests and so ends it.
//!
//! Every such call holds a place from its start until it ends (finished, expired, or abandoned by a
//! client that hung up mid-round): at most [`MAX_LIVE_CALLS`] in all and [`MAX_LIVE_CALLS_PER_CLIENT`]
//! per client identity, checked before the call is started. One round carries at most
//! [`MAX_REQUESTS_PER_ROUND`] requests; that is also the capacity of the call's event channel, so a
//! call that asks for more waits for the next round.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_core::JsonObject;
use portico_core::relay::{
    BoxFuture, Caller, RelayError, RelayNotification, RelayRequest, SamplingAnswer, SamplingError,
    SamplingRequest,
};
use portico_mcp::{request_method, sample_through};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, InputRequest, InputRequiredResult, InputResponses};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

/// How long a parked call waits for the client to come back with answers.
pub const PARKED_FOR: Duration = Duration::from_secs(300);
/// Calls taking input rounds, running or parked, over every client.
pub const MAX_LIVE_CALLS: usize = 1024;
/// Calls taking input rounds, running or parked, of one client identity.
pub const MAX_LIVE_CALLS_PER_CLIENT: usize = 64;
/// Input requests put to the client in one round, and the capacity of a call's event channel.
pub const MAX_REQUESTS_PER_ROUND: usize = 16;

/// Who a call comes from, as the door established it (the daemon puts it in the HTTP request's
/// extensions); calls without one (stdio) share one place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientKey(pub String);

type Answer = oneshot::Sender<Result<JsonObject, RelayError>>;

/// What a running call reports to the handler.
pub(crate) enum CallEvent {
    /// The call needs the client to answer a request.
    Input {
        request: RelayRequest,
        params: JsonObject,
        /// The name the asker gave the input, kept as the round's key when it is free.
        key: Option<String>,
        answer: Answer,
    },
    Done(Result<CallToolResponse, McpError>),
}

/// What a parked call was started as: its tool and a digest of its arguments. A retry carrying
/// the call's `requestState` must be the same call, or the answer to one request would be given
/// as the answer to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallBinding {
    tool: String,
    /// Of the arguments serialised with sorted keys; no arguments count as `{}`.
    arguments: String,
}

impl CallBinding {
    pub(crate) fn new(tool: &str, arguments: Option<&JsonObject>) -> Self {
        let arguments = arguments.cloned().unwrap_or_default();
        CallBinding {
            tool: tool.to_string(),
            arguments: portico_pipeline::arguments_digest(&Value::Object(arguments)),
        }
    }
}

/// Refuses `inputResponses` whose answers are not objects (the results of the requests they
/// answer), before any of them reaches a call or an upstream.
pub(crate) fn check_input_responses(responses: &InputResponses) -> Result<(), McpError> {
    for (key, answer) in responses {
        if !answer.is_object() {
            let kind = match answer {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            };
            return Err(McpError::invalid_params(
                format!(
                    "inputResponses `{key}` is {kind}, not the result object of the input request it answers; send each answer as an object under its request's key"
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// A call waiting for its client's answers.
struct Parked {
    binding: CallBinding,
    events: mpsc::Receiver<CallEvent>,
    pending: BTreeMap<String, Answer>,
    next_key: u64,
    /// Removes the call from the parked map once [`PARKED_FOR`] has passed; aborted when resumed.
    expiry: Option<AbortOnDrop>,
    /// Cancels the running call when the call is dropped: expired, or abandoned mid-round.
    _cancel: DropGuard,
    /// Also says whose call it is: only that client identity may resume it.
    place: Place,
}

struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Calls taking input rounds, shared by every session of a server: the parked ones, and the places
/// of all live ones.
#[derive(Clone)]
pub(crate) struct ParkedCalls {
    calls: Arc<Mutex<HashMap<String, Parked>>>,
    places: Arc<Mutex<Places>>,
}

impl Default for ParkedCalls {
    fn default() -> Self {
        ParkedCalls::with_limits(MAX_LIVE_CALLS, MAX_LIVE_CALLS_PER_CLIENT)
    }
}

struct Places {
    total: usize,
    /// Only clients with a live call have an entry, so the map is bounded by `max_total`.
    per_client: HashMap<String, usize>,
    max_total: usize,
    max_per_client: usize,
}

/// One live call's place; given back when dropped.
pub(crate) struct Place {
    places: Arc<Mutex<Places>>,
    client: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut places = self.places.lock().expect("places lock");
        places.total -= 1;
        if let Some(count) = places.per_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                places.per_client.remove(&self.client);
            }
        }
    }
}

impl ParkedCalls {
    pub(crate) fn with_limits(max_total: usize, max_per_client: usize) -> Self {
        ParkedCalls {
            calls: Arc::default(),
            places: Arc::new(Mutex::new(Places {
                total: 0,
                per_client: HashMap::new(),
                max_total: max_total.max(1),
                max_per_client: max_per_client.max(1),
            })),
        }
    }

    /// Takes a place for a new call of `client`, before anything of the call exists.
    pub(crate) fn admit(&self, client: &str) -> Result<Place, McpError> {
        let mut places = self.places.lock().expect("places lock");
        let mine = places.per_client.get(client).copied().unwrap_or(0);
        if mine >= places.max_per_client {
            return Err(McpError::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "this client has {mine} tool calls running or waiting for its answers to input requests, the most one client may have; answer them (call again with their requestState) or let them expire ({} s) before starting more",
                    PARKED_FOR.as_secs()
                ),
                None,
            ));
        }
        if places.total >= places.max_total {
            return Err(McpError::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "Portico has {} tool calls running or waiting for their clients' answers to input requests, the most it keeps; retry once some have finished or expired",
                    places.total
                ),
                None,
            ));
        }
        places.total += 1;
        *places.per_client.entry(client.to_string()).or_insert(0) += 1;
        Ok(Place {
            places: self.places.clone(),
            client: client.to_string(),
        })
    }

    /// How many calls hold a place (running or parked), and how many are parked.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let places = self.places.lock().unwrap().total;
        (places, self.calls.lock().unwrap().len())
    }

    /// Starts the rounds for a call already running in a task of its own: `events` is the receiving
    /// end of the call's [`InputRoundsCaller`] and of its completion; `cancel` ends the running call
    /// when the call is dropped before it finished.
    #[cfg(test)]
    pub(crate) async fn first_round(
        &self,
        binding: &CallBinding,
        place: Place,
        events: mpsc::Receiver<CallEvent>,
        cancel: DropGuard,
    ) -> Result<CallToolResponse, McpError> {
        let parked = Parked {
            binding: binding.clone(),
            events,
            pending: BTreeMap::new(),
            next_key: 0,
            expiry: None,
            _cancel: cancel,
            place,
        };
        self.wait_and_drive(parked).await
    }

    /// Runs a new call in the caller's task until it finishes (most calls: no task of its own, no
    /// channel hand-off) or first asks for input; only then does it go on in a task of its own while
    /// its rounds begin. `events` is the sending end the call's [`InputRoundsCaller`] shares, kept to
    /// report the call's completion from that task.
    pub(crate) async fn run(
        &self,
        binding: &CallBinding,
        place: Place,
        mut call: BoxFuture<'static, Result<CallToolResponse, McpError>>,
        events: mpsc::Sender<CallEvent>,
        mut receiver: mpsc::Receiver<CallEvent>,
        cancel: CallCancel,
    ) -> Result<CallToolResponse, McpError> {
        let CallCancel { guard, client_gone } = cancel;
        let first = tokio::select! {
            biased;
            result = &mut call => return result,
            first = receiver.recv() => first,
            // The client cancelled or hung up before anything was asked of it: the call is
            // dropped, which cancels it upstream.
            () = client_gone.cancelled() => return Err(cancelled_by_the_client()),
        };
        tokio::spawn(async move {
            let result = call.await;
            let _ = events.send(CallEvent::Done(result)).await;
        });
        let parked = Parked {
            binding: binding.clone(),
            events: receiver,
            pending: BTreeMap::new(),
            next_key: 0,
            expiry: None,
            _cancel: guard,
            place,
        };
        self.drive(parked, first).await
    }

    /// Resumes a parked call of `client` (the identity [`Self::admit`] was given) with its answers.
    /// Another client's handle is answered as an unknown one, and the call stays parked for its own;
    /// a retry of another tool or with other arguments is refused, and the call stays parked too.
    pub(crate) async fn next_round(
        &self,
        binding: &CallBinding,
        request_state: &str,
        client: &str,
        responses: Option<InputResponses>,
    ) -> Result<CallToolResponse, McpError> {
        let parked = {
            let mut calls = self.calls.lock().expect("parked calls lock");
            match calls.get(request_state) {
                Some(parked) if parked.place.client == client => calls.remove(request_state),
                _ => None,
            }
        };
        let Some(mut parked) = parked else {
            return Err(McpError::invalid_params(
                "requestState does not name a call waiting for input (it finished, expired after 5 minutes, or was already resumed); call the tool again without it",
                None,
            ));
        };
        if parked.binding != *binding {
            let message = if parked.binding.tool != binding.tool {
                format!(
                    "requestState belongs to a call of `{}`, not `{}`",
                    parked.binding.tool, binding.tool
                )
            } else {
                format!(
                    "requestState belongs to a call of `{}` with other arguments; a retry carries the arguments of the call it continues, unchanged",
                    binding.tool
                )
            };
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
        parked.expiry = None;
        self.wait_and_drive(parked).await
    }

    /// Waits for the call to finish or to need input; in the second case parks it and answers
    /// `input_required` with every request pending.
    async fn wait_and_drive(&self, mut parked: Parked) -> Result<CallToolResponse, McpError> {
        let first = parked.events.recv().await;
        self.drive(parked, first).await
    }

    /// [`Self::wait_and_drive`] once the call's first event (`None`: it ended without a result) is in.
    async fn drive(
        &self,
        mut parked: Parked,
        first: Option<CallEvent>,
    ) -> Result<CallToolResponse, McpError> {
        let mut requests = BTreeMap::new();
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
                    request,
                    params,
                    key,
                    answer,
                }) => {
                    let method = request_method(request);
                    let key = match key {
                        Some(key) if !requests.contains_key(&key) => key,
                        _ => {
                            parked.next_key += 1;
                            format!("portico-{}", parked.next_key)
                        }
                    };
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
            // Requests made together (parallel tool calls) go out in one round; past the round's
            // bound they wait in the channel for the next one.
            if requests.len() >= MAX_REQUESTS_PER_ROUND {
                break;
            }
            match parked.events.try_recv() {
                Ok(event) => next = Some(event),
                Err(_) if requests.is_empty() => next = parked.events.recv().await,
                Err(_) => break,
            }
        }
        let state = random_handle();
        let result = InputRequiredResult::new(Some(requests), Some(state.clone()));
        // Dropping an expired call fails its pending requests and cancels it, which ends it.
        let calls = self.calls.clone();
        let key = state.clone();
        let expiry = tokio::spawn(async move {
            tokio::time::sleep(PARKED_FOR).await;
            let expired = calls.lock().expect("parked calls lock").remove(&key);
            drop(expired);
        });
        let mut calls = self.calls.lock().expect("parked calls lock");
        parked.expiry = Some(AbortOnDrop(expiry.abort_handle()));
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
    pub(crate) events: mpsc::Sender<CallEvent>,
    /// The `inputResponses` the client's first request of the call carried, until taken.
    pub(crate) given: Mutex<Option<JsonObject>>,
}

impl InputRoundsCaller {
    fn ask(
        &self,
        key: Option<String>,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'_, Result<JsonObject, RelayError>> {
        Box::pin(async move {
            let (answer, reply) = oneshot::channel();
            self.events
                .send(CallEvent::Input {
                    request,
                    params,
                    key,
                    answer,
                })
                .await
                .map_err(|_| gone())?;
            reply.await.map_err(|_| gone())?
        })
    }
}

impl Caller for InputRoundsCaller {
    fn accepts(&self, request: RelayRequest) -> bool {
        self.inner.accepts(request)
    }

    fn accepts_tasks(&self) -> bool {
        self.inner.accepts_tasks()
    }

    fn request<'a>(
        &'a self,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        self.ask(None, request, params)
    }

    fn request_keyed<'a>(
        &'a self,
        key: &'a str,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        self.ask(Some(key.to_string()), request, params)
    }

    /// A model completion becomes an input round like any other request.
    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
        sample_through(self, request)
    }

    fn can_confirm(&self) -> bool {
        self.inner.can_confirm()
    }

    fn take_answers_given(&self) -> Option<JsonObject> {
        self.given.lock().expect("given answers lock").take()
    }

    /// An approval question becomes an input round like any other request.
    fn confirm<'a>(
        &'a self,
        question: String,
    ) -> BoxFuture<'a, Result<portico_core::relay::Confirmation, RelayError>> {
        portico_mcp::confirm_through(self, question)
    }

    fn notify<'a>(
        &'a self,
        notification: RelayNotification,
        params: JsonObject,
    ) -> BoxFuture<'a, ()> {
        self.inner.notify(notification, params)
    }
}

fn gone() -> RelayError {
    RelayError {
        code: -32603,
        message: "the client did not come back with an answer to Portico's input request (the call was abandoned or expired)".into(),
    }
}

/// How a call run by [`ParkedCalls::run`] ends early: `guard` cancels the call's own token when
/// dropped (with the call once parked, or when the request ends before that), and `client_gone`
/// is the request's: the client cancelled it or hung up.
pub(crate) struct CallCancel {
    pub(crate) guard: DropGuard,
    pub(crate) client_gone: CancellationToken,
}

/// What a call the client cancelled (or hung up on) answers, to nobody.
pub(crate) fn cancelled_by_the_client() -> McpError {
    McpError::internal_error("cancelled by the client", None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    /// The client identity the tests' calls are admitted (and resumed) as.
    const OWNER: &str = "a";

    /// A call's input-rounds caller over [`Silent`], sending its events on `events`.
    fn silent_caller(events: &mpsc::Sender<CallEvent>) -> InputRoundsCaller {
        InputRoundsCaller {
            inner: Arc::new(Silent),
            events: events.clone(),
            given: Mutex::default(),
        }
    }

    struct Silent;
    impl Caller for Silent {
        fn accepts(&self, _: RelayRequest) -> bool {
            true
        }
        fn request<'a>(
            &'a self,
            _: RelayRequest,
            _: JsonObject,
        ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
            Box::pin(async { unreachable!("input rounds never reach the inner caller's requests") })
        }
        fn sample<'a>(
            &'a self,
            _: SamplingRequest,
        ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
            Box::pin(async { unreachable!("input rounds never reach the inner caller's requests") })
        }
        fn notify<'a>(&'a self, _: RelayNotification, _: JsonObject) -> BoxFuture<'a, ()> {
            Box::pin(async {})
        }
    }

    async fn start(
        parked: &ParkedCalls,
        receiver: mpsc::Receiver<CallEvent>,
    ) -> Result<CallToolResponse, McpError> {
        let place = parked.admit(OWNER).unwrap();
        let cancel = tokio_util::sync::CancellationToken::new().drop_guard();
        parked
            .first_round(&bound("t"), place, receiver, cancel)
            .await
    }

    /// A call of `tool` without arguments.
    fn bound(tool: &str) -> CallBinding {
        CallBinding::new(tool, None)
    }

    fn sampling_params(text: &str) -> JsonObject {
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 10})
            .as_object()
            .cloned()
            .unwrap()
    }

    /// Starts `call` the way the handler does, from a task of its own (whose id it returns).
    fn run_as_handler(
        parked: &ParkedCalls,
        call: impl FnOnce(InputRoundsCaller) -> BoxFuture<'static, Result<CallToolResponse, McpError>>,
    ) -> tokio::task::JoinHandle<(tokio::task::Id, Result<CallToolResponse, McpError>)> {
        let parked = parked.clone();
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let call = call(silent_caller(&events));
        tokio::spawn(async move {
            let place = parked.admit(OWNER).unwrap();
            let cancel = CallCancel {
                guard: CancellationToken::new().drop_guard(),
                client_gone: CancellationToken::new(),
            };
            let answer = parked
                .run(&bound("t"), place, call, events, receiver, cancel)
                .await;
            (tokio::task::id(), answer)
        })
    }

    fn text_result(text: String) -> Result<CallToolResponse, McpError> {
        Ok(CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]).into())
    }

    fn first_text(response: CallToolResponse) -> String {
        let CallToolResponse::Complete(done) = response else {
            panic!("expected the result, got {response:?}");
        };
        serde_json::to_value(&done.content).unwrap()[0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn a_call_that_never_asks_runs_in_the_handlers_task_and_gives_its_place_back() {
        let parked = ParkedCalls::with_limits(1, 1);
        let handler = run_as_handler(&parked, |_caller| {
            Box::pin(async { text_result(format!("{}", tokio::task::id())) })
        });
        let (handler_task, answer) = handler.await.unwrap();
        assert_eq!(first_text(answer.unwrap()), handler_task.to_string());
        assert_eq!(parked.counts(), (0, 0));
        assert!(parked.admit(OWNER).is_ok());
    }

    #[tokio::test]
    async fn a_call_whose_client_hangs_up_before_it_asks_anything_is_dropped() {
        let parked = ParkedCalls::with_limits(1, 1);
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let (dropped, call_dropped) = oneshot::channel::<()>();
        // Never finishes; tells when it is dropped (the upstream call it stands for is cancelled).
        let call: BoxFuture<'static, Result<CallToolResponse, McpError>> = Box::pin(async move {
            let _dropped = dropped;
            std::future::pending().await
        });
        let client_gone = CancellationToken::new();
        let cancel = CallCancel {
            guard: CancellationToken::new().drop_guard(),
            client_gone: client_gone.clone(),
        };
        let place = parked.admit(OWNER).unwrap();
        let binding = bound("t");
        let running = parked.run(&binding, place, call, events, receiver, cancel);
        client_gone.cancel();
        let error = running.await.unwrap_err();
        assert_eq!(error.message, "cancelled by the client");
        assert!(call_dropped.await.is_err(), "the call was dropped");
        assert_eq!(parked.counts(), (0, 0), "its place is given back");
    }

    #[tokio::test]
    async fn a_call_that_asks_goes_on_in_a_task_of_its_own_and_finishes_through_its_rounds() {
        let parked = ParkedCalls::with_limits(1, 1);
        let handler = run_as_handler(&parked, |caller| {
            Box::pin(async move {
                let before = tokio::task::id();
                let answer = caller
                    .request(RelayRequest::Sampling, sampling_params("q"))
                    .await
                    .unwrap();
                text_result(format!("{before} {} {}", tokio::task::id(), answer["n"]))
            })
        });
        let (handler_task, round) = handler.await.unwrap();
        let CallToolResponse::InputRequired(round) = round.unwrap() else {
            panic!("expected input_required");
        };
        assert_eq!(parked.counts(), (1, 1), "parked, holding its place");
        let answers: InputResponses = [("portico-1".to_string(), json!({"n": 7}))]
            .into_iter()
            .collect();
        let done = parked
            .next_round(
                &bound("t"),
                &round.request_state.unwrap(),
                OWNER,
                Some(answers),
            )
            .await
            .unwrap();
        let text = first_text(done);
        let parts: Vec<&str> = text.split(' ').collect();
        assert_eq!(
            parts[0],
            handler_task.to_string(),
            "began in the handler's task"
        );
        assert_ne!(
            parts[1],
            handler_task.to_string(),
            "went on in its own task"
        );
        assert_eq!(parts[2], "7");
        assert_eq!(parked.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_call_abandoned_before_it_asks_is_dropped_and_gives_its_place_back() {
        let parked = ParkedCalls::with_limits(1, 1);
        let (started, running) = oneshot::channel::<()>();
        let (dropped_tx, dropped) = oneshot::channel::<()>();
        let handler = run_as_handler(&parked, |_caller| {
            Box::pin(async move {
                // Sends on `dropped_tx`'s drop, i.e. when the call's future is dropped.
                let _dropped = dropped_tx;
                let _ = started.send(());
                std::future::pending::<()>().await;
                unreachable!()
            })
        });
        running.await.unwrap();
        assert_eq!(parked.counts(), (1, 0));
        // The client hangs up: rmcp drops the request's future, and with it the call.
        handler.abort();
        assert!(handler.await.unwrap_err().is_cancelled());
        assert!(dropped.await.is_err(), "the call's future was dropped");
        assert_eq!(parked.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_call_that_asks_twice_takes_two_rounds_and_gets_each_answer() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = silent_caller(&events);
        let work = tokio::spawn(async move {
            let first = caller
                .request(RelayRequest::Sampling, sampling_params("one"))
                .await
                .unwrap();
            let second = caller
                .request(RelayRequest::Sampling, sampling_params("two"))
                .await
                .unwrap();
            let text = format!("{} {}", first["n"], second["n"]);
            let _ = events
                .send(CallEvent::Done(Ok(CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text(text),
                ])
                .into())))
                .await;
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
        let (key, request, state) = round(start(&parked, receiver).await.unwrap());
        assert_eq!(request["params"]["messages"][0]["content"]["text"], "one");
        assert_eq!(state.len(), 32);

        // The wrong tool, or an unknown handle, is refused and leaves the call parked.
        let wrong = parked
            .next_round(&bound("other"), &state, OWNER, None)
            .await
            .unwrap_err();
        assert!(
            wrong.message.contains("belongs to a call of `t`"),
            "{wrong:?}"
        );
        // The same tool with other arguments: refused, naming it; keys in another order are
        // the same arguments.
        let other_arguments = json!({"path": "/etc/shadow"});
        let other = CallBinding::new("t", other_arguments.as_object());
        let refused = parked
            .next_round(&other, &state, OWNER, None)
            .await
            .unwrap_err();
        assert_eq!(refused.code.0, -32602);
        assert_eq!(
            refused.message,
            "requestState belongs to a call of `t` with other arguments; a retry carries the arguments of the call it continues, unchanged"
        );
        assert_eq!(
            CallBinding::new("t", json!({"a": 1, "b": [2]}).as_object()),
            CallBinding::new("t", json!({"b": [2], "a": 1}).as_object())
        );
        assert_eq!(CallBinding::new("t", Some(&JsonObject::new())), bound("t"));
        let unknown = parked
            .next_round(&bound("t"), "nope", OWNER, None)
            .await
            .unwrap_err();
        assert!(
            unknown
                .message
                .contains("does not name a call waiting for input")
        );

        let answers: InputResponses = [(key, json!({"n": 1}))].into_iter().collect();
        let (key, request, state_2) = round(
            parked
                .next_round(&bound("t"), &state, OWNER, Some(answers))
                .await
                .unwrap(),
        );
        assert_eq!(request["params"]["messages"][0]["content"]["text"], "two");
        assert_ne!(state, state_2, "each round gets a fresh handle");
        assert!(
            parked
                .next_round(&bound("t"), &state, OWNER, None)
                .await
                .is_err(),
            "a handle is used once"
        );

        let answers: InputResponses = [(key, json!({"n": 2}))].into_iter().collect();
        let CallToolResponse::Complete(done) = parked
            .next_round(&bound("t"), &state_2, OWNER, Some(answers))
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
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = silent_caller(&events);
        let work = tokio::spawn(async move {
            let error = caller
                .request(RelayRequest::Elicitation, JsonObject::new())
                .await;
            let message = match error {
                Err(e) => e.message,
                Ok(_) => "answered".into(),
            };
            let _ = events
                .send(CallEvent::Done(Ok(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(message),
                ])
                .into())))
                .await;
        });
        // An elicitation without valid params cannot be put to the client: it fails at once.
        let CallToolResponse::Complete(done) = start(&parked, receiver).await.unwrap() else {
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
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = silent_caller(&events);
        let work = tokio::spawn(async move {
            let answer = caller
                .request(RelayRequest::Sampling, sampling_params("q"))
                .await;
            let message = answer
                .map(|_| "answered".to_string())
                .unwrap_or_else(|e| e.message);
            let _ = events
                .send(CallEvent::Done(Ok(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(message),
                ])
                .into())))
                .await;
        });
        let CallToolResponse::InputRequired(round) = start(&parked, receiver).await.unwrap() else {
            panic!("expected input_required");
        };
        let state = round.request_state.unwrap();
        let CallToolResponse::Complete(done) = parked
            .next_round(&bound("t"), &state, OWNER, Some(InputResponses::new()))
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

    #[tokio::test]
    async fn input_round_calls_are_bounded_per_client_and_in_all() {
        let parked = ParkedCalls::with_limits(3, 2);
        let a1 = parked.admit("a").unwrap();
        let _a2 = parked.admit("a").unwrap();
        let refused = parked.admit("a").err().unwrap();
        assert_eq!(refused.code.0, -32000);
        assert!(
            refused
                .message
                .starts_with("this client has 2 tool calls running or waiting"),
            "{refused:?}"
        );
        let _b = parked.admit("b").unwrap();
        let full = parked.admit("c").err().unwrap();
        assert!(
            full.message.starts_with("Portico has 3 tool calls running"),
            "{full:?}"
        );
        drop(a1);
        assert_eq!(parked.counts(), (2, 0));
        let _a3 = parked.admit("a").unwrap();
        assert_eq!(parked.places.lock().unwrap().per_client.len(), 2);
    }

    #[tokio::test]
    async fn a_parked_call_holds_its_place_until_it_finishes() {
        let parked = ParkedCalls::with_limits(1, 1);
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = silent_caller(&events);
        let work = tokio::spawn(async move {
            let _ = caller
                .request(RelayRequest::Sampling, sampling_params("q"))
                .await;
            let _ = events
                .send(CallEvent::Done(Ok(CallToolResult::success(vec![]).into())))
                .await;
        });
        let place = parked.admit("a").unwrap();
        let cancel = tokio_util::sync::CancellationToken::new().drop_guard();
        let CallToolResponse::InputRequired(round) = parked
            .first_round(&bound("t"), place, receiver, cancel)
            .await
            .unwrap()
        else {
            panic!("expected input_required");
        };
        assert_eq!(parked.counts(), (1, 1));
        assert!(
            parked.admit("a").is_err(),
            "the parked call holds the place"
        );
        let state = round.request_state.unwrap();
        let answers: InputResponses = [("portico-1".to_string(), json!({}))].into_iter().collect();
        let done = parked
            .next_round(&bound("t"), &state, OWNER, Some(answers))
            .await
            .unwrap();
        assert!(matches!(done, CallToolResponse::Complete(_)));
        work.await.unwrap();
        assert_eq!(parked.counts(), (0, 0));
        assert!(parked.admit("a").is_ok());
    }

    #[tokio::test]
    async fn only_the_client_that_started_a_parked_call_can_resume_it() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = silent_caller(&events);
        let work = tokio::spawn(async move {
            let answer = caller
                .request(RelayRequest::Sampling, sampling_params("q"))
                .await
                .unwrap();
            let _ = events
                .send(CallEvent::Done(text_result(answer["n"].to_string())))
                .await;
        });
        let CallToolResponse::InputRequired(round) = start(&parked, receiver).await.unwrap() else {
            panic!("expected input_required");
        };
        let state = round.request_state.unwrap();
        let answers = || -> InputResponses {
            [("portico-1".to_string(), json!({"n": 5}))]
                .into_iter()
                .collect()
        };
        // Client b holding a's handle: answered as if there were no such call, and a's call stays.
        let other = parked
            .next_round(&bound("t"), &state, "b", Some(answers()))
            .await
            .unwrap_err();
        assert_eq!(
            other.message,
            "requestState does not name a call waiting for input (it finished, expired after 5 minutes, or was already resumed); call the tool again without it"
        );
        assert_eq!(parked.counts(), (1, 1), "still parked for its own client");
        let done = parked
            .next_round(&bound("t"), &state, OWNER, Some(answers()))
            .await
            .unwrap();
        assert_eq!(first_text(done), "5");
        work.await.unwrap();
        assert_eq!(parked.counts(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_call_nobody_resumes_expires_is_cancelled_and_gives_its_place_back() {
        let parked = ParkedCalls::with_limits(1, 1);
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = InputRoundsCaller {
            inner: Arc::new(Silent),
            events,
            given: Mutex::default(),
        };
        let work = tokio::spawn(async move {
            caller
                .request(RelayRequest::Sampling, sampling_params("q"))
                .await
        });
        let token = tokio_util::sync::CancellationToken::new();
        let place = parked.admit("a").unwrap();
        let response = parked
            .first_round(&bound("t"), place, receiver, token.clone().drop_guard())
            .await
            .unwrap();
        let CallToolResponse::InputRequired(round) = response else {
            panic!("expected input_required");
        };
        assert_eq!(parked.counts(), (1, 1));
        tokio::time::sleep(PARKED_FOR + Duration::from_secs(1)).await;
        let answer = work.await.unwrap().unwrap_err();
        assert_eq!(answer.message, gone().message);
        assert!(token.is_cancelled(), "the expired call is cancelled");
        assert_eq!(parked.counts(), (0, 0));
        let late = parked
            .next_round(&bound("t"), &round.request_state.unwrap(), OWNER, None)
            .await
            .unwrap_err();
        assert!(late.message.contains("does not name a call waiting"));
    }

    #[tokio::test]
    async fn a_call_abandoned_mid_round_is_cancelled_and_gives_its_place_back() {
        let parked = ParkedCalls::with_limits(1, 1);
        let (_events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let token = tokio_util::sync::CancellationToken::new();
        let place = parked.admit("a").unwrap();
        let driver = {
            let parked = parked.clone();
            let guard = token.clone().drop_guard();
            tokio::spawn(async move {
                parked
                    .first_round(&bound("t"), place, receiver, guard)
                    .await
            })
        };
        // The client hangs up before the call asks or ends: rmcp drops the request's future.
        driver.abort();
        assert!(driver.await.unwrap_err().is_cancelled());
        assert!(token.is_cancelled());
        assert_eq!(parked.counts(), (0, 0));
    }

    #[tokio::test]
    async fn a_round_carries_at_most_its_bound_of_requests_and_the_rest_wait() {
        let parked = ParkedCalls::default();
        let (events, receiver) = mpsc::channel(MAX_REQUESTS_PER_ROUND);
        let caller = Arc::new(silent_caller(&events));
        let asked = MAX_REQUESTS_PER_ROUND + 4;
        // Every request is in the channel or waiting on it before the first round starts.
        let (queued, mut all_queued) = mpsc::channel::<()>(asked);
        let work = tokio::spawn(async move {
            let mut asks = tokio::task::JoinSet::new();
            for i in 0..asked {
                let caller = caller.clone();
                let queued = queued.clone();
                asks.spawn(async move {
                    let _ = queued.send(()).await;
                    caller
                        .request(RelayRequest::Sampling, sampling_params(&i.to_string()))
                        .await
                });
            }
            let mut answered = 0;
            while let Some(answer) = asks.join_next().await {
                answered += usize::from(answer.unwrap().is_ok());
            }
            let _ = events
                .send(CallEvent::Done(Ok(CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text(answered.to_string()),
                ])
                .into())))
                .await;
        });
        for _ in 0..asked {
            all_queued.recv().await.unwrap();
        }
        let place = parked.admit("a").unwrap();
        let cancel = tokio_util::sync::CancellationToken::new().drop_guard();
        let mut response = parked
            .first_round(&bound("t"), place, receiver, cancel)
            .await
            .unwrap();
        let mut rounds = Vec::new();
        while let CallToolResponse::InputRequired(round) = response {
            let requests = round.input_requests.unwrap();
            rounds.push(requests.len());
            let answers: InputResponses =
                requests.into_keys().map(|key| (key, json!({}))).collect();
            response = parked
                .next_round(
                    &bound("t"),
                    &round.request_state.unwrap(),
                    OWNER,
                    Some(answers),
                )
                .await
                .unwrap();
        }
        assert!(
            rounds.iter().all(|&n| n <= MAX_REQUESTS_PER_ROUND),
            "{rounds:?}"
        );
        assert_eq!(rounds.iter().sum::<usize>(), asked);
        assert_eq!(rounds[0], MAX_REQUESTS_PER_ROUND);
        let CallToolResponse::Complete(done) = response else {
            unreachable!()
        };
        assert_eq!(
            serde_json::to_value(&done.content).unwrap()[0]["text"],
            asked.to_string()
        );
        work.await.unwrap();
    }
}
