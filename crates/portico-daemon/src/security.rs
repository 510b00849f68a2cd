//! The door's checks, applied to every request before any route runs.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use portico_pipeline::{Principal, ToolPatterns};
use sha2::{Digest, Sha256};

use crate::listener::PeerAddr;
use crate::oauth::{OAuthClient, OAuthResource, Refusal};

/// One client the door knows by its token: `[[server.clients]]`, or `[server] token` as `default`.
#[derive(Debug, Clone)]
pub struct DoorClient {
    name: String,
    /// Only the token's SHA-256 is kept: what `token_sha256` gives, and all a comparison needs.
    digest: [u8; 32],
    scope: Option<Arc<ToolPatterns>>,
}

impl DoorClient {
    /// A client whose token has the SHA-256 `digest`; `scope` is all it may list and call.
    pub fn new(name: impl Into<String>, digest: [u8; 32], scope: Option<ToolPatterns>) -> Self {
        DoorClient {
            name: name.into(),
            digest,
            scope: scope.map(Arc::new),
        }
    }

    /// A client known by its token itself.
    pub fn with_token(name: impl Into<String>, token: &str, scope: Option<ToolPatterns>) -> Self {
        DoorClient::new(name, Sha256::digest(token.as_bytes()).into(), scope)
    }

    fn principal(&self) -> Principal {
        Principal::scoped_client(self.name.clone(), self.scope.clone())
    }

    #[cfg(test)]
    pub(crate) fn digest_for_test(&self) -> [u8; 32] {
        self.digest
    }
}

mod approval_session;
pub(crate) mod arrival;
pub(crate) mod ui_session;

pub(crate) use arrival::Arrival;

pub(crate) use ui_session::{UiSession, UiSessions};

/// Who may talk to the door.
#[derive(Debug, Clone)]
pub struct DoorPolicy {
    listen: SocketAddr,
    token: Option<String>,
    /// Everyone with a token: `[server] token` as `default`, then `[[server.clients]]`. Empty and no
    /// `oauth`: the door takes no tokens (loopback only).
    clients: Vec<DoorClient>,
    /// `[server.oauth]`: JWT access tokens, tried when a token is none of `clients`'.
    oauth: Option<Arc<OAuthResource>>,
    allowed_origins: Vec<String>,
    extra_hosts: Vec<String>,
    /// `[server] public_url` as an origin: allowed, and its host too.
    public_origin: Option<String>,
    /// `[server] trusted_proxies`: the peers whose forwarded headers count.
    trusted_proxies: Vec<portico_config::IpRange>,
    /// Derived from `listen` and `extra_hosts`; kept because every request checks against it.
    hosts: Vec<String>,
    /// The dashboard's logins (`portico_ui` cookies); clones of the policy share them.
    ui_sessions: UiSessions,
}

impl DoorPolicy {
    pub fn new(
        listen: SocketAddr,
        token: Option<String>,
        allowed_origins: Vec<String>,
        extra_hosts: Vec<String>,
    ) -> Self {
        let clients = token
            .iter()
            .map(|token| DoorClient::with_token(DEFAULT_CLIENT, token, None))
            .collect();
        DoorPolicy {
            listen,
            token,
            clients,
            oauth: None,
            allowed_origins: allowed_origins
                .into_iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            extra_hosts: extra_hosts
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            public_origin: None,
            trusted_proxies: Vec::new(),
            hosts: Vec::new(),
            ui_sessions: UiSessions::default(),
        }
        .with_hosts()
    }

    /// The door behind a balancer: `public_origin` (`[server] public_url` as
    /// [`portico_config::public_origin`] gives it) is an allowed origin and host, and requests from
    /// `trusted_proxies` are believed about their scheme, host and client.
    pub fn with_balancer(
        mut self,
        public_origin: Option<String>,
        trusted_proxies: Vec<portico_config::IpRange>,
    ) -> Self {
        self.public_origin = public_origin;
        self.trusted_proxies = trusted_proxies;
        self.with_hosts()
    }

