//! The stdio framing decoder, through its only public face: `DualFramingTransport` over in-memory
//! input.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use portico_stdio_framing::{DualFramingTransport, FramingConfig};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::door::runtime;

/// A small cap so that short inputs reach the oversized-message paths too.
const SMALL_MAX: usize = 300;

/// Reads `data` in pieces whose sizes follow `pattern`, so a message is split at many different
/// byte boundaries; the decoder must read the same messages as from one big read.
pub(crate) struct ChunkedReader {
    data: Vec<u8>,
    at: usize,
    pattern: Vec<usize>,
    step: usize,
}

impl ChunkedReader {
    pub(crate) fn whole(data: &[u8]) -> Self {
        Self::new(data, vec![usize::MAX])
    }

    pub(crate) fn new(data: &[u8], pattern: Vec<usize>) -> Self {
        ChunkedReader {
            data: data.to_vec(),
            at: 0,
            pattern,
            step: 0,
        }
    }
}

impl AsyncRead for ChunkedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let size = this.pattern[this.step % this.pattern.len()].max(1);
        this.step += 1;
        let end = this
            .data
            .len()
            .min(this.at.saturating_add(size))
            .min(this.at + buf.remaining());
        buf.put_slice(&this.data[this.at..end]);
        this.at = end;
        Poll::Ready(Ok(()))
    }
}

/// Collects what the transport writes.
#[derive(Clone, Default)]
pub(crate) struct Collect(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Collect {
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl AsyncWrite for Collect {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What one pass over the input produced: the messages handed to rmcp (re-serialised) and the
/// bytes of the transport's own error replies.
#[derive(Debug, PartialEq)]
struct Pass {
    messages: Vec<Value>,
    output: Vec<u8>,
}

async fn pass(reader: ChunkedReader, max_message_bytes: usize) -> Pass {
    let out = Collect::default();
    let mut transport =
        DualFramingTransport::new(reader, out.clone(), FramingConfig { max_message_bytes });
    let mut messages = Vec::new();
    while let Some(message) = transport.receive().await {
        messages.push(serde_json::to_value(&message).unwrap_or(Value::Null));
    }
    let _ = transport.close().await;
    Pass {
        messages,
        output: out.bytes(),
    }
}

/// Feeds `data` as stdin of the `portico mcp` transport: whole, then in uneven pieces, each with a
/// small message cap and the default one. Checks that every piecewise read sees what the whole read
/// sees, and that each error reply the transport writes is one well-formed JSON-RPC error frame.
pub fn stdio_framing(data: &[u8]) {
    // Piece sizes from the input itself, so the fuzzer explores the boundaries too.
    let pattern: Vec<usize> = data
        .iter()
        .take(8)
        .map(|b| usize::from(b % 7) + 1)
        .collect();
    let pattern = if pattern.is_empty() { vec![1] } else { pattern };
    runtime().block_on(async {
        for max in [SMALL_MAX, FramingConfig::default().max_message_bytes] {
            let whole = pass(ChunkedReader::whole(data), max).await;
            check_replies(&whole.output);
            let split = pass(ChunkedReader::new(data, pattern.clone()), max).await;
            assert_eq!(
                whole, split,
                "the decoder read differently when the input was split into pieces of {pattern:?} (max_message_bytes {max})"
            );
            let bytewise = pass(ChunkedReader::new(data, vec![1]), max).await;
            assert_eq!(
                whole, bytewise,
                "the decoder read differently when the input came one byte at a time (max_message_bytes {max})"
            );
        }
    });
}

/// Every frame the transport writes by itself is a JSON-RPC error with a numeric code.
fn check_replies(mut output: &[u8]) {
    while !output.is_empty() {
        let body;
        if let Some(rest) = output.strip_prefix(b"Content-Length: ") {
            let end = rest
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("a Content-Length reply has a blank line after its header");
            let length: usize = std::str::from_utf8(&rest[..end])
                .ok()
                .and_then(|n| n.parse().ok())
                .expect("a Content-Length reply declares a number");
            let start = end + 4;
            body = &rest[start..start + length];
            output = &rest[start + length..];
        } else {
            let end = output
                .iter()
                .position(|&b| b == b'\n')
                .expect("a newline reply ends with a newline");
            body = &output[..end];
            output = &output[end + 1..];
        }
        let reply: Value = serde_json::from_slice(body).expect("an error reply is JSON");
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert!(reply["error"]["code"].is_i64(), "{reply}");
        assert!(
            reply.get("id").is_some(),
            "an error reply carries an id (null when unknown): {reply}"
        );
    }
}
