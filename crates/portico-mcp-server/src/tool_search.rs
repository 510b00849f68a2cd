//! Tool-search mode: for catalogs too large to hand a model whole, clients see three meta-tools (search
//! the catalog, describe a tool, call a tool) instead of hundreds of definitions.
//!
//! Search is lexical: the query's words are matched against each tool's name, title, description and
//! input-schema property names and descriptions, with name matches weighted highest. That is enough for
//! a model to find "the tool that creates GitHub issues" among hundreds, costs nothing to index, and
//! behaves predictably.

use portico_core::JsonObject;
use serde_json::{Value, json};

pub const SEARCH_TOOL: &str = "portico_search_tools";
pub const DESCRIBE_TOOL: &str = "portico_describe_tool";
pub const CALL_TOOL: &str = "portico_call_tool";

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

/// When the door switches to tool search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSearch {
    Off,
    On,
    /// On when the catalog has more than this many tools.
    Above(usize),
}

impl ToolSearch {
    pub fn active(self, tool_count: usize) -> bool {
        match self {
            ToolSearch::Off => false,
            ToolSearch::On => true,
            ToolSearch::Above(threshold) => tool_count > threshold,
        }
    }
}

pub fn is_meta_tool(name: &str) -> bool {
    matches!(name, SEARCH_TOOL | DESCRIBE_TOOL | CALL_TOOL)
}

/// The three meta-tool definitions.
pub fn meta_tools(tool_count: usize) -> Vec<JsonObject> {
    let tools = [
        json!({
            "name": SEARCH_TOOL,
            "title": "Search tools",
            "description": format!(
                "Search the {tool_count} tools available through Portico by words (what the tool does, its name, its parameters). Returns the best matches with their names and descriptions; then use {DESCRIBE_TOOL} for a tool's parameters and {CALL_TOOL} to run it."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words describing the tool you need, e.g. \"create github issue\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "How many matches to return (default 10)."}
                },
                "required": ["query"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": DESCRIBE_TOOL,
            "title": "Describe a tool",
            "description": "Returns a tool's full definition: description, input schema, output schema and annotations.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The tool name, as returned by the search."}},
                "required": ["name"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": "Calls a tool by name with arguments matching its input schema, and returns the tool's result unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool name, as returned by the search."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["name"]
            }
        }),
    ];
    tools
        .into_iter()
        .map(|t| t.as_object().cloned().unwrap_or_default())
        .collect()
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect()
}

fn text_of(tool: &JsonObject, field: &str) -> String {
    tool.get(field)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Scores every tool against the query and returns the best `limit`, best first.
pub fn search<'a>(
    tools: &'a [JsonObject],
    query: &str,
    limit: usize,
) -> Vec<(&'a JsonObject, u32)> {
    let query = words(query);
    if query.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(&JsonObject, u32)> = tools
        .iter()
        .filter_map(|tool| {
            let name = words(&text_of(tool, "name").replace('_', " "));
            let title = words(&text_of(tool, "title"));
            let description = words(&text_of(tool, "description"));
            let mut schema_words = Vec::new();
            if let Some(properties) = tool
                .get("inputSchema")
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
            {
                for (property, spec) in properties {
                    schema_words.extend(words(property));
                    if let Some(d) = spec.get("description").and_then(Value::as_str) {
                        schema_words.extend(words(d));
                    }
                }
            }
            let score: u32 = query
                .iter()
                .map(|q| {
                    let hit = |ws: &[String]| {
                        ws.iter()
                            .any(|w| w == q || (q.len() > 3 && w.starts_with(q.as_str())))
                    };
                    u32::from(hit(&name)) * 6
                        + u32::from(hit(&title)) * 4
                        + u32::from(hit(&description)) * 3
                        + u32::from(hit(&schema_words))
                })
                .sum();
            (score > 0).then_some((tool, score))
        })
        .collect();
    // Stable: equal scores keep catalog order.
    scored.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    scored.truncate(limit.clamp(1, MAX_LIMIT));
    scored
}

/// The result of `portico_search_tools`: a text summary for models and the same as structured content.
pub fn search_result(tools: &[JsonObject], arguments: &JsonObject) -> Result<JsonObject, String> {
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .ok_or("`query` (a string) is required")?;
    let limit = arguments
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LIMIT, |l| l as usize);
    let matches: Vec<Value> = search(tools, query, limit)
        .into_iter()
        .map(|(tool, score)| {
            let mut entry = json!({"name": text_of(tool, "name"), "description": text_of(tool, "description"), "score": score});
            if let Some(title) = tool.get("title") {
                entry["title"] = title.clone();
            }
            entry
        })
        .collect();
    let text = if matches.is_empty() {
        format!("No tool matches \"{query}\". Try other words.")
    } else {
        matches
            .iter()
            .map(|m| {
                format!(
                    "{}: {}",
                    m["name"].as_str().unwrap_or(""),
                    m["description"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"tools": matches},
    })
    .as_object()
    .cloned()
    .unwrap_or_default())
}

/// The result of `portico_describe_tool`.
pub fn describe_result(tools: &[JsonObject], arguments: &JsonObject) -> Result<JsonObject, String> {
    let name = arguments
        .get("name")
        .and_then(Value::as_str)
        .ok_or("`name` (a string) is required")?;
    let tool = tools
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        .ok_or_else(|| format!("no tool named `{name}`; find names with {SEARCH_TOOL}"))?;
    let text = serde_json::to_string_pretty(tool).unwrap_or_default();
    Ok(json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"tool": tool},
    })
    .as_object()
    .cloned()
    .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, props: &[&str]) -> JsonObject {
        let properties: serde_json::Map<String, Value> = props
            .iter()
            .map(|p| (p.to_string(), json!({"type": "string"})))
            .collect();
        json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": properties}})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn finds_by_name_description_and_parameters() {
        let tools = vec![
            tool(
                "mcp_github_create_issue",
                "Create a new issue in a GitHub repository",
                &["repo", "title"],
            ),
            tool(
                "mcp_github_search_code",
                "Search code across repositories",
                &["query"],
            ),
            tool("mcp_files_read_file", "Read a file from disk", &["path"]),
        ];
        let found = search(&tools, "create github issue", 5);
        assert_eq!(found[0].0["name"], "mcp_github_create_issue");
        assert_eq!(found.len(), 2, "search_code matches `github` by name");
        let by_param = search(&tools, "path", 5);
        assert_eq!(by_param.len(), 1);
        assert_eq!(by_param[0].0["name"], "mcp_files_read_file");
        assert!(search(&tools, "   ", 5).is_empty());
        assert!(search(&tools, "zebra", 5).is_empty());
    }

    #[test]
    fn results_and_errors() {
        let tools = vec![tool("mcp_a_x", "does x", &[])];
        let result = search_result(&tools, json!({"query": "does"}).as_object().unwrap()).unwrap();
        assert_eq!(result["structuredContent"]["tools"][0]["name"], "mcp_a_x");
        assert!(search_result(&tools, &JsonObject::new()).is_err());
        let described =
            describe_result(&tools, json!({"name": "mcp_a_x"}).as_object().unwrap()).unwrap();
        assert_eq!(
            described["structuredContent"]["tool"]["description"],
            "does x"
        );
        let missing =
            describe_result(&tools, json!({"name": "nope"}).as_object().unwrap()).unwrap_err();
        assert!(missing.contains("no tool named `nope`"));
        assert!(ToolSearch::Above(2).active(3) && !ToolSearch::Above(3).active(3));
        assert_eq!(meta_tools(3).len(), 3);
    }
}
