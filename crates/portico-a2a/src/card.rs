//! Agent cards: what each Portico agent tells other frameworks about itself, in the 1.0 and 0.3 forms,
//! each strictly in its own version's schema. Built as the typed [`v1::AgentCard`] (and
//! [`v03::AgentCard`] from it); the server serialises them at its edge.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portico_a2a_client::protocol::{v1, v03};
use portico_agents::Agent;
use portico_pipeline::ToolEntry;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::wire::Version;

/// A card in one version's form, served as that form alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Card {
    V1(v1::AgentCard),
    V03(v03::AgentCard),
}

/// Where an agent's endpoints are, from the configured public base URL.
pub fn agent_url(base_url: &str, listen_path: &str, agent: &str) -> String {
    format!("{}{}/{agent}", base_url.trim_end_matches('/'), listen_path)
}

/// How much of a tool's description a skill keeps: a card lists every tool, and upstream
/// descriptions can run to pages.
const SKILL_DESCRIPTION_CHARS: usize = 300;

/// One skill for the agent itself, and one per tool it can use.
fn skills(agent: &Agent, tools: &[ToolEntry]) -> Vec<v1::AgentSkill> {
    let skill = |id: &str, name: String, description: String, tag: &str| v1::AgentSkill {
        id: id.to_string(),
        name,
        description,
        tags: vec![tag.to_string()],
        ..Default::default()
    };
    let own = if agent.config.description.is_empty() {
        format!("The `{}` agent", agent.config.name)
    } else {
        agent.config.description.clone()
    };
    let mut skills = vec![skill(
        &agent.config.name,
        agent.config.name.clone(),
        own,
        "agent",
    )];
    for tool in tools {
        // The tool's MCP definition, as the pipeline lists it.
        let description: String = tool
            .definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .take(SKILL_DESCRIPTION_CHARS)
            .collect();
        let description = if description.is_empty() {
            format!("Can use the {} tool", tool.name)
        } else {
            description
        };
        skills.push(skill(
            &tool.name,
            tool.name.replace('_', " "),
            description,
            "tool",
        ));
    }
    skills
}

fn description(agent: &Agent) -> String {
    if agent.config.description.is_empty() {
        format!("The `{}` agent, served by Portico", agent.config.name)
    } else {
        agent.config.description.clone()
    }
}

/// The 1.0 card; the 0.3 card is made from it. Capabilities are what this server really does.
fn card_1_0(agent: &Agent, tools: &[ToolEntry], url: &str) -> v1::AgentCard {
    let interface = |binding: &str, version: &str| v1::AgentInterface {
        url: url.to_string(),
        protocol_binding: binding.to_string(),
        tenant: None,
        protocol_version: version.to_string(),
    };
    v1::AgentCard {
        name: agent.config.name.clone(),
        description: description(agent),
        supported_interfaces: vec![
            interface("JSONRPC", "1.0"),
            interface("HTTP+JSON", "1.0"),
            interface("JSONRPC", "0.3"),
            // The 0.3 HTTP+JSON clients append `/v1/…` to this URL themselves.
            interface("HTTP+JSON", "0.3"),
        ],
        provider: Some(v1::AgentProvider {
            organization: "Portico".into(),
            url: url.to_string(),
        }),
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: v1::AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: Vec::new(),
            extended_agent_card: Some(false),
        },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: skills(agent, tools),
        icon_url: None,
    }
}

/// The card in `version`'s form: the 0.3 card lists the 1.0 card's 0.3 interfaces, with JSON-RPC
/// as its main one.
pub fn card(agent: &Agent, tools: &[ToolEntry], url: &str, version: Version) -> Card {
    let card = card_1_0(agent, tools, url);
    match version {
        Version::V1 => Card::V1(card),
        Version::V03 => Card::V03(card.into()),
    }
}

/// Which form a card request gets: the one its `A2A-Version` header, else its `?version=` (or
/// `?A2A-Version=`) parameter, asks for; without either, `unversioned` (the 1.0 card unless
/// configured otherwise). Each form is strictly valid for its version's schema: a document with
/// both forms' fields fails 1.0 validation (its card allows no other fields), and neither the 0.3
/// nor the 1.0 SDKs send a version when they read a card, so no header cannot tell them apart. A
/// 0.3-only client reads the 0.3 card at `/.well-known/agent.json`, or with `?version=0.3`.
pub fn form_for(header: Option<Version>, query: Option<&str>, unversioned: Version) -> Version {
    match (header, query) {
        (Some(version), _) => version,
        (None, Some("0.3" | "0.3.0")) => Version::V03,
        (None, Some("1" | "1.0" | "1.0.0")) => Version::V1,
        _ => unversioned,
    }
}

