//! The dashboard's sessions: a `portico_ui` cookie standing for a token someone typed into the
//! login form (`POST /ui/login`), so the token itself is never in a URL, a page or the browser's
//! storage.
//!
//! The cookie is an opaque id (256 random bits, base64url); the door keeps only its SHA-256, mapped
//! to the principal the token proved, in a bounded map ([`MAX_SESSIONS`], the oldest evicted; each
//! for [`SESSION_LIFE`], or until the OAuth access token it was made with expires). A lookup is by
//! the digest, so how long it takes says nothing about the id.
//!
//! Where a cookie counts: only on `/api/*`, `/metrics` and `/ui/*` (the dashboard's own requests),
//! and only when the request has no `Authorization` header; never on `/mcp`, `/sse`, `/message` or
//! A2A routes, whose clients are programs with tokens. A cookie request that changes state (any
//! method but GET and HEAD) must carry `Origin` equal to the door's own (`http://` + `Host`), and
//! none may say `Sec-Fetch-Site` other than `same-origin` or `none`: browsers send a localhost
//! cookie to every port of the host (RFC 6265 8.5) and `SameSite` counts every port as the same
//! site, so another local page could otherwise use it.
//!
//! A cookie alone is not enough: a server on another port of the host the browser visits receives
//! it, and a program can replay it with any `Origin` it likes. Each session therefore has a second
//! secret, its page key, which the login answers in its body (never in a cookie): the page keeps it
//! in its origin's `localStorage`, which another port cannot read, and sends it as
//! [`PAGE_KEY_HEADER`] on every request. A cookie counts only with its session's page key, and a
//! request carrying more than one `portico_ui` cookie (another port may plant one for a narrower
//! path) counts as none.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, Method, header};
use base64::Engine as _;
use portico_pipeline::Principal;
use sha2::{Digest, Sha256};

/// The cookie's name.
pub(crate) const COOKIE: &str = "portico_ui";
/// Most sessions kept at once; a login past it evicts the oldest.
pub(crate) const MAX_SESSIONS: usize = 256;
/// Most sessions one client keeps at once; its next login ends its oldest, so one client logging
/// in again and again cannot push everyone else's sessions out.
pub(crate) const MAX_SESSIONS_PER_CLIENT: usize = 16;
/// How long a session lasts from its login.
pub(crate) const SESSION_LIFE: Duration = Duration::from_secs(12 * 60 * 60);
/// A session id's length in characters: 32 bytes in unpadded base64url (a page key's too).
const ID_CHARS: usize = 43;
/// The header the page sends its session's page key in.
pub(crate) const PAGE_KEY_HEADER: &str = "x-portico-page-key";

/// A new session's two secrets: the cookie's value and the page key.
pub(crate) struct NewSession {
    pub id: String,
    pub page_key: String,
}

/// Who a session is: the client name the door's identity keys on, and the principal calls run as.
#[derive(Debug)]
pub(crate) struct UiSession {
    pub name: String,
    pub principal: Principal,
}

struct Entry {
    session: Arc<UiSession>,
    /// The SHA-256 of the session's page key.
    page_key: [u8; 32],
    expires: Instant,
}

#[derive(Default)]
struct Sessions {
    by_digest: HashMap<[u8; 32], Entry>,
    /// Digests in login order, for evicting the oldest.
    order: VecDeque<[u8; 32]>,
}

/// The door's dashboard sessions. Clones share one map.
#[derive(Clone, Default)]
pub struct UiSessions {
    inner: Arc<Mutex<Sessions>>,
}

