//! [`DualFramingTransport`]: the decoder and classifier wired to rmcp.
//!
//! Two tasks do the I/O, started on first use (so constructing the
//! transport needs no runtime):
//!
//! - the **reader** owns the input, runs the [`FrameDecoder`], hands rmcp
//!   messages to [`Transport::receive`] through a channel and queues the
//!   transport's own error replies on the writer;
//! - the **writer** owns the output and writes whole frames, one at a time,
//!   in queue order, flushing after each.
//!
//! rmcp polls `receive` inside a `select!` and drops it whenever another
//! branch wins, and it runs `send` futures in spawned tasks. Keeping the I/O
//! in tasks makes both trivially cancel-safe: a dropped `receive` loses
//! nothing (an mpsc `recv` is cancel-safe), and a dropped `send` can never
//! leave half a frame on the wire, because only the writer task writes.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::classify::{ErrorReply, Inbound, classify, event_reply};
use crate::decoder::{Event, FrameDecoder};
use crate::{Framing, FramingConfig};

/// Read buffer size; a message may span any number of reads.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Decoded messages waiting for rmcp. Small: it only smooths the hand-off,
/// and back-pressure should reach the client's pipe.
const INBOUND_QUEUE: usize = 16;
/// Frames waiting for the writer.
const WRITE_QUEUE: usize = 64;
/// Bound on remembered request framings (see [`Routing::record`]).
const MAX_TRACKED_REQUESTS: usize = 4096;

/// Errors from [`DualFramingTransport`]'s `send` and `close`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The transport was closed (or its writer stopped) before the message
    /// was written.
    #[error("stdio transport is closed")]
    Closed,
    /// The outgoing message could not be serialised.
    #[error("failed to serialise an outgoing message: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Writing to the output failed. After the first failure every later
    /// write fails too, since the stream may hold a partial frame.
    #[error("failed to write to the output: {0}")]
    Io(#[from] io::Error),
}

/// Which framing each outgoing message uses.
#[derive(Debug, Default)]
struct Routing {
    /// Framing of the most recent message received.
    current: Framing,
    /// Framing of each client request still awaiting its response.
    by_request: HashMap<RequestId, Framing>,
}

type SharedRouting = Arc<Mutex<Routing>>;

