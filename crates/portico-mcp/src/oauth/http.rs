//! rmcp's OAuth requests (metadata discovery, registration, token and refresh requests) sent
//! through Portico's `SafeClient`, so they meet the same address checks, DNS pinning and redirect
//! re-checks as every other outbound request, under the server's `allow_private_network`.

use std::time::Duration;

use futures::StreamExt;
use portico_net::{NetPolicy, SafeClient};
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};

/// One OAuth request's deadline, body included.
const OAUTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest metadata document or token response read.
const MAX_OAUTH_RESPONSE_BYTES: usize = 1024 * 1024;

/// Two `SafeClient`s: one follows (checked) redirects, for discovery; one hands them back, for
/// token and registration requests, which must not be redirected. Built at the first OAuth request:
/// every HTTP upstream has one, and most never need it.
pub(crate) struct SafeOAuthHttp {
    policy: NetPolicy,
    clients: std::sync::OnceLock<(SafeClient, SafeClient)>,
}

impl SafeOAuthHttp {
    pub(crate) fn new(policy: NetPolicy) -> Self {
        SafeOAuthHttp {
            policy,
            clients: std::sync::OnceLock::new(),
        }
    }

    /// (follows redirects, hands them back).
    fn clients(&self) -> Result<&(SafeClient, SafeClient), portico_net::NetError> {
        if let Some(clients) = self.clients.get() {
            return Ok(clients);
        }
        let build = |follow| {
            SafeClient::builder()
                .policy(self.policy.clone())
                .timeout(OAUTH_REQUEST_TIMEOUT)
                .follow_redirects(follow)
                .build()
        };
        let built = (build(true)?, build(false)?);
        Ok(self.clients.get_or_init(|| built))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("response from {url} is larger than {max} bytes")]
struct TooLarge {
    url: String,
    max: usize,
}

impl OAuthHttpClient for SafeOAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let boxed = |e: portico_net::NetError| Box::new(e) as OAuthHttpClientError;
            let (follow, stop) = self.clients().map_err(boxed)?;
            let client = match request.redirect_policy {
                OAuthHttpRedirectPolicy::Stop => stop,
                _ => follow,
            };
            let request = reqwest::Request::try_from(request.request)
                .map_err(|e| Box::new(e) as OAuthHttpClientError)?;
            // A clear refusal for a URL the policy blocks, before reqwest buries it.
            client.check_url(request.url().as_str()).map_err(boxed)?;
            let url = request.url().to_string();
            let response = client
                .http()
                .execute(request)
                .await
                .map_err(|e| boxed(e.into()))?;
            let mut builder = http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let mut body = Vec::new();
            let mut chunks = response.bytes_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| boxed(e.into()))?;
                if chunk.len() > MAX_OAUTH_RESPONSE_BYTES - body.len() {
                    return Err(Box::new(TooLarge {
                        url,
                        max: MAX_OAUTH_RESPONSE_BYTES,
                    }) as OAuthHttpClientError);
                }
                body.extend_from_slice(&chunk);
            }
            builder
                .body(body)
                .map_err(|e| Box::new(e) as OAuthHttpClientError)
        })
    }
}
