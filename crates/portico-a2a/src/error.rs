//! A2A errors, with the spec's codes, on every binding.
//!
//! JSON-RPC errors carry the A2A code and, in `data`, a list of typed details whose first is a
//! `google.rpc.ErrorInfo` (reason, domain, metadata); HTTP+JSON errors carry the matching HTTP status
//! and the same details in a `google.rpc.Status`-shaped body.

use serde_json::{Value, json};

/// What went wrong, as A2A names it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2aError {
    #[error("invalid JSON: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method `{0}` not found")]
    MethodNotFound(String),
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    #[error("{0}")]
    Internal(String),
    #[error("task `{0}` not found")]
    TaskNotFound(String),
    #[error("task `{id}` is {state} and cannot be canceled")]
    TaskNotCancelable { id: String, state: String },
    #[error("push notifications are not supported by this agent")]
    PushNotSupported,
    #[error("{0}")]
    Unsupported(String),
    #[error("content type `{0}` is not supported here; send the request as application/json")]
    ContentTypeNotSupported(String),
    #[error("the extended agent card is not configured")]
    ExtendedCardNotConfigured,
    #[error("A2A version `{0}` is not supported; this server speaks 1.0 and 0.3")]
    VersionNotSupported(String),
    /// The task store is full of tasks still running.
    #[error("{0}")]
    Busy(String),
    /// Every event stream Portico allows (in all, or to this caller) is open.
    #[error("{0}")]
    TooManyStreams(String),
    /// The caller's `[[server.clients]]` scope does not reach the agent (the pipeline's refusal).
    #[error("{0}")]
    PermissionDenied(String),
}

impl A2aError {
    pub fn code(&self) -> i64 {
        match self {
            A2aError::Parse(_) => -32700,
            A2aError::InvalidRequest(_) => -32600,
            A2aError::MethodNotFound(_) => -32601,
            A2aError::InvalidParams(_) => -32602,
            A2aError::Internal(_) | A2aError::Busy(_) | A2aError::TooManyStreams(_) => -32603,
            A2aError::TaskNotFound(_) => -32001,
            A2aError::TaskNotCancelable { .. } => -32002,
            A2aError::PushNotSupported => -32003,
            A2aError::Unsupported(_) => -32004,
            A2aError::ContentTypeNotSupported(_) => -32005,
            A2aError::ExtendedCardNotConfigured => -32007,
            A2aError::VersionNotSupported(_) => -32009,
            // A2A names no JSON-RPC code for it: one of the implementation-defined server errors.
            A2aError::PermissionDenied(_) => -32000,
        }
    }

    /// The ErrorInfo reason: upper snake case, stable.
    pub fn reason(&self) -> &'static str {
        match self {
            A2aError::Parse(_) => "PARSE_ERROR",
            A2aError::InvalidRequest(_) => "INVALID_REQUEST",
            A2aError::MethodNotFound(_) => "METHOD_NOT_FOUND",
            A2aError::InvalidParams(_) => "INVALID_PARAMS",
            A2aError::Internal(_) => "INTERNAL_ERROR",
            A2aError::Busy(_) => "TASK_STORE_FULL",
            A2aError::TooManyStreams(_) => "TOO_MANY_STREAMS",
            A2aError::TaskNotFound(_) => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable { .. } => "TASK_NOT_CANCELABLE",
            A2aError::PushNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aError::Unsupported(_) => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aError::ExtendedCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2aError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            A2aError::PermissionDenied(_) => "PERMISSION_DENIED",
        }
    }

    pub fn http_status(&self) -> u16 {
        match self {
            A2aError::Parse(_)
            | A2aError::InvalidRequest(_)
            | A2aError::InvalidParams(_)
            | A2aError::PushNotSupported
            | A2aError::Unsupported(_)
            | A2aError::VersionNotSupported(_) => 400,
            A2aError::MethodNotFound(_) | A2aError::TaskNotFound(_) => 404,
            A2aError::TaskNotCancelable { .. } => 409,
            A2aError::ContentTypeNotSupported(_) => 415,
            A2aError::ExtendedCardNotConfigured => 400,
            A2aError::Busy(_) | A2aError::TooManyStreams(_) => 503,
            A2aError::Internal(_) => 500,
            A2aError::PermissionDenied(_) => 403,
        }
    }

    fn grpc_status(&self) -> &'static str {
        match self.http_status() {
            400 | 415 => "INVALID_ARGUMENT",
            404 => "NOT_FOUND",
            403 => "PERMISSION_DENIED",
            409 => "FAILED_PRECONDITION",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        }
    }

    fn details(&self) -> Value {
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": "a2a-protocol.org",
            "metadata": {},
        }])
    }

    /// The JSON-RPC `error` object.
    pub fn to_jsonrpc(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string(), "data": self.details()})
    }

    /// The HTTP+JSON error body.
    pub fn to_rest(&self) -> Value {
        json!({"error": {
            "code": self.http_status(),
            "status": self.grpc_status(),
            "message": self.to_string(),
            "details": self.details(),
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_codes_reasons_and_statuses() {
        let error = A2aError::TaskNotFound("t1".into());
        assert_eq!(error.code(), -32001);
        let rpc = error.to_jsonrpc();
        assert_eq!(rpc["message"], "task `t1` not found");
        assert_eq!(rpc["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(
            rpc["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        let rest = error.to_rest();
        assert_eq!(rest["error"]["code"], 404);
        assert_eq!(rest["error"]["status"], "NOT_FOUND");
        assert_eq!(
            A2aError::TaskNotCancelable {
                id: "x".into(),
                state: "completed".into()
            }
            .http_status(),
            409
        );
        assert_eq!(A2aError::VersionNotSupported("9".into()).code(), -32009);
    }
}
