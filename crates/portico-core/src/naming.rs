//! Tool, prompt and resource naming for the aggregated catalog.
//!
//! Tools and prompts are exposed as `mcp_{server}_{name}`. Both parts are normalised the same way: lower
//! case, and every character outside `[a-z0-9_]` (including `-`) becomes `_`. The result is a valid MCP
//! tool name of at most [`MAX_TOOL_NAME_LEN`] characters; longer names are shortened to a prefix plus a
//! stable hash of the *original* server and tool names, so the same tool keeps the same name across
//! restarts and machines.
//!
//! Normalisation is lossy (`a` + `b_x` and `a_b` + `x` both give `mcp_a_b_x`), so a name can never be
//! split back into its parts. Routing therefore always goes through the catalog's exact reverse map
//! ([`crate::Catalog::tool`]); [`extract_mcp_server`] exists for the reference API and answers only when
//! the answer is unambiguous.
//!
//! Resources keep their own URIs inside a Portico URI: `portico://{server}/{original uri}`, where
//! `{server}` is the normalised server name. The server is the URI authority, which cannot contain `/`,
//! so the split is exact. Resource templates are wrapped the same way, so their variables keep working.

use sha2::{Digest, Sha256};

/// The longest tool name Portico exposes. MCP allows longer names, but many LLM providers cap function
/// names at 64 characters, and a tool that cannot be offered to a model is useless.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Prefix of every namespaced upstream tool and prompt.
pub const MCP_PREFIX: &str = "mcp_";

/// Scheme of namespaced resource URIs.
pub const RESOURCE_SCHEME: &str = "portico://";

/// Length of the stable hash suffix, in hex characters.
const HASH_LEN: usize = 8;

/// Lower-cases and replaces every character outside `[a-z0-9_]` with `_`.
pub fn normalize_segment(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A stable short hash of the original (un-normalised) server and item names.
pub fn stable_hash(server: &str, item: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(item.as_bytes());
    let digest = hasher.finalize();
    digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Builds the namespaced name `mcp_{server}_{tool}`, shortened with a stable hash when it would exceed
/// [`MAX_TOOL_NAME_LEN`]. This is the *candidate* name: the catalog may still add a hash suffix when two
/// different tools normalise to the same candidate.
pub fn format_mcp_tool_name(server: &str, tool: &str) -> String {
    let full = format!(
        "{MCP_PREFIX}{}_{}",
        normalize_segment(server),
        normalize_segment(tool)
    );
    if full.len() <= MAX_TOOL_NAME_LEN {
        full
    } else {
        with_hash_suffix(&full, server, tool, HASH_LEN)
    }
}

/// Appends `_{hash}` to `base`, truncating `base` so the whole stays within [`MAX_TOOL_NAME_LEN`].
/// `hash_len` lets the catalog lengthen the suffix in the (astronomically unlikely) case that two
/// disambiguated names still collide.
pub(crate) fn with_hash_suffix(base: &str, server: &str, tool: &str, hash_len: usize) -> String {
    let hash = long_hash(server, tool, hash_len);
    let keep = MAX_TOOL_NAME_LEN - 1 - hash.len();
    // `base` is ASCII after normalisation, so byte slicing cannot split a character.
    let base = base.trim_end_matches('_');
    let base = &base[..base.len().min(keep)];
    format!("{base}_{hash}")
}

fn long_hash(server: &str, tool: &str, hash_len: usize) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(tool.as_bytes());
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    hex[..hash_len.min(hex.len())].to_string()
}

/// True when `name` carries the upstream-tool prefix.
pub fn is_mcp_tool(name: &str) -> bool {
    name.starts_with(MCP_PREFIX)
}

/// Finds the server of a namespaced name among `servers` by prefix, for the reference API.
///
/// Returns `None` when no server or more than one server matches (`mcp_a_b_x` may belong to `a` or to
/// `a_b`); the catalog's exact map is the way to route calls.
pub fn extract_mcp_server<'a>(
    name: &str,
    servers: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let rest = name.strip_prefix(MCP_PREFIX)?;
    let mut found = None;
    for server in servers {
        let prefix = format!("{}_", normalize_segment(server));
        if rest.starts_with(&prefix) && rest.len() > prefix.len() {
            if found.is_some() {
                return None;
            }
            found = Some(server);
        }
    }
    found
}

/// Whether `name` can be the exposed name of a tool or prompt of the prefixed server `server`: it
/// starts with the server's `mcp_{server}_`, or it is a shortened or disambiguated name
/// (`{cut}_{hash}`, see [`format_mcp_tool_name`]) whose cut is consistent with that prefix. Never
/// false for a name the server's items can get, so it can decide which servers a call might need;
/// it may be true for a name that in fact belongs elsewhere (the catalog's exact map routes calls).
pub fn may_be_named_for(name: &str, server: &str) -> bool {
    let prefix = format!("{MCP_PREFIX}{}_", normalize_segment(server));
    if name.starts_with(&prefix) {
        return true;
    }
    let Some((cut, hash)) = name.rsplit_once('_') else {
        return false;
    };
    // A cut keeps at least this much of the full name (with the longest hash the catalog uses), and
    // the full name with its trailing `_` trimmed begins with the trimmed prefix.
    let shortest_cut = MAX_TOOL_NAME_LEN - 1 - MAX_TOOL_NAME_LEN / 2;
    let trimmed = prefix.trim_end_matches('_');
    (HASH_LEN..=MAX_TOOL_NAME_LEN / 2).contains(&hash.len())
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && cut.len() >= trimmed.len().min(shortest_cut)
        && prefix.starts_with(cut)
}