    /// `[server] public_url` as an origin, if set.
    pub fn public_origin(&self) -> Option<&str> {
        self.public_origin.as_deref()
    }

    /// The door with `[[server.clients]]` as well (after `[server] token`'s `default`, if any).
    pub fn with_clients(mut self, clients: impl IntoIterator<Item = DoorClient>) -> Self {
        self.clients.extend(clients);
        self
    }

    /// The door with `[server.oauth]`: it takes JWT access tokens too.
    pub fn with_oauth(mut self, oauth: OAuthResource) -> Self {
        self.oauth = Some(Arc::new(oauth));
        self
    }

    /// Whether a request must present a token: some token is configured, or `[server.oauth]`.
    pub fn takes_tokens(&self) -> bool {
        !self.clients.is_empty() || self.oauth.is_some()
    }

    pub(crate) fn oauth(&self) -> Option<&Arc<OAuthResource>> {
        self.oauth.as_ref()
    }

    pub(crate) fn ui_sessions(&self) -> &UiSessions {
        &self.ui_sessions
    }

    pub fn with_listen(mut self, listen: SocketAddr) -> Self {
        self.listen = listen;
        self.with_hosts()
    }

    fn with_hosts(mut self) -> Self {
        let mut hosts = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        let ip = self.listen.ip();
        if !ip.is_loopback() && !ip.is_unspecified() {
            hosts.push(ip.to_string());
        }
        hosts.extend(self.extra_hosts.iter().cloned());
        if let Some(host) = self
            .public_origin
            .as_deref()
            .and_then(|origin| url::Url::parse(origin).ok())
            .and_then(|url| url.host_str().map(str::to_string))
        {
            // `Url` writes an IPv6 host in brackets, as `Host` does.
            hosts.push(
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
            );
        }
        self.hosts = hosts;
        self
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Host names accepted in `Host`: loopback names always, the listen address when it is a specific
    /// non-loopback one, and what the config adds.
    pub fn allowed_hosts(&self) -> &[String] {
        &self.hosts
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let Some(name) = host_name(&host) else {
            return false;
        };
        self.hosts
            .iter()
            .any(|allowed| allowed == &host || allowed == name)
    }

    /// Browsers send `Origin`; other clients usually do not. A foreign origin is a web page trying to
    /// reach a local service, which is exactly what must be refused.
    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.allowed_origins.iter().any(|o| o == &origin)
            || self.public_origin.as_deref() == Some(origin.as_str())
        {
            return true;
        }
        let port = self.listen.port();
        ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .any(|h| origin == format!("http://{h}:{port}"))
    }

    #[cfg(test)]
    fn token_ok(&self, headers: &axum::http::HeaderMap) -> bool {
        self.static_client(headers).is_ok()
    }

    /// The client whose static token the request presents: `Ok(None)` on a door without static
    /// tokens or `[server.oauth]`, `Err` when the door takes tokens and the request has none of
    /// them. (The door itself goes through [`DoorPolicy::authenticate`].)
    #[cfg(test)]
    fn static_client(
        &self,
        headers: &axum::http::HeaderMap,
    ) -> Result<Option<&DoorClient>, Unauthorized> {
        if !self.takes_tokens() {
            return Ok(None);
        }
        let given = bearer(headers.get(header::AUTHORIZATION)).ok_or(Unauthorized::Missing)?;
        self.client_with(given).map(Some).ok_or(Unauthorized::Wrong)
    }

    /// The static client whose token is `given`.
    fn client_with(&self, given: &str) -> Option<&DoorClient> {
        // Compare digests so the comparison time does not depend on how many leading bytes match,
        // and every client's, without stopping at a match, so it does not depend on which one it is.
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        let mut found = None;
        for client in &self.clients {
            let difference = client
                .digest
                .iter()
                .zip(given.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if difference == 0 && found.is_none() {
                found = Some(client);
            }
        }
        found
    }

    /// Who the request's token proves it is: a static client's token is that client; any other
    /// token, on a door with `[server.oauth]`, is verified as a JWT access token.
    async fn authenticate(
        &self,
        authorization: Option<&http::HeaderValue>,
    ) -> Result<Caller<'_>, Unauthorized> {
        if !self.takes_tokens() {
            return Ok(Caller::Door);
        }
        let given = bearer(authorization).ok_or(Unauthorized::Missing)?;
        self.authenticate_token(given).await
    }

