//! OAuth 2.1 to protected upstream MCP servers (the MCP authorization spec, 2025-03-26 to
//! 2026-07-28).
//!
//! rmcp's `auth` module does the protocol: discovery (RFC 9728 protected resource metadata from the
//! `WWW-Authenticate` challenge, then its well-known paths; RFC 8414 and OpenID discovery, with the
//! 2025-03-26 fallbacks), client registration (pre-registered, Client ID Metadata Documents, RFC
//! 7591), PKCE S256, RFC 8707 resource indicators, scope selection, RFC 9207 `iss` checks, the token
//! exchange and refresh, and issuer binding of stored credentials. What it leaves to the
//! application is written here:
//! - where credentials live: one 0600 file per server in the data dir ([`store`]), which every
//!   Portico process reads, so a login anywhere is picked up everywhere;
//! - every OAuth request through [`portico_net::SafeClient`] (`http`);
//! - the browser and the loopback redirect listener ([`login`]);
//! - what an MCP request does on a 401 or a 403 `insufficient_scope`: use a token another process
//!   stored, refresh, log in again (when this process may open a browser), or give up with
//!   `needs login` (`transport`, [`UpstreamAuth`]);
//! - the retry limit: a 403 for scopes the token was already granted is not answered with another
//!   login, and at most [`MAX_LOGINS`] logins start per server in [`LOGIN_WINDOW`].
//!
//! Tokens never reach a log: rmcp's records redact them in `Debug`, and nothing here formats one.

pub mod login;
pub mod store;

mod http;
mod transport;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse as _;
use portico_config::{McpServerConfig, Transport, UpstreamOAuthConfig};
use portico_net::NetPolicy;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, OAuthState, WWWAuthenticateParams,
};

pub use login::{Browser, Callback, CallbackListener};
pub use store::{FileStamp, Record, StoreError, TokenFile};
pub use transport::AuthorizedHttp;

use http::SafeOAuthHttp;
use store::SharedTokenFile;

/// How long a login waits for the browser to come back to the redirect URI.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// Logins one server may start within [`LOGIN_WINDOW`]: a server that keeps refusing does not get
/// an endless series of browser windows (the spec's retry limit).
pub const MAX_LOGINS: usize = 3;
pub const LOGIN_WINDOW: Duration = Duration::from_secs(600);
/// A token this close to its expiry is refreshed before it is sent.
const REFRESH_BEFORE_EXPIRY_SECS: u64 = 30;
/// How often a server waiting for a login looks at its credentials file.
const LOGIN_POLL: Duration = Duration::from_millis(500);

/// Where a Portico process keeps OAuth credentials, and whether it may start logins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthHome {
    /// `{data_dir}/oauth`.
    pub dir: PathBuf,
    /// `Some`: a server that needs a login gets one, through this browser. `None`: it is marked
    /// `needs login` and waits for `portico auth login`.
    pub browser: Option<Browser>,
    /// Print the authorization URL on stderr as well (the CLI's `auth login`).
    pub print_url: bool,
}

impl OAuthHome {
    /// The credentials in `data_dir`; logins start by themselves only when `$BROWSER` is set.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        OAuthHome {
            dir: data_dir.join("oauth"),
            browser: Browser::from_env(),
            print_url: false,
        }
    }
}

/// Why an upstream could not be authorized.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("server `{server}` needs login ({reason}); run `portico auth login {server}`")]
    NeedsLogin { server: String, reason: String },
    #[error(
        "server `{server}` refuses Portico's token for lack of scope `{scopes}`, which it was already granted; another login would not help (check the server's and the authorization server's scope settings)"
    )]
    ScopeRefused { server: String, scopes: String },
    #[error(
        "server `{server}`: {MAX_LOGINS} logins in the last {} minutes did not satisfy it; not starting another (run `portico auth login {server}` to try again)",
        LOGIN_WINDOW.as_secs() / 60
    )]
    TooManyLogins { server: String },
    #[error("server `{server}`: login failed at {step}: {message}")]
    Login {
        server: String,
        step: &'static str,
        message: String,
    },
    #[error("server `{server}`: {source}")]
    Store { server: String, source: StoreError },
}

/// What `portico auth status` shows of one server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuthStatus {
    pub server: String,
    pub file: String,
    pub logged_in: bool,
    pub client_id: Option<String>,
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
    /// Epoch seconds, when the token response said.
    pub expires_at: Option<u64>,
    pub refreshable: bool,
    /// Why the last request found no usable token, while nothing changed since.
    pub needs_login: Option<String>,
}