fn lock(routing: &SharedRouting) -> std::sync::MutexGuard<'_, Routing> {
    routing.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Routing {
    fn record(&mut self, message: &ClientJsonRpcMessage, framing: Framing) {
        self.current = framing;
        match message {
            JsonRpcMessage::Request(request) => {
                // Entries leave when the response is sent or the request is
                // cancelled; the bound only guards against a peer that keeps
                // requests rmcp never answers. Losing entries just means
                // falling back to `current`.
                if self.by_request.len() >= MAX_TRACKED_REQUESTS {
                    self.by_request.clear();
                }
                self.by_request.insert(request.id.clone(), framing);
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.by_request.remove(id);
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
    }

    fn framing_for(&mut self, message: &TxJsonRpcMessage<RoleServer>) -> Framing {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        id.and_then(|id| self.by_request.remove(id))
            .unwrap_or(self.current)
    }
}

/// Frame a serialised message.
pub(crate) fn encode(framing: Framing, mut body: Vec<u8>) -> Vec<u8> {
    match framing {
        Framing::Newline => {
            body.push(b'\n');
            body
        }
        Framing::ContentLength => {
            let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            frame.append(&mut body);
            frame
        }
    }
}

enum WriteCmd {
    Frame {
        bytes: Vec<u8>,
        done: Option<oneshot::Sender<io::Result<()>>>,
    },
    Close {
        done: oneshot::Sender<io::Result<()>>,
    },
}

async fn write_loop<W>(mut writer: W, mut commands: mpsc::Receiver<WriteCmd>)
where
    W: AsyncWrite + Unpin,
{
    let mut failed: Option<io::ErrorKind> = None;
    while let Some(command) = commands.recv().await {
        match command {
            WriteCmd::Frame { bytes, done } => {
                let result = match failed {
                    Some(kind) => Err(io::Error::new(kind, "an earlier write failed")),
                    None => match writer.write_all(&bytes).await {
                        Ok(()) => writer.flush().await,
                        Err(error) => Err(error),
                    },
                };
                if let Err(error) = &result {
                    if failed.is_none() {
                        tracing::warn!(%error, "writing to the MCP client failed");
                    }
                    failed = Some(error.kind());
                }
                if let Some(done) = done {
                    let _ = done.send(result);
                }
            }
            WriteCmd::Close { done } => {
                let _ = done.send(writer.shutdown().await);
                return;
            }
        }
    }
    // Every sender is gone without an explicit close (the transport was
    // dropped): everything queued has been written; end the stream.
    let _ = writer.shutdown().await;
}

struct Reader {
    max_message_bytes: usize,
    inbound: mpsc::Sender<(Box<ClientJsonRpcMessage>, Framing)>,
    writes: Option<mpsc::Sender<WriteCmd>>,
    routing: SharedRouting,
}

impl Reader {
    async fn run<R: AsyncRead + Unpin>(self, input: R) {
        let mut input = BufReader::with_capacity(READ_BUFFER_BYTES, input);
        let mut decoder = FrameDecoder::new(self.max_message_bytes);
        loop {
            let event = {
                let available = match input.fill_buf().await {
                    Ok(available) => available,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => {
                        tracing::warn!(%error, "reading from the MCP client failed");
                        return;
                    }
                };
                if available.is_empty() {
                    if let Some(event) = decoder.finish() {
                        self.handle(event).await;
                    }
                    tracing::debug!("MCP client closed its input");
                    return;
                }
                let (used, event) = decoder.decode(available);
                input.consume(used);
                event
            };
            if let Some(event) = event
                && !self.handle(event).await
            {
                // `receive` is gone: the transport was closed or dropped.
                return;
            }
        }
    }

    /// Deal with one decoder event; `false` once nobody is receiving.
    async fn handle(&self, event: Event) -> bool {
        let framing = match &event {
            Event::Message { framing, body } => {
                let framing = *framing;
                return match classify(body) {
                    Inbound::Message(message) => {
                        self.inbound.send((message, framing)).await.is_ok()
                    }
                    Inbound::Reply(reply) => {
                        self.reply(reply, framing).await;
                        true
                    }
                    Inbound::Ignore => {
                        lock(&self.routing).current = framing;
                        true
                    }
                };
            }
            Event::Oversized { framing, .. } => *framing,
            Event::BadHeader { .. } | Event::Truncated { .. } => Framing::ContentLength,
        };
        if let Some(reply) = event_reply(&event, self.max_message_bytes) {
            self.reply(reply, framing).await;
        }
        true
    }

    async fn reply(&self, reply: ErrorReply, framing: Framing) {
        tracing::debug!(?reply, "answering malformed input");
        lock(&self.routing).current = framing;
        let Some(writes) = &self.writes else { return };
        let body = match serde_json::to_vec(&reply) {
            Ok(body) => body,
            Err(error) => {
                tracing::error!(%error, "failed to serialise an error reply");
                return;
            }
        };
        let bytes = encode(framing, body);
        let _ = writes.send(WriteCmd::Frame { bytes, done: None }).await;
    }
}

/// An rmcp server transport over a byte stream pair that accepts both
/// newline-delimited and `Content-Length`-framed JSON-RPC, detected per
/// message.
///
/// Responses go out in the framing of the request they answer; messages the
/// server originates (requests, notifications) in the framing of the most
/// recent message received (newline framing before anything is received).
/// See the crate documentation for the exact reading rules.
pub struct DualFramingTransport<R, W> {
    config: FramingConfig,
    /// Not yet handed to the reader task.
    input: Option<R>,
    /// Not yet handed to the writer task.
    output: Option<W>,
    writes: Option<mpsc::Sender<WriteCmd>>,
    writer_task: Option<JoinHandle<()>>,
    inbound: Option<mpsc::Receiver<(Box<ClientJsonRpcMessage>, Framing)>>,
    reader_task: Option<JoinHandle<()>>,
    routing: SharedRouting,
}

impl<R, W> std::fmt::Debug for DualFramingTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DualFramingTransport")
            .field("config", &self.config)
            .field("started", &self.writes.is_some())
            .finish_non_exhaustive()
    }
}