    /// Who `given` (a token, as a bearer header or the dashboard's login form carries it) proves
    /// the caller is, on a door that takes tokens.
    async fn authenticate_token(&self, given: &str) -> Result<Caller<'_>, Unauthorized> {
        if let Some(client) = self.client_with(given) {
            return Ok(Caller::Client(client));
        }
        let Some(oauth) = &self.oauth else {
            return Err(Unauthorized::Wrong);
        };
        // Boxed: only a JWT pays for its verification's future, not every request's check.
        let client = Box::pin(oauth.verify(given))
            .await
            .map_err(Unauthorized::Refused)?;
        // `client:{name}` of a static client or a door is theirs alone: their sessions, approvals,
        // rate limits and `callers` rules.
        if self.clients.iter().any(|c| c.name == client.principal)
            || portico_config::reserved_client_name(&client.principal).is_some()
        {
            return Err(Unauthorized::Refused(Refusal::InvalidToken(
                "the token's principal is the name of a configured client or a door",
            )));
        }
        Ok(Caller::OAuth(client))
    }
}

/// The token of an `Authorization: Bearer` header, trimmed.
fn bearer(authorization: Option<&http::HeaderValue>) -> Option<&str> {
    authorization
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Who a request's token proved it is.
#[derive(Debug)]
enum Caller<'a> {
    /// A door without tokens: nobody in particular.
    Door,
    /// `[server] token` or a `[[server.clients]]` entry.
    Client(&'a DoorClient),
    /// A JWT access token of `[server.oauth]`.
    OAuth(OAuthClient),
    /// The dashboard's cookie, standing for the token its login proved.
    Cookie(Arc<UiSession>),
}

impl Caller<'_> {
    /// The principal the doors behind the checks call as; `None` for a door without tokens (each
    /// door names its own caller).
    fn principal(&self) -> Option<Principal> {
        match self {
            Caller::Door => None,
            Caller::Client(client) => Some(client.principal()),
            Caller::OAuth(client) => Some(Principal::scoped_client(
                client.principal.clone(),
                Some(client.scope.clone()),
            )),
            Caller::Cookie(session) => Some(session.principal.clone()),
        }
    }

    /// What a dashboard login with this caller's token makes: its session and how long it may
    /// last (an OAuth token's session ends when the token does). `None` on a door without tokens.
    fn ui_session(&self) -> Option<(UiSession, std::time::Duration)> {
        let principal = self.principal()?;
        let name = self.name()?.to_string();
        let life = match self {
            Caller::OAuth(OAuthClient {
                expires_at_secs: Some(exp),
                ..
            }) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                ui_session::SESSION_LIFE
                    .min(std::time::Duration::from_secs(exp.saturating_sub(now)))
            }
            _ => ui_session::SESSION_LIFE,
        };
        Some((UiSession { name, principal }, life))
    }

    fn name(&self) -> Option<&str> {
        match self {
            Caller::Door => None,
            Caller::Client(client) => Some(&client.name),
            Caller::OAuth(client) => Some(&client.principal),
            Caller::Cookie(session) => Some(&session.name),
        }
    }
}

/// How a request's caller was established, for `GET /ui/session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthMethod {
    /// A door without tokens.
    Open,
    /// `Authorization: Bearer`.
    Bearer,
    /// The dashboard's `portico_ui` cookie.
    Cookie,
}

impl AuthMethod {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Open => "open",
            AuthMethod::Bearer => "bearer",
            AuthMethod::Cookie => "cookie",
        }
    }
}

