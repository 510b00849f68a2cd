//! Relaying what an upstream sends back during a call to the client whose request caused the call.
//!
//! An upstream tool may report progress, log, or ask the client for something (a model completion, user
//! input, the workspace roots) while it runs. Portico is in the middle: the door that received the call
//! wraps its client in a [`Caller`], the hub passes it along with the call, and the upstream session
//! hands it whatever the upstream sends for that call. Payloads are the protocol's JSON, carried opaquely;
//! only the doors and upstream sessions interpret them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::JsonObject;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Method names a [`Caller`] is asked about.
pub mod methods {
    pub const SAMPLING: &str = "sampling/createMessage";
    pub const ELICITATION: &str = "elicitation/create";
    pub const ROOTS: &str = "roots/list";
    pub const PROGRESS: &str = "notifications/progress";
    pub const LOG: &str = "notifications/message";
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
    /// Whether the client declared support for `method` (one of [`methods`]).
    fn accepts(&self, method: &str) -> bool;
    /// Sends a request to the client and waits for its answer.
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>>;
    /// Sends a notification to the client. Progress params carry no token: the caller adds the one its
    /// client asked for.
    fn notify<'a>(&'a self, method: &'a str, params: JsonObject) -> BoxFuture<'a, ()>;
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
