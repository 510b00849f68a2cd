//! The stdin/stdout transport for `portico mcp`.

use portico_config::Config;

/// Newline-delimited JSON on stdin/stdout.
pub fn transport(_config: &Config) -> (tokio::io::Stdin, tokio::io::Stdout) {
    rmcp::transport::stdio()
}