/// A dashboard login: the session `token` proves, kept in `policy`'s sessions; its secrets (the
/// cookie's value and the page key) and life, or why not (the status and message to answer with).
pub(crate) async fn login_session(
    policy: &DoorPolicy,
    token: &str,
) -> Result<(ui_session::NewSession, std::time::Duration), (StatusCode, String)> {
    if !policy.takes_tokens() {
        return Err((
            StatusCode::BAD_REQUEST,
            "this door takes no tokens (it listens on loopback without [server] token, [[server.clients]] or [server.oauth]), so the dashboard needs no login".into(),
        ));
    }
    let refused = |why: &str| {
        (
            StatusCode::UNAUTHORIZED,
            format!(
                "the token was refused ({why}); give [server] token's value, a [[server.clients]] token or an access token from [server.oauth]'s issuer"
            ),
        )
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(refused("it is empty"));
    }
    match policy.authenticate_token(token).await {
        Ok(caller) => {
            let Some((session, life)) = caller.ui_session() else {
                return Err(refused("it names nobody"));
            };
            if life.is_zero() {
                return Err(refused("it has expired"));
            }
            Ok((policy.ui_sessions.create(session, life), life))
        }
        Err(Unauthorized::Refused(Refusal::KeysUnavailable)) => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            "the token could not be checked: the [server.oauth] issuer's keys cannot be fetched now; try again shortly".into(),
        )),
        Err(Unauthorized::Refused(Refusal::InvalidToken(why))) => Err(refused(why)),
        Err(Unauthorized::Refused(Refusal::InsufficientScope)) => Err(refused(
            "none of its scopes is configured in [server.oauth] scopes",
        )),
        Err(Unauthorized::Missing | Unauthorized::Wrong) => {
            Err(refused("it is no token this door knows"))
        }
    }
}

/// The name `[server] token`'s client goes by: `client:default`.
pub const DEFAULT_CLIENT: &str = "default";

/// A door that takes tokens was given none of them.
#[derive(Debug)]
enum Unauthorized {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token that is no static client's, on a door without `[server.oauth]`.
    Wrong,
    /// A token `[server.oauth]` refused.
    Refused(Refusal),
}

/// The name in a `Host` value: `name`, `name:port` or `[v6]:port`. Anything after the name that is
/// not a port makes the whole value unusable: `[::1]evil.example` must not pass as `::1`.
fn host_name(host: &str) -> Option<&str> {
    let is_port = |port: &str| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            None if after.is_empty() => Some(name),
            Some(port) if is_port(port) => Some(name),
            _ => None,
        };
    }
    match host.split_once(':') {
        None => Some(host),
        Some((name, port)) if is_port(port) => Some(name),
        // A bare IPv6 address is not a valid Host; only an exact allowed entry can match it.
        Some(_) => Some(""),
    }
}

fn refuse(status: StatusCode, message: String) -> Response {
    tracing::warn!(%status, "{message}");
    (status, axum::Json(serde_json::json!({"error": message}))).into_response()
}

/// Who a request comes from, as the door's checks established it: the routes behind the checks (rate
/// limits, session caps) key on this and nothing else the client could respell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientIdentity(pub(crate) String);

impl ClientIdentity {
    /// On a door with tokens, the client whose token the request proved it has (every accepted
    /// spelling of it is one identity); without, an `Authorization` header proves nothing, so the
    /// peer's address.
    fn of(client: Option<&str>, arrival: &Arrival) -> Self {
        if let Some(name) = client {
            return ClientIdentity(format!("client:{name}"));
        }
        ClientIdentity(match arrival.client_ip {
            Some(ip) => peer_identity(ip),
            None => "anonymous".into(),
        })
    }
}

/// The TCP peer's address.
fn peer_ip(request: &Request) -> Option<IpAddr> {
    let extensions = request.extensions();
    match extensions.get::<ConnectInfo<PeerAddr>>() {
        Some(ConnectInfo(PeerAddr(address))) => Some(address.ip()),
        // An embedder serving `app()` with axum's own TcpListener.
        None => extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(address)| address.ip()),
    }
}

