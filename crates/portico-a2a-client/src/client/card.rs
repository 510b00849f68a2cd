//! Card discovery: reading another agent's card (1.0 or 0.3), and choosing the interface to talk
//! to.

use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};

use crate::wire::Version;

use super::*;

/// The binding of an interface Portico can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Binding {
    #[serde(rename = "JSONRPC")]
    JsonRpc,
    #[serde(rename = "HTTP+JSON")]
    HttpJson,
}

impl Binding {
    pub fn label(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    fn parse(label: &str) -> Option<Binding> {
        match label.trim().to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" | "JSON_RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "HTTP_JSON" | "REST" => Some(Binding::HttpJson),
            _ => None,
        }
    }
}

/// `1.0`, `1`, `v1.0` → 1.0; `0.3`, `0.3.0`, `0.2.5` → 0.3 (the 0.x method names).
pub(crate) fn version_of(label: &str) -> Option<Version> {
    let label = label.trim().trim_start_matches(['v', 'V']);
    if label == "1" || label.starts_with("1.") {
        Some(Version::V1)
    } else if label.starts_with("0.") {
        Some(Version::V03)
    } else {
        None
    }
}

/// One interface a card lists, as written there (URLs made absolute).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardInterface {
    pub url: String,
    pub binding: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The interface the client talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub url: String,
    pub binding: Binding,
    pub version: Version,
    /// Sent in every request when the card's interface names one.
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
}

/// An agent card, read.
#[derive(Debug, Clone)]
pub struct AgentCard {
    /// Where the card was read from.
    pub card_url: String,
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    pub interfaces: Vec<CardInterface>,
    pub streaming: bool,
    pub push_notifications: bool,
    pub skills: Vec<Skill>,
    /// The interface chosen: JSON-RPC 1.0, else HTTP+JSON 1.0, else JSON-RPC 0.3.
    pub endpoint: Endpoint,
    /// The card as served.
    pub raw: Value,
}

impl AgentCard {
    /// What `portico a2a discover --json` prints: the summary, the chosen interface and the raw card.
    pub fn summary(&self) -> Value {
        json!({
            "card_url": self.card_url,
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "interfaces": self.interfaces,
            "selected": {
                "url": self.endpoint.url,
                "binding": self.endpoint.binding.label(),
                "version": self.endpoint.version.label(),
            },
            "capabilities": {
                "streaming": self.streaming,
                "pushNotifications": self.push_notifications,
            },
            "skills": self.skills,
            "card": self.raw,
        })
    }

    /// Reads a card document. `card_url` resolves relative interface URLs.
    pub fn parse(card_url: &str, value: &Value) -> Result<AgentCard, String> {
        let object = value.as_object().ok_or("it is not a JSON object")?;
        let text = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| object.get(*k).and_then(Value::as_str))
                .map(str::to_string)
        };
        let name = text(&["name"])
            .filter(|n| !n.trim().is_empty())
            .ok_or("it has no `name`")?;
        let base = url::Url::parse(card_url).ok();
        let absolute = |href: &str| -> Result<String, String> {
            match url::Url::parse(href) {
                Ok(url) => Ok(url.to_string()),
                Err(url::ParseError::RelativeUrlWithoutBase) => base
                    .as_ref()
                    .and_then(|b| b.join(href).ok())
                    .map(|u| u.to_string())
                    .ok_or_else(|| format!("interface URL `{href}` cannot be resolved")),
                Err(e) => Err(format!("interface URL `{href}` is invalid: {e}")),
            }
        };

        let mut interfaces: Vec<CardInterface> = Vec::new();
        let mut add = |interface: CardInterface| {
            let key = |i: &CardInterface| {
                (
                    i.url.clone(),
                    i.binding.to_ascii_uppercase(),
                    version_of(&i.version),
                )
            };
            if !interfaces.iter().any(|i| key(i) == key(&interface)) {
                interfaces.push(interface);
            }
        };
        let supported = object
            .get("supportedInterfaces")
            .or_else(|| object.get("supported_interfaces"));
        if let Some(list) = supported {
            let list = list
                .as_array()
                .ok_or("`supportedInterfaces` is not a list")?;
            for (i, item) in list.iter().enumerate() {
                let field = |keys: &[&str]| {
                    keys.iter()
                        .find_map(|k| item.get(*k).and_then(Value::as_str))
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                };
                let url = field(&["url"])
                    .ok_or_else(|| format!("supportedInterfaces[{i}] has no `url`"))?;
                let binding = field(&["protocolBinding", "protocol_binding", "transport"])
                    .ok_or_else(|| format!("supportedInterfaces[{i}] has no `protocolBinding`"))?;
                add(CardInterface {
                    url: absolute(&url)?,
                    binding,
                    // Required in 1.0; a 1.0 card that leaves it out most likely means 1.0.
                    version: field(&["protocolVersion", "protocol_version"])
                        .unwrap_or_else(|| "1.0".into()),
                    tenant: field(&["tenant"]),
                });
            }
        }
        // The 0.3 form: the main URL with its preferred transport, then the additional ones.
        if let Some(url) = text(&["url"]) {
            let version = text(&["protocolVersion"])
                .filter(|v| version_of(v) == Some(Version::V03))
                .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
                .unwrap_or_else(|| "0.3".into());
            add(CardInterface {
                url: absolute(&url)?,
                binding: text(&["preferredTransport"]).unwrap_or_else(|| "JSONRPC".into()),
                version: version.clone(),
                tenant: None,
            });
            for item in object
                .get("additionalInterfaces")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(url), Some(transport)) = (
                    item.get("url").and_then(Value::as_str),
                    item.get("transport").and_then(Value::as_str),
                ) {
                    add(CardInterface {
                        url: absolute(url)?,
                        binding: transport.to_string(),
                        version: version.clone(),
                        tenant: None,
                    });
                }
            }
        }
        if interfaces.is_empty() {
            return Err(
                "it lists no interfaces: neither `supportedInterfaces` (A2A 1.0) nor a \
                        top-level `url` (A2A 0.3)"
                    .into(),
            );
        }
        let endpoint = choose(&interfaces).ok_or_else(|| {
            let offered: Vec<String> = interfaces
                .iter()
                .map(|i| format!("{} {} at {}", i.binding, i.version, i.url))
                .collect();
            format!(
                "none of its interfaces is one Portico speaks (JSONRPC or HTTP+JSON at A2A 1.0, \
                 JSONRPC at 0.3); it offers {}",
                offered.join(", ")
            )
        })?;

        let capabilities = object.get("capabilities");
        let flag = |key: &str| {
            capabilities
                .and_then(|c| c.get(key))
                .and_then(Value::as_bool)
                == Some(true)
        };
        let skills = object
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|skill| {
                let field = |k: &str| {
                    skill
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                Skill {
                    id: field("id"),
                    name: field("name"),
                    description: field("description"),
                }
            })
            .collect();
        Ok(AgentCard {
            card_url: card_url.to_string(),
            name,
            description: text(&["description"]).unwrap_or_default(),
            version: text(&["version"]),
            streaming: flag("streaming"),
            push_notifications: flag("pushNotifications") || flag("push_notifications"),
            interfaces,
            skills,
            endpoint,
            raw: value.clone(),
        })
    }
}

