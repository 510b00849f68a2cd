//! The two local ends of an authorization-code login: the browser the authorization URL is handed
//! to, and the loopback listener the authorization server redirects back to (RFC 8252 §7.3).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::{Html, IntoResponse};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How a login's authorization URL reaches the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Browser {
    /// `$BROWSER`: a command that is given the URL (`%s` in it is replaced by the URL, else the URL
    /// is its last argument). Any command will do: a test's follows the redirect itself.
    Command(String),
    /// The desktop's opener (`xdg-open`, `open`), tried by `portico auth login` when `$BROWSER` is
    /// unset; the URL is printed as well.
    Desktop,
}

impl Browser {
    /// `$BROWSER` when it is set: a process with it may start logins by itself.
    pub fn from_env() -> Option<Browser> {
        std::env::var("BROWSER")
            .ok()
            .filter(|b| !b.trim().is_empty())
            .map(Browser::Command)
    }

    /// Hands `url` to the browser. The command runs on its own (not waited for); it gets Portico's
    /// environment, since it is the user's browser.
    pub fn open(&self, url: &str) -> Result<(), String> {
        let (program, args) = match self {
            Browser::Command(command) => {
                // `$BROWSER` may list alternatives separated by `:`; the first is used.
                let first = command.split(':').next().unwrap_or_default();
                let mut words = first.split_whitespace().map(str::to_string);
                let Some(program) = words.next() else {
                    return Err("$BROWSER is empty".into());
                };
                let mut args: Vec<String> = words.collect();
                if args.iter().any(|a| a.contains("%s")) {
                    for arg in &mut args {
                        *arg = arg.replace("%s", url);
                    }
                } else {
                    args.push(url.to_string());
                }
                (program, args)
            }
            Browser::Desktop => {
                let opener = if cfg!(target_os = "macos") {
                    "open"
                } else {
                    "xdg-open"
                };
                (opener.to_string(), vec![url.to_string()])
            }
        };
        let mut child = tokio::process::Command::new(&program)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| format!("cannot run `{program}`: {e}"))?;
        // Reaped when it exits, whenever that is.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Ok(())
    }
}

/// What the authorization server sent back to the redirect URI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    /// RFC 9207's `iss`, checked against the issuer the login started with.
    pub issuer: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl Callback {
    fn parse(query: &str) -> Callback {
        let mut callback = Callback::default();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match key.as_ref() {
                "code" => &mut callback.code,
                "state" => &mut callback.state,
                "iss" => &mut callback.issuer,
                "error" => &mut callback.error,
                "error_description" => &mut callback.error_description,
                _ => continue,
            };
            // The first of a repeated parameter counts.
            if slot.is_none() {
                *slot = Some(value.into_owned());
            }
        }
        callback
    }
}

/// What the listener waits for: the one redirect, and the `state` it must carry.
#[derive(Default)]
struct Pending {
    sender: Option<oneshot::Sender<Callback>>,
    expected_state: Option<String>,
}

type Waiting = Arc<Mutex<Pending>>;

/// A listener on 127.0.0.1 that takes one redirect at `/callback` and then closes.
pub struct CallbackListener {
    port: u16,
    received: oneshot::Receiver<Callback>,
    stop: CancellationToken,
    waiting: Waiting,
}

impl Drop for CallbackListener {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl CallbackListener {
    /// Listens on `127.0.0.1:port` (any free port when `None`).
    pub async fn bind(port: Option<u16>) -> std::io::Result<CallbackListener> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await?;
        let port = listener.local_addr()?.port();
        let (sender, received) = oneshot::channel();
        let waiting: Waiting = Arc::new(Mutex::new(Pending {
            sender: Some(sender),
            expected_state: None,
        }));
        let stop = CancellationToken::new();
        let app = axum::Router::new()
            .route("/callback", axum::routing::get(receive))
            .with_state(waiting.clone());
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
        });
        Ok(CallbackListener {
            port,
            received,
            stop,
            waiting,
        })
    }

    /// Only a redirect carrying this `state` (the authorization request's) is taken: another local
    /// process or a web page probing ports cannot end the login, or finish it with its own code.
    pub fn expect_state(&self, state: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expected_state = Some(state.to_string());
    }

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the redirect, at most `timeout`.
    pub async fn wait(mut self, timeout: Duration) -> Option<Callback> {
        tokio::time::timeout(timeout, &mut self.received)
            .await
            .ok()
            .and_then(Result::ok)
    }
}

