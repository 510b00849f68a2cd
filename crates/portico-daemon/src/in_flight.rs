//! Counting requests in progress, so that shutdown can let them finish.
//!
//! A `POST /mcp` answers over a response body that stays open until the final JSON-RPC response has
//! been written, so a request counts as in progress until its body is finished or dropped. `GET`
//! streams are not counted: they are the long-lived notification streams that shutdown must end.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
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
    // The guard lives as long as the body: until the answer is fully sent or the client left.
    Response::from_parts(
        parts,
        Body::new(CountedBody {
            inner: body,
            _guard: guard,
        }),
    )
}

/// A response body that holds its request's place in the count. It forwards the body's end and size
/// as well as its frames (a stream adapter would not): a JSON answer keeps its `Content-Length` and
/// goes out in one write, instead of as chunks plus a separate terminating chunk.
struct CountedBody {
    inner: Body,
    _guard: Guard,
}

impl HttpBody for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_counted_body_keeps_its_length_and_holds_the_count_until_dropped() {
        let in_flight = InFlight::default();
        in_flight.0.count.fetch_add(1, Ordering::SeqCst);
        let body = CountedBody {
            inner: Body::from("{\"jsonrpc\":\"2.0\"}"),
            _guard: Guard(in_flight.0.clone()),
        };
        assert_eq!(body.size_hint().exact(), Some(17));
        assert!(!body.is_end_stream());
        assert_eq!(in_flight.0.count.load(Ordering::SeqCst), 1);
        let bytes = axum::body::to_bytes(Body::new(body), 1024).await.unwrap();
        assert_eq!(&bytes[..], b"{\"jsonrpc\":\"2.0\"}");
        assert_eq!(in_flight.0.count.load(Ordering::SeqCst), 0);
        tokio::time::timeout(std::time::Duration::from_secs(5), in_flight.idle())
            .await
            .expect("idle once the body is gone");
    }
}
