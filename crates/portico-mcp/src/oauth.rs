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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// The browser this process may open for a login: for a server whose `[mcp_servers.oauth]
    /// open_browser` is true, or every server with [`OAuthHome::every_server`]. `None`: never;
    /// a server that needs a login is marked `needs login` and waits for `portico auth login`.
    pub browser: Option<Browser>,
    /// Open the browser for every server's login, whatever its `open_browser` (`portico auth login`,
    /// where the user asked for exactly that).
    pub every_server: bool,
    /// Print the authorization URL on stderr as well (the CLI's `auth login`).
    pub print_url: bool,
}

impl OAuthHome {
    /// The credentials in `data_dir`; a login opens `$BROWSER`, else the desktop's opener, for the
    /// servers whose `open_browser` allows it.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        OAuthHome {
            dir: data_dir.join("oauth"),
            browser: Some(Browser::from_env().unwrap_or(Browser::Desktop)),
            every_server: false,
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

/// An rmcp manager able to refresh, for the client the credentials file names.
struct CachedManager {
    manager: AuthorizationManager,
    client_id: String,
}

/// Sets a flag for as long as it lives: a login cancelled half-way (its future dropped) does not
/// leave the handshake waiting for it.
struct Raised<'a>(&'a AtomicBool);

impl<'a> Raised<'a> {
    fn new(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Raised(flag)
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
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
    /// Where `client_secret_env` is read: Portico's environment, then the secret store of the
    /// data dir that holds the credentials.
    vars: portico_secrets::Vars,
    /// The last login's manager, or one built from the file when a refresh first needs it; rebuilt
    /// when the file names another client. Held across a refresh.
    manager: tokio::sync::Mutex<Option<CachedManager>>,
    /// Held through a login: concurrent requests that need one wait for the same one. Holds the
    /// start times of the recent logins.
    logging_in: tokio::sync::Mutex<VecDeque<Instant>>,
    login_running: AtomicBool,
    /// Logins started, and the last one's failure (with its number): a request that waited for a
    /// login that failed gets that failure instead of starting another.
    logins_started: AtomicU64,
    last_failure: std::sync::Mutex<Option<(u64, String)>>,
    /// Why a request found no usable token, and the file's version when that token was read.
    needs_login: std::sync::Mutex<Option<(String, Option<FileStamp>)>>,
    /// How many times `needs login` was found: a connect attempt reports it only if this moved
    /// during the attempt, so an old mark never turns another failure into `needs login`.
    refusals: AtomicU64,
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
    pub fn for_server(config: &McpServerConfig, home: &OAuthHome) -> Option<Arc<UpstreamAuth>> {
        let (url, headers) = match &config.transport {
            Transport::Http { url, headers } | Transport::Sse { url, headers } => (url, headers),
            Transport::Stdio { .. } => return None,
        };
        if headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"))
        {
            return None;
        }
        let http = SafeOAuthHttp::new(NetPolicy::private_network(config.allow_private_network));
        let settings = config.oauth.clone().unwrap_or_default();
        let browser = home
            .browser
            .clone()
            .filter(|_| home.every_server || settings.open_browser);
        Some(Arc::new(UpstreamAuth {
            server: config.name.clone(),
            url: url.clone(),
            settings,
            http: Arc::new(http),
            file: Arc::new(TokenFile::new(&home.dir, &config.name, url)),
            browser,
            print_url: home.print_url,
            vars: match home.dir.parent() {
                // A store is only read here, and reading does not depend on `[secrets] store`.
                Some(data_dir) => portico_secrets::Vars::with_store(
                    portico_secrets::SecretStore::open(data_dir, Default::default()),
                ),
                None => portico_secrets::Vars::environment(),
            },
            manager: tokio::sync::Mutex::new(None),
            logging_in: tokio::sync::Mutex::new(VecDeque::new()),
            login_running: AtomicBool::new(false),
            logins_started: AtomicU64::new(0),
            last_failure: std::sync::Mutex::new(None),
            needs_login: std::sync::Mutex::new(None),
            refusals: AtomicU64::new(0),
            fresh_login: AtomicBool::new(false),
        }))
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

    /// How many times a request found it needs a login; see [`UpstreamAuth::needs_login_since`].
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::SeqCst)
    }

    /// [`UpstreamAuth::needs_login`], if it was found after [`UpstreamAuth::refusals`] read `count`:
    /// what a connect attempt that started then failed for.
    pub fn needs_login_since(&self, count: u64) -> Option<String> {
        (self.refusals() > count)
            .then(|| self.needs_login())
            .flatten()
    }

