//! The aggregated catalog: every upstream's tools, prompts, resources and resource templates under
//! collision-free exposed names, with an exact reverse map for routing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::JsonObject;
use crate::naming::{
    self, MAX_TOOL_NAME_LEN, format_mcp_tool_name, namespace_resource_uri, normalize_segment,
    split_resource_uri,
};

/// A tool as one upstream lists it. `definition` is the upstream's JSON object, verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub definition: JsonObject,
}

/// A prompt as one upstream lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptDef {
    pub name: String,
    pub definition: JsonObject,
}

/// A resource as one upstream lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDef {
    pub uri: String,
    pub definition: JsonObject,
}

/// A resource template as one upstream lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTemplateDef {
    pub uri_template: String,
    pub definition: JsonObject,
}

/// Everything one upstream offers, as last listed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCatalog {
    pub server: String,
    /// Serve this server's tools and prompts under their own names and its resources under their own
    /// URIs, without the `mcp_{server}_` / `portico://{server}/` namespace.
    pub unprefixed: bool,
    pub tools: Vec<ToolDef>,
    pub prompts: Vec<PromptDef>,
    pub resources: Vec<ResourceDef>,
    pub resource_templates: Vec<ResourceTemplateDef>,
}

/// A tool in the aggregated catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogTool {
    /// The name clients see and call.
    pub name: String,
    /// The configured name of the upstream server that owns it.
    pub server: String,
    /// The name the upstream knows it by.
    pub upstream_name: String,
    /// The upstream's definition, verbatim (its `name` is the upstream name).
    pub definition: JsonObject,
    /// [`CatalogTool::exposed_definition`], made once with the catalog: every call looks its tool up,
    /// and copying the definition each time cost more than the lookup.
    exposed: Arc<JsonObject>,
}

impl CatalogTool {
    /// A tool exposed as `name`, with the upstream's `definition`.
    pub fn new(
        name: String,
        server: String,
        upstream_name: String,
        definition: JsonObject,
    ) -> Self {
        let mut exposed = definition.clone();
        exposed.insert("name".into(), name.clone().into());
        CatalogTool {
            name,
            server,
            upstream_name,
            definition,
            exposed: Arc::new(exposed),
        }
    }

    /// [`CatalogTool::exposed_definition`], shared rather than copied.
    pub fn exposed(&self) -> Arc<JsonObject> {
        self.exposed.clone()
    }

    /// The definition as clients and models see it: unchanged but for the exposed name. The one key
    /// the catalog writes: every tool vocabulary Portico serves (MCP, the model providers' tool lists,
    /// `portico tools --json`) names a tool by `name`, and the exposed name is the catalog's own
    /// decision. Prompts', resources' and templates' exposed definitions are MCP's alone, so the MCP
    /// server edge writes those.
    pub fn exposed_definition(&self) -> JsonObject {
        (*self.exposed).clone()
    }
}

/// A prompt in the aggregated catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogPrompt {
    pub name: String,
    pub server: String,
    pub upstream_name: String,
    pub definition: JsonObject,
}

/// A resource in the aggregated catalog, under its `portico://` URI.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogResource {
    pub uri: String,
    pub server: String,
    pub upstream_uri: String,
    pub definition: JsonObject,
}

/// A resource template in the aggregated catalog, under its `portico://` URI template.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogResourceTemplate {
    pub uri_template: String,
    pub server: String,
    pub upstream_uri_template: String,
    pub definition: JsonObject,
}

/// Two or more different upstream items whose names normalised to the same candidate. Each was given a
/// hash-suffixed name instead; this records which, so it can be shown as a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameCollision {
    pub kind: &'static str,
    pub candidate: String,
    /// `(server, upstream name, exposed name)` for each member that is served.
    pub members: Vec<(String, String, String)>,
    /// `(server, upstream name)` of an unprefixed item that would have taken a name already in use: it
    /// is not served, since an unprefixed name cannot be changed without breaking what clients expect.
    pub refused: Option<(String, String)>,
}

impl std::fmt::Display for NameCollision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((server, upstream)) = &self.refused {
            return write!(
                f,
                "{} `{upstream}` of server `{server}` is configured unprefixed, but `{}` is already served; it is left out. Give one of the servers a prefix.",
                self.kind, self.candidate
            );
        }
        write!(
            f,
            "{} name `{}` would be shared by ",
            self.kind, self.candidate
        )?;
        for (i, (server, upstream, exposed)) in self.members.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "`{upstream}` of server `{server}` (now `{exposed}`)")?;
        }
        write!(
            f,
            "; each was given a hash suffix. Rename a server to get shorter names."
        )
    }
}

