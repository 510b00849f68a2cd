//! The registry API's read side, v0.1: `GET /v0.1/servers` (search, limit, cursor),
//! `GET /v0.1/servers/{name}/versions/latest` and `.../versions/{version}`.
//!
//! Every request goes through `portico-net`'s [`SafeClient`] (public addresses only, unless
//! `[registry] allow_private_network`), under a total deadline, and every answer is read up to
//! [`MAX_RESPONSE_BYTES`]. Errors say which registry and what to do, never a transport type.

use std::time::Duration;

use portico_net::{NetError, NetPolicy, SafeClient};
use serde::de::DeserializeOwned;
use url::Url;

use crate::server_json::{ServerList, ServerResponse};
use crate::translate::printable;

/// The most one answer may hold. A page of 100 servers with their packages is well under 1 MiB.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Servers asked for per page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 30;
/// The most the official registry gives per page.
pub const MAX_LIMIT: usize = 100;
/// One request, body included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A registry, reached through the SSRF-safe client.
#[derive(Debug, Clone)]
pub struct Registry {
    client: SafeClient,
    base: Url,
}

/// What a list request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Words matched against server names (the API's `search`).
    pub search: Option<String>,
    /// Servers per page (at most [`MAX_LIMIT`]).
    pub limit: Option<usize>,
    /// Where to continue, from the previous page's `metadata.nextCursor`.
    pub cursor: Option<String>,
}

/// Why the registry could not answer.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("[registry] url `{url}` {reason}")]
    BadUrl { url: String, reason: &'static str },
    #[error("{message}")]
    Refused { message: String },
    #[error("cannot reach the registry at {url}: {cause}; check [registry] url and the network")]
    Unreachable { url: String, cause: String },
    #[error("the registry at {url} did not answer within {} s", TIMEOUT.as_secs())]
    Timeout { url: String },
    #[error("the registry at {registry} has no server `{name}`{}", .version.as_deref().map(|v| format!(" at version {v}")).unwrap_or_default())]
    NotFound {
        registry: String,
        name: String,
        version: Option<String>,
    },
    #[error("the registry at {url} answered HTTP {status}{}", .detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Status {
        url: String,
        status: u16,
        detail: Option<String>,
    },
    #[error(
        "the registry at {url} sent more than {} MiB; is [registry] url a registry?",
        MAX_RESPONSE_BYTES / (1024 * 1024)
    )]
    TooLarge { url: String },
    #[error(
        "the registry at {url} answered with something other than the registry API's JSON ({detail}); is [registry] url a registry serving /v0.1?"
    )]
    NotRegistryJson { url: String, detail: String },
}

