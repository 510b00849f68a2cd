//! Relaying what an upstream sends back during a call to the client whose request caused the call.
//!
//! An upstream tool may report progress, log, or ask the client for something (a model completion, user
//! input, the workspace roots) while it runs. Portico is in the middle: the door that received the call
//! wraps its client in a [`Caller`], the hub passes it along with the call, and the upstream session
//! hands it whatever the upstream sends for that call. What is relayed is named by [`RelayRequest`] and
//! [`RelayNotification`]; payloads are the protocol's JSON, carried opaquely; only the doors and
//! upstream sessions interpret them (and know the protocol's method names). The requests Portico
//! makes of a client itself are typed: a model completion for an agent ([`Caller::sample`] with
//! [`SamplingRequest`] and [`SamplingAnswer`]) and a yes/no approval question ([`Caller::confirm`],
//! [`Confirmation`]), so neither the agents nor the pipeline write the protocol's JSON.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::JsonObject;

mod sampling;

pub use sampling::{
    SamplingAnswer, SamplingContent, SamplingError, SamplingMessage, SamplingRequest, SamplingRole,
    SamplingTool, SamplingToolChoice, SamplingToolUse,
};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an upstream can ask the calling client for during a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayRequest {
    /// A model completion (MCP sampling).
    Sampling,
    /// Input from the person at the client (MCP elicitation).
    Elicitation,
    /// The client's workspace roots.
    Roots,
}

/// What an upstream can tell the calling client during a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayNotification {
    Progress,
    Log,
}

/// What the person at the client answered to a yes/no question Portico asked ([`Caller::confirm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// They accepted and said yes.
    Yes,
    /// They accepted and said no, or declined to answer.
    No,
    /// They dismissed the question.
    Cancelled,
}

/// A relayed request the caller refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RelayError {
    /// A JSON-RPC error code, passed back to the upstream as is.
    pub code: i32,
    pub message: String,
}

/// The client at the other end of a call.
pub trait Caller: Send + Sync {
    /// Whether the client declared support for `request`.
    fn accepts(&self, request: RelayRequest) -> bool;
    /// Whether the client takes a task for an answer (it declared the MCP tasks extension on this
    /// call), so the call may become a task on its server. By default it does not.
    fn accepts_tasks(&self) -> bool {
        false
    }
    /// Sends a request to the client and waits for its answer.
    fn request<'a>(
        &'a self,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>>;
    /// [`Caller::request`] for an input its asker names `key` (a 2026-07-28 upstream's
    /// `inputRequests` key): a caller that puts requests to its client as input rounds of its own
    /// keeps the name, so the client sees the upstream's keys. By default the key is not used.
    fn request_keyed<'a>(
        &'a self,
        key: &'a str,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        let _ = key;
        self.request(request, params)
    }
    /// Answers the client sent with its call before anything was asked of it (a 2026-07-28
    /// client may send `inputResponses` up front, for a server that needs no round to know its
    /// questions), by key. Taken once: the first upstream request of the call carries them.
    fn take_answers_given(&self) -> Option<JsonObject> {
        None
    }
    /// Asks the client's model for a completion (a [`RelayRequest::Sampling`] Portico makes itself,
    /// for an agent); the caller writes the protocol's request and reads its answer.
    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>>;
    /// Whether [`Caller::confirm`] can reach a person: by default, whether the client declared
    /// elicitation.
    fn can_confirm(&self) -> bool {
        self.accepts(RelayRequest::Elicitation)
    }
    /// Asks the person at the client a yes/no question (an approval of a held call), which the
    /// caller writes as the protocol's request (MCP elicitation). The default: this caller cannot.
    fn confirm<'a>(&'a self, question: String) -> BoxFuture<'a, Result<Confirmation, RelayError>> {
        drop(question);
        Box::pin(async {
            Err(RelayError {
                code: -32601,
                message: "this caller cannot ask its client a question".into(),
            })
        })
    }
    /// Sends a notification to the client. Progress params carry no token: the caller adds the one its
    /// client asked for.
    fn notify<'a>(
        &'a self,
        notification: RelayNotification,
        params: JsonObject,
    ) -> BoxFuture<'a, ()>;
}

/// What travels with a call besides its name and arguments.
#[derive(Clone, Default)]
pub struct CallContext {
    pub caller: Option<Arc<dyn Caller>>,
    /// The client asked for progress notifications.
    pub progress: bool,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("caller", &self.caller.is_some())
            .field("progress", &self.progress)
            .finish()
    }
}
