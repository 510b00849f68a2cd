//! How a browser proves it may answer approvals: the one place the door accepts a cookie.
//!
//! A browser cannot send a bearer header when someone opens a link, so the approval page takes the
//! door's token once, in the URL: `GET /approvals/...?token=T` with the right token answers 303 to
//! the same URL without it and sets an `HttpOnly; SameSite=Strict` session cookie. The cookie is an
//! HMAC of the token's digest under a key made fresh at every start, so it is not the token, is
//! worth nothing after a restart, and works only where this module is asked: the page
//! (`/approvals*`) and its API (`/api/approvals*`), never `/mcp`, `/sse` or the rest of `/api`.
//!
//! What a browser sends is then held to the page's own origin: `Sec-Fetch-Site`, when present,
//! must be `same-origin` or `none` (another port on localhost is "same-site", and SameSite cookies
//! go there too; only a top-level navigation to the page itself may come from elsewhere), and a
//! request that changes state must carry an `Origin` equal to the daemon's own (`http(s)://` and
//! the `Host` the door already checked). Without `[server] token` no cookie is needed, but the same
//! browser rules apply to whatever sends them. A request with an `Authorization` header is a
//! program's, not a browser's: the door's usual token check decides it.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use super::{DoorPolicy, refuse};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "portico_approvals";

/// The routes a session cookie is accepted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `/approvals` and below: the page and its static files; the only place `?token=` is read.
    Page,
    /// `/api/approvals` and below: what the page's script calls.
    Api,
}

impl Scope {
    /// Exact prefixes on the raw path: a respelling (`//`, percent-escapes) is not in scope, so it
    /// needs the bearer header like any other route (and routes nowhere anyway).
    pub(crate) fn of(path: &str) -> Option<Scope> {
        let under = |prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if under("/approvals") {
            Some(Scope::Page)
        } else if under("/api/approvals") {
            Some(Scope::Api)
        } else {
            None
        }
    }
}

/// What the approval routes' checks decided for a request in [`Scope`].
pub(crate) enum Admission {
    /// Not a browser's to decide here (it has an `Authorization` header): the door's token check
    /// applies as on every other route.
    TokenCheck,
    /// Admitted: the session cookie was valid (with the SHA-256 of the token it was made from), or
    /// the door has no token (`None`).
    Admitted(Option<[u8; 32]>),
    /// Answered here: the token redirect, or a refusal.
    Answer(Response),
}

/// The per-start key session cookies are made with.
#[derive(Clone)]
pub(crate) struct SessionKey([u8; 32]);

impl SessionKey {
    pub(crate) fn generate() -> Self {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(&rand::random::<u128>().to_le_bytes());
        key[16..].copy_from_slice(&rand::random::<u128>().to_le_bytes());
        SessionKey(key)
    }

    /// The cookie value for a holder of the token with SHA-256 `digest`: made from the digest,
    /// which is all a door that keeps only token digests has.
    fn cookie_for(&self, digest: &[u8; 32]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        mac.update(b"portico approvals session v1\0");
        mac.update(digest);
        hex(&mac.finalize().into_bytes())
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal without the time depending on where the first difference is.
fn same_secret(given: &str, expected: &str) -> bool {
    Sha256::digest(given.as_bytes()) == Sha256::digest(expected.as_bytes())
}

/// The digest among `digests` equal to `given`'s, comparing with every one without stopping, so the
/// time says neither whether nor which one matched.
fn matching_digest(digests: &[[u8; 32]], given: &str) -> Option<[u8; 32]> {
    let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
    let mut found = None;
    for digest in digests {
        let difference = digest
            .iter()
            .zip(given.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if difference == 0 && found.is_none() {
            found = Some(*digest);
        }
    }
    found
}

pub(crate) fn admit(policy: &DoorPolicy, scope: Scope, request: &Request) -> Admission {
    let headers = request.headers();
    if headers.contains_key(header::AUTHORIZATION) {
        return Admission::TokenCheck;
    }
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    if scope == Scope::Page
        && reading
        && let Some(given) = query_token(request.uri().query())
    {
        return Admission::Answer(token_link(policy, request, &given));
    }
    let takes_tokens = policy.takes_tokens();
    let mut holder = None;
    if takes_tokens {
        let cookie = session_cookie(headers);
        let digests = policy.token_digests();
        // Every token's cookie is compared, so the time does not say which one it was.
        if let Some(cookie) = cookie {
            for digest in &digests {
                if same_secret(cookie, &policy.session_key.cookie_for(digest)) {
                    holder = Some(*digest);
                }
            }
        }
        if holder.is_none() {
            return Admission::Answer(unauthorized(scope, cookie.is_some()));
        }
    }
    // Opening the page from a link elsewhere is fine: a navigation cannot read what it opens, the page
    // refuses to be framed, and its data comes only through its own same-origin requests.
    let navigation = scope == Scope::Page
        && reading
        && headers
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode.as_bytes() == b"navigate");
    if navigation {
        return Admission::Admitted(holder);
    }
    if let Err(why) = browser_rules(headers, reading, takes_tokens) {
        return Admission::Answer(refuse(StatusCode::FORBIDDEN, why));
    }
    Admission::Admitted(holder)
}

/// `?token=` opened from a link: with the right token, the cookie and the same URL without it.
fn token_link(policy: &DoorPolicy, request: &Request, given: &str) -> Response {
    let location = without_token(request.uri().path(), request.uri().query());
    let mut response = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.as_str())],
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !policy.takes_tokens() {
        // Nothing to prove on a door without a token; the URL is only tidied.
        return response;
    }
    let Some(digest) = matching_digest(&policy.token_digests(), given.trim()) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "the token in this approval link is wrong; use [server] token's value (it is in daemon.json) or your [[server.clients]] token, or answer with `portico approvals`".into(),
        );
    };
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        policy.session_key.cookie_for(&digest)
    );
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            headers.insert(header::SET_COOKIE, value);
            response
        }
        // Hex and fixed text: always a valid header value.
        Err(_) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not make the session cookie".into(),
        ),
    }
}