impl std::fmt::Debug for UiSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiSessions")
            .field("count", &self.len())
            .finish()
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl UiSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions held now (expired ones included until they are next looked at).
    pub(crate) fn len(&self) -> usize {
        self.lock().by_digest.len()
    }

    /// A new session for `session`, lasting `life`: its id (the cookie's value) and page key.
    pub(crate) fn create(&self, session: UiSession, life: Duration) -> NewSession {
        let secret =
            || base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let (id, page_key) = (secret(), secret());
        let key = digest(&id);
        let now = Instant::now();
        let mut sessions = self.lock();
        sessions.by_digest.retain(|_, entry| entry.expires > now);
        let Sessions { by_digest, order } = &mut *sessions;
        order.retain(|key| by_digest.contains_key(key));
        let theirs: Vec<[u8; 32]> = order
            .iter()
            .filter(|key| by_digest[*key].session.name == session.name)
            .copied()
            .collect();
        if theirs.len() >= MAX_SESSIONS_PER_CLIENT {
            by_digest.remove(&theirs[0]);
            order.retain(|key| *key != theirs[0]);
        }
        while by_digest.len() >= MAX_SESSIONS {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            by_digest.remove(&oldest);
        }
        by_digest.insert(
            key,
            Entry {
                session: Arc::new(session),
                page_key: digest(&page_key),
                expires: now + life,
            },
        );
        order.push_back(key);
        NewSession { id, page_key }
    }

    /// The live session `id` names, when `page_key` is its page key.
    pub(crate) fn find(&self, id: &str, page_key: &str) -> Option<Arc<UiSession>> {
        if id.len() != ID_CHARS || page_key.len() != ID_CHARS {
            return None;
        }
        let key = digest(id);
        let offered = digest(page_key);
        let mut sessions = self.lock();
        let entry = sessions.by_digest.get(&key)?;
        if entry.expires > Instant::now() {
            // Digests compared whole (no early exit), though a digest's prefix says little.
            let differs = entry
                .page_key
                .iter()
                .zip(offered.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            return (differs == 0).then(|| entry.session.clone());
        }
        sessions.by_digest.remove(&key);
        sessions.order.retain(|k| *k != key);
        None
    }

    /// Forgets session `id`; whether there was one.
    pub(crate) fn forget(&self, id: &str) -> bool {
        let key = digest(id);
        let mut sessions = self.lock();
        sessions.order.retain(|k| *k != key);
        sessions.by_digest.remove(&key).is_some()
    }

    /// The live session the request's one `portico_ui` cookie names, with its page key in
    /// [`PAGE_KEY_HEADER`]; none when either is missing or wrong, or when there are several cookies.
    pub(crate) fn of_request(&self, headers: &HeaderMap) -> Option<Arc<UiSession>> {
        let mut cookies = cookie_values(headers);
        let id = cookies.next()?;
        if cookies.next().is_some() {
            return None;
        }
        let page_key = headers.get(PAGE_KEY_HEADER)?.to_str().ok()?;
        self.find(id, page_key)
    }
}

/// Every `portico_ui` value in the request's `Cookie` headers, in order.
pub(crate) fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.trim_matches('"'))
        })
}

/// The `Set-Cookie` of a new session, for `life` (whole seconds); `Secure` when the page is https
/// (behind a balancer), so the browser never sends it over plain HTTP.
pub(crate) fn set_cookie(id: &str, life: Duration, secure: bool) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        life.as_secs(),
        if secure { "; Secure" } else { "" }
    ))
    .expect("a base64url id and digits are a valid header value")
}

/// The `Set-Cookie` that makes the browser drop the cookie (`Secure` like the one it replaces:
/// a browser ignores a plain one over https for a `Secure` cookie's name).
pub(crate) fn clear_cookie(secure: bool) -> HeaderValue {
    if secure {
        HeaderValue::from_static(
            "portico_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure",
        )
    } else {
        HeaderValue::from_static("portico_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
    }
}

/// Whether `path` is one where the cookie stands for a token: `/api/*`, `/metrics`, `/ui/*`, on
/// the raw path (a respelling is not in scope, and needs the bearer header).
pub(crate) fn accepts_cookie(path: &str) -> bool {
    let under = |prefix: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    path == "/metrics" || under("/api") || under("/ui")
}

/// The dashboard's routes that answer without a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Public {
    /// `GET /`, `GET /ui/<file>.js|.css`: the static shell and its assets.
    Shell,
    /// `POST /ui/login` and `/ui/logout`: they decide for themselves.
    Login,
}

