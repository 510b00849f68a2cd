//! Counting requests in progress, so that shutdown can let them finish.
//!
//! A `POST /mcp` answers over a response body that stays open until the final JSON-RPC response has
//! been written, so a request counts as in progress until its body is finished or dropped. `GET`
//! streams are not counted: they are the long-lived notification streams that shutdown must end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use tokio::sync::Notify;

#[derive(Clone, Default)]
pub(crate) struct InFlight(Arc<Counter>);

#[derive(Default)]
pub(crate) struct Counter {
    count: AtomicUsize,
    idle: Notify,
}

struct Guard(Arc<Counter>);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl InFlight {
    /// Waits until no counted request is in progress.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            if self.0.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

pub(crate) async fn count_posts(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    in_flight.0.count.fetch_add(1, Ordering::SeqCst);
    let guard = Guard(in_flight.0.clone());
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    // The guard lives as long as the body stream: until the answer is fully sent or the client left.
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}