impl<R, W> DualFramingTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Wrap an input and an output. Nothing is read or written, and no task
    /// is started, until rmcp first calls `receive` or `send` (which must be
    /// inside a Tokio runtime).
    pub fn new(reader: R, writer: W, config: FramingConfig) -> Self {
        Self {
            config,
            input: Some(reader),
            output: Some(writer),
            writes: None,
            writer_task: None,
            inbound: None,
            reader_task: None,
            routing: SharedRouting::default(),
        }
    }

    fn start_writer(&mut self) {
        if let Some(output) = self.output.take() {
            let (writes, commands) = mpsc::channel(WRITE_QUEUE);
            self.writer_task = Some(tokio::spawn(write_loop(output, commands)));
            self.writes = Some(writes);
        }
    }

    fn start_reader(&mut self) {
        self.start_writer();
        if let Some(input) = self.input.take() {
            let (inbound, receiver) = mpsc::channel(INBOUND_QUEUE);
            let reader = Reader {
                max_message_bytes: self.config.max_message_bytes,
                inbound,
                writes: self.writes.clone(),
                routing: self.routing.clone(),
            };
            self.reader_task = Some(tokio::spawn(reader.run(input)));
            self.inbound = Some(receiver);
        }
    }
}

impl<R, W> Drop for DualFramingTransport<R, W> {
    fn drop(&mut self) {
        // The writer task finishes on its own once every queued frame is
        // written; the reader would otherwise block on input forever.
        if let Some(task) = &self.reader_task {
            task.abort();
        }
    }
}

impl<R, W> Transport<RoleServer> for DualFramingTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = TransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.start_writer();
        let framing = lock(&self.routing).framing_for(&item);
        let writes = self.writes.clone();
        async move {
            let writes = writes.ok_or(TransportError::Closed)?;
            let bytes = encode(framing, serde_json::to_vec(&item)?);
            let (done, written) = oneshot::channel();
            let command = WriteCmd::Frame {
                bytes,
                done: Some(done),
            };
            writes
                .send(command)
                .await
                .map_err(|_| TransportError::Closed)?;
            written.await.map_err(|_| TransportError::Closed)??;
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.start_reader();
        let (message, framing) = self.inbound.as_mut()?.recv().await?;
        lock(&self.routing).record(&message, framing);
        Some(*message)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.input = None;
        self.output = None;
        if let Some(task) = self.reader_task.take() {
            task.abort();
            let _ = task.await;
        }
        self.inbound = None;
        let Some(writes) = self.writes.take() else {
            return Ok(());
        };
        // Frames queued before this point are written first; later sends
        // fail with `Closed`.
        let (done, closed) = oneshot::channel();
        let result = match writes.send(WriteCmd::Close { done }).await {
            Ok(()) => closed.await.unwrap_or(Ok(())),
            Err(_) => Ok(()),
        };
        drop(writes);
        if let Some(task) = self.writer_task.take() {
            let _ = task.await;
        }
        result.map_err(TransportError::Io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_both_framings_with_byte_lengths() {
        let body = "{\"s\":\"é\"}".as_bytes().to_vec();
        assert_eq!(
            encode(Framing::Newline, body.clone()),
            b"{\"s\":\"\xc3\xa9\"}\n"
        );
        assert_eq!(
            encode(Framing::ContentLength, body),
            b"Content-Length: 10\r\n\r\n{\"s\":\"\xc3\xa9\"}"
        );
    }

    #[test]
    fn responses_use_their_request_framing() {
        let mut routing = Routing::default();
        let request = |id: i64| -> ClientJsonRpcMessage {
            serde_json::from_value(serde_json::json!(
                {"jsonrpc": "2.0", "id": id, "method": "ping"}
            ))
            .unwrap()
        };
        let response = |id: i64| -> TxJsonRpcMessage<RoleServer> {
            serde_json::from_value(serde_json::json!(
                {"jsonrpc": "2.0", "id": id, "result": {}}
            ))
            .unwrap()
        };
        routing.record(&request(1), Framing::ContentLength);
        routing.record(&request(2), Framing::Newline);
        assert_eq!(routing.framing_for(&response(1)), Framing::ContentLength);
        assert_eq!(routing.framing_for(&response(2)), Framing::Newline);
        // Unknown ids (and server-initiated messages) follow the latest.
        routing.record(&request(3), Framing::ContentLength);
        assert_eq!(routing.framing_for(&response(1)), Framing::ContentLength);
        let cancel: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 3}
        }))
        .unwrap();
        routing.record(&cancel, Framing::Newline);
        assert!(routing.by_request.is_empty());
    }
}