/// The aggregated catalog. Built whole from per-server snapshots; never patched in place, so readers see
/// either the old or the new catalog and never a half-updated one.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<CatalogTool>,
    tool_index: HashMap<String, usize>,
    prompts: Vec<CatalogPrompt>,
    prompt_index: HashMap<String, usize>,
    resources: Vec<CatalogResource>,
    resource_templates: Vec<CatalogResourceTemplate>,
    /// Normalised server segment → configured server name, for resource URIs.
    servers_by_segment: HashMap<String, String>,
    /// Unprefixed servers' resources: their own URI → server.
    unprefixed_resources: HashMap<String, String>,
    /// Unprefixed servers' resource templates, tried in order: (template, server).
    unprefixed_templates: Vec<(String, String)>,
    collisions: Vec<NameCollision>,
}

impl Catalog {
    /// Builds the catalog from each server's snapshot, in the order given (config order), so names are
    /// deterministic.
    pub fn build(servers: &[ServerCatalog]) -> Self {
        let mut collisions = Vec::new();

        let tool_keys: Vec<NameKey> = servers
            .iter()
            .flat_map(|s| {
                s.tools
                    .iter()
                    .map(|t| (s.server.as_str(), t.name.as_str(), s.unprefixed))
            })
            .collect();
        let tool_names = assign_names("tool", &tool_keys, &mut collisions);
        let mut tools = Vec::new();
        let mut tool_index = HashMap::new();
        let mut names = tool_names.into_iter();
        for server in servers {
            for tool in &server.tools {
                let Some(name) = names.next().flatten() else {
                    continue;
                };
                tool_index.insert(name.clone(), tools.len());
                tools.push(CatalogTool::new(
                    name,
                    server.server.clone(),
                    tool.name.clone(),
                    tool.definition.clone(),
                ));
            }
        }

        let prompt_keys: Vec<NameKey> = servers
            .iter()
            .flat_map(|s| {
                s.prompts
                    .iter()
                    .map(|p| (s.server.as_str(), p.name.as_str(), s.unprefixed))
            })
            .collect();
        let prompt_names = assign_names("prompt", &prompt_keys, &mut collisions);
        let mut prompts = Vec::new();
        let mut prompt_index = HashMap::new();
        let mut names = prompt_names.into_iter();
        for server in servers {
            for prompt in &server.prompts {
                let Some(name) = names.next().flatten() else {
                    continue;
                };
                prompt_index.insert(name.clone(), prompts.len());
                prompts.push(CatalogPrompt {
                    name,
                    server: server.server.clone(),
                    upstream_name: prompt.name.clone(),
                    definition: prompt.definition.clone(),
                });
            }
        }

        let mut resources = Vec::new();
        let mut resource_templates = Vec::new();
        let mut servers_by_segment = HashMap::new();
        let mut unprefixed_resources = HashMap::new();
        let mut unprefixed_templates = Vec::new();
        for server in servers {
            servers_by_segment.insert(normalize_segment(&server.server), server.server.clone());
            let expose = |uri: &str| {
                if server.unprefixed {
                    uri.to_string()
                } else {
                    namespace_resource_uri(&server.server, uri)
                }
            };
            for resource in &server.resources {
                if server.unprefixed {
                    unprefixed_resources
                        .entry(resource.uri.clone())
                        .or_insert_with(|| server.server.clone());
                }
                resources.push(CatalogResource {
                    uri: expose(&resource.uri),
                    server: server.server.clone(),
                    upstream_uri: resource.uri.clone(),
                    definition: resource.definition.clone(),
                });
            }
            for template in &server.resource_templates {
                if server.unprefixed {
                    unprefixed_templates
                        .push((template.uri_template.clone(), server.server.clone()));
                }
                resource_templates.push(CatalogResourceTemplate {
                    uri_template: expose(&template.uri_template),
                    server: server.server.clone(),
                    upstream_uri_template: template.uri_template.clone(),
                    definition: template.definition.clone(),
                });
            }
        }

        for collision in &collisions {
            tracing::warn!("{collision}");
        }

        Catalog {
            tools,
            tool_index,
            prompts,
            prompt_index,
            resources,
            resource_templates,
            servers_by_segment,
            unprefixed_resources,
            unprefixed_templates,
            collisions,
        }
    }

    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    /// Looks a tool up by its exposed name: the only way calls are routed.
    pub fn tool(&self, exposed_name: &str) -> Option<&CatalogTool> {
        self.tool_index.get(exposed_name).map(|&i| &self.tools[i])
    }

