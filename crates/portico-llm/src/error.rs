//! What can go wrong reaching a model. Every message names the provider and says what to do; none
//! contains a credential (response excerpts are scrubbed of the key that was sent).

use portico_net::BlockRule;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// No connection could be made (or it broke before any response byte), after the retries.
    #[error(
        "{provider}: could not reach {url}: {detail}; is the server running at {url}, and is the \
         base URL right?"
    )]
    Unreachable {
        provider: String,
        url: String,
        detail: String,
    },

    /// The provider answered with an error status (after the retries, for retryable ones).
    #[error("{provider} answered HTTP {status}: {body_excerpt}{hint}", hint = status_hint(*status))]
    Http {
        provider: String,
        status: u16,
        /// The first 500 characters of the response body.
        body_excerpt: String,
    },

    /// The response did not follow the provider's protocol (or reported an error mid-stream).
    #[error("{provider}: unexpected response: {detail}")]
    Protocol { provider: String, detail: String },

    /// The provider needs an API key and none was configured.
    #[error(
        "{provider} needs an API key and none is set: set the {env_var} environment variable \
         (or the model's api_key setting) and try again"
    )]
    MissingKey { provider: String, env_var: String },

    /// The outbound client refused the request before sending it: a destination forbidden by the
    /// network policy (`rule` names which), an unsupported scheme, or too many redirects.
    #[error("{provider}: {detail}")]
    Blocked {
        provider: String,
        rule: Option<BlockRule>,
        detail: String,
    },

    /// A driver setting is unusable (a malformed base URL or header).
    #[error("{provider}: invalid setting: {detail}")]
    Config { provider: String, detail: String },

    /// The scripted driver's rules failed or did not cover the conversation.
    #[error("scripted model: {detail}")]
    Script { detail: String },

    /// The calling MCP client refused or failed a sampling request.
    #[error("sampling through the calling MCP client failed: {detail}")]
    Sampling { detail: String },

    /// The model cannot be used in this context (e.g. sampling with a client that did not declare it).
    #[error("model not available: {detail}")]
    NotAvailable { detail: String },
}

impl LlmError {
    /// Whether trying the same request later could succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Unreachable { .. } => true,
            LlmError::Http { status, .. } => crate::retry::is_retryable_status(*status),
            _ => false,
        }
    }
}

/// What to check for the statuses people hit most; the body usually says the rest.
fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " (check the API key and that it may use this model)",
        404 => " (check the base URL and the model name)",
        429 => " (rate limited: retries ran out; wait or raise the limit)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e = LlmError::MissingKey {
            provider: "openai".into(),
            env_var: "OPENAI_API_KEY".into(),
        };
        assert_eq!(
            e.to_string(),
            "openai needs an API key and none is set: set the OPENAI_API_KEY environment \
             variable (or the model's api_key setting) and try again"
        );
        let e = LlmError::Unreachable {
            provider: "ollama".into(),
            url: "http://127.0.0.1:11434/v1/chat/completions".into(),
            detail: "connection refused".into(),
        };
        assert!(
            e.to_string()
                .contains("is the server running at http://127.0.0.1:11434/v1/chat/completions"),
            "{e}"
        );
        let e = LlmError::Http {
            provider: "openai".into(),
            status: 401,
            body_excerpt: "bad key".into(),
        };
        assert_eq!(
            e.to_string(),
            "openai answered HTTP 401: bad key (check the API key and that it may use this model)"
        );
        assert!(!e.is_transient());
    }
}