/// How long a client may keep a card (spec 8.6.1: a `max-age` suited to how often it changes). A card
/// changes with its agent's tools, so a minute, after which the ETag makes a re-read a 304; `private`
/// because a card depends on the client's scope.
pub const CACHE_CONTROL: &str = "private, max-age=60";

/// When each card first looked the way it does, for `Last-Modified` (the A2A TCK's caching checks
/// want one beside the ETag). Keyed by the card's ETag, so a card that changes with its agent's
/// tools gets a new date, and one that does not keeps its date across requests and clients.
#[derive(Default)]
pub struct CardDates {
    first_seen: Mutex<HashMap<String, SystemTime>>,
}

/// Cards differ by agent, version and scope, so there are few; past this many the dates are
/// forgotten and start again (a client then sees a later date and simply re-reads).
const MAX_CARD_DATES: usize = 1024;

impl CardDates {
    /// When the card with ETag `tag` was first served by this process, in whole seconds (an
    /// HTTP-date has no finer grain, and `If-Modified-Since` compares against what was sent).
    pub fn last_modified(&self, tag: &str) -> SystemTime {
        let mut dates = self.first_seen.lock().expect("card dates lock");
        if dates.len() >= MAX_CARD_DATES && !dates.contains_key(tag) {
            dates.clear();
        }
        *dates.entry(tag.to_string()).or_insert_with(|| {
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            UNIX_EPOCH + Duration::from_secs(secs)
        })
    }
}

/// Whether a request's validators say the client's copy is current: `If-None-Match` against the
/// ETag when the request has one (it takes precedence, RFC 9110 13.2.2), else `If-Modified-Since`
/// against the card's date.
pub fn not_modified(
    if_none_match: Option<&str>,
    if_modified_since: Option<&str>,
    tag: &str,
    last_modified: SystemTime,
) -> bool {
    match (if_none_match, if_modified_since) {
        (Some(tags), _) => tags.split(',').any(|t| {
            let t = t.trim();
            t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag
        }),
        (None, Some(since)) => {
            httpdate::parse_http_date(since).is_ok_and(|since| last_modified <= since)
        }
        (None, None) => false,
    }
}

