//! The door's rules for the approval page and its API. The page uses no cookie (the dashboard's
//! `portico_ui` cookie counts on `/api/approvals` as on all of `/api`, for the dashboard's own page:
//! `ui_session`).
//!
//! The page (`/approvals*`) is a static shell (HTML, its script and style, no request data), served
//! without a token. Its script takes the door's token from the link's fragment
//! (`/approvals/<id>#token=T`: browsers never send a fragment to any server), keeps it in the tab's
//! `sessionStorage` (one origin, port included) and calls the API (`/api/approvals*`) with
//! `Authorization: Bearer T`, which the door's usual token check decides. A cookie would not do:
//! browsers send `127.0.0.1`'s cookies to every port on it (RFC 6265 8.5), so any local listener
//! could collect one and replay it. `?token=` is refused with a 400 naming the fragment: a query
//! ends up in logs and history.
//!
//! What a browser sends is also held to the page's own origin, so another site (another port on
//! localhost included) cannot drive the API through a visitor's browser, on a door without a token
//! above all: `Sec-Fetch-Site`, when present, must be `same-origin` or `none` (only a top-level
//! navigation to the page itself may come from elsewhere), and a request that changes state with an
//! `Origin` must carry the daemon's own (`http(s)://` and the `Host` the door already checked), not
//! merely one of `[server] allowed_origins`. A program (the CLI) sends neither header.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;

use super::refuse;

/// The routes these rules apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `/approvals` and below: the page's static shell, served without a token.
    Page,
    /// `/api/approvals` and below: what the page's script calls, with the bearer token.
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
    /// The page's shell: nothing in it is the door's to protect, so no token is asked for.
    Shell,
    /// The API: the door's token check applies as on every other route.
    TokenCheck,
    /// Refused here.
    Answer(Response),
}

/// `own_origins`: the page's origins besides `http(s)://{Host}` (`[server] public_url`, a trusted
/// balancer's).
pub(crate) fn admit(scope: Scope, request: &Request, own_origins: &[String]) -> Admission {
    let headers = request.headers();
    if has_token_parameter(request.uri().query()) {
        return Admission::Answer(token_in_query(scope));
    }
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    // Opening the page from a link elsewhere is fine: a navigation cannot read what it opens, the page
    // refuses to be framed, and its data comes only through its own same-origin requests.
    let navigation = scope == Scope::Page
        && reading
        && headers
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode.as_bytes() == b"navigate");
    if !navigation && let Err(why) = browser_rules(headers, reading, own_origins) {
        return Admission::Answer(refuse(StatusCode::FORBIDDEN, why));
    }
    match scope {
        Scope::Page if reading && is_shell(request.uri().path()) => Admission::Shell,
        // Anything else under `/approvals` (another method, a deeper path: a route mounted there
        // by config, such as an A2A listen path) is no part of the shell and needs the token.
        Scope::Page | Scope::Api => Admission::TokenCheck,
    }
}

/// The shell's own paths, exactly: `/approvals`, its script and style, and `/approvals/<id>`
/// (one segment). Only these are served without a token.
fn is_shell(path: &str) -> bool {
    match path.strip_prefix("/approvals") {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('/')
            .is_some_and(|segment| !segment.is_empty() && !segment.contains('/')),
        None => false,
    }
}

/// A `token` pair in the query, whatever its value (even empty): the link is the old kind, or
/// someone's guess, and either way the token must not travel there.
fn has_token_parameter(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        url::form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "token")
    })
}

/// The 400 for `?token=`, never repeating the value; the URL held a secret, so nothing of this
/// answer is kept or referred on.
fn token_in_query(scope: Scope) -> Response {
    let what_to_do = match scope {
        Scope::Page => {
            "the token goes after `#` instead, where the browser keeps it: open /approvals/<id>#token=<token> (or /approvals#token=<token>)"
        }
        Scope::Api => "send `Authorization: Bearer <token>` instead",
    };
    let mut response = refuse(
        StatusCode::BAD_REQUEST,
        format!(
            "approvals do not take the token in the URL's query (`?token=`), where logs and browser history keep it; {what_to_do}"
        ),
    );
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// What a browser's request must show: it comes from the page itself. `Origin` was already checked
/// against the door's allowed origins; here only the daemon's own origin will do. `Err` says why not
/// (a 403).
fn browser_rules(headers: &HeaderMap, reading: bool, own_origins: &[String]) -> Result<(), String> {
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
    // Browsers send Origin with every request that changes state; a program (the CLI) sends none,
    // and on a door with a token needs the token like everyone else.
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .unwrap_or("<not text>")
        .trim_end_matches('/')
        .to_ascii_lowercase();
    let own = (!host.is_empty()
        && (origin == format!("http://{host}") || origin == format!("https://{host}")))
        || own_origins.contains(&origin);
    if own {
        Ok(())
    } else {
        Err(format!(
            "an approval can be answered in a browser only from the daemon's own page; Origin `{origin}` is not http://{host}"
        ))
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
    fn any_token_pair_in_the_query_is_found() {
        assert!(has_token_parameter(Some("token=abc")));
        assert!(has_token_parameter(Some("a=1&token=")));
        assert!(has_token_parameter(Some("a=1&token")));
        assert!(!has_token_parameter(Some("tokens=1&a=token")));
        assert!(!has_token_parameter(Some("")));
        assert!(!has_token_parameter(None));
    }

    #[test]
    fn only_the_shells_own_paths_are_the_shell() {
        for path in ["/approvals", "/approvals/app.js", "/approvals/apr_abc"] {
            assert!(is_shell(path), "{path}");
        }
        for path in [
            "/approvals/",
            "/approvals/a2a/agent",
            "/approvalsx",
            "/api/approvals",
            "/mcp",
        ] {
            assert!(!is_shell(path), "{path}");
        }
    }
}