/// One identity per machine: every loopback address is the local machine (127.0.0.0/8 has 16
/// million spellings of it), and an IPv6 host picks freely within its /64.
fn peer_identity(ip: IpAddr) -> String {
    let ip = ip.to_canonical();
    if ip.is_loopback() {
        return "ip:loopback".into();
    }
    match ip {
        IpAddr::V4(v4) => format!("ip:{v4}"),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            format!("ip:{}/64", Ipv6Addr::from(prefix))
        }
    }
}

/// Marks a request to a public route (the health check, the approval page's and the dashboard's
/// shells) that came without the token the door requires: it gets only what anyone may see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Anonymous;

pub(crate) async fn check(
    State(policy): State<Arc<DoorPolicy>>,
    mut request: Request,
    next: Next,
) -> Response {
    let arrival = match Arrival::of(
        request.headers(),
        peer_ip(&request),
        policy.public_origin(),
        &policy.trusted_proxies,
        |host| policy.host_allowed(host),
    ) {
        Ok(arrival) => arrival,
        Err(why) => return refuse(StatusCode::FORBIDDEN, why),
    };
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    if !policy.host_allowed(host) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "Host `{host}` is not allowed; add it to [server] allowed_hosts if Portico is meant to be reached by that name"
            ),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("<not text>");
        let own = arrival
            .own_origins
            .iter()
            .any(|own| *own == origin.trim_end_matches('/').to_ascii_lowercase());
        if !own && !policy.origin_allowed(origin) {
            return refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "Origin `{origin}` is not allowed; add it to [server] allowed_origins to let that web page call Portico"
                ),
            );
        }
    }
    let path = request.uri().path();
    // A page on another site (or another port) may embed an API URL as an image, a script or a
    // stylesheet: the browser sends that without an `Origin`, so the check above never sees it,
    // and on an open loopback door it would be served (an event stream held open, a large audit
    // read). A browser says where such a request comes from in `Sec-Fetch-Site`; a page's own
    // requests and programs' (which send no such header) pass, as do cross-origin calls, which
    // carry an `Origin` that `allowed_origins` decided on.
    if ui_session::accepts_cookie(path)
        && !headers.contains_key(header::ORIGIN)
        && let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "{path} is not served to another page's embedded request (Sec-Fetch-Site is `{}`); call it from the dashboard, with fetch from an origin in [server] allowed_origins, or from a program",
                site.to_str().unwrap_or("<not text>")
            ),
        );
    }
    let public = path == "/api/health" || policy.oauth().is_some_and(|o| o.is_metadata_path(path));
    // The approval page's shell is served without a token (its script sends the token to the API);
    // its routes and the API's are held to the page's own origin (`approval_session`).
    let mut shell = false;
    if let Some(scope) = approval_session::Scope::of(path) {
        match approval_session::admit(scope, &request, &arrival.own_origins) {
            approval_session::Admission::Shell => shell = true,
            approval_session::Admission::TokenCheck => {}
            approval_session::Admission::Answer(response) => return response,
        }
    }
    // The dashboard's shell and assets need no token; its login and logout decide for themselves,
    // held to the page's own origin like every cookie request that changes something.
    match ui_session::Public::of(request.method(), path) {
        Some(ui_session::Public::Shell) => shell = true,
        Some(ui_session::Public::Login) => {
            if let Err(why) = ui_session::from_own_page(
                request.headers(),
                request.headers().contains_key(header::ORIGIN),
                &arrival.own_origins,
            ) {
                return refuse(StatusCode::FORBIDDEN, why);
            }
            shell = true;
        }
        None => {}
    }
    let mut anonymous = false;
    // Taken out of the request: a JWT may be verified across an await (its keys fetched).
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    // The dashboard's cookie stands for a token only where the dashboard calls, and never beside
    // an `Authorization` header (which decides alone).
    let cookie = match authorization {
        None if policy.takes_tokens() && ui_session::accepts_cookie(path) => {
            policy.ui_sessions().of_request(request.headers())
        }
        _ => None,
    };
    let (caller, method) = if let Some(session) = cookie {
        let changing = !matches!(*request.method(), Method::GET | Method::HEAD);
        if let Err(why) =
            ui_session::from_own_page(request.headers(), changing, &arrival.own_origins)
        {
            return refuse(StatusCode::FORBIDDEN, why);
        }
        (Caller::Cookie(session), AuthMethod::Cookie)
    } else {
        match policy.authenticate(authorization.as_ref()).await {
            Ok(Caller::Door) => (Caller::Door, AuthMethod::Open),
            Ok(caller) => (caller, AuthMethod::Bearer),
            // The health check, the pages' shells and the resource metadata answer anyone; with a
            // wrong token they are simply nobody's.
            Err(_) if public || shell => {
                anonymous = true;
                (Caller::Door, AuthMethod::Open)
            }
            Err(refused) => return unauthorized(&policy, refused),
        }
    };
    if anonymous {
        request.extensions_mut().insert(Anonymous);
    } else {
        request.extensions_mut().insert(method);
    }
    let identity = ClientIdentity::of(caller.name(), &arrival);
    // The dashboard's login makes its cookie `Secure` when the page is https.
    request.extensions_mut().insert(arrival);
    if let Some(principal) = caller.principal() {
        // Every door behind this (MCP, the API, A2A) calls as this principal, within its scope.
        request.extensions_mut().insert(principal);
    }
    // The MCP handler bounds per-client work (input rounds) by the same identity.
    request
        .extensions_mut()
        .insert(portico_mcp_server::ClientKey(identity.0.clone()));
    request.extensions_mut().insert(identity);
    next.run(request).await
}

