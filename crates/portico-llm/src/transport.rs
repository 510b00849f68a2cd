//! The HTTP part the streaming drivers share: send with retries, map failures, read the event stream.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use portico_net::sse::{ResponseEvents, SseError, SseEvent, SseLimits};
use portico_net::{NetError, SafeClient, retry_after};

use crate::LlmError;
use crate::retry::{RetryPolicy, is_retryable_status};
use crate::types::excerpt;

/// Characters of an error response body kept in [`LlmError::Http`].
const BODY_EXCERPT_CHARS: usize = 500;
/// Bytes of an error body read for the excerpt; the rest is not worth waiting for.
const BODY_READ_LIMIT: usize = 8 * 1024;
/// An error body that trickles in must not hold the error back.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how one driver posts its requests.
pub(crate) struct Endpoint<'a> {
    pub provider: &'a str,
    pub url: &'a str,
    /// Authentication and provider headers; secret values are marked sensitive.
    pub headers: HeaderMap,
    /// The API key, scrubbed from any response text we quote.
    pub secret: Option<&'a str>,
    pub retry: &'a RetryPolicy,
}

/// Posts `body` as JSON asking for an event stream, retrying rate limits, overload and connection
/// failures. Once a success status arrives nothing is retried: output may already be on its way
/// to the user.
pub(crate) async fn open_event_stream(
    client: &SafeClient,
    endpoint: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<EventStream, LlmError> {
    let provider = endpoint.provider;
    let shown_url = redact_url(endpoint.url);
    // Serialised once; each retry sends the same bytes.
    let body = Bytes::from(body.to_string());
    let mut attempt: u32 = 0;
    loop {
        let request = client
            .request(reqwest::Method::POST, endpoint.url)
            .map_err(|e| net_refusal(provider, e))?
            .headers(endpoint.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.clone());
        let retries_left = endpoint.retry.allows_retry(attempt);
        match client.send(request).await {
            Ok(response) if response.status().is_success() => {
                return EventStream::start(response, endpoint).await;
            }
            Ok(response) => {
                let status = response.status().as_u16();
                if retries_left && is_retryable_status(status) {
                    let hint = retry_after(response.headers(), SystemTime::now());
                    let delay = endpoint.retry.delay(attempt, hint);
                    tracing::debug!(
                        provider,
                        url = %shown_url,
                        status,
                        attempt = attempt + 1,
                        ?delay,
                        "model request will be retried"
                    );
                    drop(response);
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
                return Err(LlmError::Http {
                    provider: provider.to_owned(),
                    status,
                    body_excerpt: read_excerpt(response, endpoint.secret).await,
                });
            }
            Err(NetError::Http(err)) => {
                // Send errors all happen before a response byte arrived (connecting, TLS, the
                // server closing on us), so another attempt cannot duplicate visible output.
                let detail = error_chain(&err.without_url());
                if retries_left {
                    let delay = endpoint.retry.delay(attempt, None);
                    tracing::debug!(
                        provider,
                        url = %shown_url,
                        error = %detail,
                        attempt = attempt + 1,
                        ?delay,
                        "model request will be retried"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
                return Err(LlmError::Unreachable {
                    provider: provider.to_owned(),
                    url: shown_url,
                    detail,
                });
            }
            Err(other) => return Err(net_refusal(provider, other)),
        }
    }
}

/// The SSE events of a successful response, read as they arrive.
pub(crate) struct EventStream {
    events: ResponseEvents,
    provider: String,
}

impl EventStream {
    async fn start(response: reqwest::Response, endpoint: &Endpoint<'_>) -> Result<Self, LlmError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        // A missing content type is tolerated (some small servers omit it); a different one means
        // the server ignored `stream: true` or a proxy answered instead.
        if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
            return Err(LlmError::Protocol {
                provider: endpoint.provider.to_owned(),
                detail: format!(
                    "expected a streamed response (text/event-stream) from {} but got {content_type}: {}",
                    redact_url(endpoint.url),
                    read_excerpt(response, endpoint.secret).await
                ),
            });
        }
        Ok(EventStream {
            // Some OpenAI-compatible servers end on `data: [DONE]` without the blank line after it.
            events: ResponseEvents::from_response(
                response,
                SseLimits::default().dispatching_unterminated(),
            ),
            provider: endpoint.provider.to_owned(),
        })
    }

    /// The next event, or `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, LlmError> {
        match self.events.next().await.transpose() {
            Ok(event) => Ok(event),
            Err(SseError::Body(err)) => Err(LlmError::Protocol {
                provider: self.provider.clone(),
                detail: format!(
                    "the response stream broke off: {}",
                    error_chain(&err.without_url())
                ),
            }),
            Err(too_large) => Err(LlmError::Protocol {
                provider: self.provider.clone(),
                detail: too_large.to_string(),
            }),
        }
    }
}

/// A header for the request, validated here because a bad one would otherwise surface as reqwest's
/// opaque builder error on send. `sensitive` keeps the value out of any Debug output.
pub(crate) fn header(
    provider: &str,
    headers: &mut HeaderMap,
    name: &str,
    value: &str,
    sensitive: bool,
) -> Result<(), LlmError> {
    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| LlmError::Config {
        provider: provider.to_owned(),
        detail: format!("{name:?} is not a valid HTTP header name"),
    })?;
    let mut value = HeaderValue::from_str(value).map_err(|_| LlmError::Config {
        provider: provider.to_owned(),
        // The value may be a credential: say which header, never what it held.
        detail: format!("the value of header {name} is not a valid HTTP header value"),
    })?;
    value.set_sensitive(sensitive);
    headers.insert(name, value);
    Ok(())
}

/// A configured key, treating an empty one (an unset `${VAR}` expanded to "") as absent.
pub(crate) fn present_key(key: &Option<String>) -> Option<&str> {
    key.as_deref().map(str::trim).filter(|k| !k.is_empty())
}

/// The URL without user-info, for messages and `describe`.
pub(crate) fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        _ => raw.to_owned(),
    }
}