/// A strong ETag of a card's bytes.
pub fn etag(body: &[u8]) -> String {
    let hash = Sha256::digest(body);
    let hex: String = hash.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use portico_agents::DriverChoice;
    use portico_core::context::ToolPatterns;
    use portico_pipeline::Trust;
    use serde_json::json;

    use super::*;

    const URL: &str = "https://agents.example.com/a2a/helper";

    fn agent(description: &str) -> Agent {
        let config = portico_config::parse(
            "card test",
            &format!(
                "[[agents]]\nname = \"helper\"\ndescription = \"{description}\"\ntools = [\"*\"]\n"
            ),
        )
        .unwrap();
        Agent {
            config: config.agents[0].clone(),
            tool_name: "portico_agent_helper".into(),
            patterns: ToolPatterns::new(&["*"]).unwrap(),
            driver: DriverChoice::Unavailable("no model in a card test".into()),
        }
    }

    fn tool(name: &str, description: Option<&str>) -> ToolEntry {
        let mut definition = json!({"name": name, "inputSchema": {"type": "object"}});
        if let Some(description) = description {
            definition["description"] = json!(description);
        }
        let serde_json::Value::Object(definition) = definition else {
            unreachable!("an object literal")
        };
        ToolEntry {
            name: name.into(),
            definition: Arc::new(definition),
            trust: Trust::Trusted,
            sensitive: false,
            timeout: None,
            generation: 0,
        }
    }

    /// A described tool, an undescribed one, and one whose description is over the 300 characters
    /// a skill keeps (multi-byte, so a byte cut would split a character).
    fn tools() -> Vec<ToolEntry> {
        vec![
            tool("system_time", Some("The current time")),
            tool("mcp_docs_search", None),
            tool("long_one", Some(&"é".repeat(301))),
        ]
    }

    fn skills_json() -> serde_json::Value {
        json!([
            {"id": "helper", "name": "helper", "description": "Helps", "tags": ["agent"], "examples": []},
            {"id": "system_time", "name": "system time", "description": "The current time",
             "tags": ["tool"], "examples": []},
            {"id": "mcp_docs_search", "name": "mcp docs search",
             "description": "Can use the mcp_docs_search tool", "tags": ["tool"], "examples": []},
            {"id": "long_one", "name": "long one", "description": "é".repeat(300),
             "tags": ["tool"], "examples": []},
        ])
    }

    /// The bytes a client gets (and the ETag hashes): exact JSON, keys in this order.
    fn served(card: &impl serde::Serialize) -> String {
        serde_json::to_string(card).unwrap()
    }

    #[test]
    fn the_1_0_card_is_exactly_what_portico_serves() {
        let card = card(&agent("Helps"), &tools(), URL, Version::V1);
        let expected = json!({
            "name": "helper",
            "description": "Helps",
            "supportedInterfaces": [
                {"url": URL, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": URL, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": URL, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": URL, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            ],
            "provider": {"organization": "Portico", "url": URL},
            "version": env!("CARGO_PKG_VERSION"),
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": false},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain"],
            "skills": skills_json(),
        });
        assert_eq!(serde_json::to_value(&card).unwrap(), expected);
        assert_eq!(served(&card), served(&expected));
    }

    #[test]
    fn the_0_3_card_is_exactly_what_portico_serves() {
        let card = card(&agent("Helps"), &tools(), URL, Version::V03);
        let expected = json!({
            "protocolVersion": "0.3.0",
            "name": "helper",
            "description": "Helps",
            "url": URL,
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [
                {"url": URL, "transport": "JSONRPC"},
                {"url": URL, "transport": "HTTP+JSON"},
            ],
            "provider": {"organization": "Portico", "url": URL},
            "version": env!("CARGO_PKG_VERSION"),
            "capabilities": {"streaming": true, "pushNotifications": true, "stateTransitionHistory": false},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain"],
            "skills": skills_json(),
        });
        assert_eq!(serde_json::to_value(&card).unwrap(), expected);
        assert_eq!(served(&card), served(&expected));
    }

    #[test]
    fn an_undescribed_agent_is_described_by_its_name() {
        let v1 = serde_json::to_value(card(&agent(""), &[], URL, Version::V1)).unwrap();
        assert_eq!(v1["description"], "The `helper` agent, served by Portico");
        assert_eq!(
            v1["skills"],
            json!([{"id": "helper", "name": "helper", "description": "The `helper` agent",
                "tags": ["agent"], "examples": []}])
        );
        let v03 = serde_json::to_value(card(&agent(""), &[], URL, Version::V03)).unwrap();
        assert_eq!(v03["description"], v1["description"]);
        assert_eq!(v03["skills"], v1["skills"]);
    }

    #[test]
    fn a_card_request_without_a_version_gets_the_configured_form() {
        use Version::{V1, V03};
        assert_eq!(form_for(None, None, V1), V1);
        assert_eq!(form_for(None, None, V03), V03);
        assert_eq!(form_for(None, Some("1.0"), V03), V1);
        assert_eq!(form_for(None, Some("0.3"), V1), V03);
        assert_eq!(form_for(None, Some("0.3.0"), V1), V03);
        assert_eq!(form_for(None, Some("0.9"), V1), V1);
        assert_eq!(form_for(Some(V03), Some("1.0"), V1), V03);
        assert_eq!(form_for(Some(V1), Some("0.3"), V03), V1);
    }

    #[test]
    fn a_card_keeps_its_date_until_it_changes_and_validators_follow_rfc_9110() {
        let dates = CardDates::default();
        let first = dates.last_modified("\"a\"");
        assert_eq!(first.duration_since(UNIX_EPOCH).unwrap().subsec_nanos(), 0);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(dates.last_modified("\"a\""), first);
        assert!(dates.last_modified("\"b\"") > first);

        let date = httpdate::fmt_http_date(first);
        let earlier = httpdate::fmt_http_date(first - Duration::from_secs(1));
        assert!(not_modified(Some("\"x\", \"a\""), None, "\"a\"", first));
        assert!(not_modified(Some("W/\"a\""), None, "\"a\"", first));
        assert!(not_modified(Some("*"), None, "\"a\"", first));
        assert!(!not_modified(Some("\"x\""), Some(&date), "\"a\"", first));
        assert!(not_modified(None, Some(&date), "\"a\"", first));
        assert!(!not_modified(None, Some(&earlier), "\"a\"", first));
        assert!(!not_modified(None, Some("yesterday"), "\"a\"", first));
        assert!(!not_modified(None, None, "\"a\"", first));
    }
}
