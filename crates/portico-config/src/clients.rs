//! `[[server.clients]]`: the named clients of the HTTP door, each with its token and tool scope.

use schemars::JsonSchema;
use serde::Deserialize;

/// One client of the HTTP door. Its bearer token makes a request `client:{name}`; `tools`, when set,
/// is all it may list and call.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// `[a-z0-9_-]`; the client is the principal `client:{name}` in audit records and policies.
    pub name: String,
    /// The client's bearer token; `${VAR}` is expanded from Portico's environment. Give this or
    /// `token_sha256`, not both.
    #[serde(default)]
    pub token: Option<String>,
    /// The lowercase hex SHA-256 of the token, so the token itself need not be in the file
    /// (`portico clients add NAME` prints both).
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// Globs over the tool names the doors serve: what this client may list and call. Absent: all.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

/// Whether `name` can name a client: `[a-z0-9_-]`, 1 to 64 characters.
pub fn is_client_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Names a `[[server.clients]]` entry may not take, and whose caller each already is: a client
/// named after a door would be the same principal as that door's callers (matching `callers`
/// rules meant for them, seeing their pending approvals in a shared portico.db).
pub const RESERVED_CLIENT_NAMES: [(&str, &str); 7] = [
    ("default", "the client of [server] token"),
    ("stdio", "the caller of `portico mcp` and other stdio doors"),
    (
        "cli",
        "the caller of `portico call` and the other CLI commands",
    ),
    (
        "http",
        "the HTTP door's caller when no token identifies one",
    ),
    ("api", "the HTTP API's caller when no token identifies one"),
    ("a2a", "the A2A door's caller"),
    ("mcp", "an MCP door's caller"),
];

/// Whose caller a reserved client name already is, or `None` if `name` is free to take.
pub fn reserved_client_name(name: &str) -> Option<&'static str> {
    RESERVED_CLIENT_NAMES
        .iter()
        .find(|(reserved, _)| *reserved == name)
        .map(|(_, whose)| *whose)
}

/// The 32 bytes of a `token_sha256` value (64 hex digits, either case), or `None` if it is not one.
pub fn parse_sha256_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(digest)
}

/// The lowercase hex SHA-256 of `token`: what `token_sha256` holds.
pub fn token_sha256_hex(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_digests() {
        for ok in ["laptop", "ci-2", "a_b", "0"] {
            assert!(is_client_name(ok), "{ok}");
        }
        for bad in ["", "Laptop", "lap top", "lap:top", "é", &"a".repeat(65)] {
            assert!(!is_client_name(bad), "{bad}");
        }
        for door in ["default", "stdio", "cli", "http", "api", "a2a", "mcp"] {
            assert!(reserved_client_name(door).is_some(), "{door}");
        }
        assert_eq!(reserved_client_name("laptop"), None);
        assert_eq!(reserved_client_name("stdio2"), None);
        let hex = token_sha256_hex("s3cret");
        assert_eq!(hex.len(), 64);
        let digest = parse_sha256_hex(&hex).unwrap();
        assert_eq!(parse_sha256_hex(&hex.to_uppercase()), Some(digest));
        assert_eq!(parse_sha256_hex(&hex[..63]), None);
        assert_eq!(parse_sha256_hex(&format!("{}zz", &hex[..62])), None);
        assert_eq!(parse_sha256_hex(&format!("{}é", &hex[..62])), None);
    }
}