impl Registry {
    /// A client of the registry at `url` (`https://registry.modelcontextprotocol.io`, or a
    /// company's own under any path). `allow_private_network` lets it be on loopback or a
    /// private network; cloud metadata and link-local addresses stay refused.
    pub fn new(url: &str, allow_private_network: bool) -> Result<Registry, RegistryError> {
        let base = base_url(url)?;
        let policy = NetPolicy::private_network(allow_private_network).with_private_network_remedy(
            "; set `allow_private_network = true` under [registry] to allow it",
        );
        let client = SafeClient::builder()
            .policy(policy)
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| RegistryError::Unreachable {
                url: url.to_string(),
                cause: portico_net::root_cause(&e),
            })?;
        Ok(Registry { client, base })
    }

    /// The registry of `[registry]`.
    pub fn from_config(
        section: &portico_config::RegistrySection,
    ) -> Result<Registry, RegistryError> {
        Registry::new(section.url(), section.allow_private_network)
    }

    /// The base URL, as messages name the registry.
    pub fn url(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_string()
    }

    /// One page of servers.
    pub async fn list(&self, query: &ListQuery) -> Result<ServerList, RegistryError> {
        let mut url = self.endpoint(&[]);
        {
            let mut pairs = url.query_pairs_mut();
            if let Some(search) = query.search.as_deref().filter(|s| !s.trim().is_empty()) {
                pairs.append_pair("search", search.trim());
            }
            // One entry per server: its latest version.
            pairs.append_pair("version", "latest");
            let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
            pairs.append_pair("limit", &limit.to_string());
            if let Some(cursor) = &query.cursor {
                pairs.append_pair("cursor", cursor);
            }
        }
        self.get_json(url, None).await
    }

    /// The latest version of the server named `name` (`io.github.owner/server`).
    pub async fn latest(&self, name: &str) -> Result<ServerResponse, RegistryError> {
        let url = self.endpoint(&[name, "versions", "latest"]);
        self.get_json(url, Some((name, None))).await
    }

    /// One version of the server named `name`.
    pub async fn version(
        &self,
        name: &str,
        version: &str,
    ) -> Result<ServerResponse, RegistryError> {
        let url = self.endpoint(&[name, "versions", version]);
        self.get_json(url, Some((name, Some(version)))).await
    }

    /// `{base}/v0.1/servers/{segments...}`, each segment percent-encoded (a name's `/` included).
    fn endpoint(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["v0.1", "servers"])
                .extend(segments);
        }
        url
    }

    /// GETs `url` and reads its JSON. `subject`: the server (and version) a 404 is about.
    async fn get_json<T: DeserializeOwned>(
        &self,
        url: Url,
        subject: Option<(&str, Option<&str>)>,
    ) -> Result<T, RegistryError> {
        let shown = url_without_query(&url);
        let request = self
            .client
            .request(reqwest::Method::GET, url.as_str())
            .map_err(|e| self.net_error(&shown, e))?
            .header(reqwest::header::ACCEPT, "application/json");
        let mut response = self
            .client
            .send(request)
            .await
            .map_err(|e| self.net_error(&shown, e))?;
        let status = response.status();
        if response
            .content_length()
            .is_some_and(|length| length > MAX_RESPONSE_BYTES as u64)
        {
            return Err(RegistryError::TooLarge { url: shown });
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                        return Err(RegistryError::TooLarge { url: shown });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(self.net_error(&shown, NetError::from(e))),
            }
        }
        if status == reqwest::StatusCode::NOT_FOUND
            && let Some((name, version)) = subject
        {
            return Err(RegistryError::NotFound {
                registry: self.url(),
                name: printable(name),
                version: version.map(printable),
            });
        }
        if !status.is_success() {
            return Err(RegistryError::Status {
                url: shown,
                status: status.as_u16(),
                detail: error_detail(&body),
            });
        }
        serde_json::from_slice(&body).map_err(|e| RegistryError::NotRegistryJson {
            url: shown,
            detail: printable(&e.to_string()),
        })
    }

    fn net_error(&self, url: &str, error: NetError) -> RegistryError {
        if let Some(blocked) = error.blocked() {
            return refusal(&blocked.to_string());
        }
        if let NetError::Http(e) = &error
            && e.is_timeout()
        {
            return RegistryError::Timeout {
                url: url.to_string(),
            };
        }
        if let Some(message) = self.client.last_refusal_message()
            && portico_net::blocked_in_error_chain(&error).is_some()
        {
            return refusal(&message);
        }
        let cause = self
            .client
            .last_connect_failure()
            .unwrap_or_else(|| portico_net::root_cause(&error));
        RegistryError::Unreachable {
            url: url.to_string(),
            cause,
        }
    }
}

/// A refusal by the SSRF checks (its message ends in the registry's own remedy).
fn refusal(message: &str) -> RegistryError {
    RegistryError::Refused {
        message: format!("the registry was {message}"),
    }
}