async fn receive(State(waiting): State<Waiting>, RawQuery(query): RawQuery) -> impl IntoResponse {
    let callback = Callback::parse(query.as_deref().unwrap_or_default());
    let failed = callback.error.is_some() || callback.code.is_none();
    let sender = {
        let mut pending = waiting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(expected) = &pending.expected_state
            && callback.state.as_deref() != Some(expected.as_str())
        {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                Html(page(
                    "This redirect is not for the login Portico is waiting for.",
                )),
            );
        }
        pending.sender.take()
    };
    let text = match sender {
        None => "This login was already answered; you can close this tab.",
        Some(sender) => {
            let _ = sender.send(callback);
            if failed {
                "The authorization server did not authorize Portico; see the terminal or Portico's log."
            } else {
                "Portico received the authorization; you can close this tab."
            }
        }
    };
    (axum::http::StatusCode::OK, Html(page(text)))
}

fn page(text: &str) -> String {
    format!("<!doctype html><meta charset=utf-8><title>Portico</title><p>{text}</p>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_query_is_read_with_its_first_values() {
        let callback =
            Callback::parse("code=abc&state=xyz&iss=https%3A%2F%2Fas.example&code=second&x=1");
        assert_eq!(callback.code.as_deref(), Some("abc"));
        assert_eq!(callback.state.as_deref(), Some("xyz"));
        assert_eq!(callback.issuer.as_deref(), Some("https://as.example"));
        let denied = Callback::parse("error=access_denied&error_description=no+thanks");
        assert_eq!(denied.error.as_deref(), Some("access_denied"));
        assert_eq!(denied.error_description.as_deref(), Some("no thanks"));
        assert_eq!(denied.code, None);
    }

    #[tokio::test]
    async fn a_redirect_with_another_state_is_refused_and_does_not_end_the_login() {
        let listener = CallbackListener::bind(None).await.unwrap();
        listener.expect_state("s-good");
        let uri = listener.redirect_uri();
        let client = reqwest::Client::new();
        let forged = client
            .get(format!("{uri}?code=evil&state=s-forged"))
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 400);
        let stateless = client
            .get(format!("{uri}?error=access_denied"))
            .send()
            .await
            .unwrap();
        assert_eq!(stateless.status(), 400);
        let real = client
            .get(format!("{uri}?code=c1&state=s-good"))
            .send()
            .await
            .unwrap();
        assert_eq!(real.status(), 200);
        let callback = listener.wait(Duration::from_secs(5)).await.unwrap();
        assert_eq!(callback.code.as_deref(), Some("c1"));
    }

    #[tokio::test]
    async fn the_listener_takes_one_redirect_on_loopback() {
        let listener = CallbackListener::bind(None).await.unwrap();
        let uri = listener.redirect_uri();
        assert!(uri.starts_with("http://127.0.0.1:"), "{uri}");
        let client = reqwest::Client::new();
        let first = client
            .get(format!("{uri}?code=c1&state=s1"))
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 200);
        assert!(first.text().await.unwrap().contains("received"));
        let second = client
            .get(format!("{uri}?code=c2&state=s2"))
            .send()
            .await
            .unwrap();
        assert!(second.text().await.unwrap().contains("already answered"));
        let other = client
            .get(uri.replace("/callback", "/elsewhere"))
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), 404);
        let callback = listener.wait(Duration::from_secs(5)).await.unwrap();
        assert_eq!(callback.code.as_deref(), Some("c1"));
        assert_eq!(callback.state.as_deref(), Some("s1"));
    }
}