/// JSON-RPC 1.0, else HTTP+JSON 1.0, else JSON-RPC 0.3; the card's order within each.
pub(crate) fn choose(interfaces: &[CardInterface]) -> Option<Endpoint> {
    [
        (Binding::JsonRpc, Version::V1),
        (Binding::HttpJson, Version::V1),
        (Binding::JsonRpc, Version::V03),
    ]
    .into_iter()
    .find_map(|(binding, version)| {
        interfaces
            .iter()
            .find(|i| {
                Binding::parse(&i.binding) == Some(binding)
                    && version_of(&i.version) == Some(version)
            })
            .map(|i| Endpoint {
                url: i.url.clone(),
                binding,
                version,
                tenant: i.tenant.clone(),
            })
    })
}

/// Where to look for the card of the agent at `url`.
pub(crate) fn card_candidates(url: &url::Url) -> Vec<String> {
    if url.path().ends_with(".json") {
        return vec![url.to_string()];
    }
    let mut base = url.clone();
    base.set_query(None);
    base.set_fragment(None);
    let base = base.as_str().trim_end_matches('/').to_string();
    vec![
        format!("{base}{CARD_PATH}"),
        format!("{base}{LEGACY_CARD_PATH}"),
        url.to_string(),
    ]
}

impl A2aClient {
    // -----------------------------------------------------------------------------------------------
    // Discovery.

    /// Fetches and reads the card of the agent at `url` (a base URL, or the card's own URL).
    pub async fn discover(&self, url: &str) -> Result<AgentCard, ClientError> {
        let limit = self.timeout.min(DISCOVERY_TIMEOUT);
        match tokio::time::timeout(limit, self.discover_within(url)).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::DiscoveryTimeout {
                url: url.to_string(),
                limit,
            }),
        }
    }

    pub(crate) async fn discover_within(&self, url: &str) -> Result<AgentCard, ClientError> {
        // Refusals and bad URLs are reported before anything is sent.
        let parsed = self.http.check_url(url).map_err(|e| net_error(url, e))?;
        let candidates = card_candidates(&parsed);
        let last = candidates.len() - 1;
        let mut tried = Vec::new();
        for (i, candidate) in candidates.iter().enumerate() {
            let response = self
                .request(
                    Method::GET,
                    candidate,
                    Version::V1,
                    None,
                    "application/json",
                )
                .await?;
            let status = response.status();
            if matches!(status.as_u16(), 429 | 503) {
                // The agent is there but asks us to come back: another path would not answer
                // sooner, and the refresh must know how long to wait.
                return Err(ClientError::Status {
                    url: candidate.clone(),
                    status: status.as_u16(),
                    detail: String::new(),
                    retry_after: retry_after_of(&response),
                });
            }
            if !status.is_success() {
                tried.push(format!("{candidate} (HTTP {})", status.as_u16()));
                continue;
            }
            let body = read_body(candidate, response).await?;
            let value: Value = match serde_json::from_slice(&body) {
                Ok(value) => value,
                Err(e) => {
                    tried.push(format!("{candidate} (not JSON: {e})"));
                    continue;
                }
            };
            match AgentCard::parse(candidate, &value) {
                Ok(card) => return Ok(card),
                // A well-known path (or a URL given as the card) that serves JSON serves the card:
                // say what is wrong with it.
                Err(reason) if i < last || candidates.len() == 1 => {
                    return Err(ClientError::InvalidCard {
                        url: candidate.clone(),
                        reason,
                    });
                }
                Err(reason) => tried.push(format!("{candidate} (not an agent card: {reason})")),
            }
        }
        Err(ClientError::NoCard {
            url: url.to_string(),
            tried,
        })
    }
}