/// One HTTP upstream's authorization: its credentials file, its OAuth client, and what it does when
/// the server refuses a request. One per configured server, kept across reconnects.
pub struct UpstreamAuth {
    server: String,
    url: String,
    settings: UpstreamOAuthConfig,
    http: Arc<SafeOAuthHttp>,
    file: Arc<TokenFile>,
    browser: Option<Browser>,
    print_url: bool,
    /// An rmcp manager able to refresh: the last login's, or one built from the file when first
    /// needed. Held across a refresh.
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// Held through a login: concurrent requests that need one wait for the same one.
    logging_in: tokio::sync::Mutex<VecDeque<Instant>>,
    login_running: AtomicBool,
    /// Why a request found no usable token, and the file's version then.
    needs_login: std::sync::Mutex<Option<(String, Option<FileStamp>)>>,
    /// `portico auth login`: the stored token is not sent until the new login is done.
    fresh_login: AtomicBool,
}

impl std::fmt::Debug for UpstreamAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamAuth")
            .field("server", &self.server)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl UpstreamAuth {
    /// The authorization of an HTTP server, `None` for a stdio one and for one whose configured
    /// headers carry its credentials (`Authorization`): those are sent as they are.
    pub fn for_server(
        config: &McpServerConfig,
        home: &OAuthHome,
    ) -> Result<Option<Arc<UpstreamAuth>>, OAuthError> {
        let (url, headers) = match &config.transport {
            Transport::Http { url, headers } | Transport::Sse { url, headers } => (url, headers),
            Transport::Stdio { .. } => return Ok(None),
        };
        if headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"))
        {
            return Ok(None);
        }
        let http = SafeOAuthHttp::new(NetPolicy {
            allow_private: config.allow_private_network,
        })
        .map_err(|e| OAuthError::Login {
            server: config.name.clone(),
            step: "setting up its HTTP client",
            message: e.to_string(),
        })?;
        Ok(Some(Arc::new(UpstreamAuth {
            server: config.name.clone(),
            url: url.clone(),
            settings: config.oauth.clone().unwrap_or_default(),
            http: Arc::new(http),
            file: Arc::new(TokenFile::new(&home.dir, &config.name, url)),
            browser: home.browser.clone(),
            print_url: home.print_url,
            manager: tokio::sync::Mutex::new(None),
            logging_in: tokio::sync::Mutex::new(VecDeque::new()),
            login_running: AtomicBool::new(false),
            needs_login: std::sync::Mutex::new(None),
            fresh_login: AtomicBool::new(false),
        })))
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn token_file(&self) -> &TokenFile {
        &self.file
    }

    /// `portico auth login`: until a login completes, requests go without the stored token, so the
    /// server's challenge starts a new one.
    pub fn start_fresh(&self) {
        self.fresh_login.store(true, Ordering::SeqCst);
    }

    /// Whether [`UpstreamAuth::start_fresh`]'s login has not happened yet.
    pub fn fresh_login_pending(&self) -> bool {
        self.fresh_login.load(Ordering::SeqCst)
    }

    /// Whether a login is waiting for the browser now (a handshake's deadline waits for it).
    pub fn login_running(&self) -> bool {
        self.login_running.load(Ordering::SeqCst)
    }

    /// Why the server cannot be reached without a login, while the credentials file has not
    /// changed since that was found.
    pub fn needs_login(&self) -> Option<String> {
        let guard = self.needs_login.lock().unwrap_or_else(|e| e.into_inner());
        let (reason, stamp) = guard.as_ref()?;
        (*stamp == self.file.stamp()).then(|| reason.clone())
    }

    /// Waits until the credentials file changes (a login in this or another process), or returns at
    /// once when no login is pending.
    pub async fn wait_for_login(&self) {
        loop {
            if self.needs_login().is_none() {
                return;
            }
            tokio::time::sleep(LOGIN_POLL).await;
        }
    }

    fn mark_needs_login(&self, reason: &str) -> OAuthError {
        *self.needs_login.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((reason.to_string(), self.file.stamp()));
        OAuthError::NeedsLogin {
            server: self.server.clone(),
            reason: reason.to_string(),
        }
    }

    fn store_error(&self, source: StoreError) -> OAuthError {
        OAuthError::Store {
            server: self.server.clone(),
            source,
        }
    }

    fn login_error(&self, step: &'static str, message: impl std::fmt::Display) -> OAuthError {
        OAuthError::Login {
            server: self.server.clone(),
            step,
            message: message.to_string(),
        }
    }

    /// The token to send with a request: the stored one for this URL, refreshed when it is about to
    /// expire. `None`: the request goes without, and the server's challenge decides.
    pub async fn token(&self) -> Result<Option<String>, OAuthError> {
        if self.fresh_login.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let Some(record) = self.file.current().map_err(|e| self.store_error(e))? else {
            return Ok(None);
        };
        let Some(response) = record.credentials.token_response.as_ref() else {
            return Ok(None);
        };
        if !expiring(&record) {
            return Ok(Some(access_token(response)));
        }
        self.refresh().await
    }

    /// Scopes the stored token was granted.
    fn granted_scopes(&self) -> Result<Vec<String>, OAuthError> {
        Ok(self
            .file
            .current()
            .map_err(|e| self.store_error(e))?
            .filter(|r| r.credentials.token_response.is_some())
            .map(|r| r.credentials.granted_scopes)
            .unwrap_or_default())
    }

    /// A new access token from the refresh token; `None` when there is none or it was refused.
    async fn refresh(&self) -> Result<Option<String>, OAuthError> {
        let mut manager = self.manager.lock().await;
        if manager.is_none() {
            *manager = self.manager_from_file().await?;
        }
        let Some(manager) = manager.as_ref() else {
            return Ok(None);
        };
        match manager.refresh_token().await {
            Ok(response) => {
                tracing::info!(server = self.server, "refreshed the OAuth access token");
                Ok(Some(access_token(&response)))
            }
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => Ok(None),
            Err(e) => Err(self.login_error("token refresh", e)),
        }
    }

    /// A manager for the stored credentials (discovering the authorization server again), or `None`
    /// when there are none or they belong to another authorization server.
    async fn manager_from_file(&self) -> Result<Option<AuthorizationManager>, OAuthError> {
        if self
            .file
            .current()
            .map_err(|e| self.store_error(e))?
            .is_none()
        {
            return Ok(None);
        }
        let mut manager =
            AuthorizationManager::new_with_oauth_http_client(self.url.as_str(), self.http.clone())
                .await
                .map_err(|e| self.login_error("discovery", e))?;
        manager.set_credential_store(SharedTokenFile(self.file.clone()));
        match manager.initialize_from_store().await {
            Ok(true) => Ok(Some(manager)),
            Ok(false) => Ok(None),
            Err(e) => Err(self.login_error("discovery", e)),
        }
    }

    /// The server answered 401 to a request sent with `sent`. The token to retry with: one another
    /// process stored meanwhile, a refreshed one, or a new login's. `retried`: `sent` is already the
    /// answer to an earlier 401 of this request, so only a login can help.
    pub async fn on_unauthorized(
        &self,
        challenge: &str,
        sent: Option<&str>,
        retried: bool,
    ) -> Result<String, OAuthError> {
        if !retried && !self.fresh_login.load(Ordering::SeqCst) {
            if let Some(stored) = self.token().await?
                && Some(stored.as_str()) != sent
            {
                return Ok(stored);
            }
            if sent.is_some()
                && let Some(fresh) = self.refresh().await?
                && Some(fresh.as_str()) != sent
            {
                return Ok(fresh);
            }
        }
        // SEP-2350: a new authorization asks for what was granted before and what is challenged now.
        let mut scopes = self.settings.scopes.clone();
        if !self.fresh_login.load(Ordering::SeqCst) {
            union_into(&mut scopes, self.granted_scopes()?);
        }
        if !scopes.is_empty() {
            union_into(&mut scopes, challenged_scopes(challenge, &self.url));
        }
        let reason = if sent.is_some() {
            "the server refused the stored token"
        } else {
            "the server requires authorization"
        };
        self.login_or_give_up(Some(challenge), scopes, reason).await
    }

    /// The server answered 403 `insufficient_scope`. The token to retry with, from a login that asks
    /// for the challenged scopes as well as those granted; refused when the token already has them.
    pub async fn on_insufficient_scope(&self, challenge: &str) -> Result<String, OAuthError> {
        let challenged = challenged_scopes(challenge, &self.url);
        let granted = self.granted_scopes()?;
        if challenged.iter().all(|scope| granted.contains(scope)) {
            return Err(OAuthError::ScopeRefused {
                server: self.server.clone(),
                scopes: if challenged.is_empty() {
                    "(the challenge names none)".into()
                } else {
                    challenged.join(" ")
                },
            });
        }
        let mut scopes = self.settings.scopes.clone();
        union_into(&mut scopes, granted);
        let reason = format!("the server requires scope `{}`", challenged.join(" "));
        union_into(&mut scopes, challenged);
        self.login_or_give_up(Some(challenge), scopes, &reason)
            .await
    }

    async fn login_or_give_up(
        &self,
        challenge: Option<&str>,
        scopes: Vec<String>,
        reason: &str,
    ) -> Result<String, OAuthError> {
        match self.browser.clone() {
            Some(browser) => self.login(&browser, challenge, scopes).await,
            None => Err(self.mark_needs_login(reason)),
        }
    }

    /// Runs an authorization-code login through `browser` and stores its tokens; the new access
    /// token. `challenge` seeds discovery (the reactive path); without one the server's metadata is
    /// looked up at its well-known places. Empty `scopes`: the challenge's, else the protected
    /// resource metadata's, else none.
    pub async fn login(
        &self,
        browser: &Browser,
        challenge: Option<&str>,
        scopes: Vec<String>,
    ) -> Result<String, OAuthError> {
        let before = self.file.stamp();
        let mut recent = self.logging_in.lock().await;
        // A login finished while this one waited for it: its token is the answer.
        if self.file.stamp() != before
            && !self.fresh_login.load(Ordering::SeqCst)
            && let Some(token) = self.token().await?
        {
            return Ok(token);
        }
        while recent
            .front()
            .is_some_and(|started| started.elapsed() > LOGIN_WINDOW)
        {
            recent.pop_front();
        }
        if recent.len() >= MAX_LOGINS {
            return Err(OAuthError::TooManyLogins {
                server: self.server.clone(),
            });
        }
        recent.push_back(Instant::now());
        self.login_running.store(true, Ordering::SeqCst);
        let result = self.authorize(browser, challenge, scopes).await;
        self.login_running.store(false, Ordering::SeqCst);
        let manager = result?;
        *self.manager.lock().await = Some(manager);
        self.fresh_login.store(false, Ordering::SeqCst);
        *self.needs_login.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let token = self
            .file
            .current()
            .map_err(|e| self.store_error(e))?
            .and_then(|r| r.credentials.token_response.as_ref().map(access_token));
        token.ok_or_else(|| self.login_error("storing the token", "the token was not stored"))
    }

    async fn authorize(
        &self,
        browser: &Browser,
        challenge: Option<&str>,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager, OAuthError> {
        let listener = CallbackListener::bind(self.settings.redirect_port)
            .await
            .map_err(|e| {
                self.login_error(
                    "listening for the redirect on 127.0.0.1",
                    match self.settings.redirect_port {
                        Some(port) => format!("port {port}: {e} (its `redirect_port`)"),
                        None => e.to_string(),
                    },
                )
            })?;
        let redirect_uri = listener.redirect_uri();
        let mut manager =
            AuthorizationManager::new_with_oauth_http_client(self.url.as_str(), self.http.clone())
                .await
                .map_err(|e| self.login_error("discovery", e))?;
        manager.set_credential_store(SharedTokenFile(self.file.clone()));
        let mut request = AuthorizationRequest::new(redirect_uri)
            .with_client_name(
                self.settings
                    .client_name
                    .clone()
                    .unwrap_or_else(|| "Portico".into()),
            )
            .with_application_type("native");
        if let Some(challenge) = challenge.filter(|c| !c.trim().is_empty()) {
            request = request.with_challenge(challenge);
        }
        request = if scopes.is_empty() {
            request.with_initial_scope_selection()
        } else {
            request.with_scopes(scopes)
        };
        if let Some(client_id) = &self.settings.client_id {
            request = request.with_preregistered_client(client_id);
            if let Some(variable) = &self.settings.client_secret_env {
                let secret = std::env::var(variable).map_err(|_| {
                    self.login_error(
                        "reading the client secret",
                        format!("`{variable}` (its `client_secret_env`) is not set"),
                    )
                })?;
                request = request.with_client_secret(secret);
            }
        }
        if let Some(url) = &self.settings.client_metadata_url {
            request = request.with_client_metadata_url(url);
        }
        let mut state = OAuthState::Unauthorized(manager);
        state
            .start_authorization(request)
            .await
            .map_err(|e| self.login_error("discovery and client registration", e))?;
        let url = state
            .get_authorization_url()
            .await
            .map_err(|e| self.login_error("building the authorization URL", e))?;
        // The page comes from the authorization server's metadata: only a web page goes to the
        // browser (not `file:`, `javascript:` or a command-line option).
        match url::Url::parse(&url) {
            Ok(parsed) if matches!(parsed.scheme(), "https" | "http") => {}
            _ => {
                return Err(self.login_error(
                    "building the authorization URL",
                    "the authorization server's authorization_endpoint is not an http(s) URL",
                ));
            }
        }
        tracing::info!(
            server = self.server,
            "waiting for the authorization in the browser (up to {} s)",
            LOGIN_TIMEOUT.as_secs()
        );
        if self.print_url {
            eprintln!(
                "To log in to `{}`, open this page (a browser was asked to):\n  {url}",
                self.server
            );
        }
        if let Err(e) = browser.open(&url) {
            tracing::warn!(server = self.server, "cannot open the browser: {e}");
            if !self.print_url {
                return Err(self.login_error("opening the browser", e));
            }
        }
        let callback = listener.wait(LOGIN_TIMEOUT).await.ok_or_else(|| {
            self.login_error(
                "authorization",
                format!(
                    "the browser did not come back to the redirect URI within {} s",
                    LOGIN_TIMEOUT.as_secs()
                ),
            )
        })?;
        if let Some(error) = &callback.error {
            return Err(self.login_error(
                "authorization",
                format!(
                    "the authorization server answered `{error}`{}",
                    callback
                        .error_description
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ),
            ));
        }
        let (Some(code), Some(csrf)) = (&callback.code, &callback.state) else {
            return Err(self.login_error(
                "authorization",
                "the redirect carried no `code` or no `state`",
            ));
        };
        state
            .handle_callback_with_issuer(code, csrf, callback.issuer.as_deref())
            .await
            .map_err(|e| self.login_error("token exchange", e))?;
        tracing::info!(server = self.server, "logged in");
        state.into_authorization_manager().ok_or_else(|| {
            self.login_error("token exchange", "no authorized state after the exchange")
        })
    }

    /// `portico auth status`.
    pub fn status(&self) -> Result<AuthStatus, OAuthError> {
        let record = self.file.current().map_err(|e| self.store_error(e))?;
        let credentials = record.as_ref().map(|r| &r.credentials);
        let response = credentials.and_then(|c| c.token_response.as_ref());
        let expires_at = credentials.and_then(|c| {
            let received = c.token_received_at?;
            let expires_in = c.token_response.as_ref()?.expires_in()?;
            Some(received + expires_in.as_secs())
        });
        Ok(AuthStatus {
            server: self.server.clone(),
            file: self.file.path().display().to_string(),
            logged_in: response.is_some(),
            client_id: credentials.map(|c| c.client_id.clone()),
            issuer: credentials.and_then(|c| c.issuer.clone()),
            scopes: credentials
                .map(|c| c.granted_scopes.clone())
                .unwrap_or_default(),
            expires_at,
            refreshable: response.is_some_and(|r| r.refresh_token().is_some()),
            needs_login: self.needs_login(),
        })
    }

    /// `portico auth logout`: forgets the stored credentials; true when there were some.
    pub async fn logout(&self) -> Result<bool, OAuthError> {
        *self.manager.lock().await = None;
        self.file.remove().map_err(|e| self.store_error(e))
    }
}

/// The one place a token response's access token is read.
fn access_token(response: &rmcp::transport::auth::OAuthTokenResponse) -> String {
    response.access_token().secret().to_string()
}

/// Whether the stored token expires within [`REFRESH_BEFORE_EXPIRY_SECS`].
fn expiring(record: &Record) -> bool {
    let credentials = &record.credentials;
    let (Some(response), Some(received)) = (
        credentials.token_response.as_ref(),
        credentials.token_received_at,
    ) else {
        return false;
    };
    let Some(expires_in) = response.expires_in() else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let expires_at = received.saturating_add(expires_in.as_secs());
    let margin = REFRESH_BEFORE_EXPIRY_SECS.min(expires_in.as_secs() / 2);
    now.saturating_add(margin) >= expires_at
}

/// The scopes a `WWW-Authenticate` challenge names.
fn challenged_scopes(challenge: &str, url: &str) -> Vec<String> {
    let Ok(base) = url::Url::parse(url) else {
        return Vec::new();
    };
    WWWAuthenticateParams::parse(challenge, &base)
        .scope
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Adds what `more` has that `scopes` lacks, keeping the order.
fn union_into(scopes: &mut Vec<String>, more: Vec<String>) {
    for scope in more {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_read_from_a_challenge_and_united_in_order() {
        let challenge = r#"Bearer error="insufficient_scope", scope="mcp:write files:read", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp""#;
        let challenged = challenged_scopes(challenge, "https://mcp.example/mcp");
        assert_eq!(challenged, ["mcp:write", "files:read"]);
        let mut scopes = vec!["mcp:basic".to_string(), "files:read".to_string()];
        union_into(&mut scopes, challenged);
        assert_eq!(scopes, ["mcp:basic", "files:read", "mcp:write"]);
        assert!(challenged_scopes("Bearer realm=\"x\"", "https://mcp.example/mcp").is_empty());
    }
}
