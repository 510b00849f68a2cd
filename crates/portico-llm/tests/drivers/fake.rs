//! A fake provider: an axum server on 127.0.0.1:0 that records every request and answers from a
//! queue of canned replies, streaming event-stream bodies in small pieces so events, lines and
//! even UTF-8 characters are split across network chunks.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use portico_llm::{EventSink, StreamEvent};
use portico_net::{NetPolicy, SafeClient};
use serde_json::Value;
use tokio::sync::Notify;

/// One canned answer.
pub enum Reply {
    /// 200 with an event stream, sent in pieces of `piece` bytes.
    Sse { body: String, piece: usize },
    /// 200 with `first`, then (after `gate` is notified) `rest`: proves the driver hands events
    /// on before the response is complete.
    Gated {
        first: String,
        gate: Arc<Notify>,
        rest: String,
    },
    /// Any status with headers and a body.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
}

impl Reply {
    pub fn sse(body: impl Into<String>) -> Self {
        Reply::Sse {
            body: body.into(),
            piece: 7,
        }
    }

    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name, value.to_owned()));
        }
        self
    }
}

/// What the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

pub struct FakeServer {
    /// `http://127.0.0.1:PORT`
    pub origin: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeServer {
            origin,
            shared,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn hits(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.requests.lock().unwrap().push(Recorded {
        method,
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => plain(500, "the fake server ran out of replies"),
        Some(Reply::Status {
            status,
            headers,
            body,
        }) => {
            let mut response = plain(status, &body);
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Some(Reply::Sse { body, piece }) => {
            let pieces: Vec<Bytes> = body
                .as_bytes()
                .chunks(piece)
                .map(Bytes::copy_from_slice)
                .collect();
            let stream = futures::stream::unfold(pieces.into_iter(), |mut rest| async move {
                let next = rest.next()?;
                // A pause per piece so they leave as separate writes.
                tokio::time::sleep(Duration::from_millis(1)).await;
                Some((Ok::<_, Infallible>(next), rest))
            });
            event_stream(Body::from_stream(stream))
        }
        Some(Reply::Gated { first, gate, rest }) => {
            let stream = futures::stream::unfold(0u8, move |step| {
                let (first, gate, rest) = (first.clone(), gate.clone(), rest.clone());
                async move {
                    match step {
                        0 => Some((Ok::<_, Infallible>(Bytes::from(first)), 1)),
                        1 => {
                            gate.notified().await;
                            Some((Ok(Bytes::from(rest)), 2))
                        }
                        _ => None,
                    }
                }
            });
            event_stream(Body::from_stream(stream))
        }
    }
}

fn plain(status: u16, body: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

/// A client that may reach loopback, where the fakes live.
pub fn client() -> SafeClient {
    SafeClient::new(NetPolicy::allow_private_network()).unwrap()
}

/// An event sink that keeps what it is given.
pub fn recorder() -> (EventSink, Arc<Mutex<Vec<StreamEvent>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: EventSink = Arc::new(move |event| sink_seen.lock().unwrap().push(event));
    (sink, seen)
}

/// The text deltas among `events`, in order.
pub fn deltas(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// An SSE body from `(event name, data)` pairs; an empty name writes no `event:` line.
pub fn sse_body(events: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

/// A port nothing listens on: bound, then released.
pub async fn dead_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