    /// The server accepted a request: whatever was marked is over.
    pub fn accepted(&self) {
        if self.refusals() > 0 {
            *self.needs_login.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
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

    /// Marks the server `needs login`, for the file's version `stamp` (read with the token that was
    /// refused): a login that lands meanwhile is not mistaken for the one awaited.
    fn mark_needs_login(&self, reason: &str, stamp: Option<FileStamp>) -> OAuthError {
        *self.needs_login.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((reason.to_string(), stamp));
        self.refusals.fetch_add(1, Ordering::SeqCst);
        self.needs_login_error(reason)
    }

    fn needs_login_error(&self, reason: &str) -> OAuthError {
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

    fn current(&self) -> Result<Option<Record>, OAuthError> {
        self.file.current().map_err(|e| self.store_error(e))
    }

    /// The token to send with a request: the stored one for this URL, refreshed when it is about to
    /// expire. `None`: the request goes without, and the server's challenge decides.
    pub async fn token(&self) -> Result<Option<String>, OAuthError> {
        if self.fresh_login.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let Some(record) = self.current()? else {
            return Ok(None);
        };
        let Some(response) = record.credentials.token_response.as_ref() else {
            return Ok(None);
        };
        let stored = access_token(response);
        if !expiring(&record, REFRESH_BEFORE_EXPIRY_SECS) {
            return Ok(Some(stored));
        }
        let still_valid = !expiring(&record, 0);
        match self.refresh(Some(&stored)).await {
            Ok(Some(fresh)) => Ok(Some(fresh)),
            // Not refreshable (no refresh token, or refused): while it lasts, the old one is sent.
            Ok(None) => Ok(still_valid.then_some(stored)),
            Err(e) if still_valid => {
                tracing::warn!(
                    server = self.server,
                    "{e}; sending the token it has meanwhile"
                );
                Ok(Some(stored))
            }
            Err(e) => Err(e),
        }
    }

    /// Scopes the stored token was granted, and scopes still pending from a refused step-up.
    fn stored_scopes(&self) -> Result<(Vec<String>, Vec<String>), OAuthError> {
        Ok(self
            .current()?
            .map(|r| {
                let granted = if r.credentials.token_response.is_some() {
                    r.credentials.granted_scopes
                } else {
                    Vec::new()
                };
                (granted, r.pending_scopes)
            })
            .unwrap_or_default())
    }

    /// A new access token from the refresh token; `None` when there is none or it was refused.
    /// `sent`: the token found wanting; another request or process may have replaced it already.
    async fn refresh(&self, sent: Option<&str>) -> Result<Option<String>, OAuthError> {
        let mut cached = self.manager.lock().await;
        let record = self.current()?;
        if let Some(record) = &record
            && let Some(response) = &record.credentials.token_response
        {
            let current = access_token(response);
            if Some(current.as_str()) != sent && !expiring(record, REFRESH_BEFORE_EXPIRY_SECS) {
                return Ok(Some(current));
            }
        }
        let file_client = record.map(|r| r.credentials.client_id);
        if cached.as_ref().map(|c| &c.client_id) != file_client.as_ref() {
            // Another login (here or in another process) registered another client.
            *cached = self.manager_from_file().await?;
        }
        let Some(cached) = cached.as_ref() else {
            return Ok(None);
        };
        match cached.manager.refresh_token().await {
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
    async fn manager_from_file(&self) -> Result<Option<CachedManager>, OAuthError> {
        let Some(record) = self.current()? else {
            return Ok(None);
        };
        let mut manager =
            AuthorizationManager::new_with_oauth_http_client(self.url.as_str(), self.http.clone())
                .await
                .map_err(|e| self.login_error("discovery", e))?;
        manager.set_credential_store(SharedTokenFile(self.file.clone()));
        match manager.initialize_from_store().await {
            Ok(true) => Ok(Some(CachedManager {
                manager,
                client_id: record.credentials.client_id,
            })),
            Ok(false) => Ok(None),
            Err(e) => Err(self.login_error("discovery", e)),
        }
    }

    /// The scopes a new login asks for: the configured ones, those granted before and those a
    /// refused step-up left pending (SEP-2350: a re-authorization keeps what was granted), and
    /// `challenged`. Empty: the challenge's, else the metadata's (rmcp's initial selection).
    pub fn login_scopes(&self, challenged: Vec<String>) -> Result<Vec<String>, OAuthError> {
        let (granted, pending) = self.stored_scopes()?;
        let mut scopes = self.settings.scopes.clone();
        union_into(&mut scopes, granted);
        union_into(&mut scopes, pending);
        if !scopes.is_empty() {
            union_into(&mut scopes, challenged);
        }
        Ok(scopes)
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
        let stamp = self.file.stamp();
        if !retried && !self.fresh_login.load(Ordering::SeqCst) {
            if let Some(stored) = self.token().await?
                && Some(stored.as_str()) != sent
            {
                return Ok(stored);
            }
            if sent.is_some()
                && let Some(fresh) = self.refresh(sent).await?
                && Some(fresh.as_str()) != sent
            {
                return Ok(fresh);
            }
        }
        let scopes = self.login_scopes(challenged_scopes(challenge, &self.url))?;
        let reason = if sent.is_some() {
            "the server refused the stored token"
        } else {
            "the server requires authorization"
        };
        if self.browser.is_none() {
            return Err(self.mark_needs_login(reason, stamp));
        }
        self.login(Some(challenge), scopes).await
    }

    /// The server answered 403 `insufficient_scope`. The token to retry with, from a login that asks
    /// for the challenged scopes as well as those granted; refused when the token already has them.
    /// Without a browser the call fails saying so, and the scopes are kept for the next login; the
    /// server stays usable for everything else.
    pub async fn on_insufficient_scope(&self, challenge: &str) -> Result<String, OAuthError> {
        let challenged = challenged_scopes(challenge, &self.url);
        let (granted, _) = self.stored_scopes()?;
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
        let reason = format!("the server requires scope `{}`", challenged.join(" "));
        if self.browser.is_none() {
            if let Err(e) = self.file.add_pending_scopes(&challenged) {
                tracing::warn!(server = self.server, "{e}");
            }
            return Err(self.needs_login_error(&reason));
        }
        let mut scopes = self.login_scopes(Vec::new())?;
        union_into(&mut scopes, challenged);
        self.login(Some(challenge), scopes).await
    }

    /// Runs an authorization-code login through this process's browser and stores its tokens; the
    /// new access token. `challenge` seeds discovery (the reactive path); without one the server's
    /// metadata is looked up at its well-known places. Empty `scopes`: the challenge's, else the
    /// protected resource metadata's, else none.
    pub async fn login(
        &self,
        challenge: Option<&str>,
        scopes: Vec<String>,
    ) -> Result<String, OAuthError> {
        let Some(browser) = self.browser.clone() else {
            return Err(self.needs_login_error("this process may not open a browser"));
        };
        let before = self.file.stamp();
        let started_before = self.logins_started.load(Ordering::SeqCst);
        let mut recent = self.logging_in.lock().await;
        // A login finished while this one waited for it: its token is the answer.
        if self.file.stamp() != before
            && !self.fresh_login.load(Ordering::SeqCst)
            && let Some(token) = self.token().await?
        {
            return Ok(token);
        }
        // One failed while this one waited: so does this one, without another browser window.
        if self.logins_started.load(Ordering::SeqCst) != started_before
            && let Some((_, failure)) = self
                .last_failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        {
            return Err(self.login_error("authorization (a login moments ago)", failure));
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
        let number = self.logins_started.fetch_add(1, Ordering::SeqCst) + 1;
        let result = {
            let _running = Raised::new(&self.login_running);
            self.authorize(&browser, challenge, scopes).await
        };
        let manager = match result {
            Ok(manager) => manager,
            Err(e) => {
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((number, e.to_string()));
                return Err(e);
            }
        };
        *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let record = self.current()?;
        let client_id = record
            .as_ref()
            .map(|r| r.credentials.client_id.clone())
            .unwrap_or_default();
        *self.manager.lock().await = Some(CachedManager { manager, client_id });
        self.fresh_login.store(false, Ordering::SeqCst);
        *self.needs_login.lock().unwrap_or_else(|e| e.into_inner()) = None;
        record
            .and_then(|r| r.credentials.token_response.as_ref().map(access_token))
            .ok_or_else(|| self.login_error("storing the token", "the token was not stored"))
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
                let secret = self.vars.get(variable).ok_or_else(|| {
                    self.login_error(
                        "reading the client secret",
                        format!(
                            "`{variable}` (its `client_secret_env`) is set neither in Portico's environment nor in its secret store; run `portico secret set {variable}`"
                        ),
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
        if let Some(state) = url::Url::parse(&url).ok().and_then(|u| {
            u.query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
        }) {
            listener.expect_state(&state);
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
            Some(received.saturating_add(expires_in.as_secs()))
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

/// Whether the stored token expires within `margin_secs` (at most half its lifetime).
fn expiring(record: &Record, margin_secs: u64) -> bool {
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
    let margin = margin_secs.min(expires_in.as_secs() / 2);
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
