//! No MCP wire keys or method names outside the MCP edge crates. Scanned: the string literals (as
//! tokens, so comments do not count; JSON inside a literal does) of every `crates/*/src/**/*.rs`
//! outside the edges. Everywhere else sees domain types from `portico-core`; an MCP key read by string
//! there means the protocol's JSON became the internal data model.

use std::collections::BTreeSet;

use crate::source::{Token, files_under, read, tokens};

/// The crates whose job is MCP's wire format, and the tooling that speaks it to test Portico.
const MCP_EDGES: &[&str] = &[
    "portico-mcp",
    "portico-mcp-server",
    // The stdio transport of `portico mcp`: framing of rmcp's JSON-RPC messages, tested with MCP ones.
    "portico-stdio-framing",
    // The MCP registry's API edge: its documents spell `_meta` and `nextCursor` as MCP does.
    "portico-registry",
    "portico-conformance-fixture",
    "portico-bench",
    "portico-fuzz-targets",
    // This check's own lists.
    "portico-tidy",
];

/// MCP result and request keys (from `/work/shared/specs/mcp/*/schema.json`) that no other vocabulary
/// in Portico uses (A2A 1.0 and 0.3, the model providers' JSON, JSON Schema), so a literal of one
/// outside the edges is MCP's JSON.
///
/// Left out on purpose: `inputSchema`, `outputSchema` and `annotations`, because a tool definition
/// is the upstream's own JSON kept verbatim (ARCHITECTURE.md), whose schema the pipeline validates
/// against and models read, and nothing types it yet (add them when a definition type
/// exists); `mimeType` and `protocolVersion`, which A2A 0.3 parts and A2A cards spell the same;
/// and words any JSON has (`content`, `text`, `type`, `uri`, `name`, `capabilities`).
const KEYS: &[&str] = &[
    // CallToolResult: the typed core's tool result carries these as fields.
    "isError",
    "structuredContent",
    "_meta",
    // Resource templates and list pagination.
    "uriTemplate",
    "nextCursor",
    // The progress token a request carries in its `_meta`.
    "progressToken",
    // The handshake and capabilities.
    "serverInfo",
    "clientInfo",
    "listChanged",
    // sampling/createMessage parameters and result (the providers spell theirs in snake case).
    "systemPrompt",
    "maxTokens",
    "stopReason",
    "modelPreferences",
    "includeContext",
    // elicitation/create.
    "requestedSchema",
    // 2026-07-28 input rounds.
    "inputRequests",
    "inputResponses",
    "requestState",
    "resultType",
];

/// MCP method names, every era's (from the same schemas), except `tasks/*`: A2A 0.3's JSON-RPC
/// methods `tasks/get` and `tasks/cancel` are spelled the same, so a scan cannot tell them apart.
/// Any literal starting `notifications/` counts too.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/call",
    "tools/list",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/templates/list",
    "prompts/get",
    "prompts/list",
    "completion/complete",
    "logging/setLevel",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "server/discover",
    "subscriptions/listen",
];

/// Today's violations, as (file, MCP literal) pairs: none left. A pair that no longer occurs fails
/// the test too, so fixed code takes its entry with it; this list may only shrink.
const ALLOWED: &[(&str, &str)] = &[];

/// The MCP keys and method names a string literal's text spells.
fn mcp_literals_in(text: &str) -> Vec<String> {
    let mut found: Vec<String> = KEYS
        .iter()
        .chain(METHODS)
        .filter(|word| text == **word || text.contains(&format!("\"{word}\"")))
        .map(|word| word.to_string())
        .collect();
    if let Some(method) = notification_in(text) {
        found.push(method);
    }
    found
}

/// A `notifications/…` method name the text is, or quotes.
fn notification_in(text: &str) -> Option<String> {
    let start = if text.starts_with("notifications/") {
        0
    } else {
        text.find("\"notifications/")? + 1
    };
    let name: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_'))
        .collect();
    Some(name)
}

/// Every (file, MCP literal) pair with the first line it occurs on.
fn occurrences(files: &[(String, String)]) -> Vec<(String, String, usize)> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for (path, text) in files {
        for token in tokens(text) {
            let Token::Str { text, line } = token else {
                continue;
            };
            for literal in mcp_literals_in(&text) {
                if seen.insert((path.clone(), literal.clone())) {
                    found.push((path.clone(), literal, line));
                }
            }
        }
    }
    found
}

fn problems(found: &[(String, String, usize)], allowed: &[(&str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, literal, line) in found {
        if !allowed.contains(&(path.as_str(), literal.as_str())) {
            problems.push(format!(
                "{path}:{line}: MCP wire name \"{literal}\" outside the MCP edge crates: move the MCP \
                 knowledge into portico-mcp or portico-mcp-server (convert the JSON there into a \
                 portico-core type, or let the edge answer the question) and use that here; do not \
                 add to the allow-list in crates/portico-tidy/src/wire_literals.rs, which may only \
                 shrink"
            ));
        }
    }
    for (path, literal) in allowed {
        if !found.iter().any(|(p, l, _)| p == path && l == literal) {
            problems.push(format!(
                "(\"{path}\", \"{literal}\") is allowed but no longer occurs: delete it from \
                 ALLOWED in crates/portico-tidy/src/wire_literals.rs, so the list shrinks with \
                 the code"
            ));
        }
    }
    problems
}

fn scanned_files() -> Vec<(String, String)> {
    files_under("crates", ".rs")
        .into_iter()
        .filter(|path| {
            let mut parts = path.split('/');
            let (_, crate_name, dir) = (parts.next(), parts.next(), parts.next());
            dir == Some("src") && crate_name.is_some_and(|name| !MCP_EDGES.contains(&name))
        })
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect()
}

#[test]
fn no_mcp_wire_names_outside_the_edges() {
    let problems = problems(&occurrences(&scanned_files()), ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn wire_names_are_found_in_plain_raw_and_escaped_literals_but_not_comments() {
    let files = [(
        "crates/x/src/lib.rs".to_string(),
        r####"
            // "isError" in a comment
            let a = "tools/call";
            let b = r#"{"structuredContent": {}, "method": "notifications/progress"}"#;
            let c = "{\"_meta\": {}}";
            let d = "isErrorish";
            let e = "tasks/get";
        "####
            .to_string(),
    )];
    let found: Vec<(String, usize)> = occurrences(&files)
        .into_iter()
        .map(|(_, literal, line)| (literal, line))
        .collect();
    assert_eq!(
        found,
        [
            ("tools/call".to_string(), 3),
            ("structuredContent".to_string(), 4),
            ("notifications/progress".to_string(), 4),
            ("_meta".to_string(), 5),
        ]
    );
    let problems = problems(
        &occurrences(&files),
        &[
            ("crates/x/src/lib.rs", "tools/call"),
            ("crates/y/src/lib.rs", "isError"),
        ],
    )
    .join("\n");
    assert!(problems.contains("crates/x/src/lib.rs:4: MCP wire name \"structuredContent\""));
    assert!(!problems.contains("\"tools/call\" outside"), "{problems}");
    assert!(
        problems.contains("(\"crates/y/src/lib.rs\", \"isError\") is allowed but no longer occurs")
    );
}