/// Joins `base` and `path` with exactly one slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

pub(crate) fn net_refusal(provider: &str, err: NetError) -> LlmError {
    let provider = provider.to_owned();
    match err {
        NetError::Blocked(blocked) => LlmError::Blocked {
            provider,
            rule: Some(blocked.rule()),
            detail: blocked.to_string(),
        },
        NetError::UnsupportedScheme { .. }
        | NetError::MissingHost { .. }
        | NetError::TooManyRedirects { .. }
        | NetError::CredentialsCrossOrigin { .. } => LlmError::Blocked {
            provider,
            rule: None,
            detail: err.to_string(),
        },
        NetError::InvalidUrl { .. } | NetError::Build(_) => LlmError::Config {
            provider,
            detail: format!("{err}; check the model's base URL"),
        },
        NetError::Http(e) => LlmError::Unreachable {
            provider,
            url: e.url().map(|u| redact_url(u.as_str())).unwrap_or_default(),
            detail: error_chain(&e.without_url()),
        },
    }
}

/// An error and its causes on one line, skipping causes whose text the previous already includes.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

/// The start of an error body, as text, without the key we sent.
async fn read_excerpt(mut response: reqwest::Response, secret: Option<&str>) -> String {
    let mut body = Vec::new();
    let read = async {
        while body.len() < BODY_READ_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(BODY_READ_TIMEOUT, read).await;
    let mut text = String::from_utf8_lossy(&body).trim().to_owned();
    if let Some(secret) = secret.filter(|s| s.len() >= 4) {
        text = text.replace(secret, "[redacted]");
    }
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    excerpt(&text, BODY_EXCERPT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            join_url("https://api.openai.com/v1/", "/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            redact_url("https://user:pw@example.com/v1"),
            "https://example.com/v1"
        );
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn bad_header_values_are_not_echoed() {
        let mut headers = HeaderMap::new();
        let err = header("p", &mut headers, "x-api-key", "sk-\nsecret", true).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(header("p", &mut headers, "bad name", "v", false).is_err());
        header("p", &mut headers, "x-api-key", "sk-secret", true).unwrap();
        assert!(!format!("{headers:?}").contains("sk-secret"));
    }

    #[test]
    fn empty_keys_are_absent() {
        assert_eq!(present_key(&Some("  ".into())), None);
        assert_eq!(present_key(&None), None);
        assert_eq!(present_key(&Some("k".into())), Some("k"));
    }
}