    pub fn tools_of<'a>(&'a self, server: &'a str) -> impl Iterator<Item = &'a CatalogTool> {
        self.tools.iter().filter(move |t| t.server == server)
    }

    pub fn prompts(&self) -> &[CatalogPrompt] {
        &self.prompts
    }

    pub fn prompt(&self, exposed_name: &str) -> Option<&CatalogPrompt> {
        self.prompt_index
            .get(exposed_name)
            .map(|&i| &self.prompts[i])
    }

    pub fn resources(&self) -> &[CatalogResource] {
        &self.resources
    }

    pub fn resource_templates(&self) -> &[CatalogResourceTemplate] {
        &self.resource_templates
    }

    /// Resolves a `portico://{server}/{uri}` URI (of a listed resource or an expanded template) to the
    /// owning server's configured name and the upstream URI.
    ///
    /// URIs of unprefixed servers are their own: they resolve through the listed resources, then by
    /// matching the servers' resource templates.
    pub fn resolve_resource_uri<'a>(&'a self, uri: &'a str) -> Option<(&'a str, &'a str)> {
        if let Some((segment, upstream)) = split_resource_uri(uri)
            && let Some(server) = self.servers_by_segment.get(segment)
        {
            return Some((server.as_str(), upstream));
        }
        if let Some(server) = self.unprefixed_resources.get(uri) {
            return Some((server.as_str(), uri));
        }
        self.unprefixed_templates
            .iter()
            .find(|(template, _)| template_matches(template, uri))
            .map(|(_, server)| (server.as_str(), uri))
    }

    /// Name collisions found while building, each already resolved with hash suffixes.
    pub fn collisions(&self) -> &[NameCollision] {
        &self.collisions
    }
}

/// `(server, upstream name, unprefixed)`.
type NameKey<'a> = (&'a str, &'a str, bool);