/// The base URL: http(s), with a host, without query or fragment.
fn base_url(url: &str) -> Result<Url, RegistryError> {
    let bad = |reason| RegistryError::BadUrl {
        url: printable(url),
        reason,
    };
    let parsed = Url::parse(url.trim()).map_err(|_| bad("is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
        return Err(bad("is not an http(s) URL with a host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("has a query or fragment; give the registry's base URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("holds a user name or password"));
    }
    Ok(parsed)
}

fn url_without_query(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.to_string()
}

/// The error text of an API error body: `{"error": ...}`, or a problem document's `detail` /
/// `title`. Cut and made printable: it is shown to the user.
fn error_detail(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    ["error", "detail", "title", "message"]
        .iter()
        .find_map(|key| value.get(key).and_then(|v| v.as_str()))
        .map(printable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_encode_the_name_as_one_segment_under_the_base_path() {
        let registry = Registry::new("https://registry.example.com/mcp/", false).unwrap();
        assert_eq!(
            registry
                .endpoint(&["io.github.x/y", "versions", "latest"])
                .as_str(),
            "https://registry.example.com/mcp/v0.1/servers/io.github.x%2Fy/versions/latest"
        );
        let plain = Registry::new("https://registry.example.com", false).unwrap();
        assert_eq!(
            plain
                .endpoint(&["a/../b", "versions", "1.0.0+build"])
                .as_str(),
            "https://registry.example.com/v0.1/servers/a%2F..%2Fb/versions/1.0.0+build"
        );
        assert_eq!(plain.url(), "https://registry.example.com");
    }

    #[test]
    fn base_urls_are_checked() {
        for (url, reason) in [
            ("registry.example.com", "is not a URL"),
            (
                "ftp://registry.example.com",
                "is not an http(s) URL with a host",
            ),
            (
                "https://r.example.com/?q=1",
                "has a query or fragment; give the registry's base URL",
            ),
            (
                "https://user:pw@r.example.com",
                "holds a user name or password",
            ),
        ] {
            let error = Registry::new(url, false).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("[registry] url `{url}` {reason}")
            );
        }
    }

    #[test]
    fn error_bodies_are_read_in_both_forms() {
        assert_eq!(
            error_detail(br#"{"error": "Server not found"}"#).as_deref(),
            Some("Server not found")
        );
        assert_eq!(
            error_detail(br#"{"title": "Not Found", "status": 404, "detail": "no such\nserver"}"#)
                .as_deref(),
            Some("no such server")
        );
        assert_eq!(error_detail(b"<html>"), None);
    }

    /// One canned HTTP answer on 127.0.0.1, for the error paths.
    async fn answer_once(response: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(&response).await;
            let _ = socket.shutdown().await;
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_loopback_registry_is_refused_unless_allowed() {
        let url = answer_once(Vec::new()).await;
        let error = Registry::new(&url, false)
            .unwrap()
            .latest("io.example/x")
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, RegistryError::Refused { .. }), "{message}");
        assert_eq!(
            message,
            format!(
                "the registry was refused {url}/v0.1/servers/io.example%2Fx/versions/latest: 127.0.0.1 is a loopback address; set `allow_private_network = true` under [registry] to allow it"
            )
        );
    }

    #[tokio::test]
    async fn not_found_too_large_and_not_json_are_told_apart() {
        let body = r#"{"error": "Server not found"}"#;
        let url = answer_once(
            format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
        .await;
        let error = Registry::new(&url, true)
            .unwrap()
            .latest("io.example/nope")
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("the registry at {url} has no server `io.example/nope`")
        );

        let url = answer_once(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                MAX_RESPONSE_BYTES + 1
            )
            .into_bytes(),
        )
        .await;
        let error = Registry::new(&url, true)
            .unwrap()
            .list(&ListQuery::default())
            .await
            .unwrap_err();
        assert!(matches!(error, RegistryError::TooLarge { .. }), "{error}");

        // Without a length, the body is cut as it streams.
        let mut huge = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b' ', MAX_RESPONSE_BYTES + 10));
        let url = answer_once(huge).await;
        let error = Registry::new(&url, true)
            .unwrap()
            .list(&ListQuery::default())
            .await
            .unwrap_err();
        assert!(matches!(error, RegistryError::TooLarge { .. }), "{error}");

        let url = answer_once(
            b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\n<html>".to_vec(),
        )
        .await;
        let error = Registry::new(&url, true)
            .unwrap()
            .list(&ListQuery::default())
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "the registry at {url}/v0.1/servers answered with something other than the registry API's JSON"
            )),
            "{message}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_registry_says_why() {
        // Bound and closed at once: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let error = Registry::new(&url, true)
            .unwrap()
            .list(&ListQuery::default())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "cannot reach the registry at {url}/v0.1/servers: connection refused; check [registry] url and the network"
            )
        );
    }
}
