//! The registry's documents as types: a `server.json` ([`ServerJson`]), the API's answer for one
//! version ([`ServerResponse`], with the registry's own `_meta`) and a page of the list
//! ([`ServerList`]).
//!
//! Read leniently, as the API is versioned by date and grows: unknown keys are ignored, a package's
//! `registryType` and a transport's `type` are kept as written (a kind Portico does not know is
//! reported by name, not a parse error), and the list's cursor is read under both of the names the
//! API has used for it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One server as its publisher describes it (`server.json`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerJson {
    /// Reverse-DNS with one slash: `io.github.owner/server`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<Repository>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<Package>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remotes: Vec<Transport>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repository {
    pub url: String,
    #[serde(default)]
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subfolder: Option<String>,
}

/// A package the server can be installed from.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    pub registry_type: RegistryType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_base_url: Option<String>,
    /// The package name (npm, PyPI, NuGet), the image reference (OCI) or a download URL (MCPB).
    pub identifier: String,
    /// Required for npm, PyPI and NuGet; an OCI image carries its tag in `identifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_hint: Option<String>,
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_arguments: Vec<Argument>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub package_arguments: Vec<Argument>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_variables: Vec<KeyValueInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_sha256: Option<String>,
}

/// Where a package comes from. The schema's list grows (a registry may add `cargo`, say): a kind
/// not known here is kept by its name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "String", into = "String")]
pub enum RegistryType {
    Npm,
    Pypi,
    Oci,
    Nuget,
    Mcpb,
    Other(String),
}

impl From<String> for RegistryType {
    fn from(name: String) -> Self {
        match name.as_str() {
            "npm" => RegistryType::Npm,
            "pypi" => RegistryType::Pypi,
            "oci" => RegistryType::Oci,
            "nuget" => RegistryType::Nuget,
            "mcpb" => RegistryType::Mcpb,
            _ => RegistryType::Other(name),
        }
    }
}

impl From<RegistryType> for String {
    fn from(kind: RegistryType) -> Self {
        kind.as_str().to_string()
    }
}

impl RegistryType {
    pub fn as_str(&self) -> &str {
        match self {
            RegistryType::Npm => "npm",
            RegistryType::Pypi => "pypi",
            RegistryType::Oci => "oci",
            RegistryType::Nuget => "nuget",
            RegistryType::Mcpb => "mcpb",
            RegistryType::Other(name) => name,
        }
    }
}

/// How a package or a remote is spoken to: `stdio`, `streamable-http` or `sse` (a URL, headers,
/// and for a remote the variables its URL template refers to).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transport {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<KeyValueInput>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Input>,
}

/// A transport's kind, as far as Portico knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Stdio,
    StreamableHttp,
    Sse,
}

impl Transport {
    pub fn known_kind(&self) -> Option<TransportKind> {
        match self.kind.as_str() {
            "stdio" => Some(TransportKind::Stdio),
            "streamable-http" => Some(TransportKind::StreamableHttp),
            "sse" => Some(TransportKind::Sse),
            _ => None,
        }
    }
}

/// A value the user may be asked for (or that the publisher fixed), with `{name}` variables.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    /// `string` (the default), `number`, `boolean` or `filepath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// A fixed value; `{name}` in it stands for an entry of `variables`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Input>,
}

/// An environment variable or a header.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct KeyValueInput {
    pub name: String,
    #[serde(flatten)]
    pub input: Input,
}

/// A command-line argument: `positional` (a value) or `named` (`--flag` and its value).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[serde(rename = "type")]
    pub kind: String,
    /// The flag, dashes included (named arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What a positional argument is called when it is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_hint: Option<String>,
    #[serde(default)]
    pub is_repeated: bool,
    #[serde(flatten)]
    pub input: Input,
}

/// The API's answer for one server version: the document and what the registry says about it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ServerResponse {
    pub server: ServerJson,
    #[serde(rename = "_meta", default)]
    pub meta: ResponseMeta,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ResponseMeta {
    #[serde(
        rename = "io.modelcontextprotocol.registry/official",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub official: Option<OfficialMeta>,
}

/// The official registry's metadata of a version.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OfficialMeta {
    /// `active`, `deprecated` or `deleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub is_latest: bool,
}

impl ServerResponse {
    /// The registry's status of this version, `active` when it says none.
    pub fn status(&self) -> &str {
        self.meta
            .official
            .as_ref()
            .and_then(|o| o.status.as_deref())
            .unwrap_or("active")
    }
}

/// One page of `GET /v0.1/servers`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ServerList {
    pub servers: Vec<ServerResponse>,
    #[serde(default)]
    pub metadata: ListMetadata,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMetadata {
    /// Where the next page starts; absent or empty on the last page. Earlier versions of the API
    /// spelled it `next_cursor`.
    #[serde(
        default,
        alias = "next_cursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl ServerList {
    /// The cursor of the next page, if there is one.
    pub fn next(&self) -> Option<&str> {
        self.metadata
            .next_cursor
            .as_deref()
            .filter(|cursor| !cursor.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_reads_with_unknown_kinds_kept_by_name() {
        let text = r#"{
          "server": {
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": "io.example/thing",
            "description": "A thing",
            "version": "1.2.3",
            "packages": [
              {"registryType": "cargo", "identifier": "thing", "version": "1.2.3",
               "transport": {"type": "stdio"}},
              {"registryType": "npm", "identifier": "@example/thing", "version": "1.2.3",
               "transport": {"type": "stdio"},
               "packageArguments": [{"type": "named", "name": "--port", "valueHint": "port", "isRequired": true}],
               "environmentVariables": [{"name": "API_KEY", "isSecret": true, "isRequired": true, "description": "the key"}]}
            ],
            "remotes": [{"type": "websocket", "url": "wss://example.com"}],
            "somethingNew": {"x": 1}
          },
          "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated", "isLatest": true}}
        }"#;
        let response: ServerResponse = serde_json::from_str(text).unwrap();
        assert_eq!(response.status(), "deprecated");
        let server = &response.server;
        assert_eq!(
            server.packages[0].registry_type,
            RegistryType::Other("cargo".into())
        );
        assert_eq!(server.packages[1].registry_type, RegistryType::Npm);
        let arg = &server.packages[1].package_arguments[0];
        assert_eq!(
            (
                arg.kind.as_str(),
                arg.name.as_deref(),
                arg.input.is_required
            ),
            ("named", Some("--port"), true)
        );
        let env = &server.packages[1].environment_variables[0];
        assert!(env.input.is_secret && env.input.is_required);
        assert_eq!(env.input.description.as_deref(), Some("the key"));
        assert_eq!(server.remotes[0].known_kind(), None);
        // Written back, the kinds keep their names.
        let again = serde_json::to_value(server).unwrap();
        assert_eq!(again["packages"][0]["registryType"], "cargo");
    }

    #[test]
    fn the_cursor_is_read_under_both_names_and_empty_means_none() {
        let camel: ServerList =
            serde_json::from_str(r#"{"servers": [], "metadata": {"nextCursor": "abc"}}"#).unwrap();
        assert_eq!(camel.next(), Some("abc"));
        let snake: ServerList =
            serde_json::from_str(r#"{"servers": [], "metadata": {"next_cursor": "def"}}"#).unwrap();
        assert_eq!(snake.next(), Some("def"));
        let last: ServerList =
            serde_json::from_str(r#"{"servers": [], "metadata": {"nextCursor": ""}}"#).unwrap();
        assert_eq!(last.next(), None);
        let bare: ServerList = serde_json::from_str(r#"{"servers": []}"#).unwrap();
        assert_eq!(bare.next(), None);
    }
}
