//! Configured headers stay on their origin: a 307 to another origin (127.0.0.1 on another port) is
//! refused when the request carries them, and what the second origin received is asserted.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use portico_net::{CredentialScope, NetError, NetPolicy, SafeClient};
use tokio::net::TcpListener;

/// A local origin: `/307?to=URL` answers 307 to URL; anything else answers 200 and records the
/// request's `x-api-key` header.
struct Origin {
    base: String,
    seen: Seen,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

async fn origin() -> Origin {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route(
            "/307",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, q["to"].clone())],
                )
            }),
        )
        .fallback(
            |State(seen): State<Seen>, uri: axum::http::Uri, headers: HeaderMap| async move {
                let key = headers
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                seen.lock().unwrap().push((uri.path().to_string(), key));
                "landed".into_response()
            },
        )
        .with_state(seen.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Origin { base, seen, server }
}

fn client(scope: CredentialScope) -> SafeClient {
    SafeClient::builder()
        .policy(NetPolicy::allow_private_network())
        .credentials(scope)
        .build()
        .unwrap()
}

async fn get_with_key(client: &SafeClient, url: &str) -> Result<reqwest::Response, NetError> {
    let request = client
        .request(reqwest::Method::GET, url)
        .unwrap()
        .header("x-api-key", "s3cret");
    client.send(request).await
}

#[tokio::test]
async fn configured_headers_never_follow_a_redirect_to_another_origin() {
    let first = origin().await;
    let second = origin().await;
    let away = format!("{}/307?to={}/landing", first.base, second.base);
    let home_url = url::Url::parse(&first.base).unwrap();

    for scope in [
        CredentialScope::for_url(&home_url, true),
        CredentialScope::Everywhere,
    ] {
        let error = get_with_key(&client(scope.clone()), &away)
            .await
            .expect_err("a redirect off the origin is refused");
        assert!(
            matches!(&error, NetError::CredentialsCrossOrigin { to, .. } if to == &format!("{}/landing", second.base)),
            "{scope:?}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "refused redirect from {away} to {}/landing: the request carries configured headers \
                 meant only for {}, and following would send them to another origin; if the \
                 service moved, configure its new URL",
                second.base, first.base
            )
        );
    }
    assert!(
        second.seen.lock().unwrap().is_empty(),
        "the second origin received nothing"
    );

    // On its own origin, a redirect is followed with the headers.
    let scoped = client(CredentialScope::for_url(&home_url, true));
    let stay = format!("{}/307?to=/here", first.base);
    let landed = get_with_key(&scoped, &stay).await.unwrap();
    assert_eq!(landed.status(), 200);
    assert_eq!(
        *first.seen.lock().unwrap(),
        [("/here".to_string(), Some("s3cret".to_string()))]
    );

    // A request to another origin carries no configured headers, so its redirects are followed.
    let elsewhere = format!("{}/307?to={}/free", second.base, first.base);
    let response = scoped
        .send(scoped.request(reqwest::Method::GET, &elsewhere).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // Without a scope, reqwest's own behaviour: the custom header goes along (the defect).
    let unscoped = client(CredentialScope::Nowhere);
    get_with_key(&unscoped, &away).await.unwrap();
    assert_eq!(
        *second.seen.lock().unwrap(),
        [("/landing".to_string(), Some("s3cret".to_string()))]
    );
}
