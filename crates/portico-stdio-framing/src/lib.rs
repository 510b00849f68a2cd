//! The stdio transport behind `portico mcp`, Portico's MCP server for IDEs.
//!
//! IDE clients (Claude Desktop, Cursor, VS Code) speak the MCP standard stdio
//! framing: one JSON-RPC message per line. The system Portico replaces used
//! LSP-style framing, `Content-Length: N\r\n\r\n` followed by exactly `N`
//! bytes of JSON, and existing integrations still send that. Portico accepts
//! both, **detected per message**, and answers each request in the framing
//! it arrived in.
//!
//! This is written by hand because no maintained crate does dual framing:
//! rmcp's own stdio transport is newline-only, and LSP crates are
//! header-only. [`DualFramingTransport`] implements rmcp's
//! [`Transport<RoleServer>`](rmcp::transport::Transport), so an rmcp server
//! runs over it unchanged:
//!
//! ```no_run
//! use portico_stdio_framing::{FramingConfig, stdio};
//! use rmcp::{ServerHandler, ServiceExt};
//!
//! struct Portico;
//! impl ServerHandler for Portico {}
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Portico.serve(stdio(FramingConfig::default())).await?;
//! server.waiting().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Reading
//!
//! A byte-level state machine, so a message may arrive split across any
//! number of reads:
//!
//! - Whitespace and blank lines between messages are skipped.
//! - A message that opens with a `Content-Length:` (or `Content-Type:`)
//!   header, matched case-insensitively, is header-framed: header lines are
//!   read up to an empty line (`\r\n` or `\n` line ends), headers other than
//!   `Content-Length` are ignored, then exactly `N` body bytes are read.
//!   Anything else is newline-framed: the message runs to the next `\n`, a
//!   trailing `\r` is dropped.
//! - A message over [`FramingConfig::max_message_bytes`] (a declared
//!   `Content-Length` above it, or a line growing past it) is drained — read
//!   and thrown away as it streams, never buffered whole — and answered with
//!   `-32600` Invalid Request naming the size and the limit. The reply
//!   carries the request's id when it can be recovered from the first 16 KiB
//!   of the message, `null` otherwise. A declared length over the limit is
//!   refused as soon as its header block ends (id `null`), without waiting
//!   for a body that may never come; what follows is read as the next
//!   message, header or line. Only a line that is itself over the limit is
//!   taken for the refused body: it is drained up to a newline or the
//!   declared length, whichever comes first, and answered again with its id.
//!   So a lying `Content-Length: 9223372036854775808` costs no later message.
//! - A malformed header block (non-numeric, negative, empty, out-of-range or
//!   conflicting `Content-Length`, no `Content-Length`, a line that is not a
//!   header, a block over 8 KiB) is answered with `-32600`. To resynchronise,
//!   a JSON object or array that starts right after the blank line is taken
//!   to be the orphaned body and skipped (by bracket matching); a non-header
//!   line inside a header block ends the block and is discarded with it. The
//!   rest of a block over 8 KiB is discarded as it streams, line by line, up
//!   to its blank line, and its body skipped the same way.
//! - A skipped body that has a raw newline inside a string is not JSON: the
//!   skip ends at that newline.
//! - Input that is not JSON (including invalid UTF-8 and binary garbage) is
//!   answered with `-32700` Parse error, id `null`. JSON that is not a
//!   JSON-RPC message is answered with `-32600`, with its id if it has a
//!   usable one. A JSON-RPC batch (an array) is answered with `-32600`:
//!   batches are not supported, as MCP removed them in 2025-06-18. A
//!   notification rmcp cannot parse is dropped without an answer, like
//!   rmcp's own transport does. rmcp never sees any of these.
//! - End of input ends the stream (`receive` returns `None`). A
//!   `Content-Length` message cut short by end of input is answered with
//!   `-32700` first; an unterminated last line is handled as a whole line.
//!
//! # Writing
//!
//! Responses use the framing of the request they answer; server-initiated
//! messages use the framing of the most recent message received (newline
//! before any). Header framing writes `Content-Length: N\r\n\r\n` with `N`
//! the body's length in bytes. All frames — rmcp's and the transport's own
//! error replies — go through one writer task, so frames never interleave,
//! and the output is flushed after each.
//!
//! Error replies written by the transport use `"id": null` when the id is
//! unknown, as JSON-RPC 2.0 requires (rmcp itself omits the member).

mod classify;
mod decoder;
mod transport;

pub use transport::{DualFramingTransport, TransportError};

/// Default cap on one incoming message: 10 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

/// How a message is delimited on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Framing {
    /// One message per line (MCP's standard stdio framing).
    #[default]
    Newline,
    /// `Content-Length: N\r\n\r\n` then `N` bytes (LSP base protocol).
    ContentLength,
}

/// Settings for [`DualFramingTransport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramingConfig {
    /// Largest accepted message body, in bytes; bigger messages are
    /// discarded and answered with an error. Defaults to
    /// [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
}

impl Default for FramingConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// The transport over the process's stdin and stdout.
///
/// Note that Tokio reads stdin on a blocking thread, which can keep the
/// runtime from shutting down until the read returns; exit the process
/// once the server is done rather than relying on runtime shutdown.
pub fn stdio(config: FramingConfig) -> DualFramingTransport<tokio::io::Stdin, tokio::io::Stdout> {
    DualFramingTransport::new(tokio::io::stdin(), tokio::io::stdout(), config)
}
