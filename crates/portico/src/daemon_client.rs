//! The running daemon, as the CLI reaches it: found through the owner-only `daemon.json` in the data
//! dir, proven to be the process that wrote it (an HMAC challenge) before it is sent the token, then
//! asked over its `/api` routes, or over `/mcp` for calls, exactly as an IDE would be answered.
//! `portico approvals` needs it; `servers`, `tools`, `call`, `chat`, `agents`, `audit` and
//! `conversations` use it when it runs (see `oneview_cli`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use portico_config::{McpServerConfig, Transport};
use portico_daemon::{DaemonInfo, InfoFile};
use serde_json::Value;

use crate::stdio_door::{CLIENT_TOKEN_ENV, DaemonCheck, check_daemon};

/// How long one API request to the daemon may take; the routes answer from memory or the store.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a streamed answer (a chat turn) is read for.
const STREAMED_ANSWER_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The running daemon, proven to be the one that wrote `daemon.json`.
pub(crate) struct Daemon {
    pub(crate) base: String,
    pub(crate) info: DaemonInfo,
    token: Option<String>,
    client: portico_net::SafeClient,
}

impl Daemon {
    /// The daemon, or an error that says how to start it: for commands only a daemon can answer.
    pub(crate) async fn find() -> anyhow::Result<Daemon> {
        let file = InfoFile::in_dir(&portico_config::data_dir());
        let Some(info) = file.read() else {
            bail!(
                "no daemon is running (no {}); approvals are held and answered by the daemon: start it with `portico serve` (with the same PORTICO_HOME)",
                file.path().display()
            );
        };
        match check_daemon(&info).await {
            DaemonCheck::Proven => {}
            DaemonCheck::NoAnswer => bail!(
                "the daemon in {} (pid {} at {}) does not answer; is it still running? start it with `portico serve`",
                file.path().display(),
                info.pid,
                info.address
            ),
            DaemonCheck::Impostor(what) => bail!(
                "{} names a daemon with pid {} at {}, but {what}; not sending it the token. If the daemon is gone, remove that file; if it runs, restart it",
                file.path().display(),
                info.pid,
                info.address
            ),
        }
        Daemon::at(info)
    }

    /// The daemon if one runs, else `None` (no info file, or a stale one nothing answers); a
    /// process that cannot prove it is the daemon is warned of and not used.
    pub(crate) async fn running() -> Option<Daemon> {
        let file = InfoFile::in_dir(&portico_config::data_dir());
        let info = file.read()?;
        match check_daemon(&info).await {
            DaemonCheck::Proven => Daemon::at(info).ok(),
            DaemonCheck::NoAnswer => None,
            DaemonCheck::Impostor(what) => {
                if crate::oneview_cli::quiet() {
                    return None;
                }
                eprintln!(
                    "warning: {} names a daemon with pid {} at {}, but {what}; not using it (running in this process). If the daemon is gone, remove that file",
                    file.path().display(),
                    info.pid,
                    info.address
                );
                None
            }
        }
    }

    fn at(info: DaemonInfo) -> anyhow::Result<Daemon> {
        let client = portico_net::SafeClient::builder()
            // The daemon listens on this machine: loopback by design.
            .policy(portico_net::NetPolicy::allow_private_network())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("cannot build the HTTP client to reach the daemon")?;
        Ok(Daemon {
            base: info.base_url(),
            token: client_token(&info),
            info,
            client,
        })
    }

    /// A one-line name for messages: `the daemon (pid 12, http://127.0.0.1:4200)`.
    pub(crate) fn describe(&self) -> String {
        format!("the daemon (pid {}, {})", self.info.pid, self.base)
    }

    /// The config to open an MCP session with the daemon's `/mcp` as its client, under the token
    /// that makes this CLI the daemon's client.
    pub(crate) fn mcp_server(&self) -> McpServerConfig {
        mcp_server_config(&self.info, self.token.as_deref())
    }

    pub(crate) async fn get(&self, path: &str, id: Option<&str>) -> anyhow::Result<Value> {
        let request = self.client.http().get(format!("{}{path}", self.base));
        self.answer(request, path, id).await
    }

    pub(crate) async fn post(&self, path: &str, id: &str, body: Value) -> anyhow::Result<Value> {
        let request = self
            .client
            .http()
            .post(format!("{}{path}", self.base))
            .json(&body);
        self.answer(request, path, Some(id)).await
    }

