//! `portico-registry` reads the MCP registry (the API of modelcontextprotocol/registry, v0.1:
//! `https://registry.modelcontextprotocol.io` by default, or a company's own under `[registry] url`)
//! and turns a server's `server.json` into a Portico `[[mcp_servers]]` entry.
//!
//! - [`server_json`]: the documents as types, read leniently (a package kind or transport Portico
//!   does not know is kept by name).
//! - [`Registry`]: search and fetch, through `portico-net`'s SSRF-safe client, bounded in time and
//!   size, with errors in words (an unreachable registry, an unknown name).
//! - [`translate()`]: npm → `npx -y NAME@VERSION`, PyPI → `uvx NAME@VERSION`, OCI → `docker run -i
//!   --rm`, remotes → `http`/`sse` with their headers; versions pinned; the values the user must
//!   supply as [`InputNeed`]s; secrets only ever as `${VAR}`. Pure and unit tested, hostile
//!   documents included.
//! - [`Registry::resolve`]: a registry name to a [`Translation`], with suggestions from a search
//!   when the name is unknown.
//!
//! `portico add NAME` with a registry name: [`Registry::from_config`], then [`Registry::resolve`]
//! with the `--env` values as [`Options::values`]; ask for each of [`Translation::missing`] on a
//! terminal and call [`Translation::with_values`] with the answers (no second fetch); write only
//! when [`Translation::writable`]; put [`Translation::secrets`] in the secret store; append
//! [`Translation::into_import`] with `Import::merge`.
//!
//! What it is not: it writes no file and asks nobody anything. The entry comes out as
//! `portico-config`'s [`ImportedServer`](portico_config::import::ImportedServer), which
//! [`Import::merge`](portico_config::import::Import::merge) appends to a config as `portico import`
//! does; the binary asks for missing inputs and stores secrets.

mod client;
pub mod server_json;
mod translate;

pub use client::{
    DEFAULT_LIMIT, ListQuery, MAX_LIMIT, MAX_RESPONSE_BYTES, Registry, RegistryError,
};
pub use server_json::{ServerJson, ServerList, ServerResponse};
pub use translate::{
    InputNeed, InputPlace, MAX_VALUE_CHARS, Options, RunsAs, SecretValue, TranslateError,
    Translation, offers, portico_name, portico_name_problem, registry_name_problem, runnable,
    translate,
};

use serde::Serialize;

/// How many names an unknown name's suggestions list.
const SUGGESTIONS: usize = 5;

/// One server of a search, as `portico search` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub name: String,
    pub version: String,
    pub description: String,
    /// `npm`, `pypi`, `oci`, `remote`; empty when Portico can run none of what it offers.
    pub runs_as: Vec<&'static str>,
    /// What it offers when Portico can run none of it (`a nuget package ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<String>,
    /// `active`, `deprecated` or `deleted`.
    pub status: String,
}

impl Found {
    pub fn of(response: &ServerResponse) -> Found {
        let server = &response.server;
        let runs_as: Vec<&'static str> = runnable(server).into_iter().map(RunsAs::label).collect();
        Found {
            name: translate::printable(&server.name),
            version: translate::printable(&server.version),
            description: translate::printable(&server.description),
            offers: runs_as.is_empty().then(|| offers(server)),
            runs_as,
            status: translate::printable(response.status()),
        }
    }
}

/// Why a registry name could not become an entry.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{}", unknown_message(.name, .registry, .reason, .suggestions))]
    Unknown {
        name: String,
        registry: String,
        /// Set when the name is not a registry name at all.
        reason: Option<&'static str>,
        suggestions: Vec<String>,
    },
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Translate(#[from] TranslateError),
}

fn unknown_message(
    name: &str,
    registry: &str,
    reason: &Option<&'static str>,
    suggestions: &[String],
) -> String {
    let head = match reason {
        Some(reason) => format!("`{name}` is not a registry name ({reason})"),
        None => format!("the registry at {registry} has no server `{name}`"),
    };
    if suggestions.is_empty() {
        format!("{head}; `portico search WORDS` finds servers by name")
    } else {
        format!(
            "{head}; did you mean {}? (`portico search WORDS` lists more)",
            suggestions.join(", ")
        )
    }
}

impl Registry {
    /// The entry for the latest version of the server named `name`, with what the user must
    /// still supply. An unknown name (or a word that is not a registry name) gets suggestions
    /// from a search.
    pub async fn resolve(
        &self,
        name: &str,
        options: &Options,
    ) -> Result<Translation, ResolveError> {
        let name = name.trim();
        if let Some(reason) = registry_name_problem(name) {
            return Err(ResolveError::Unknown {
                name: translate::printable(name),
                registry: self.url(),
                reason: Some(reason),
                suggestions: self.suggestions(name).await,
            });
        }
        let response = match self.latest(name).await {
            Ok(response) => response,
            Err(RegistryError::NotFound { .. }) => {
                return Err(ResolveError::Unknown {
                    name: name.to_string(),
                    registry: self.url(),
                    reason: None,
                    suggestions: self.suggestions(name).await,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let mut options = options.clone();
        if options.origin.is_empty() {
            options.origin = format!(
                "the MCP registry at {}: {} {}",
                self.url(),
                response.server.name,
                translate::printable(&response.server.version)
            );
        }
        if response.status() != "active" {
            let why = response
                .meta
                .official
                .as_ref()
                .and_then(|o| o.status_message.as_deref())
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            options.status_note = Some(format!(
                "the registry marks this version {}{why}",
                response.status()
            ));
        }
        Ok(translate(&response.server, &options)?)
    }

    /// Names like `name`: a search for its last segment. A failed search suggests nothing (the
    /// error being reported is the unknown name).
    async fn suggestions(&self, name: &str) -> Vec<String> {
        let words = name.rsplit('/').next().unwrap_or(name).trim();
        if words.is_empty() || words.chars().count() > translate::MAX_NAME_CHARS {
            return Vec::new();
        }
        let query = ListQuery {
            search: Some(words.to_string()),
            limit: Some(SUGGESTIONS),
            cursor: None,
        };
        match self.list(&query).await {
            Ok(page) => page
                .servers
                .iter()
                .map(|s| translate::printable(&s.server.name))
                .filter(|found| found != name)
                .take(SUGGESTIONS)
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}