/// True when `name` is a valid MCP tool name as Portico exposes them: 1 to [`MAX_TOOL_NAME_LEN`]
/// characters from `[A-Za-z0-9_.-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Wraps an upstream resource URI (or URI template) as `portico://{server}/{uri}`.
pub fn namespace_resource_uri(server: &str, uri: &str) -> String {
    format!("{RESOURCE_SCHEME}{}/{uri}", normalize_segment(server))
}

/// Splits a namespaced resource URI into the normalised server segment and the upstream URI.
pub fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(RESOURCE_SCHEME)?;
    let (server, upstream) = rest.split_once('/')?;
    (!server.is_empty() && !upstream.is_empty()).then_some((server, upstream))
}

/// A hint for an unknown name: up to three known names containing it ("; did you mean `x`?"), else
/// where to look.
pub fn suggest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let needle = name.to_ascii_lowercase();
    let close: Vec<&str> = known
        .filter(|k| {
            let k = k.to_ascii_lowercase();
            k.ends_with(&needle) || needle.ends_with(&k) || k.contains(&needle)
        })
        .take(3)
        .collect();
    if close.is_empty() {
        "; list tools with `portico tools`".into()
    } else {
        format!(
            "; did you mean {}?",
            close
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_examples() {
        assert_eq!(
            format_mcp_tool_name("github", "create_issue"),
            "mcp_github_create_issue"
        );
        assert_eq!(
            format_mcp_tool_name("my-server", "do_thing"),
            "mcp_my_server_do_thing"
        );
    }

    #[test]
    fn odd_characters_become_underscores() {
        assert_eq!(
            format_mcp_tool_name("My.Server", "get-Weather/v2 ü"),
            "mcp_my_server_get_weather_v2__"
        );
        assert!(is_valid_tool_name(&format_mcp_tool_name("ÄÖÜ", "日本語")));
    }

    #[test]
    fn long_names_are_shortened_stably_and_distinctly() {
        let tool_a = "a".repeat(100);
        let tool_b = format!("{}b", "a".repeat(99));
        let a1 = format_mcp_tool_name("server", &tool_a);
        let a2 = format_mcp_tool_name("server", &tool_a);
        let b = format_mcp_tool_name("server", &tool_b);
        assert_eq!(a1, a2, "shortening must be stable");
        assert_eq!(a1.len(), MAX_TOOL_NAME_LEN);
        assert_ne!(a1, b, "same prefix, different tools must differ");
        assert!(is_valid_tool_name(&a1));
        assert!(a1.starts_with("mcp_server_aaaa"));
        // The suffix is the documented hash of the original names.
        assert!(a1.ends_with(&format!("_{}", stable_hash("server", &tool_a))));
    }

    #[test]
    fn exactly_64_is_kept() {
        let tool = "t".repeat(MAX_TOOL_NAME_LEN - "mcp_s_".len());
        let name = format_mcp_tool_name("s", &tool);
        assert_eq!(name.len(), 64);
        assert_eq!(name, format!("mcp_s_{tool}"));
    }

    #[test]
    fn prefix_helpers() {
        assert!(is_mcp_tool("mcp_github_x"));
        assert!(!is_mcp_tool("file_read"));
        let servers = ["github", "my-server"];
        assert_eq!(
            extract_mcp_server("mcp_my_server_do", servers),
            Some("my-server")
        );
        assert_eq!(extract_mcp_server("mcp_other_do", servers), None);
        // Ambiguous: both `a` and `a_b` could own it.
        assert_eq!(extract_mcp_server("mcp_a_b_x", ["a", "a_b"]), None);
    }

    #[test]
    fn a_name_may_be_named_for_the_servers_whose_prefix_it_can_carry() {
        let servers = [
            "a",
            "a_b",
            "ab",
            "github",
            "My-Server",
            "trailing_",
            "s".repeat(40).leak() as &str,
            "t".repeat(70).leak() as &str,
        ];
        let tools = [
            "x".to_string(),
            "-".to_string(),
            String::new(),
            "create_issue".to_string(),
            "y".repeat(80),
        ];
        for server in servers {
            for tool in &tools {
                let name = format_mcp_tool_name(server, tool);
                assert!(may_be_named_for(&name, server), "{name} from {server}");
                // The names a collision gives, with every hash length the catalog tries.
                for hash_len in (HASH_LEN..=MAX_TOOL_NAME_LEN / 2).step_by(4) {
                    let name = with_hash_suffix(&name, server, tool, hash_len);
                    assert!(may_be_named_for(&name, server), "{name} from {server}");
                }
            }
        }
        assert!(may_be_named_for("mcp_a_x", "a"));
        assert!(!may_be_named_for("mcp_a_x", "b"));
        assert!(!may_be_named_for("mcp_a_x", "ab"));
        assert!(!may_be_named_for("mcp_ab_x", "a"));
        // Lossy normalisation: `a` + `b_x` and `a_b` + `x` are both `mcp_a_b_x`.
        assert!(may_be_named_for("mcp_a_b_x", "a") && may_be_named_for("mcp_a_b_x", "a_b"));
        assert!(may_be_named_for("mcp_my_server_do", "My-Server"));
        assert!(!may_be_named_for("system_time", "a"));
        assert!(!may_be_named_for("portico_agent_helper", "a"));
        assert!(!may_be_named_for("mcp_other_0123abcd", "a"));
    }

    #[test]
    fn resource_uris_round_trip() {
        let wrapped = namespace_resource_uri("My-Files", "file:///tmp/a b.txt");
        assert_eq!(wrapped, "portico://my_files/file:///tmp/a b.txt");
        assert_eq!(
            split_resource_uri(&wrapped),
            Some(("my_files", "file:///tmp/a b.txt"))
        );
        assert_eq!(split_resource_uri("file:///x"), None);
        assert_eq!(split_resource_uri("portico:///x"), None);
    }
}
