//! The approval page at `/approvals` (pending requests) and `/approvals/{id}` (one request): a static
//! shell and its own script, served without a token to anyone the door admits. The script takes the
//! token from the link's fragment (`#token=`), keeps it in the tab's `sessionStorage`, reads
//! `/api/approvals` with it as a bearer token and answers with the API's POST routes
//! (`{"via": "web"}`). No request data is put into the HTML on the server: the script shows it as
//! text (the arguments as the API's `argumentsText`), so an argument cannot become markup. The
//! door's checks (`security`, `approval_session`) decide who gets here; this module only serves the
//! files, under headers that let nothing else run, frame or refer.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const PAGE: &str = include_str!("../assets/approvals/index.html");
const SCRIPT: &str = include_str!("../assets/approvals/app.js");
const STYLE: &str = include_str!("../assets/approvals/app.css");

/// Only the daemon's own script, style and API; no inline script, no frames, no forms elsewhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The longest id the page serves; the contract's ids are `apr_` and some 22 to 43 URL-safe
/// characters.
const MAX_ID_CHARS: usize = 128;

pub(crate) fn routes() -> Router {
    Router::new()
        .route("/approvals", get(pending))
        .route("/approvals/app.js", get(script))
        .route("/approvals/app.css", get(style))
        .route("/approvals/{id}", get(one))
}

async fn pending() -> Response {
    served(PAGE, "text/html; charset=utf-8")
}

