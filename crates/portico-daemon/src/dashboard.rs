//! The dashboard's static files: the shell at `/` and its scripts and style under `/ui/`, compiled
//! into the binary from `assets/dashboard/`. They hold no data and are served without a token, under
//! the approval page's headers (its CSP: only the daemon's own scripts, styles and API; no framing,
//! no referrer). Everything the page shows it reads from the API as the browser's caller (the
//! `portico_ui` session cookie, or nothing on an open loopback door) and puts in the page as text.
//! The login, session and event routes the page calls are the API's, not this module's.

use axum::Router;
use axum::response::Response;
use axum::routing::get;

use crate::approval_page::served;

const SHELL: &str = include_str!("../assets/dashboard/index.html");

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file under `/ui/`: its name, its bytes and its type. The shell loads `app.js` as a module,
/// which imports the others by these names.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        include_str!("../assets/dashboard/app.js"),
        JAVASCRIPT,
    ),
    ("app.css", include_str!("../assets/dashboard/app.css"), CSS),
    (
        "util.js",
        include_str!("../assets/dashboard/util.js"),
        JAVASCRIPT,
    ),
    (
        "servers.js",
        include_str!("../assets/dashboard/servers.js"),
        JAVASCRIPT,
    ),
    (
        "tools.js",
        include_str!("../assets/dashboard/tools.js"),
        JAVASCRIPT,
    ),
    (
        "agents.js",
        include_str!("../assets/dashboard/agents.js"),
        JAVASCRIPT,
    ),
    (
        "a2a.js",
        include_str!("../assets/dashboard/a2a.js"),
        JAVASCRIPT,
    ),
    (
        "approvals.js",
        include_str!("../assets/dashboard/approvals.js"),
        JAVASCRIPT,
    ),
    (
        "audit.js",
        include_str!("../assets/dashboard/audit.js"),
        JAVASCRIPT,
    ),
    (
        "live.js",
        include_str!("../assets/dashboard/live.js"),
        JAVASCRIPT,
    ),
    (
        "raw.js",
        include_str!("../assets/dashboard/raw.js"),
        JAVASCRIPT,
    ),
    (
        "content.js",
        include_str!("../assets/dashboard/content.js"),
        JAVASCRIPT,
    ),
    (
        "resources.js",
        include_str!("../assets/dashboard/resources.js"),
        JAVASCRIPT,
    ),
    (
        "prompts.js",
        include_str!("../assets/dashboard/prompts.js"),
        JAVASCRIPT,
    ),
];

pub(crate) fn routes() -> Router {
    let mut router = Router::new().route("/", get(|| async { shell() }));
    for &(name, body, content_type) in ASSETS {
        router = router.route(
            &format!("/ui/{name}"),
            get(move || async move { served(body, content_type) }),
        );
    }
    router
}

fn shell() -> Response {
    served(SHELL, "text/html; charset=utf-8")
}

