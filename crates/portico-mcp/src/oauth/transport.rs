//! rmcp's Streamable HTTP client with Portico's answers to a server's refusals.
//!
//! rmcp's own `AuthClient` refreshes once and then hands the 401 to the application; Portico has more
//! to do at that point (a token another process stored, a login through the browser when this
//! process may open one, a step-up login on 403 `insufficient_scope`, the retry limit, the `needs
//! login` state), so the wrapper is its own, asking [`UpstreamAuth`] what to do.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use super::UpstreamAuth;

type HttpError = StreamableHttpError<reqwest::Error>;

/// Attempts at one request: the first, then after a refresh or a login, then after a second login
/// (an authorization server migration refuses the refreshed token too).
const MAX_ATTEMPTS: usize = 3;

/// The server's refusal that authorization can answer.
enum Refusal {
    Unauthorized(String),
    InsufficientScope(String),
}

fn refusal(error: &HttpError) -> Option<Refusal> {
    match error {
        StreamableHttpError::AuthRequired(e) => {
            Some(Refusal::Unauthorized(e.www_authenticate_header.clone()))
        }
        StreamableHttpError::InsufficientScope(e) => Some(Refusal::InsufficientScope(
            e.www_authenticate_header.clone(),
        )),
        _ => None,
    }
}

/// rmcp's reqwest client (over the server's `SafeClient`) sending the server's OAuth token.
#[derive(Clone)]
pub struct AuthorizedHttp {
    http: reqwest::Client,
    auth: Arc<UpstreamAuth>,
}

impl AuthorizedHttp {
    pub fn new(http: reqwest::Client, auth: Arc<UpstreamAuth>) -> Self {
        AuthorizedHttp { http, auth }
    }

    /// Runs `call` with the current token, answering a 401 or 403 as [`UpstreamAuth`] says, at most
    /// [`MAX_ATTEMPTS`] times. When it cannot be answered, the error says why in words, or, with
    /// `keep_refusal` (a GET stream, which rmcp reconnects on other errors), is the server's refusal
    /// as it came, which ends rmcp's reconnecting.
    async fn authorized<T, F, Fut>(&self, keep_refusal: bool, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let mut token = self.auth.token().await.map_err(unanswerable)?;
        for attempt in 1..=MAX_ATTEMPTS {
            let result = call(token.clone()).await;
            let refused = match &result {
                Err(error) if attempt < MAX_ATTEMPTS => refusal(error),
                _ => None,
            };
            let Some(refused) = refused else {
                if result.is_ok() {
                    self.auth.accepted();
                }
                return result;
            };
            let answer = match refused {
                Refusal::Unauthorized(challenge) => {
                    self.auth
                        .on_unauthorized(&challenge, token.as_deref(), attempt > 1)
                        .await
                }
                Refusal::InsufficientScope(challenge) => {
                    self.auth.on_insufficient_scope(&challenge).await
                }
            };
            match answer {
                Ok(next) => token = Some(next),
                Err(e) => {
                    tracing::warn!(server = self.auth.server(), "{e}");
                    return if keep_refusal {
                        result
                    } else {
                        Err(unanswerable(e))
                    };
                }
            }
        }
        unreachable!("the last attempt returns its result")
    }
}

/// An authorization failure as rmcp's transport error, its words kept.
fn unanswerable(error: super::OAuthError) -> HttpError {
    StreamableHttpError::Auth(AuthError::AuthorizationFailed(error.to_string()))
}

impl StreamableHttpClient for AuthorizedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.authorized(false, |token| {
            self.http.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.authorized(false, |token| {
            self.http.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.authorized(false, |token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        // Ending a session never starts a login: the stored token or nothing.
        let token = self.auth.token().await.ok().flatten();
        self.http
            .delete_session(uri, session_id, token, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.authorized(true, |token| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.authorized(true, |token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