async fn one(Path(id): Path<String>) -> Response {
    let plausible = !id.is_empty()
        && id.len() <= MAX_ID_CHARS
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !plausible {
        let mut response = served(
            "not an approval id: ids are letters, digits, `_` and `-` (see `portico approvals list`)\n",
            "text/plain; charset=utf-8",
        );
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    served(PAGE, "text/html; charset=utf-8")
}

async fn script() -> Response {
    served(SCRIPT, "text/javascript; charset=utf-8")
}

async fn style() -> Response {
    served(STYLE, "text/css; charset=utf-8")
}

/// A static file under the page's headers: this CSP, no framing, no referrer, no sniffing, no
/// caching. The dashboard (`dashboard`) serves its files the same way.
pub(crate) fn served(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_runs_only_its_own_script() {
        assert!(PAGE.contains(r#"<script src="/approvals/app.js"></script>"#));
        // Exactly one script element, and it has a src: nothing inline for the CSP to allow.
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert!(!PAGE.contains("http://") && !PAGE.contains("https://"));
        assert!(!SCRIPT.contains("http://") && !SCRIPT.contains("https://"));
        assert!(!STYLE.contains("http") && !STYLE.contains("@import"));
        // Request data reaches the page only as text.
        assert!(!SCRIPT.contains("innerHTML") && !SCRIPT.contains("outerHTML"));
        assert!(!SCRIPT.contains("insertAdjacentHTML") && !SCRIPT.contains("document.write"));
        assert!(!SCRIPT.contains("eval(") && !SCRIPT.contains("new Function"));
    }

    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::post;
    use tower::ServiceExt;

    use crate::listener::PeerAddr;
    use crate::security::{self, DoorPolicy};

    const TOKEN: &str = "s3cret-token";
    const HOST: &str = "127.0.0.1:4200";
    const OWN_ORIGIN: &str = "http://127.0.0.1:4200";

    /// The real security layer over the real page and stand-ins for the approvals API and `/mcp`.
    fn door(token: Option<&str>) -> Router {
        let policy = Arc::new(DoorPolicy::new(
            HOST.parse().unwrap(),
            token.map(str::to_string),
            vec!["https://app.example.com".into()],
            Vec::new(),
        ));
        Router::new()
            .merge(routes())
            .route("/api/approvals", get(|| async { "listed" }))
            .route("/api/approvals/{id}/approve", post(|| async { "approved" }))
            .route("/api/audit", get(|| async { "audit" }))
            .route("/mcp", post(|| async { "mcp" }))
            .layer(axum::middleware::from_fn_with_state(
                policy,
                security::check,
            ))
    }

    struct Sent {
        status: u16,
        headers: axum::http::HeaderMap,
        body: String,
    }

    async fn send(router: &Router, method: &str, uri: &str, headers: &[(&str, &str)]) -> Sent {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", HOST);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut request = request.body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(PeerAddr(
                "127.0.0.1:40000".parse().unwrap(),
            )));
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        Sent {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    #[tokio::test]
    async fn the_shell_is_served_without_a_token_and_holds_no_request_data() {
        let router = door(Some(TOKEN));
        for (path, body) in [
            ("/approvals", PAGE),
            ("/approvals/apr_abc", PAGE),
            ("/approvals/apr_other", PAGE),
            ("/approvals/app.js", SCRIPT),
            ("/approvals/app.css", STYLE),
        ] {
            let sent = send(&router, "GET", path, &[]).await;
            assert_eq!((sent.status, sent.body.as_str()), (200, body), "{path}");
            assert!(sent.headers.get(header::SET_COOKIE).is_none(), "{path}");
        }
        // The same bytes whoever asks: nothing of the request (its id) is in them.
        assert!(!PAGE.contains("apr_"));
        // With a wrong token it is still only the shell.
        let sent = send(
            &router,
            "GET",
            "/approvals/apr_abc",
            &[("authorization", "Bearer wrong")],
        )
        .await;
        assert_eq!((sent.status, sent.body.as_str()), (200, PAGE));
        // The script takes the token from the fragment and sends it as a bearer header, never a cookie.
        assert!(SCRIPT.contains("location.hash"));
        assert!(SCRIPT.contains("sessionStorage"));
        assert!(SCRIPT.contains("history.replaceState"));
        assert!(SCRIPT.contains("headers.Authorization = `Bearer ${token}`"));
        assert!(SCRIPT.contains("credentials: 'omit'"));
        assert!(!SCRIPT.contains("document.cookie"));
        assert!(SCRIPT.contains("type: 'password'"));
        assert!(SCRIPT.contains("view.argumentsText"));
    }

    #[tokio::test]
    async fn the_api_takes_the_bearer_token_and_no_cookie() {
        let router = door(Some(TOKEN));
        let bearer = format!("Bearer {TOKEN}");
        let sent = send(&router, "GET", "/api/approvals", &[]).await;
        assert_eq!(sent.status, 401);
        assert_eq!(sent.headers[header::WWW_AUTHENTICATE], "Bearer");
        assert!(sent.body.contains("Authorization: Bearer"), "{}", sent.body);
        // What the old page's session looked like, or anything else in a cookie: proves nothing.
        for cookie in [
            "portico_approvals=00ff".to_string(),
            format!("portico_approvals={TOKEN}"),
            format!("token={TOKEN}"),
        ] {
            let with_cookie = [("cookie", cookie.as_str()), ("origin", OWN_ORIGIN)];
            let sent = send(&router, "GET", "/api/approvals", &with_cookie).await;
            assert_eq!(sent.status, 401, "{cookie}: {}", sent.body);
            let sent = send(
                &router,
                "POST",
                "/api/approvals/apr_abc/approve",
                &with_cookie,
            )
            .await;
            assert_eq!(sent.status, 401, "{cookie}: {}", sent.body);
            assert_ne!(sent.body, "approved");
        }
        let page = [
            ("authorization", bearer.as_str()),
            ("sec-fetch-site", "same-origin"),
        ];
        let sent = send(&router, "GET", "/api/approvals", &page).await;
        assert_eq!((sent.status, sent.body.as_str()), (200, "listed"));
        let answer = [
            ("authorization", bearer.as_str()),
            ("origin", OWN_ORIGIN),
            ("sec-fetch-site", "same-origin"),
        ];
        let sent = send(&router, "POST", "/api/approvals/apr_abc/approve", &answer).await;
        assert_eq!((sent.status, sent.body.as_str()), (200, "approved"));
        // A wrong token is refused like anywhere else.
        let wrong = [("authorization", "Bearer s3cret")];
        assert_eq!(
            send(&router, "GET", "/api/approvals", &wrong).await.status,
            401
        );
    }

    #[tokio::test]
    async fn a_token_in_the_query_is_refused_with_the_fragment_as_the_way() {
        let router = door(Some(TOKEN));
        for path in [
            format!("/approvals/apr_abc?token={TOKEN}"),
            format!("/approvals?view=full&token={TOKEN}"),
            "/approvals?token=".to_string(),
        ] {
            let sent = send(&router, "GET", &path, &[]).await;
            assert_eq!(sent.status, 400, "{path}");
            assert!(sent.body.contains("#token=<token>"), "{}", sent.body);
            assert!(!sent.body.contains(TOKEN), "{}", sent.body);
            assert!(sent.headers.get(header::SET_COOKIE).is_none());
            assert!(sent.headers.get(header::LOCATION).is_none());
            assert_eq!(sent.headers[header::CACHE_CONTROL], "no-store");
            assert_eq!(sent.headers[header::REFERRER_POLICY], "no-referrer");
        }
        // Not even with the bearer header as well, nor on the API.
        let bearer = format!("Bearer {TOKEN}");
        let sent = send(
            &router,
            "GET",
            &format!("/api/approvals?token={TOKEN}"),
            &[("authorization", bearer.as_str())],
        )
        .await;
        assert_eq!(sent.status, 400);
        assert!(
            sent.body
                .contains("send `Authorization: Bearer <token>` instead"),
            "{}",
            sent.body
        );
        // A door without a token refuses it as well: the link is wrong wherever it is opened.
        let sent = send(&door(None), "GET", "/approvals?token=x", &[]).await;
        assert_eq!(sent.status, 400);
    }

    #[tokio::test]
    async fn browsers_are_held_to_the_daemons_own_page() {
        let router = door(Some(TOKEN));
        let bearer = format!("Bearer {TOKEN}");
        let path = "/api/approvals/apr_abc/approve";
        for (origin, site) in [
            // Allowed for /api in general by [server] allowed_origins, but not the page.
            (Some("https://app.example.com"), None),
            // Another port on the same machine is refused by the door itself.
            (Some("http://127.0.0.1:3000"), None),
            (Some("http://localhost:4200"), None),
            (Some("null"), None),
            (Some(OWN_ORIGIN), Some("same-site")),
            (Some(OWN_ORIGIN), Some("cross-site")),
            (None, Some("cross-site")),
        ] {
            let mut headers = vec![("authorization", bearer.as_str())];
            if let Some(origin) = origin {
                headers.push(("origin", origin));
            }
            if let Some(site) = site {
                headers.push(("sec-fetch-site", site));
            }
            let sent = send(&router, "POST", path, &headers).await;
            assert_eq!(sent.status, 403, "{origin:?} {site:?}: {}", sent.body);
        }
        // Reading from another site's page is refused as well.
        let read = [
            ("authorization", bearer.as_str()),
            ("sec-fetch-site", "same-site"),
        ];
        assert_eq!(
            send(&router, "GET", "/api/approvals", &read).await.status,
            403
        );
        // Opening the page from a link elsewhere is a navigation, which cannot read the page: fine.
        let open = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert_eq!(
            send(&router, "GET", "/approvals/apr_abc", &open)
                .await
                .status,
            200
        );
        // But a navigation is no way into the API.
        let mut opened = open.to_vec();
        opened.push(("authorization", bearer.as_str()));
        assert_eq!(
            send(&router, "GET", "/api/approvals", &opened).await.status,
            403
        );
        // A program with the token is not a browser: no Origin needed, none refused.
        let program = [("authorization", bearer.as_str())];
        assert_eq!(send(&router, "POST", path, &program).await.status, 200);
        // Everywhere else the door's rules are its own: the page's rules add nothing to `/mcp`.
        assert_eq!(send(&router, "POST", "/mcp", &program).await.status, 200);
        assert_eq!(send(&router, "POST", "/mcp", &[]).await.status, 401);
    }

    #[tokio::test]
    async fn without_a_token_browsers_are_still_held_to_the_page() {
        let router = door(None);
        assert_eq!(send(&router, "GET", "/approvals", &[]).await.status, 200);
        let path = "/api/approvals/apr_abc/approve";
        // The CLI on a door without a token: no Origin, no token.
        assert_eq!(send(&router, "POST", path, &[]).await.status, 200);
        let own = [("origin", OWN_ORIGIN), ("sec-fetch-site", "same-origin")];
        assert_eq!(send(&router, "POST", path, &own).await.status, 200);
        for foreign in ["https://app.example.com", "http://localhost:3000"] {
            let sent = send(&router, "POST", path, &[("origin", foreign)]).await;
            assert_eq!(sent.status, 403, "{foreign}");
        }
        let sent = send(&router, "POST", path, &[("sec-fetch-site", "cross-site")]).await;
        assert_eq!(sent.status, 403);
        let linked = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert_eq!(
            send(&router, "GET", "/approvals", &linked).await.status,
            200
        );
        let fetched = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert_eq!(
            send(&router, "GET", "/approvals", &fetched).await.status,
            403
        );
        assert_eq!(
            send(&router, "GET", "/api/approvals", &linked).await.status,
            403
        );
    }

    #[tokio::test]
    async fn the_page_is_served_under_a_strict_policy() {
        let router = door(None);
        for path in [
            "/approvals",
            "/approvals/apr_abc",
            "/approvals/app.js",
            "/approvals/app.css",
        ] {
            let sent = send(&router, "GET", path, &[]).await;
            assert_eq!(sent.status, 200, "{path}");
            assert_eq!(
                sent.headers[header::CONTENT_SECURITY_POLICY],
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(sent.headers[header::X_FRAME_OPTIONS], "DENY");
            assert_eq!(sent.headers[header::REFERRER_POLICY], "no-referrer");
            assert_eq!(sent.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self';"));
        assert!(CONTENT_SECURITY_POLICY.contains("frame-ancestors 'none'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
        let sent = send(&router, "GET", "/approvals/app.js", &[]).await;
        assert_eq!(
            sent.headers[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        let sent = send(&router, "GET", "/approvals/%3Cscript%3E", &[]).await;
        assert_eq!(sent.status, 404);
        assert!(!sent.body.contains('<'));
    }
}
