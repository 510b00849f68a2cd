//! The stdin/stdout transport for `portico mcp`.

use portico_config::Config;
use portico_stdio_framing::{DualFramingTransport, FramingConfig};

/// Newline-delimited JSON or `Content-Length` framing, detected per message, with the configured cap.
pub fn transport(config: &Config) -> DualFramingTransport<tokio::io::Stdin, tokio::io::Stdout> {
    portico_stdio_framing::stdio(FramingConfig {
        max_message_bytes: config.server.max_message_bytes,
    })
}
