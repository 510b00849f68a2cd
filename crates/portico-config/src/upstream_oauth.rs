//! `[mcp_servers.oauth]`: how Portico authorizes itself to an OAuth-protected MCP server.
//!
//! Every key is optional, and so is the table: an HTTP server that answers 401 is authorized with
//! what its challenge and metadata say (the MCP authorization spec). The table is for what cannot be
//! discovered: a client registered out of band, a Client ID Metadata Document Portico is known by,
//! the scopes to ask for, a fixed redirect port.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[mcp_servers.oauth]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuthConfig {
    /// A client registered with the server's authorization server out of band. Without it, Portico
    /// uses `client_metadata_url` where the authorization server supports it, else dynamic client
    /// registration (RFC 7591).
    #[serde(default)]
    pub client_id: Option<String>,
    /// The environment variable holding the pre-registered client's secret (a confidential
    /// client). The secret itself never goes in the file.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Scopes to ask for. Without them, Portico asks for what the server's `WWW-Authenticate`
    /// challenge names, else its protected resource metadata's `scopes_supported`, else none.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The HTTPS URL of a Client ID Metadata Document that describes Portico, used as its
    /// `client_id` where the authorization server advertises
    /// `client_id_metadata_document_supported`.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// The port of the loopback redirect, `http://127.0.0.1:PORT/callback`; any free port when unset.
    /// A client pre-registered with one redirect URI needs it fixed.
    #[serde(default)]
    pub redirect_port: Option<u16>,
    /// The `client_name` sent in dynamic client registration (default `Portico`).
    #[serde(default)]
    pub client_name: Option<String>,
    /// Lets a running daemon or `portico mcp` open the browser itself when this server needs a
    /// login or a step-up (`$BROWSER`, else the desktop's opener). Off by default: the server is
    /// marked `needs login` and `portico auth login` does it.
    #[serde(default)]
    pub open_browser: bool,
}