/// Assigns exposed names. Returns one entry per input, `None` for an item that is not served: a
/// duplicate of an earlier pair (an upstream listing the same name twice: the first wins), or an
/// unprefixed name that is already taken.
///
/// Prefixed names are settled first (colliding ones get hash suffixes), then unprefixed names claim
/// their own names in config order.
fn assign_names(
    kind: &'static str,
    keys: &[NameKey<'_>],
    collisions: &mut Vec<NameCollision>,
) -> Vec<Option<String>> {
    let mut seen_pairs = HashSet::new();
    let mut names: Vec<Option<String>> = vec![None; keys.len()];
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    let mut unprefixed = Vec::new();
    for (i, &(server, item, plain)) in keys.iter().enumerate() {
        if !seen_pairs.insert((server, item)) {
            tracing::warn!("server `{server}` lists {kind} `{item}` twice; keeping the first");
            continue;
        }
        if plain {
            unprefixed.push(i);
            continue;
        }
        let candidate = format_mcp_tool_name(server, item);
        groups.entry(candidate.clone()).or_default().push(i);
        names[i] = Some(candidate);
    }

    let mut taken: HashSet<String> = groups
        .iter()
        .filter(|(_, members)| members.len() == 1)
        .map(|(name, _)| name.clone())
        .collect();
    let mut colliding: Vec<(&String, &Vec<usize>)> =
        groups.iter().filter(|(_, m)| m.len() > 1).collect();
    colliding.sort_by_key(|(_, members)| members[0]);
    for (candidate, members) in colliding {
        let mut record = Vec::new();
        for &i in members {
            let (server, item, _) = keys[i];
            let mut hash_len = 8;
            let name = loop {
                let name = naming::with_hash_suffix(candidate, server, item, hash_len);
                if !taken.contains(&name) || hash_len >= MAX_TOOL_NAME_LEN / 2 {
                    break name;
                }
                hash_len += 4;
            };
            taken.insert(name.clone());
            record.push((server.to_string(), item.to_string(), name.clone()));
            names[i] = Some(name);
        }
        collisions.push(NameCollision {
            kind,
            candidate: candidate.clone(),
            members: record,
            refused: None,
        });
    }

    for i in unprefixed {
        let (server, item, _) = keys[i];
        if taken.insert(item.to_string()) {
            names[i] = Some(item.to_string());
        } else {
            collisions.push(NameCollision {
                kind,
                candidate: item.to_string(),
                members: Vec::new(),
                refused: Some((server.to_string(), item.to_string())),
            });
        }
    }
    names
}

/// Whether `uri` is an expansion of an RFC 6570 template, treating each `{...}` expression as matching
/// one or more characters. Enough to route a read to the server whose template produced the URI.
fn template_matches(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return template == uri,
        }
    }
    let tail = rest;
    if literals.is_empty() {
        return template == uri;
    }
    let Some(mut remaining) = uri.strip_prefix(literals[0]) else {
        return false;
    };
    for literal in &literals[1..] {
        // Each expression must match at least one character before the next literal.
        let Some(found) = remaining.get(1..).and_then(|r| r.find(literal)) else {
            return false;
        };
        remaining = &remaining[1 + found + literal.len()..];
    }
    !remaining.is_empty() && remaining.ends_with(tail) && remaining.len() > tail.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::is_valid_tool_name;
    use serde_json::json;

    fn tool(name: &str) -> ToolDef {
        let definition = json!({
            "name": name,
            "title": format!("Title of {name}"),
            "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
            "icons": [{"src": "https://example.com/i.png"}],
            // A key no Portico crate knows: the catalog keeps what it does not understand.
            "vendorExtension": {"vendor/x": 1},
        });
        ToolDef {
            name: name.into(),
            definition: definition.as_object().unwrap().clone(),
        }
    }

    fn server(name: &str, tools: &[&str]) -> ServerCatalog {
        ServerCatalog {
            server: name.into(),
            tools: tools.iter().map(|t| tool(t)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn collision_between_a_bx_and_ab_x_is_disambiguated() {
        let catalog = Catalog::build(&[server("a", &["b_x"]), server("a_b", &["x"])]);
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 2);
        assert_ne!(names[0], names[1]);
        for name in &names {
            assert!(name.starts_with("mcp_a_b_x_"), "{name}");
            assert!(is_valid_tool_name(name));
        }
        assert_eq!(
            names[0],
            format!("mcp_a_b_x_{}", naming::stable_hash("a", "b_x"))
        );
        assert_eq!(
            names[1],
            format!("mcp_a_b_x_{}", naming::stable_hash("a_b", "x"))
        );
        // Routing is exact: each name leads back to its own server and upstream name.
        let first = catalog.tool(names[0]).unwrap();
        assert_eq!(
            (first.server.as_str(), first.upstream_name.as_str()),
            ("a", "b_x")
        );
        let second = catalog.tool(names[1]).unwrap();
        assert_eq!(
            (second.server.as_str(), second.upstream_name.as_str()),
            ("a_b", "x")
        );
        assert!(catalog.tool("mcp_a_b_x").is_none());
        assert_eq!(catalog.collisions().len(), 1);
        let warning = catalog.collisions()[0].to_string();
        assert!(warning.contains("`b_x` of server `a`"), "{warning}");
        assert!(warning.contains("`x` of server `a_b`"), "{warning}");
    }

    #[test]
    fn non_colliding_names_are_plain() {
        let catalog = Catalog::build(&[server("github", &["create_issue", "search"])]);
        assert!(catalog.tool("mcp_github_create_issue").is_some());
        assert!(catalog.tool("mcp_github_search").is_some());
        assert!(catalog.collisions().is_empty());
    }

    #[test]
    fn case_and_dash_collisions_within_one_server() {
        let catalog = Catalog::build(&[server("s", &["Get-Item", "get_item"])]);
        let names: HashSet<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 2);
        assert!(!names.contains("mcp_s_get_item"));
    }

    #[test]
    fn duplicate_listing_keeps_first() {
        let catalog = Catalog::build(&[server("s", &["t", "t"])]);
        assert_eq!(catalog.tools().len(), 1);
        assert!(catalog.collisions().is_empty());
    }

    #[test]
    fn long_colliding_names_stay_within_limit() {
        let long = "x".repeat(80);
        let catalog = Catalog::build(&[
            server("a", &[&format!("b_{long}")]),
            server("a_b", &[&long]),
        ]);
        let names: HashSet<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 2);
        for name in names {
            assert!(name.len() <= MAX_TOOL_NAME_LEN, "{name}");
            assert!(is_valid_tool_name(name));
        }
    }

    #[test]
    fn definitions_pass_through_unchanged_except_name() {
        let catalog = Catalog::build(&[server("my-server", &["do_thing"])]);
        let t = catalog.tool("mcp_my_server_do_thing").unwrap();
        let exposed = t.exposed_definition();
        let mut expected = tool("do_thing").definition;
        expected.insert("name".into(), "mcp_my_server_do_thing".into());
        assert_eq!(exposed, expected);
        assert_eq!(t.definition, tool("do_thing").definition);
    }

    #[test]
    fn unprefixed_servers_keep_their_names_and_collisions_are_refused() {
        let mut plain = server("fixture", &["echo", "mcp_other_x", "add"]);
        plain.unprefixed = true;
        let mut also_plain = server("second", &["echo", "other"]);
        also_plain.unprefixed = true;
        let catalog = Catalog::build(&[plain, server("other", &["x"]), also_plain]);
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["echo", "add", "mcp_other_x", "other"]);
        assert_eq!(catalog.tool("echo").unwrap().server, "fixture");
        assert_eq!(catalog.tool("mcp_other_x").unwrap().server, "other");
        let refused: Vec<String> = catalog.collisions().iter().map(|c| c.to_string()).collect();
        assert_eq!(refused.len(), 2, "{refused:#?}");
        assert!(
            refused[0].contains("`mcp_other_x` of server `fixture` is configured unprefixed"),
            "{refused:#?}"
        );
        assert!(
            refused[1].contains("`echo` of server `second`"),
            "{refused:#?}"
        );
    }

    #[test]
    fn unprefixed_resources_keep_their_uris_and_route_by_template() {
        let mut plain = server("fixture", &[]);
        plain.unprefixed = true;
        plain.resources.push(ResourceDef {
            uri: "test://static".into(),
            definition: json!({"uri": "test://static", "name": "s"})
                .as_object()
                .unwrap()
                .clone(),
        });
        plain.resource_templates.push(ResourceTemplateDef {
            uri_template: "test://template/{id}/data".into(),
            definition: json!({"name": "t"}).as_object().unwrap().clone(),
        });
        let catalog = Catalog::build(&[plain]);
        assert_eq!(catalog.resources()[0].uri, "test://static");
        assert_eq!(
            catalog.resource_templates()[0].uri_template,
            "test://template/{id}/data"
        );
        assert_eq!(
            catalog.resolve_resource_uri("test://static"),
            Some(("fixture", "test://static"))
        );
        assert_eq!(
            catalog.resolve_resource_uri("test://template/42/data"),
            Some(("fixture", "test://template/42/data"))
        );
        assert_eq!(catalog.resolve_resource_uri("test://template//data"), None);
        assert_eq!(catalog.resolve_resource_uri("test://elsewhere"), None);
    }

    #[test]
    fn template_matching() {
        assert!(template_matches("a://{x}", "a://1"));
        assert!(!template_matches("a://{x}", "a://"));
        assert!(template_matches("a://{x}/b/{y}", "a://1/b/2"));
        assert!(!template_matches("a://{x}/b/{y}", "a://1/c/2"));
        assert!(template_matches("file:///{path}", "file:///etc/hosts"));
        assert!(template_matches("plain", "plain"));
        assert!(!template_matches("plain", "plainer"));
    }

    #[test]
    fn resources_and_prompts_are_namespaced() {
        let mut s = server("files", &[]);
        s.resources.push(ResourceDef {
            uri: "file:///a.txt".into(),
            definition: json!({"uri": "file:///a.txt", "name": "a"})
                .as_object()
                .unwrap()
                .clone(),
        });
        s.resource_templates.push(ResourceTemplateDef {
            uri_template: "file:///{path}".into(),
            definition: json!({"name": "any"}).as_object().unwrap().clone(),
        });
        s.prompts.push(PromptDef {
            name: "summarise".into(),
            definition: json!({"name": "summarise"}).as_object().unwrap().clone(),
        });
        let catalog = Catalog::build(&[s]);
        assert_eq!(catalog.resources()[0].uri, "portico://files/file:///a.txt");
        assert_eq!(
            catalog.resource_templates()[0].uri_template,
            "portico://files/file:///{path}"
        );
        assert_eq!(
            catalog.resolve_resource_uri("portico://files/file:///etc/x"),
            Some(("files", "file:///etc/x"))
        );
        assert_eq!(
            catalog.resolve_resource_uri("portico://nope/file:///x"),
            None
        );
        assert!(catalog.prompt("mcp_files_summarise").is_some());
    }
}