/// Whether `path` is the shell or one of its files (exact paths: nothing else under `/ui/`, so
/// `/ui/session` still needs a token). The door serves these to a GET or HEAD without a token.
pub(crate) fn is_shell_file(path: &str) -> bool {
    path == "/"
        || path
            .strip_prefix("/ui/")
            .is_some_and(|name| ASSETS.iter().any(|&(asset, _, _)| asset == name))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, header};
    use tower::ServiceExt;

    use super::*;
    use crate::approval_page::CONTENT_SECURITY_POLICY;
    use crate::listener::PeerAddr;
    use crate::security::{self, DoorPolicy};

    const TOKEN: &str = "dashboard-token";
    const HOST: &str = "127.0.0.1:4200";

    /// The real security layer over the real files and a stand-in for a token-only API route.
    fn door(token: Option<&str>) -> Router {
        let policy = Arc::new(DoorPolicy::new(
            HOST.parse().unwrap(),
            token.map(str::to_string),
            Vec::new(),
            Vec::new(),
        ));
        Router::new()
            .merge(routes())
            .route("/ui/session", get(|| async { "session" }))
            .route("/api/servers", get(|| async { "servers" }))
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

    async fn send(router: &Router, method: &str, uri: &str) -> Sent {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", HOST)
            .body(Body::empty())
            .unwrap();
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
    async fn the_shell_and_its_files_are_served_without_a_token_under_the_strict_headers() {
        let router = door(Some(TOKEN));
        let mut served = vec![("/".to_string(), SHELL, "text/html; charset=utf-8")];
        for &(name, body, content_type) in ASSETS {
            served.push((format!("/ui/{name}"), body, content_type));
        }
        for (path, body, content_type) in served {
            let sent = send(&router, "GET", &path).await;
            assert_eq!((sent.status, sent.body.as_str()), (200, body), "{path}");
            let header = |name| sent.headers[name].to_str().unwrap().to_string();
            assert_eq!(header(header::CONTENT_TYPE), content_type, "{path}");
            assert_eq!(
                header(header::CONTENT_SECURITY_POLICY),
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(header(header::X_FRAME_OPTIONS), "DENY");
            assert_eq!(header(header::REFERRER_POLICY), "no-referrer");
            assert_eq!(header(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
            assert_eq!(header(header::CACHE_CONTROL), "no-store");
            assert!(sent.headers.get(header::SET_COOKIE).is_none(), "{path}");
            let head = send(&router, "HEAD", &path).await;
            assert_eq!(head.status, 200, "{path}");
        }
    }

    #[tokio::test]
    async fn everything_else_needs_the_token_or_is_not_there() {
        let router = door(Some(TOKEN));
        // The API and the session behind the shell need the token.
        for path in ["/ui/session", "/api/servers"] {
            assert_eq!(send(&router, "GET", path).await.status, 401, "{path}");
        }
        // Not a file of the dashboard: refused without the token, or (a name the door lets through
        // as a possible file) not found; never the shell.
        for path in ["/ui/other.js", "/ui/", "/ui", "/index.html", "/ui/app.js/x"] {
            let sent = send(&router, "GET", path).await;
            assert!(matches!(sent.status, 401 | 404), "{path}: {}", sent.status);
            assert!(!sent.body.contains("<script"), "{path}");
        }
        // A method the shell does not answer.
        assert_eq!(send(&router, "POST", "/").await.status, 401);
        // On an open door: unknown paths are 404, and so is another method on a file.
        let open = door(None);
        for path in [
            "/ui/other.js",
            "/ui/",
            "/index.html",
            "/nothing",
            "/ui/app.js/x",
        ] {
            let sent = send(&open, "GET", path).await;
            assert_eq!(sent.status, 404, "{path}");
            assert!(!sent.body.contains('<'), "{path}: {}", sent.body);
        }
        assert_eq!(send(&open, "POST", "/ui/app.js").await.status, 405);
        assert_eq!(send(&open, "GET", "/ui/session").await.status, 200);
    }

    #[test]
    fn only_the_shell_and_its_files_are_shell_paths() {
        assert!(is_shell_file("/"));
        assert!(is_shell_file("/ui/app.css"));
        assert!(is_shell_file("/ui/audit.js"));
        for path in [
            "/ui/session",
            "/ui/login",
            "/ui/",
            "/ui//app.js",
            "/ui/app.js/",
            "//",
            "/api/servers",
        ] {
            assert!(!is_shell_file(path), "{path}");
        }
    }

    #[test]
    fn the_page_runs_only_its_own_files_and_shows_data_as_text() {
        // One script element, a module with a src: nothing inline for the CSP to allow.
        assert_eq!(SHELL.matches("<script").count(), 1);
        assert!(SHELL.contains(r#"<script type="module" src="/ui/app.js"></script>"#));
        assert!(!SHELL.contains("style="), "no inline style");
        assert!(!SHELL.contains("<style"), "no inline style");
        assert!(!SHELL.contains("http://") && !SHELL.contains("https://"));
        for &(name, body, _) in ASSETS {
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{name}: nothing from elsewhere"
            );
            assert!(
                !body.contains("@import") && !body.contains("url("),
                "{name}"
            );
            for markup in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "sessionStorage",
                "document.cookie",
            ] {
                assert!(!body.contains(markup), "{name} uses {markup}");
            }
            // Storage holds the session's page key and nothing else, in one place.
            let stored = body.matches("localStorage").count();
            let expected = if name == "util.js" { 3 } else { 0 };
            assert_eq!(stored, expected, "{name} uses localStorage");
        }
        // Every module the scripts import is served.
        for &(name, body, _) in ASSETS {
            for import in body.match_indices("from './") {
                let rest = &body[import.0 + "from './".len()..];
                let file = &rest[..rest.find('\'').unwrap()];
                assert!(
                    ASSETS.iter().any(|&(asset, _, _)| asset == file),
                    "{name} imports {file}, which is not served"
                );
            }
        }
    }
}
