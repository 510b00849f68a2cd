//! One bounded GET of a JSON document from the authorization server, through the SSRF-safe client.

use portico_net::SafeClient;
use serde_json::Value;

/// Why a document could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("{0}")]
    Net(#[from] portico_net::NetError),
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} sent more than {max} bytes")]
    TooLarge { url: String, max: usize },
    #[error("{url} sent something that is not a JSON object: {reason}")]
    NotJson { url: String, reason: String },
    #[error("reading {url}: {reason}")]
    Body { url: String, reason: String },
}

/// `url`'s JSON object, read to at most `max_bytes` (a longer body is refused as soon as it is).
pub(crate) async fn json_object(
    client: &SafeClient,
    url: &str,
    max_bytes: usize,
) -> Result<serde_json::Map<String, Value>, FetchError> {
    let request = client
        .request(reqwest::Method::GET, url)?
        .header(reqwest::header::ACCEPT, "application/json");
    let mut response = client.send(request).await?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    let too_large = || FetchError::TooLarge {
        url: url.to_string(),
        max: max_bytes,
    };
    if response
        .content_length()
        .is_some_and(|length| length > max_bytes as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| FetchError::Body {
            url: url.to_string(),
            reason: portico_net::root_cause(&e),
        })?;
        let Some(chunk) = chunk else { break };
        if body.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(FetchError::NotJson {
            url: url.to_string(),
            reason: "not an object".into(),
        }),
        Err(e) => Err(FetchError::NotJson {
            url: url.to_string(),
            reason: e.to_string(),
        }),
    }
}