fn query_token(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

/// `path` with the query's other pairs kept, in their order.
fn without_token(path: &str, query: Option<&str>) -> String {
    let kept: Vec<(String, String)> = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(name, _)| name != "token")
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    if kept.is_empty() {
        return path.to_string();
    }
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(kept)
        .finish();
    format!("{path}?{query}")
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
}

fn unauthorized(scope: Scope, had_cookie: bool) -> Response {
    let why = if had_cookie {
        "the approval session cookie is not valid (the daemon restarted, or it was never this daemon's)"
    } else {
        "this needs the door's token"
    };
    let what_to_do = match scope {
        Scope::Page => {
            "open the approval link with ?token=<[server] token> once (e.g. /approvals?token=...); the page then keeps a session cookie, or answer with `portico approvals approve ID`"
        }
        Scope::Api => "send `Authorization: Bearer <[server] token>`",
    };
    let mut response = refuse(StatusCode::UNAUTHORIZED, format!("{why}: {what_to_do}"));
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// What a browser's request must show: it comes from the page itself. `Origin` was already checked
/// against the door's allowed origins; here only the daemon's own origin will do. `Err` says why not
/// (a 403).
fn browser_rules(headers: &HeaderMap, reading: bool, by_cookie: bool) -> Result<(), String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("<not text>");
        if !matches!(site, "same-origin" | "none") {
            return Err(format!(
                "approvals answer only requests from their own page (Sec-Fetch-Site is `{site}`); open /approvals on the daemon itself"
            ));
        }
    }
    if reading {
        return Ok(());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    match headers.get(header::ORIGIN) {
        Some(origin) => {
            let origin = origin
                .to_str()
                .unwrap_or("<not text>")
                .trim_end_matches('/')
                .to_ascii_lowercase();
            let own = !host.is_empty()
                && (origin == format!("http://{host}") || origin == format!("https://{host}"));
            if own {
                Ok(())
            } else {
                Err(format!(
                    "an approval can be answered in a browser only from the daemon's own page; Origin `{origin}` is not http://{host}"
                ))
            }
        }
        // Browsers send Origin with every request that changes state; a cookie without one is not
        // from the page. Without a token there is no cookie, and a program (the CLI) sends none.
        None if by_cookie => Err(
            "an approval answered with the page's session cookie must carry the page's Origin; use the page's buttons, or `portico approvals` with the token".into(),
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_exact_prefixes() {
        assert_eq!(Scope::of("/approvals"), Some(Scope::Page));
        assert_eq!(Scope::of("/approvals/apr_x"), Some(Scope::Page));
        assert_eq!(Scope::of("/approvals/app.js"), Some(Scope::Page));
        assert_eq!(Scope::of("/api/approvals"), Some(Scope::Api));
        assert_eq!(Scope::of("/api/approvals/apr_x/approve"), Some(Scope::Api));
        for outside in [
            "/approvalsx",
            "/api/approvalsx",
            "/api/audit",
            "/mcp",
            "/sse",
            "/message",
            "//approvals",
            "/api//approvals",
            "/api/%61pprovals",
            "/x/approvals",
        ] {
            assert_eq!(Scope::of(outside), None, "{outside}");
        }
    }

    #[test]
    fn the_token_leaves_the_link_and_other_pairs_stay() {
        assert_eq!(without_token("/approvals", Some("token=abc")), "/approvals");
        assert_eq!(
            without_token("/approvals/apr_1", Some("a=1&token=abc&b=x+y")),
            "/approvals/apr_1?a=1&b=x+y"
        );
        assert_eq!(query_token(Some("a=1&token=s%20t")).as_deref(), Some("s t"));
        assert_eq!(query_token(Some("tokens=1")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn cookies_depend_on_the_start_and_the_token() {
        let key = SessionKey::generate();
        let digest = |token: &str| -> [u8; 32] { Sha256::digest(token.as_bytes()).into() };
        let (a, b) = (digest("a"), digest("b"));
        assert_eq!(key.cookie_for(&a), key.cookie_for(&a));
        assert_ne!(key.cookie_for(&a), key.cookie_for(&b));
        assert_ne!(key.cookie_for(&a), SessionKey::generate().cookie_for(&a));
        assert_eq!(key.cookie_for(&a).len(), 64);
        assert_ne!(key.cookie_for(&a), hex(&a));
    }

    #[test]
    fn a_link_token_matches_exactly_one_of_the_doors_tokens() {
        let digest = |token: &str| -> [u8; 32] { Sha256::digest(token.as_bytes()).into() };
        let digests = [digest("one"), digest("two")];
        assert_eq!(matching_digest(&digests, "two"), Some(digests[1]));
        assert_eq!(matching_digest(&digests, "one"), Some(digests[0]));
        assert_eq!(matching_digest(&digests, "tw"), None);
        assert_eq!(matching_digest(&digests, ""), None);
        assert_eq!(matching_digest(&[], "one"), None);
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, "a=1; other=2".parse().unwrap());
        assert_eq!(session_cookie(&headers), None);
        headers.append(
            header::COOKIE,
            format!("x=y;  {COOKIE}=abc ; z=1").parse().unwrap(),
        );
        assert_eq!(session_cookie(&headers), Some("abc"));
    }
}