impl Public {
    pub(crate) fn of(method: &Method, path: &str) -> Option<Public> {
        let reading = matches!(*method, Method::GET | Method::HEAD);
        if path == "/ui/login" || path == "/ui/logout" {
            return Some(Public::Login);
        }
        if !reading {
            return None;
        }
        // Exactly the dashboard's own files: any other name under `/ui/` needs a token.
        crate::dashboard::is_shell_file(path).then_some(Public::Shell)
    }
}

/// Whether the request comes from the door's own page, as a browser tells: `Origin` (required when
/// `changing`) is `http://` + `Host`, and `Sec-Fetch-Site`, when sent, is `same-origin` or `none`.
/// `Err` says why not (a 403).
pub(crate) fn from_own_page(
    headers: &HeaderMap,
    changing: bool,
    own_origins: &[String],
) -> Result<(), String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("<not text>");
        if !matches!(site, "same-origin" | "none") {
            return Err(format!(
                "the dashboard's cookie is accepted only from the dashboard's own page (Sec-Fetch-Site is `{site}`); open the dashboard on the daemon itself, or send `Authorization: Bearer <token>`"
            ));
        }
    }
    if !changing {
        return Ok(());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let origin = headers.get(header::ORIGIN).map(|origin| {
        origin
            .to_str()
            .unwrap_or("<not text>")
            .trim_end_matches('/')
            .to_ascii_lowercase()
    });
    match origin {
        Some(origin) if !host.is_empty() && origin == format!("http://{host}") => Ok(()),
        Some(origin) if own_origins.contains(&origin) => Ok(()),
        Some(origin) => Err(format!(
            "a request with the dashboard's cookie that changes something must come from the dashboard's own page; Origin `{origin}` is not http://{host}{}",
            if own_origins.is_empty() {
                " (behind a balancer that terminates TLS, set [server] public_url, or list the balancer in [server] trusted_proxies)".to_string()
            } else {
                format!(" nor {}", own_origins.join(", "))
            }
        )),
        None => Err(
            "a request with the dashboard's cookie that changes something must carry the dashboard's Origin (browsers send it); a program should send `Authorization: Bearer <token>` instead"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(name: &str) -> UiSession {
        UiSession {
            name: name.into(),
            principal: Principal::client(name),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    #[test]
    fn a_session_is_found_only_by_its_id_with_its_page_key_each_256_random_bits() {
        let sessions = UiSessions::default();
        let NewSession { id, page_key } = sessions.create(session("laptop"), SESSION_LIFE);
        for secret in [&id, &page_key] {
            assert_eq!(secret.len(), ID_CHARS);
            assert!(
                secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{secret}"
            );
            let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(secret)
                .unwrap();
            assert_eq!(decoded.len(), 32);
        }
        assert_ne!(id, page_key);
        assert_eq!(sessions.find(&id, &page_key).unwrap().name, "laptop");
        let other = sessions.create(session("ci"), SESSION_LIFE);
        assert_ne!(id, other.id);
        // Another session's page key, a changed one, a cut one: nothing.
        assert!(sessions.find(&id, &other.page_key).is_none());
        let mut wrong = page_key.clone();
        wrong.replace_range(0..1, if page_key.starts_with('A') { "B" } else { "A" });
        assert!(sessions.find(&id, &wrong).is_none());
        assert!(sessions.find(&id, &page_key[1..]).is_none());
        assert!(sessions.find(&id, "").is_none());
        let mut wrong = id.clone();
        wrong.replace_range(0..1, if id.starts_with('A') { "B" } else { "A" });
        assert!(sessions.find(&wrong, &page_key).is_none());
        assert!(sessions.find(&id[1..], &page_key).is_none());
        // Kept by digest: the map holds neither secret.
        let debug = format!("{sessions:?}");
        assert!(
            !debug.contains(&id) && !debug.contains(&page_key) && debug.contains("count: 2"),
            "{debug}"
        );
        assert!(sessions.forget(&id));
        assert!(!sessions.forget(&id));
        assert!(sessions.find(&id, &page_key).is_none());
        assert_eq!(
            sessions.find(&other.id, &other.page_key).unwrap().name,
            "ci"
        );
    }

    #[test]
    fn sessions_are_bounded_and_the_oldest_goes_first() {
        let sessions = UiSessions::default();
        let made: Vec<NewSession> = (0..MAX_SESSIONS + 10)
            .map(|i| sessions.create(session(&format!("c{i}")), SESSION_LIFE))
            .collect();
        let find = |s: &NewSession| sessions.find(&s.id, &s.page_key);
        assert_eq!(sessions.len(), MAX_SESSIONS);
        for made in &made[..10] {
            assert!(find(made).is_none());
        }
        assert_eq!(find(&made[10]).unwrap().name, "c10");
        assert_eq!(
            find(made.last().unwrap()).unwrap().name,
            format!("c{}", MAX_SESSIONS + 9)
        );
        // A logout frees its place; the next login evicts nobody.
        assert!(sessions.forget(&made[20].id));
        sessions.create(session("new"), SESSION_LIFE);
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(find(&made[10]).is_some());
    }

    #[test]
    fn one_client_keeps_at_most_its_bound_and_pushes_out_only_its_own() {
        let sessions = UiSessions::default();
        let other = sessions.create(session("admin"), SESSION_LIFE);
        let mine: Vec<NewSession> = (0..MAX_SESSIONS_PER_CLIENT + 5)
            .map(|_| sessions.create(session("mallory"), SESSION_LIFE))
            .collect();
        assert_eq!(sessions.len(), MAX_SESSIONS_PER_CLIENT + 1);
        assert!(sessions.find(&other.id, &other.page_key).is_some());
        for made in &mine[..5] {
            assert!(sessions.find(&made.id, &made.page_key).is_none());
        }
        for made in &mine[5..] {
            assert!(sessions.find(&made.id, &made.page_key).is_some());
        }
    }

    #[test]
    fn an_expired_session_is_gone() {
        let sessions = UiSessions::default();
        let made = sessions.create(session("laptop"), Duration::ZERO);
        assert!(sessions.find(&made.id, &made.page_key).is_none());
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn a_request_counts_with_one_cookie_and_its_page_key_and_the_attributes_are_exact() {
        let sessions = UiSessions::default();
        let NewSession { id, page_key } = sessions.create(session("laptop"), SESSION_LIFE);
        let found =
            |pairs: &[(&str, &str)]| sessions.of_request(&headers(pairs)).map(|s| s.name.clone());
        let key = (PAGE_KEY_HEADER, page_key.as_str());
        let cookie = format!("a=1; {COOKIE}={id}; b=2");
        assert_eq!(
            found(&[("cookie", &cookie), key]).as_deref(),
            Some("laptop")
        );
        // The cookie alone (replayed by whoever another port handed it to) is nobody.
        assert_eq!(found(&[("cookie", &cookie)]), None);
        let other = sessions.create(session("attacker"), SESSION_LIFE);
        assert_eq!(
            found(&[("cookie", &cookie), (PAGE_KEY_HEADER, &other.page_key)]),
            None
        );
        // Two cookies (one planted by another port for a narrower path): neither counts.
        let planted = format!("{COOKIE}={}", other.id);
        let live = format!("{COOKIE}={id}");
        assert_eq!(found(&[("cookie", &planted), ("cookie", &live), key]), None);
        assert_eq!(
            found(&[("cookie", &format!("{planted}; {live}")), key]),
            None
        );
        assert_eq!(found(&[("cookie", &format!("x{COOKIE}={id}")), key]), None);
        assert_eq!(found(&[key]), None);
        assert_eq!(
            set_cookie(&id, SESSION_LIFE, false),
            format!("portico_ui={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200").as_str()
        );
        assert_eq!(
            clear_cookie(false),
            "portico_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        );
        assert_eq!(
            set_cookie(&id, SESSION_LIFE, true),
            format!("portico_ui={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200; Secure")
                .as_str()
        );
        assert_eq!(
            clear_cookie(true),
            "portico_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure"
        );
    }

    #[test]
    fn the_cookie_counts_only_under_the_api_metrics_and_the_dashboard() {
        for path in [
            "/api",
            "/api/tools",
            "/api/servers/x/restart",
            "/metrics",
            "/ui/session",
            "/ui/logout",
        ] {
            assert!(accepts_cookie(path), "{path}");
        }
        for path in [
            "/mcp",
            "/sse",
            "/message",
            "/a2a",
            "/a2a/agent/message:send",
            "/v1/message:send",
            "/.well-known/agent-card.json",
            "/apix",
            "/metricsx",
            "/metrics/x",
            "//api/tools",
            "/uix",
            "/",
            "/approvals",
        ] {
            assert!(!accepts_cookie(path), "{path}");
        }
    }

    #[test]
    fn only_the_shell_and_login_routes_are_public() {
        let public = |method: Method, path: &str| Public::of(&method, path);
        assert_eq!(public(Method::GET, "/"), Some(Public::Shell));
        assert_eq!(public(Method::HEAD, "/ui/app.js"), Some(Public::Shell));
        assert_eq!(public(Method::GET, "/ui/app.css"), Some(Public::Shell));
        assert_eq!(public(Method::GET, "/ui/servers.js"), Some(Public::Shell));
        assert_eq!(public(Method::POST, "/ui/login"), Some(Public::Login));
        assert_eq!(public(Method::POST, "/ui/logout"), Some(Public::Login));
        for (method, path) in [
            (Method::POST, "/"),
            (Method::GET, "/ui/session"),
            (Method::GET, "/ui/"),
            (Method::GET, "/ui/a/b.js"),
            (Method::GET, "/ui/app.json"),
            (Method::GET, "/ui/%2e%2e.js"),
            (Method::GET, "/ui/not-an-asset.js"),
            (Method::GET, "/ui//app.js"),
            (Method::GET, "/ui/app.js/"),
            (Method::POST, "/ui/app.js"),
            (Method::GET, "/api/tools"),
            (Method::GET, "/index.html"),
        ] {
            assert_eq!(public(method.clone(), path), None, "{method} {path}");
        }
    }

    #[test]
    fn a_changing_cookie_request_needs_the_doors_own_origin() {
        let host = ("host", "127.0.0.1:4200");
        assert!(from_own_page(&headers(&[host]), false, &[]).is_ok());
        assert!(
            from_own_page(
                &headers(&[host, ("origin", "http://127.0.0.1:4200")]),
                true,
                &[]
            )
            .is_ok()
        );
        assert!(
            from_own_page(
                &headers(&[host, ("origin", "http://127.0.0.1:4200/")]),
                true,
                &[]
            )
            .is_ok()
        );
        let refused =
            |pairs: &[(&str, &str)]| from_own_page(&headers(pairs), true, &[]).unwrap_err();
        // Behind a balancer: the page's https origin, as `[server] public_url` or a trusted
        // proxy gives it, and the hint when neither is set.
        let balanced = [
            ("host", "127.0.0.1:4200"),
            ("origin", "https://portico.example.com"),
        ];
        assert!(
            from_own_page(
                &headers(&balanced),
                true,
                &["https://portico.example.com".into()]
            )
            .is_ok()
        );
        assert!(refused(&balanced).contains("[server] public_url"));
        assert!(refused(&[host]).contains("must carry the dashboard's Origin"));
        assert!(
            refused(&[host, ("origin", "http://localhost:4200")])
                .contains("Origin `http://localhost:4200` is not http://127.0.0.1:4200")
        );
        assert!(refused(&[host, ("origin", "http://127.0.0.1:9999")]).contains("9999"));
        assert!(refused(&[host, ("origin", "null")]).contains("`null`"));
        assert!(
            refused(&[
                host,
                ("origin", "http://127.0.0.1:4200"),
                ("sec-fetch-site", "same-site")
            ])
            .contains("Sec-Fetch-Site is `same-site`")
        );
        // Reading too: another port's page is same-site, not same-origin.
        assert!(
            from_own_page(
                &headers(&[host, ("sec-fetch-site", "same-site")]),
                false,
                &[]
            )
            .is_err()
        );
        assert!(from_own_page(&headers(&[host, ("sec-fetch-site", "none")]), false, &[]).is_ok());
    }
}