    /// A request to the daemon, with the token when it has one, for streaming answers: these last
    /// as long as the agent's turn, so the client's 30 s bound on a whole request would cut them
    /// off; the daemon's own agent timeout ends a turn that runs on.
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self
            .client
            .http()
            .request(method, format!("{}{path}", self.base))
            .timeout(STREAMED_ANSWER_TIMEOUT);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `method path` with the token, answered with its status and body text, whatever they are:
    /// for callers that tell the statuses apart themselves.
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> anyhow::Result<(u16, String)> {
        let request = self
            .client
            .http()
            .request(method, format!("{}{path}", self.base));
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .with_context(|| format!("the daemon at {} did not answer {path}", self.base))?;
        let status = response.status().as_u16();
        let body = response.text().await.with_context(|| {
            format!("the daemon at {} broke off its answer to {path}", self.base)
        })?;
        if status == 401 {
            bail!(
                "the daemon at {} refused the token; check PORTICO_CLIENT_TOKEN against [[server.clients]], or restart the daemon so daemon.json has the current token",
                self.base
            );
        }
        Ok((status, error_text(&body)))
    }

    async fn answer(
        &self,
        request: reqwest::RequestBuilder,
        path: &str,
        id: Option<&str>,
    ) -> anyhow::Result<Value> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .with_context(|| format!("the daemon at {} did not answer {path}", self.base))?;
        let status = response.status().as_u16();
        let body: Option<Value> = response.json().await.ok();
        let error = body
            .as_ref()
            .and_then(|b| b.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string);
        match (status, error, body) {
            (200..=299, _, Some(body)) => Ok(body),
            (404, Some(error), _) => match id {
                Some(id) => bail!(
                    "no approval request `{id}` ({error}); `portico approvals list --status all` shows the ones the daemon has"
                ),
                None => bail!("{error}"),
            },
            // The route itself is missing: a daemon from an older Portico.
            (404, None, _) if path.starts_with("/api/approvals") => bail!(
                "the daemon at {} has no approvals API; restart it with this version of portico",
                self.base
            ),
            (404, None, _) => bail!(
                "the daemon at {} has no {} route (an older Portico); restart it with this version of portico, or pass --standalone",
                self.base,
                path.split('?').next().unwrap_or(path)
            ),
            (409, Some(error), _) => {
                bail!(
                    "{error}; only a pending request can be answered (see `portico approvals show ID`)"
                )
            }
            (401, _, _) => bail!(
                "the daemon at {} refused the token ({}); {}",
                self.base,
                if std::env::var_os(CLIENT_TOKEN_ENV).is_some() {
                    "PORTICO_CLIENT_TOKEN"
                } else {
                    "daemon.json's"
                },
                "check PORTICO_CLIENT_TOKEN against [[server.clients]], or restart the daemon so daemon.json has the current token"
            ),
            (403, Some(error), _) => bail!("the daemon refused: {error}"),
            (_, Some(error), _) => bail!("the daemon answered {path} with HTTP {status}: {error}"),
            (_, None, _) => bail!(
                "the daemon answered {path} with HTTP {status} and no JSON error; check its log"
            ),
        }
    }
}

/// An API answer's `error` text, else the body as it came.
fn error_text(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.to_string())
}

/// As `portico mcp` does: a `[[server.clients]]` token in `PORTICO_CLIENT_TOKEN` answers as that
/// client; else the daemon's own `[server] token` from `daemon.json`.
pub(crate) fn client_token(info: &DaemonInfo) -> Option<String> {
    std::env::var(CLIENT_TOKEN_ENV)
        .ok()
        .map(|token| token.trim().to_string())
        .filter(|token| !token.is_empty())
        .or_else(|| info.token.clone())
}

/// The daemon's `/mcp` as an upstream of this process, under `token`.
pub(crate) fn mcp_server_config(info: &DaemonInfo, token: Option<&str>) -> McpServerConfig {
    let mut headers = BTreeMap::new();
    if let Some(token) = token {
        headers.insert(
            "Authorization".to_string(),
            format!("Bearer {}", token.trim()),
        );
    }
    McpServerConfig {
        name: "daemon".into(),
        timeout_secs: portico_config::DEFAULT_TIMEOUT_SECS,
        startup_timeout_secs: None,
        max_concurrent_calls: portico_config::DEFAULT_MAX_CONCURRENT_CALLS,
        env: Vec::new(),
        enabled: true,
        // The daemon listens on this machine, so its address is loopback by design.
        allow_private_network: true,
        // The daemon's catalog is already named; keep its names as they are.
        prefix: Some(false),
        protocol_version: None,
        transport: Transport::Http {
            url: info.mcp_url(),
            headers,
        },
        oauth: None,
    }
}

/// An id the daemon made, checked before it goes into a URL path: only the characters ids are made
/// of (anything else would change the path), at most `max` of them. `what` names the kind of id
/// and how to list them, for the error.
pub fn checked_path_id<'a>(id: &'a str, max: usize, what: &str) -> anyhow::Result<&'a str> {
    let fine = !id.is_empty()
        && id.len() <= max
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !fine {
        anyhow::bail!("`{id}` is not {what}");
    }
    Ok(id)
}