/// The answer to a request the door's tokens refuse: 401 with a `Bearer` challenge (with
/// `[server.oauth]`, one naming its resource metadata and scopes), 403 for a token without a
/// configured scope, 503 when no keys could be had to verify it.
fn unauthorized(policy: &DoorPolicy, refused: Unauthorized) -> Response {
    let oauth = policy.oauth();
    match (refused, oauth) {
        (Unauthorized::Refused(refusal), Some(oauth)) => {
            oauth.refusal(refusal, oauth.retry_after())
        }
        (Unauthorized::Missing | Unauthorized::Wrong, Some(oauth)) => {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                format!(
                    "missing or wrong bearer token; send `Authorization: Bearer <token>` with an access token from {} (the resource metadata at {} says how), or a [server] token or [[server.clients]] token",
                    oauth.issuer(),
                    oauth.metadata_url()
                ),
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, oauth.challenge(None));
            response
        }
        (_, None) => {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token; send `Authorization: Bearer <token>` with [server] token's value or a [[server.clients]] token".into(),
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

    fn policy(token: Option<&str>) -> DoorPolicy {
        DoorPolicy::new(
            "127.0.0.1:4200".parse().unwrap(),
            token.map(str::to_string),
            vec!["https://app.example.com/".into()],
            vec!["portico.internal".into()],
        )
    }

    #[test]
    fn hosts() {
        let p = policy(None);
        for ok in [
            "localhost:4200",
            "127.0.0.1:4200",
            "[::1]:4200",
            "localhost",
            "portico.internal:4200",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.com", "evil.com:4200", "127.0.0.1.evil.com", ""] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
    }

    /// Text around an allowed name must never let a foreign name through (DNS rebinding).
    #[test]
    fn hostile_host_values_are_refused() {
        let p = policy(None);
        for bad in [
            "[::1]evil.example",
            "[::1]evil.example:4200",
            "[::1].evil.example",
            "[::1]:4200evil.example",
            "[::1]:4200:80",
            "[::1]:",
            "[::1",
            "[localhost]x",
            "localhost:",
            "localhost:4200x",
            "localhost:evil.example",
            "localhost:4200:4200",
            "localhost.evil.example",
            "evil.example:localhost",
            "portico.internal.evil.example",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
        assert!(p.host_allowed("[::1]"));
        assert!(p.host_allowed("LOCALHOST:4200"));
    }

    #[test]
    fn peers_are_one_identity_per_machine() {
        let id = |ip: &str| peer_identity(ip.parse().unwrap());
        assert_eq!(id("127.0.0.1"), "ip:loopback");
        assert_eq!(id("127.3.4.5"), "ip:loopback");
        assert_eq!(id("::1"), "ip:loopback");
        assert_eq!(id("::ffff:127.0.0.9"), "ip:loopback");
        assert_eq!(id("192.0.2.7"), "ip:192.0.2.7");
        assert_eq!(id("::ffff:192.0.2.7"), "ip:192.0.2.7");
        assert_eq!(id("2001:db8:1:2:aaaa::1"), id("2001:db8:1:2:ffff::9"));
        assert_eq!(id("2001:db8:1:2::1"), "ip:2001:db8:1:2::/64");
        assert_ne!(id("2001:db8:1:2::1"), id("2001:db8:1:3::1"));
    }

    #[test]
    fn origins() {
        let p = policy(None);
        assert!(p.origin_allowed("https://app.example.com"));
        assert!(p.origin_allowed("http://localhost:4200"));
        assert!(!p.origin_allowed("http://localhost:3000"));
        assert!(!p.origin_allowed("https://evil.com"));
        assert!(!p.origin_allowed("null"));
    }

    #[test]
    fn public_url_is_an_allowed_origin_and_host() {
        let p = policy(None).with_balancer(Some("https://portico.example.com".into()), vec![]);
        assert!(p.origin_allowed("https://portico.example.com"));
        assert!(p.origin_allowed("https://PORTICO.example.com/"));
        assert!(!p.origin_allowed("http://portico.example.com"));
        assert!(!p.origin_allowed("https://portico.example.com:8443"));
        assert!(p.host_allowed("portico.example.com"));
        assert!(p.host_allowed("portico.example.com:443"));
        assert!(!p.host_allowed("evil.example.com"));
        assert!(!policy(None).host_allowed("portico.example.com"));
    }

    #[test]
    fn client_tokens_identify_their_client_and_nothing_else_passes() {
        let laptop_scope = ToolPatterns::new(&["time_*"]).unwrap();
        let ci_digest: [u8; 32] = Sha256::digest(b"ci-secret").into();
        let p = policy(Some("s3cret")).with_clients([
            DoorClient::with_token("laptop", "laptop-secret", Some(laptop_scope)),
            DoorClient::new("ci", ci_digest, None),
        ]);
        let named = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            p.static_client(&headers)
                .map(|c| c.map(|c| c.principal().label()))
        };
        assert_eq!(
            named("Bearer s3cret").unwrap().as_deref(),
            Some("client:default")
        );
        assert_eq!(
            named("Bearer laptop-secret").unwrap().as_deref(),
            Some("client:laptop")
        );
        assert_eq!(
            named("bearer  ci-secret ").unwrap().as_deref(),
            Some("client:ci")
        );
        assert!(named("Bearer laptop-secre").is_err());
        assert!(named("Basic laptop-secret").is_err());
        assert!(p.static_client(&HeaderMap::new()).is_err());
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "Bearer laptop-secret".parse().unwrap(),
        );
        let laptop = p.static_client(&headers).unwrap().unwrap().principal();
        assert!(laptop.may_use("time_now"));
        assert!(!laptop.may_use("file_read"));
        // Clients alone make a door take tokens.
        let only_clients = policy(None).with_clients([DoorClient::with_token("ci", "x", None)]);
        assert!(only_clients.takes_tokens());
        assert!(!only_clients.token_ok(&HeaderMap::new()));
        assert!(!policy(None).takes_tokens());
    }

    #[test]
    fn tokens() {
        let p = policy(Some("s3cret"));
        let mut headers = HeaderMap::new();
        assert!(!p.token_ok(&headers));
        headers.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert!(!p.token_ok(&headers));
        headers.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(p.token_ok(&headers));
        assert!(policy(None).token_ok(&HeaderMap::new()));
    }
}
