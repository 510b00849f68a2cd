//! `config check`: every problem in a config file, with line, column and a hint.

use std::collections::HashMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use portico_core::naming::normalize_segment;

mod clients;
mod registry;
mod server_oauth;
mod store;
mod telemetry;
mod unknown_keys;
mod upstream_oauth;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl Problem {
    pub(crate) fn at(
        text: &str,
        span: Range<usize>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Self {
        let (line, column) = line_column(text, span.start);
        Problem {
            line,
            column,
            message: message.into(),
            hint,
        }
    }

    pub(crate) fn from_toml_error(text: &str, error: &toml::de::Error) -> Self {
        let span = error.span().unwrap_or(0..0);
        Problem::at(
            text,
            span,
            error.message().trim().to_string(),
            Some("fix the TOML syntax at this position".into()),
        )
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

/// Checks config text and returns every problem found, in file order. Empty means valid.
pub fn check(text: &str) -> Vec<Problem> {
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    let mut checker = Checker {
        text,
        problems: syntax_errors
            .iter()
            .map(|e| Problem::from_toml_error(text, e))
            .collect(),
    };
    if checker.problems.is_empty() {
        checker.unknown_keys(root.get_ref(), &unknown_keys::CONFIG, "the top level");
        checker.root(root.get_ref());
    }
    // Unknown keys and the rules walked by hand above are reported in full; a wrong type in a
    // section the hand walk does not cover (builtins, say) is left to serde, whose first error
    // still carries a position.
    if checker.problems.is_empty()
        && let Err(error) = toml::from_str::<crate::Config>(text)
    {
        checker
            .problems
            .push(Problem::from_toml_error(text, &error));
    }
    checker.problems.sort_by_key(|p| (p.line, p.column));
    checker.problems
}

/// Checks one agent file of an agents directory: the `[[agents]]` fields at top level.
pub fn check_agent_file(text: &str) -> Vec<Problem> {
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    let mut checker = Checker {
        text,
        problems: syntax_errors
            .iter()
            .map(|e| Problem::from_toml_error(text, e))
            .collect(),
    };
    if checker.problems.is_empty() {
        checker.unknown_keys(root.get_ref(), &unknown_keys::AGENT_FILE, "an agent file");
        checker.agent(0..0, root.get_ref(), &mut HashMap::new());
    }
    if checker.problems.is_empty()
        && let Err(error) = toml::from_str::<crate::AgentConfig>(text)
    {
        checker
            .problems
            .push(Problem::from_toml_error(text, &error));
    }
    checker.problems.sort_by_key(|p| (p.line, p.column));
    checker.problems
}

struct Checker<'t> {
    text: &'t str,
    problems: Vec<Problem>,
}

type Entry<'a, 'i> = (
    &'a Spanned<std::borrow::Cow<'i, str>>,
    &'a Spanned<DeValue<'i>>,
);

impl Checker<'_> {
    fn report(&mut self, span: Range<usize>, message: impl Into<String>, hint: Option<String>) {
        self.problems
            .push(Problem::at(self.text, span, message, hint));
    }

    fn unknown_keys(&mut self, root: &DeTable<'_>, schema: &serde_json::Value, section: &str) {
        for unknown in unknown_keys::unknown_keys(root, schema, section) {
            let known: Vec<&str> = unknown.known.iter().map(String::as_str).collect();
            let hint = match closest(&unknown.key, &known) {
                Some(suggestion) => format!(
                    "did you mean `{suggestion}`? known keys: {}",
                    known.join(", ")
                ),
                None => format!("known keys: {}", known.join(", ")),
            };
            self.report(
                unknown.span,
                format!("unknown key `{}` in {}", unknown.key, unknown.section),
                Some(hint),
            );
        }
    }

    fn expect_table<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        what: &str,
    ) -> Option<&'a DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.wrong_type(value.span(), what, "a table", other);
                None
            }
        }
    }

    fn expect_string<'a>(
        &mut self,
        value: &'a Spanned<DeValue<'_>>,
        what: &str,
    ) -> Option<&'a str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s),
            other => {
                self.wrong_type(value.span(), what, "a string", other);
                None
            }
        }
    }

    fn expect_bool(&mut self, value: &Spanned<DeValue<'_>>, what: &str) {
        if !matches!(value.get_ref(), DeValue::Boolean(_)) {
            self.wrong_type(value.span(), what, "true or false", value.get_ref());
        }
    }

    fn expect_string_array(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        what: &str,
    ) -> Vec<(String, Range<usize>)> {
        let mut out = Vec::new();
        match value.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let Some(s) = self.expect_string(item, &format!("each item of {what}")) {
                        out.push((s.to_string(), item.span()));
                    }
                }
            }
            other => self.wrong_type(value.span(), what, "an array of strings", other),
        }
        out
    }

    fn expect_string_table(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        what: &str,
    ) -> Vec<(String, Range<usize>)> {
        let mut out = Vec::new();
        if let Some(table) = self.expect_table(value, what) {
            for (key, v) in table.iter() {
                if self
                    .expect_string(v, &format!("`{}` in {what}", key.get_ref()))
                    .is_some()
                {
                    out.push((key.get_ref().to_string(), key.span()));
                }
            }
        }
        out
    }

    fn wrong_type(&mut self, span: Range<usize>, what: &str, expected: &str, found: &DeValue<'_>) {
        self.report(
            span,
            format!("{what} must be {expected}, found {}", type_name(found)),
            None,
        );
    }

    fn root(&mut self, root: &DeTable<'_>) {
        for (key, value) in root.iter() {
            match key.get_ref().as_ref() {
                "server" => self.server_section(value),
                "mcp_servers" => self.mcp_servers(value),
                "expose" => self.expose_section(value),
                "agents" => self.agents(value),
                "policies" => self.policies(value),
                "builtins" | "policy" | "a2a" => self.policy_section(key.get_ref(), value),
                "telemetry" => self.telemetry_section(value),
                "store" => self.store_section(value),
                "registry" => self.registry_section(value),
                "secrets" => self.secrets_section(value),
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
    }

    fn expose_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[expose]") else {
            return;
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "tool_search" => self.one_of(
                    value,
                    "[expose] tool_search",
                    &["auto", "on", "off"],
                    "use \"auto\" (above tool_search_threshold tools), \"on\" or \"off\"",
                ),
                "tool_search_threshold" => self.positive_integer(
                    value,
                    "[expose] tool_search_threshold",
                    "the default is 100",
                ),
                known @ ("tools" | "resources" | "prompts" | "prefix") => {
                    self.expect_bool(value, &format!("[expose] {known}"));
                }
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
    }

    fn secrets_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[secrets]") else {
            return;
        };
        if let Some(value) = table.get("store") {
            self.one_of(
                value,
                "[secrets] store",
                &["auto", "keyring", "file"],
                "use \"auto\" (the OS keyring where one is usable, else a file), \"keyring\" or \"file\"",
            );
        }
    }

    /// Records `name` under `key` (its normalised form), or reports that an earlier name already
    /// took that key: "{what} `name` clashes with `first` (line N): {clash}".
    fn distinct(
        &mut self,
        seen: &mut HashMap<String, (String, Range<usize>)>,
        key: String,
        name: &str,
        span: Range<usize>,
        what: &str,
        clash: &str,
    ) {
        match seen.get(&key) {
            Some((first, first_span)) => {
                let (line, _) = line_column(self.text, first_span.start);
                let message =
                    format!("{what} `{name}` clashes with `{first}` (line {line}): {clash}");
                self.report(span, message, Some("give each a distinct name".into()));
            }
            None => {
                seen.insert(key, (name.to_string(), span));
            }
        }
    }

    /// A string that must be one of `allowed` (a mode).
    fn one_of(&mut self, value: &Spanned<DeValue<'_>>, what: &str, allowed: &[&str], hint: &str) {
        if let Some(mode) = self.expect_string(value, what)
            && !allowed.contains(&mode)
        {
            self.report(
                value.span(),
                format!("{what} `{mode}` is not a mode"),
                Some(hint.into()),
            );
        }
    }

    fn positive_integer(&mut self, value: &Spanned<DeValue<'_>>, what: &str, hint: &str) {
        match value.get_ref() {
            DeValue::Integer(i) => {
                let ok = i
                    .as_str()
                    .replace('_', "")
                    .parse::<u64>()
                    .is_ok_and(|n| n > 0);
                if !ok || i.radix() != 10 {
                    self.report(
                        value.span(),
                        format!("{what} must be a positive number, found {}", i.as_str()),
                        Some(hint.into()),
                    );
                }
            }
            other => self.wrong_type(value.span(), what, "a positive integer", other),
        }
    }

    /// A decimal integer within `range` (a bounded setting: huge values would overflow clocks).
    fn integer_in(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        what: &str,
        range: std::ops::RangeInclusive<u64>,
        hint: &str,
    ) {
        match value.get_ref() {
            DeValue::Integer(i) => {
                let ok = i
                    .as_str()
                    .replace('_', "")
                    .parse::<u64>()
                    .is_ok_and(|n| range.contains(&n));
                if !ok || i.radix() != 10 {
                    self.report(
                        value.span(),
                        format!(
                            "{what} must be a whole number from {} to {}, found {}",
                            range.start(),
                            range.end(),
                            i.as_str()
                        ),
                        Some(hint.into()),
                    );
                }
            }
            other => self.wrong_type(value.span(), what, "an integer", other),
        }
    }

    fn server_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[server]") else {
            return;
        };
        let mut door = clients::DoorTokens {
            listen: None,
            server_token: None,
            clients: None,
            oauth: None,
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "listen" => {
                    if let Some(listen) = self.expect_string(value, "[server] listen") {
                        match crate::listen_address(listen) {
                            Some(address) => door.listen = Some((address, value.span())),
                            None => self.report(
                                value.span(),
                                format!("[server] listen `{listen}` is not an IP address and port"),
                                Some(
                                    "write it like \"127.0.0.1:4200\" or \"localhost:4200\"".into(),
                                ),
                            ),
                        }
                    }
                }
                "clients" => door.clients = Some(value),
                "oauth" => door.oauth = Some(value),
                "instructions" => {
                    self.expect_string(value, "[server] instructions");
                }
                "token" => {
                    let token = self.expect_string(value, "[server] token");
                    door.server_token = token;
                    if let Some(token) = token
                        && token.trim().is_empty()
                    {
                        self.report(
                            value.span(),
                            "[server] token is empty",
                            Some(
                                "use a long random value, e.g. token = \"${PORTICO_TOKEN}\"".into(),
                            ),
                        );
                    }
                }
                "allowed_origins" => {
                    for (origin, span) in
                        self.expect_string_array(value, "[server] allowed_origins")
                    {
                        let valid = origin == "null"
                            || url::Url::parse(&origin).is_ok_and(|u| {
                                matches!(u.scheme(), "http" | "https") && u.host().is_some()
                            });
                        if !valid {
                            self.report(
                                span,
                                format!("`{origin}` is not an origin"),
                                Some(
                                    "write scheme://host[:port], e.g. \"https://app.example.com\""
                                        .into(),
                                ),
                            );
                        }
                    }
                }
                "allowed_hosts" => {
                    self.expect_string_array(value, "[server] allowed_hosts");
                }
                "public_url" => {
                    if let Some(url) = self.expect_string(value, "[server] public_url")
                        && let Err(why) = crate::public_origin(url)
                    {
                        self.report(
                            value.span(),
                            format!("[server] public_url `{url}` is not usable: {why}"),
                            Some(
                                "write the address browsers use, scheme://host[:port], e.g. \"https://portico.example.com\""
                                    .into(),
                            ),
                        );
                    }
                }
                "trusted_proxies" => {
                    for (proxy, span) in self.expect_string_array(value, "[server] trusted_proxies")
                    {
                        if crate::IpRange::parse(&proxy).is_none() {
                            self.report(
                                span,
                                format!(
                                    "[server] trusted_proxies: `{proxy}` is not an IP address or CIDR range"
                                ),
                                Some(
                                    "list the balancers' addresses, e.g. [\"127.0.0.1\", \"10.0.0.0/8\"] (names are not resolved)"
                                        .into(),
                                ),
                            );
                        }
                    }
                }
                "max_response_bytes" => self.positive_integer(
                    value,
                    "[server] max_response_bytes",
                    "the default is 16777216 (16 MiB)",
                ),
                "max_message_bytes" => self.positive_integer(
                    value,
                    "[server] max_message_bytes",
                    "the default is 10485760 (10 MiB)",
                ),
                "agents_dir" => {
                    self.expect_string(value, "[server] agents_dir");
                }
                "max_sessions" => {
                    self.positive_integer(value, "[server] max_sessions", "the default is 1024")
                }
                "max_sessions_per_client" => self.positive_integer(
                    value,
                    "[server] max_sessions_per_client",
                    "the default is 256",
                ),
                "session_idle_secs" => self.positive_integer(
                    value,
                    "[server] session_idle_secs",
                    "the default is 300 (5 minutes)",
                ),
                "max_connections" => {
                    self.positive_integer(value, "[server] max_connections", "the default is 1024")
                }
                "max_connections_per_peer" => self.positive_integer(
                    value,
                    "[server] max_connections_per_peer",
                    "the default is a quarter of max_connections, at least 16",
                ),
                // Field names and types: the serde pass.
                "rate_limit" => {
                    self.expect_table(value, "[server.rate_limit]");
                }
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        self.door_tokens(door);
    }

    /// `[[agents]]`: names, providers and patterns here; field types by the serde pass in [`check`].
    fn agents(&mut self, value: &Spanned<DeValue<'_>>) {
        let mut seen: HashMap<String, (String, Range<usize>)> = HashMap::new();
        for (span, table) in self.array_of_tables(value, "agents") {
            self.agent(span, table, &mut seen);
        }
    }

    /// The tables of a `[[section]]` array, each with its span; anything else is reported.
    fn array_of_tables<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        section: &str,
    ) -> Vec<(Range<usize>, &'a DeTable<'i>)> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(
                value.span(),
                section,
                &format!("an array of tables ([[{section}]])"),
                value.get_ref(),
            );
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| {
                self.expect_table(item, &format!("each [[{section}]] entry"))
                    .map(|table| (item.span(), table))
            })
            .collect()
    }

    pub(crate) fn agent(
        &mut self,
        span: Range<usize>,
        table: &DeTable<'_>,
        seen: &mut HashMap<String, (String, Range<usize>)>,
    ) {
        let mut has_name = false;
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "name" => {
                    has_name = true;
                    let Some(name) = self.expect_string(value, "agents.name") else {
                        continue;
                    };
                    let tool_name = crate::agent_tool_name(name);
                    if name.trim().is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    {
                        self.report(
                            value.span(),
                            format!("agent name `{name}` must be letters, digits, `-` and `_`"),
                            Some("agents become the MCP tool portico_agent_{name}, e.g. name = \"code-reviewer\"".into()),
                        );
                    } else {
                        let clash = format!("both become the tool `{tool_name}`");
                        self.distinct(seen, tool_name, name, value.span(), "agent name", &clash);
                    }
                }
                "tools" => {
                    for (pattern, span) in self.expect_string_array(value, "agents.tools") {
                        if pattern.trim().is_empty()
                            || pattern.matches('[').count() != pattern.matches(']').count()
                        {
                            self.report(
                                span,
                                format!("tool pattern `{pattern}` is not a valid glob"),
                                Some(
                                    "use names and `*`, e.g. \"mcp_github_*\" or \"file_read\""
                                        .into(),
                                ),
                            );
                        }
                    }
                }
                "model" => {
                    if let Some(model) = self.expect_table(value, "agents.model")
                        && let Some((_, provider)) =
                            model.iter().find(|(k, _)| k.get_ref() == "provider")
                        && let Some(name) = self.expect_string(provider, "agents.model.provider")
                        && !crate::PROVIDERS.contains(&name)
                    {
                        self.report(
                            provider.span(),
                            format!("model provider `{name}` is not one Portico knows"),
                            Some(format!("use one of {}", crate::PROVIDERS.join(", "))),
                        );
                    }
                }
                "max_iterations" => {
                    self.positive_integer(value, "agents.max_iterations", "the default is 10")
                }
                "timeout_secs" => self.positive_integer(
                    value,
                    "agents.timeout_secs",
                    "seconds; the default is 300",
                ),
                // Unknown keys: `unknown_keys`; wrong types: the serde pass in [`check`].
                _ => {}
            }
        }
        if !has_name {
            self.report(
                span,
                "[[agents]] entry has no `name`",
                Some("add name = \"...\"".into()),
            );
        }
    }

    fn policy_section(&mut self, section: &str, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, &format!("[{section}]")) else {
            return;
        };
        if section == "a2a" {
            self.a2a_section(table);
            return;
        }
        if section != "policy" {
            return;
        }
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "taint" => self.one_of(
                    value,
                    "[policy] taint",
                    &["refuse", "approval", "off"],
                    "use \"refuse\" (the default), \"approval\" or \"off\"",
                ),
                "tool_timeout_secs" => self.positive_integer(
                    value,
                    "[policy] tool_timeout_secs",
                    "seconds; the default is 60",
                ),
                "max_result_chars" => self.positive_integer(
                    value,
                    "[policy] max_result_chars",
                    "the default is 50000",
                ),
                "approval_ttl_secs" => self.integer_in(
                    value,
                    "[policy] approval_ttl_secs",
                    1..=crate::model::MAX_APPROVAL_TTL_SECS,
                    "seconds a request waits for an answer and a grant for its retry; the default is 600, at most 604800 (7 days)",
                ),
                "approval_wait_secs" => self.integer_in(
                    value,
                    "[policy] approval_wait_secs",
                    0..=crate::model::MAX_APPROVAL_WAIT_SECS,
                    "seconds a held call waits for an answer; the default is 0, at most 3600 (1 hour), and never longer than approval_ttl_secs",
                ),
                "default" => self.one_of(
                    value,
                    "[policy] default",
                    &["allow", "deny"],
                    "use \"allow\" (the default) or \"deny\": what happens to a call no [[policies]] entry matches",
                ),
                _ => {}
            }
        }
    }

    /// `[[policies]]`: globs, pointers, regexes and actions are checked here with the same parsers
    /// the pipeline compiles them with; field types by the serde pass in [`check`].
    fn policies(&mut self, value: &Spanned<DeValue<'_>>) {
        for (span, table) in self.array_of_tables(value, "policies") {
            self.tool_policy(span, table);
        }
    }

    fn tool_policy(&mut self, span: Range<usize>, table: &DeTable<'_>) {
        let (mut has_tools, mut has_action) = (false, false);
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "tools" => {
                    has_tools = true;
                    let patterns = self.expect_string_array(value, "policies.tools");
                    if patterns.is_empty() && matches!(value.get_ref(), DeValue::Array(_)) {
                        self.report(
                            value.span(),
                            "policies.tools is empty, so the entry matches no tool",
                            Some("list globs over the tool names the doors serve, e.g. [\"mcp_github_create_*\", \"file_write\"]".into()),
                        );
                    }
                    for (pattern, span) in patterns {
                        self.glob(
                            &pattern,
                            span,
                            "tool pattern",
                            "e.g. \"mcp_github_*\" or \"file_write\"",
                        );
                    }
                }
                "callers" => {
                    let patterns = self.expect_string_array(value, "policies.callers");
                    if patterns.is_empty() && matches!(value.get_ref(), DeValue::Array(_)) {
                        self.report(
                            value.span(),
                            "policies.callers is empty, so the entry matches no caller",
                            Some("leave `callers` out to match every caller, or list globs such as \"client:*\"".into()),
                        );
                    }
                    for (pattern, span) in patterns {
                        self.glob(&pattern, span, "caller pattern", "callers are client:{name} (a [[server.clients]] name, `default`, or the door: stdio, http, api, a2a) and agent:{name}, e.g. \"client:*\" or \"agent:code-reviewer\"");
                    }
                }
                "when" => self.policy_conditions(value),
                "action" => {
                    has_action = true;
                    if let Some(action) = self.expect_string(value, "policies.action")
                        && !crate::POLICY_ACTIONS.contains(&action)
                    {
                        self.report(
                            value.span(),
                            format!("policies.action `{action}` is not an action"),
                            Some("use \"allow\", \"deny\" or \"approve\"".into()),
                        );
                    }
                }
                "reason" => {
                    self.expect_string(value, "policies.reason");
                }
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        if !has_tools {
            self.report(
                span.clone(),
                "[[policies]] entry has no `tools`",
                Some("add tools = [\"...\"]: globs over the tool names the doors serve".into()),
            );
        }
        if !has_action {
            self.report(
                span,
                "[[policies]] entry has no `action`",
                Some("add action = \"allow\", \"deny\" or \"approve\"".into()),
            );
        }
    }

    /// A glob of a policy, compiled as the pipeline will.
    fn glob(&mut self, pattern: &str, span: Range<usize>, what: &str, hint: &str) {
        if let Err(error) = portico_core::context::ToolPatterns::new(&[pattern]) {
            self.report(
                span,
                format!("{what} `{pattern}` is not a valid glob: {}", error.reason),
                Some(format!("use names with `*`, `?` and `[abc]`, {hint}")),
            );
        }
    }

    /// `when = [{ pointer = "/branch", matches = "^main$" }, ...]`.
    fn policy_conditions(&mut self, value: &Spanned<DeValue<'_>>) {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(
                value.span(),
                "policies.when",
                "an array of { pointer, matches } tables",
                value.get_ref(),
            );
            return;
        };
        for item in items.iter() {
            let Some(condition) = self.expect_table(item, "each item of policies.when") else {
                continue;
            };
            let (mut has_pointer, mut has_matches) = (false, false);
            for (key, value) in condition.iter() {
                match key.get_ref().as_ref() {
                    "pointer" => {
                        has_pointer = true;
                        if let Some(pointer) = self.expect_string(value, "policies.when.pointer")
                            && let Err(error) = portico_core::pointer::JsonPointer::parse(pointer)
                        {
                            self.report(
                                value.span(),
                                error.to_string(),
                                Some("a JSON pointer (RFC 6901) into the call's arguments".into()),
                            );
                        }
                    }
                    "matches" => {
                        has_matches = true;
                        if let Some(pattern) = self.expect_string(value, "policies.when.matches")
                            && let Err(error) = regex::Regex::new(pattern)
                        {
                            self.report(
                                value.span(),
                                format!(
                                    "policies.when.matches `{pattern}` is not a valid regex: {}",
                                    regex_problem(&error)
                                ),
                                Some("Rust regex syntax, searched in the value: anchor it with ^...$ to match all of it".into()),
                            );
                        }
                    }
                    // Unknown keys: `unknown_keys`, from the model.
                    _ => {}
                }
            }
            for (present, field, example) in [
                (has_pointer, "pointer", "pointer = \"/branch\""),
                (has_matches, "matches", "matches = \"^main$\""),
            ] {
                if !present {
                    self.report(
                        item.span(),
                        format!("policies.when item has no `{field}`"),
                        Some(format!("add {example}")),
                    );
                }
            }
        }
    }

    /// `[a2a]`: the listen path and the external agents' names and URLs (types: the serde pass).
    fn a2a_section(&mut self, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "listen_path" => {
                    let Some(path) = self.expect_string(value, "[a2a] listen_path") else {
                        continue;
                    };
                    let taken = [
                        "/approvals",
                        "/api",
                        "/mcp",
                        "/sse",
                        "/message",
                        "/ui",
                        "/metrics",
                    ]
                    .into_iter()
                    .find(|taken| {
                        path.strip_prefix(taken)
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                    });
                    if !path.starts_with('/') || path.contains(['{', '}', '?', '#']) {
                        self.report(
                            value.span(),
                            format!("[a2a] listen_path `{path}` is not a plain absolute path"),
                            Some("write it like \"/a2a\"".into()),
                        );
                    } else if let Some(taken) = taken {
                        // Those paths have their own rules at the door (the approval page's shell
                        // needs no token); an A2A route under them must not inherit any.
                        self.report(
                            value.span(),
                            format!(
                                "[a2a] listen_path `{path}` is under `{taken}`, which the door serves itself"
                            ),
                            Some("choose a path of its own, like \"/a2a\"".into()),
                        );
                    }
                }
                "public_url" => {
                    if let Some(url) = self.expect_string(value, "[a2a] public_url")
                        && !url::Url::parse(url)
                            .is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
                    {
                        self.report(
                            value.span(),
                            format!("[a2a] public_url `{url}` is not an http(s) URL"),
                            Some("the base URL other agents reach Portico at, e.g. \"https://agents.example.com\"".into()),
                        );
                    }
                }
                "external_agents" => {
                    let mut seen: HashMap<String, (String, Range<usize>)> = HashMap::new();
                    for (span, agent) in self.array_of_tables(value, "a2a.external_agents") {
                        let mut has_url = false;
                        for (key, value) in agent.iter() {
                            match key.get_ref().as_ref() {
                                "name" => {
                                    let Some(name) =
                                        self.expect_string(value, "a2a.external_agents.name")
                                    else {
                                        continue;
                                    };
                                    let tool = normalize_segment(name);
                                    let clash = format!("both become the tool `a2a_{tool}`");
                                    self.distinct(
                                        &mut seen,
                                        tool,
                                        name,
                                        value.span(),
                                        "external agent",
                                        &clash,
                                    );
                                }
                                "url" => {
                                    has_url = true;
                                    if let Some(url) =
                                        self.expect_string(value, "a2a.external_agents.url")
                                        && !url::Url::parse(url)
                                            .is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
                                    {
                                        self.report(
                                            value.span(),
                                            format!("external agent url `{url}` is not an http(s) URL"),
                                            Some("the agent's base URL; its card is read from /.well-known/agent-card.json under it".into()),
                                        );
                                    }
                                }
                                _ => {}
                            }
                        }
                        if !has_url {
                            self.report(
                                span,
                                "[[a2a.external_agents]] entry has no `url`",
                                Some("add url = \"https://...\"".into()),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn mcp_servers(&mut self, value: &Spanned<DeValue<'_>>) {
        // Normalised name → span of first use, to catch `my-server` vs `my_server`.
        let mut seen: HashMap<String, (String, Range<usize>)> = HashMap::new();
        for (span, table) in self.array_of_tables(value, "mcp_servers") {
            self.mcp_server(span, table, &mut seen);
        }
    }

    fn mcp_server(
        &mut self,
        span: Range<usize>,
        table: &DeTable<'_>,
        seen: &mut HashMap<String, (String, Range<usize>)>,
    ) {
        let mut has_name = false;
        let mut has_transport = false;
        let mut oauth = None;
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "name" => {
                    has_name = true;
                    let Some(name) = self.expect_string(value, "mcp_servers.name") else {
                        continue;
                    };
                    let normalized = normalize_segment(name);
                    if name.trim().is_empty() {
                        self.report(
                            value.span(),
                            "mcp_servers.name is empty",
                            Some("give every server a short name such as \"github\"".into()),
                        );
                    } else if let Some(why) = crate::edit::server_name_problem(name) {
                        // The name goes into log lines and terminals: shown escaped, never raw.
                        self.report(
                            value.span(),
                            format!(
                                "server name `{}` cannot be used: {why}",
                                portico_core::text::log_safe(name)
                            ),
                            Some("server names are 1 to 64 of ASCII letters, digits, `-`, `_` and `.`, starting with a letter or digit, e.g. name = \"my-files\"".into()),
                        );
                    } else {
                        let clash = format!("both become `{normalized}` in tool names");
                        self.distinct(seen, normalized, name, value.span(), "server name", &clash);
                    }
                }
                "timeout_secs" => self.positive_integer(
                    value,
                    "timeout_secs",
                    "seconds each request may take; the default is 30",
                ),
                "startup_timeout_secs" => self.positive_integer(
                    value,
                    "startup_timeout_secs",
                    "seconds the server's start and handshake may take; the default is 120",
                ),
                "max_concurrent_calls" => self.positive_integer(
                    value,
                    "max_concurrent_calls",
                    "requests in flight to this server at once; the default is 64",
                ),
                "env" => self.env(value),
                "enabled" => self.expect_bool(value, "enabled"),
                "allow_private_network" => self.expect_bool(value, "allow_private_network"),
                "prefix" => self.expect_bool(value, "prefix"),
                "protocol_version" => {
                    if let Some(version) = self.expect_string(value, "protocol_version")
                        && !crate::PROTOCOL_VERSIONS.contains(&version)
                    {
                        self.report(
                            value.span(),
                            format!(
                                "protocol_version `{version}` is not an MCP version Portico speaks"
                            ),
                            Some(format!(
                                "use one of {}",
                                crate::PROTOCOL_VERSIONS.join(", ")
                            )),
                        );
                    }
                }
                "transport" => {
                    has_transport = true;
                    self.transport(value);
                }
                "oauth" => oauth = Some(value),
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        if let Some(oauth) = oauth {
            let kind = table
                .iter()
                .find(|(k, _)| k.get_ref() == "transport")
                .and_then(|(_, t)| match t.get_ref() {
                    DeValue::Table(t) => t.iter().find(|(k, _)| k.get_ref() == "type"),
                    _ => None,
                })
                .and_then(|(_, kind)| match kind.get_ref() {
                    DeValue::String(kind) => Some(kind.to_string()),
                    _ => None,
                });
            self.upstream_oauth(oauth, kind.as_deref());
        }
        if !has_name {
            self.report(
                span.clone(),
                "[[mcp_servers]] entry has no `name`",
                Some("add name = \"...\"".into()),
            );
        }
        if !has_transport {
            self.report(
                span,
                "[[mcp_servers]] entry has no transport",
                Some("add a [mcp_servers.transport] table with type = \"stdio\", \"http\" or \"sse\"".into()),
            );
        }
    }

    fn env(&mut self, value: &Spanned<DeValue<'_>>) {
        let names: Vec<(String, Range<usize>)> = match value.get_ref() {
            DeValue::Array(_) => self
                .expect_string_array(value, "env")
                .into_iter()
                .map(|(item, span)| {
                    (
                        item.split_once('=')
                            .map_or(item.clone(), |(n, _)| n.to_string()),
                        span,
                    )
                })
                .collect(),
            DeValue::Table(_) => self.expect_string_table(value, "env"),
            other => {
                self.wrong_type(
                    value.span(),
                    "env",
                    "a list of variable names or a table of values",
                    other,
                );
                return;
            }
        };
        for (name, span) in names {
            if !is_env_name(&name) {
                self.report(
                    span,
                    format!("`{name}` is not a valid environment variable name"),
                    Some("use letters, digits and _, not starting with a digit; write NAME or NAME=value".into()),
                );
            }
        }
    }

    fn transport(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "mcp_servers.transport") else {
            return;
        };
        let kind = table
            .iter()
            .find(|(k, _)| k.get_ref() == "type")
            .map(|(_, v)| v);
        let Some(kind_value) = kind else {
            self.report(
                value.span(),
                "transport has no `type`",
                Some("add type = \"stdio\", \"http\" or \"sse\"".into()),
            );
            return;
        };
        let Some(kind) = self.expect_string(kind_value, "transport.type") else {
            return;
        };
        match kind {
            "stdio" | "http" | "sse" => {}
            other => {
                self.report(
                    kind_value.span(),
                    format!("unknown transport type `{other}`"),
                    Some("use \"stdio\", \"http\" (Streamable HTTP) or \"sse\" (legacy HTTP+SSE, auto-detected)".into()),
                );
                return;
            }
        }
        let section = format!("a {kind} transport");
        let mut has_target = false;
        for (key, v) in table.iter() {
            match key.get_ref().as_ref() {
                "type" => {}
                "command" if kind == "stdio" => {
                    has_target = true;
                    if let Some(command) = self.expect_string(v, "transport.command") {
                        if command.trim().is_empty() {
                            self.report(
                                v.span(),
                                "transport.command is empty",
                                Some("name the program to run, such as \"npx\"".into()),
                            );
                        } else if std::path::Path::new(command)
                            .components()
                            .any(|c| matches!(c, std::path::Component::ParentDir))
                        {
                            self.report(
                                v.span(),
                                format!("transport.command `{command}` contains a `..` path component, which Portico refuses"),
                                Some("use an absolute path or a program on PATH".into()),
                            );
                        }
                    }
                }
                "args" if kind == "stdio" => {
                    self.expect_string_array(v, "transport.args");
                }
                "cwd" if kind == "stdio" => {
                    self.expect_string(v, "transport.cwd");
                }
                "url" if kind != "stdio" => {
                    has_target = true;
                    if let Some(url) = self.expect_string(v, "transport.url") {
                        match url::Url::parse(url) {
                            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                            Ok(parsed) => self.report(
                                v.span(),
                                format!(
                                    "transport.url scheme `{}` is not allowed",
                                    parsed.scheme()
                                ),
                                Some("use an http:// or https:// URL".into()),
                            ),
                            Err(e) => self.report(
                                v.span(),
                                format!("transport.url `{url}` is not a valid URL: {e}"),
                                Some(
                                    "write a full URL such as \"https://mcp.example.com/mcp\""
                                        .into(),
                                ),
                            ),
                        }
                    }
                }
                "headers" if kind != "stdio" => {
                    self.expect_string_table(v, "transport.headers");
                }
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        if !has_target {
            let (field, hint) = if kind == "stdio" {
                ("command", "add command = \"npx\" (and args = [...])")
            } else {
                ("url", "add url = \"https://...\"")
            };
            self.report(
                value.span(),
                format!("{section} needs `{field}`"),
                Some(hint.into()),
            );
        }
    }
}

/// A regex error in one line: its last line (`error: unclosed group`), not the drawing above it.
fn regex_problem(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or(text.trim())
        .to_string()
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn type_name(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The known key `key` is most likely a slip for: one it abbreviates (`cmd` for `command`, its
/// letters in order with the same first letter), else the closest by edit distance if close enough
/// to be a typo. An abbreviation wins over a near spelling: `cmd` is one letter from `cwd`, but
/// means `command`.
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let abbreviated = known
        .iter()
        .filter(|k| abbreviates(key, k))
        .min_by_key(|k| edit_distance(key, k));
    if let Some(full) = abbreviated {
        return Some(full);
    }
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Whether `short` could be an abbreviation of `full`: at least three letters, shorter, the same
/// first letter, and every letter found in `full` in order.
fn abbreviates(short: &str, full: &str) -> bool {
    let mut rest = full.chars();
    short.chars().count() >= 3
        && short.len() < full.len()
        && short.chars().next() == full.chars().next()
        && short.chars().all(|c| rest.any(|f| f == c))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_that_could_forge_a_line_or_reorder_text_are_refused_escaped() {
        let text = "[[mcp_servers]]\nname = \"evil\\nERROR forged\\u202e\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"a\"\n\n[[mcp_servers]]\nname = \"-dash\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"a\"\n\n[[mcp_servers]]\nname = \"io.github.Ok_1\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"a\"\n";
        let rendered: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert_eq!(rendered.len(), 2, "{rendered:#?}");
        assert!(
            rendered[0].starts_with(
                "2:8: server name `evil\\nERROR forged\\u{202e}` cannot be used: only ASCII letters, digits, `-`, `_` and `.` are allowed (hint: server names are 1 to 64"
            ),
            "{rendered:#?}"
        );
        assert!(
            rendered[1].starts_with(
                "8:8: server name `-dash` cannot be used: it must start with a letter or a digit"
            ),
            "{rendered:#?}"
        );
        assert!(
            !rendered
                .concat()
                .chars()
                .any(portico_core::text::is_invisible)
        );
    }

    #[test]
    fn approval_times_are_bounded_with_positions() {
        let text = "[policy]\napproval_ttl_secs = 99999999999999\napproval_wait_secs = 604800\n";
        let messages: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            messages,
            [
                "2:21: [policy] approval_ttl_secs must be a whole number from 1 to 604800, found \
                 99999999999999 (hint: seconds a request waits for an answer and a grant for its \
                 retry; the default is 600, at most 604800 (7 days))",
                "3:22: [policy] approval_wait_secs must be a whole number from 0 to 3600, found \
                 604800 (hint: seconds a held call waits for an answer; the default is 0, at most \
                 3600 (1 hour), and never longer than approval_ttl_secs)",
            ]
        );
        assert_eq!(
            check("[policy]\napproval_ttl_secs = 0\n")[0].message,
            "[policy] approval_ttl_secs must be a whole number from 1 to 604800, found 0"
        );
        let at_the_limits = "[policy]\napproval_ttl_secs = 604_800\napproval_wait_secs = 3600\n";
        assert_eq!(check(at_the_limits), Vec::<Problem>::new());
    }

    #[test]
    fn agents_sections_are_checked_with_positions() {
        let text = r#"
[[agents]]
name = "code-reviewer"
tools = ["mcp_github_*", "file_read"]
model = { provider = "openai", model = "gpt-4o-mini", api_key_env = "OPENAI_API_KEY" }

[[agents]]
name = "code_reviewer"
model = { provider = "gpt" }

[policy]
taint = "maybe"
"#;
        let problems = check(text);
        let messages: Vec<String> = problems
            .iter()
            .map(|p| format!("{}:{} {}", p.line, p.column, p.message))
            .collect();
        assert_eq!(
            messages,
            [
                "8:8 agent name `code_reviewer` clashes with `code-reviewer` (line 3): both become the tool `portico_agent_code_reviewer`",
                "9:22 model provider `gpt` is not one Portico knows",
                "12:9 [policy] taint `maybe` is not a mode",
            ]
        );
        // Field names inside agents are checked against the model, with a position and a hint.
        let typo = check("[[agents]]\nname = \"a\"\nmax_iteration = 3\n");
        assert_eq!(typo.len(), 1, "{typo:?}");
        assert_eq!(typo[0].line, 3);
        assert!(
            typo[0]
                .message
                .contains("unknown key `max_iteration` in [[agents]]"),
            "{typo:?}"
        );
        assert!(
            typo[0]
                .hint
                .as_deref()
                .is_some_and(|h| h.starts_with("did you mean `max_iterations`?")),
            "{typo:?}"
        );
        let config = crate::parse("t", "[[agents]]\nname = \"a\"\n").unwrap();
        assert_eq!(config.agents[0].max_iterations, 10);
        assert_eq!(config.agents[0].model.provider, "auto");
    }

    #[test]
    fn public_url_and_trusted_proxies_are_checked() {
        let problems = check(
            "[server]\npublic_url = \"https://portico.example.com/gw\"\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/33\", \"lb.internal\"]\n",
        );
        let messages: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.line, p.message))
            .collect();
        assert_eq!(
            messages,
            [
                "2: [server] public_url `https://portico.example.com/gw` is not usable: it has a path, query or fragment; Portico is served at the root of its address",
                "3: [server] trusted_proxies: `10.0.0.0/33` is not an IP address or CIDR range",
                "3: [server] trusted_proxies: `lb.internal` is not an IP address or CIDR range",
            ]
        );
        assert!(
            check("[server]\npublic_url = \"https://portico.example.com\"\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n").is_empty()
        );
    }

    #[test]
    fn a2a_section_is_checked() {
        let text = r#"
[a2a]
listen_path = "a2a"
public_url = "ftp://x"
[[a2a.external_agents]]
name = "research-agent"
url = "https://research.example.com"
[[a2a.external_agents]]
name = "research_agent"
url = "not a url"
"#;
        let messages: Vec<String> = check(text)
            .iter()
            .map(|p| format!("{}: {}", p.line, p.message))
            .collect();
        assert_eq!(
            messages,
            [
                "3: [a2a] listen_path `a2a` is not a plain absolute path",
                "4: [a2a] public_url `ftp://x` is not an http(s) URL",
                "9: external agent `research_agent` clashes with `research-agent` (line 6): both become the tool `a2a_research_agent`",
                "10: external agent url `not a url` is not an http(s) URL",
            ]
        );
        assert_eq!(check("[a2a]\nenabled = false\nmax_tasks = 5\n"), vec![]);
        let under: Vec<String> = check("[a2a]\nlisten_path = \"/approvals/a2a\"\n")
            .iter()
            .map(|p| format!("{}: {}", p.line, p.message))
            .collect();
        assert_eq!(
            under,
            [
                "2: [a2a] listen_path `/approvals/a2a` is under `/approvals`, which the door serves itself"
            ]
        );
        // The dashboard's paths, where its session cookie counts, are the door's too.
        for taken in ["/ui", "/metrics"] {
            let under: Vec<String> = check(&format!("[a2a]\nlisten_path = \"{taken}/a2a\"\n"))
                .iter()
                .map(|p| p.message.clone())
                .collect();
            assert_eq!(
                under,
                [format!(
                    "[a2a] listen_path `{taken}/a2a` is under `{taken}`, which the door serves itself"
                )]
            );
        }
    }

    #[test]
    fn store_section_is_checked_with_positions_and_never_echoes_the_url() {
        let text = "[store]\nurl = \"mysql://root:hunter2@db/app\"\npool_size = 0\nreplica = \"gw 1\"\nreplicas = 0\nreplika = \"x\"\n";
        let problems: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems[0].starts_with("2:7: [store] url is not a postgres:// URL"),
            "{}",
            problems[0]
        );
        assert!(
            problems.iter().all(|p| !p.contains("hunter2")),
            "{problems:#?}"
        );
        assert!(
            problems[1].starts_with("3:13: [store] pool_size"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].starts_with("4:11: [store] replica `gw 1` may hold only letters"),
            "{}",
            problems[2]
        );
        assert!(
            problems[3].starts_with("5:12: [store] replicas"),
            "{}",
            problems[3]
        );
        assert!(
            problems[4].starts_with(
                "6:1: unknown key `replika` in [store] (hint: did you mean `replica`?"
            ),
            "{}",
            problems[4]
        );
        let fine = "[store]\nurl = \"postgres://portico:${PW}@127.0.0.1:5432/portico\"\npool_size = 4\nreplica = \"gw-1\"\nreplicas = 2\n";
        assert_eq!(check(fine), vec![]);
        let config: crate::Config = crate::parse("t", fine).unwrap();
        assert_eq!(
            (
                config.store.pool_size(),
                config.store.replicas(),
                config.store.replica.as_deref()
            ),
            (4, 2, Some("gw-1"))
        );
        let default = crate::Config::default().store;
        assert_eq!(
            (
                default.url.as_deref(),
                default.pool_size(),
                default.replicas()
            ),
            (None, 8, 1)
        );
    }

    #[test]
    fn registry_section_is_checked_with_positions() {
        let text = "[registry]\nurl = \"ftp://registry.example.com\"\nallow_private_network = \"yes\"\nurls = 1\n";
        let problems: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            problems,
            vec![
                "2:7: [registry] url `ftp://registry.example.com` is not an http(s) URL with a host (hint: the registry's base URL, e.g. \"https://registry.modelcontextprotocol.io\" (the default); its API is under /v0.1/)",
                "3:25: [registry] allow_private_network must be true or false, found a string",
                "4:1: unknown key `urls` in [registry] (hint: did you mean `url`? known keys: url, allow_private_network)",
            ]
        );
        assert_eq!(
            check("[registry]\nurl = \"https://r.example.com/mcp?x=1\"\n")[0].message,
            "[registry] url `https://r.example.com/mcp?x=1` has a query or fragment; give the registry's base URL"
        );
        assert_eq!(
            check("[registry]\nurl = \"not a url\"\n")[0].message,
            "[registry] url `not a url` is not a URL"
        );
        let fine =
            "[registry]\nurl = \"http://127.0.0.1:8080/registry\"\nallow_private_network = true\n";
        assert_eq!(check(fine), vec![]);
        let config = crate::parse("test", fine).unwrap();
        assert_eq!(config.registry.url(), "http://127.0.0.1:8080/registry");
        assert!(config.registry.allow_private_network);
        assert_eq!(
            crate::Config::default().registry.url(),
            "https://registry.modelcontextprotocol.io"
        );
    }

    #[test]
    fn telemetry_section_is_checked_with_positions() {
        let text = "[telemetry]\notlp_endpoint = \"grpc://collector:4317\"\nservice_name = \" \"\nsample_ratio = 1.5\nsampel_ratio = 1\n";
        let problems: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            problems,
            vec![
                "2:17: [telemetry] otlp_endpoint `grpc://collector:4317` is not an http(s) URL (hint: the collector's OTLP/HTTP traces URL, e.g. \"http://127.0.0.1:4318/v1/traces\")",
                "3:16: [telemetry] service_name is empty (hint: leave it out for the default, \"portico\")",
                "4:16: [telemetry] sample_ratio must be from 0.0 to 1.0 (hint: the share of new traces sampled: 1.0 (the default) keeps every one, 0.1 one in ten)",
                "5:1: unknown key `sampel_ratio` in [telemetry] (hint: did you mean `sample_ratio`? known keys: otlp_endpoint, service_name, sample_ratio)",
            ]
        );
        assert_eq!(
            check("[telemetry]\nsample_ratio = \"all\"\n")[0].message,
            "[telemetry] sample_ratio must be a number, found a string"
        );
        let fine = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\nservice_name = \"gw\"\nsample_ratio = 0\n";
        assert_eq!(check(fine), vec![]);
        assert_eq!(
            check("[telemetry]\notlp_endpoint = \"${OTLP_URL}\"\n"),
            vec![]
        );
        let config: crate::Config = crate::parse("t", fine).unwrap();
        assert_eq!(
            config.telemetry.otlp_endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            (
                config.telemetry.service_name(),
                config.telemetry.sample_ratio()
            ),
            ("gw", 0.0)
        );
        let default = crate::Config::default().telemetry;
        assert_eq!(
            (
                default.otlp_endpoint.as_deref(),
                default.service_name(),
                default.sample_ratio()
            ),
            (None, "portico", 1.0)
        );
    }

    #[test]
    fn valid_policies_load_in_order_with_their_defaults() {
        let text = r#"
[policy]
default = "deny"

[[policies]]
tools = ["mcp_github_create_*", "file_write", "shell_exec"]
callers = ["client:*", "agent:code-reviewer"]
when = [{ pointer = "/branch", matches = "^(main|release/.*)$" }]
action = "approve"
reason = "writes to protected branches need an owner's approval"

[[policies]]
tools = ["file_*", "system_time"]
action = "allow"
"#;
        assert_eq!(check(text), vec![]);
        let config = crate::parse("t", text).unwrap();
        assert_eq!(config.policy.default, crate::PolicyDefault::Deny);
        assert_eq!(config.policies.len(), 2);
        let first = &config.policies[0];
        assert_eq!(first.action, crate::PolicyAction::Approve);
        assert_eq!(
            first.callers.as_deref(),
            Some(&["client:*".to_string(), "agent:code-reviewer".to_string()][..])
        );
        assert_eq!(
            first.when,
            [crate::PolicyCondition {
                pointer: "/branch".into(),
                matches: "^(main|release/.*)$".into()
            }]
        );
        let second = &config.policies[1];
        assert_eq!(
            (
                second.action,
                &second.callers,
                second.when.len(),
                &second.reason
            ),
            (crate::PolicyAction::Allow, &None, 0, &None)
        );
        assert_eq!(
            crate::parse("t", "").unwrap().policy.default,
            crate::PolicyDefault::Allow
        );
    }

    #[test]
    fn policies_are_checked_with_positions() {
        let text = r#"[policy]
default = "maybe"

[[policies]]
tools = ["file_[write", "ok_*"]
callers = ["client:{a"]
when = [
  { pointer = "branch", matches = "^main$" },
  { pointer = "/a~2", matches = "(main" },
  { pointer = "/ok", matches = "x", flags = "i" },
  { matches = "x" },
]
action = "approve-later"
reasn = "typo"

[[policies]]
tools = []
callers = []
when = [{ pointer = "/ok" }]

[[policies]]
action = "deny"
"#;
        let rendered: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        let expect = [
            "2:11: [policy] default `maybe` is not a mode (hint: use \"allow\" (the default) or \"deny\"",
            "5:10: tool pattern `file_[write` is not a valid glob: unclosed character class; missing ']' (hint: use names with `*`",
            "6:12: caller pattern `client:{a` is not a valid glob: unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?) (hint: use names with `*`, `?` and `[abc]`, callers are client:{name} (a [[server.clients]] name",
            "8:15: JSON pointer `branch` does not start with `/`",
            "9:15: JSON pointer `/a~2` has a `~` not followed by 0 or 1",
            "9:33: policies.when.matches `(main` is not a valid regex: unclosed group (hint: Rust regex syntax",
            "10:37: unknown key `flags` in [[policies.when]] (hint: known keys: pointer, matches)",
            "11:3: policies.when item has no `pointer` (hint: add pointer = \"/branch\")",
            "13:10: policies.action `approve-later` is not an action (hint: use \"allow\", \"deny\" or \"approve\")",
            "14:1: unknown key `reasn` in [[policies]] (hint: did you mean `reason`?",
            "17:9: policies.tools is empty, so the entry matches no tool",
            "18:11: policies.callers is empty, so the entry matches no caller",
            "19:9: policies.when item has no `matches` (hint: add matches = \"^main$\")",
            "16:1: [[policies]] entry has no `action`",
            "21:1: [[policies]] entry has no `tools`",
        ];
        for e in expect {
            assert!(
                rendered.iter().any(|r| r.starts_with(e)),
                "missing {e:?} in {rendered:#?}"
            );
        }
        assert_eq!(rendered.len(), expect.len(), "{rendered:#?}");
        // A policies value that is no array of tables is named too.
        let rendered: Vec<String> = check("policies = 1\n")
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(
            rendered,
            ["1:12: policies must be an array of tables ([[policies]]), found an integer"]
        );
        let rendered: Vec<String> =
            check("[[policies]]\ntools = [\"a\"]\naction = \"deny\"\nwhen = \"/x\"\n")
                .iter()
                .map(|p| p.to_string())
                .collect();
        assert_eq!(
            rendered,
            ["4:8: policies.when must be an array of { pointer, matches } tables, found a string"]
        );
    }

    #[test]
    fn an_agents_directory_adds_one_agent_per_file() {
        let dir = std::env::temp_dir().join(format!("portico-agents-dir-{}", std::process::id()));
        let agents = dir.join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("b.toml"),
            "name = \"beta\"\ntools = [\"file_*\"]\n",
        )
        .unwrap();
        std::fs::write(agents.join("a.toml"), "name = \"alpha\"\n").unwrap();
        std::fs::write(agents.join("notes.txt"), "ignored").unwrap();
        let mut config = crate::parse(
            "t",
            "[server]\nagents_dir = \"agents\"\n[[agents]]\nname = \"main\"\n",
        )
        .unwrap();
        crate::load_agents_dir(&mut config, &dir).unwrap();
        let names: Vec<&str> = config.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["main", "alpha", "beta"]);

        std::fs::write(agents.join("c.toml"), "name = \"MAIN\"\nbogus = 1\n").unwrap();
        let mut again = crate::parse("t", "[server]\nagents_dir = \"agents\"\n").unwrap();
        let error = crate::load_agents_dir(&mut again, &dir)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("c.toml") && error.contains("unknown key `bogus` in an agent file"),
            "{error}"
        );
        std::fs::write(agents.join("c.toml"), "name = \"alpha\"\n").unwrap();
        let mut fresh = crate::parse("t", "[server]\nagents_dir = \"agents\"\n").unwrap();
        let error = crate::load_agents_dir(&mut fresh, &dir)
            .unwrap_err()
            .to_string();
        assert!(error.contains("clashes with agent `alpha`"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn valid_reference_config_has_no_problems() {
        let text = r#"
[server]
listen = "127.0.0.1:4200"

[[mcp_servers]]
name = "github"
timeout_secs = 30
env = ["GITHUB_PERSONAL_ACCESS_TOKEN", "MODE=fast"]

[mcp_servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[[mcp_servers]]
name = "remote"
allow_private_network = true
env = { A = "b" }
[mcp_servers.transport]
type = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
"#;
        assert_eq!(check(text), vec![]);
        let config: crate::Config = crate::parse("t", text).unwrap();
        assert_eq!(config.mcp_servers.len(), 2);
        assert_eq!(config.mcp_servers[0].timeout_secs, 30);
        assert_eq!(
            config.mcp_servers[0].env,
            vec![
                crate::EnvEntry::PassThrough("GITHUB_PERSONAL_ACCESS_TOKEN".into()),
                crate::EnvEntry::Literal {
                    name: "MODE".into(),
                    value: "fast".into()
                }
            ]
        );
        assert!(config.mcp_servers[1].allow_private_network);
    }

    #[test]
    fn reports_every_problem_with_position_and_hint() {
        let text = r#"[[mcp_servers]]
nmae = "x"
timeout_secs = "soon"
env = ["GOOD", "1BAD"]
[mcp_servers.transport]
type = "stdio"
command = "../bin/server"
url = "http://x"

[[mcp_servers]]
name = "a-b"
[mcp_servers.transport]
type = "carrier-pigeon"

[[mcp_servers]]
name = "a_b"
[mcp_servers.transport]
type = "http"
url = "file:///etc/passwd"

[bogus]
"#;
        let problems = check(text);
        let rendered: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        let expect = [
            "2:1: unknown key `nmae` in [[mcp_servers]] (hint: did you mean `name`?",
            "3:16: timeout_secs must be a positive integer, found a string",
            "4:16: `1BAD` is not a valid environment variable name",
            "7:11: transport.command `../bin/server` contains a `..` path component",
            "8:1: unknown key `url` in a stdio transport",
            "13:8: unknown transport type `carrier-pigeon`",
            "16:8: server name `a_b` clashes with `a-b` (line 11)",
            "19:7: transport.url scheme `file` is not allowed",
            "21:2: unknown key `bogus` in the top level",
        ];
        for e in expect {
            assert!(
                rendered.iter().any(|r| r.starts_with(e)),
                "missing {e:?} in {rendered:#?}"
            );
        }
        // The entry without a name is reported too.
        assert!(
            rendered.iter().any(|r| r.contains("entry has no `name`")),
            "{rendered:#?}"
        );
        assert_eq!(problems.len(), expect.len() + 1, "{rendered:#?}");
    }

    #[test]
    fn syntax_errors_have_positions() {
        let problems = check("[server\nlisten = 1");
        assert!(!problems.is_empty());
        assert_eq!(problems[0].line, 1);
    }

    #[test]
    fn missing_transport_and_url() {
        let rendered: Vec<String> = check("[[mcp_servers]]\nname = \"x\"\n\n[[mcp_servers]]\nname = \"y\"\ntransport = { type = \"sse\" }\n")
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert!(
            rendered.iter().any(|r| r.contains("has no transport")),
            "{rendered:#?}"
        );
        assert!(
            rendered
                .iter()
                .any(|r| r.contains("a sse transport needs `url`")),
            "{rendered:#?}"
        );
    }

    #[test]
    fn an_abbreviation_is_taken_for_the_key_it_abbreviates() {
        let text = "[[mcp_servers]]\nname = \"x\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncmd = \"node\"\n";
        let rendered: Vec<String> = check(text).iter().map(|p| p.to_string()).collect();
        assert!(
            rendered.iter().any(|r| r.starts_with(
                "5:1: unknown key `cmd` in a stdio transport (hint: did you mean `command`?"
            )),
            "{rendered:#?}"
        );
        assert_eq!(
            closest("timeout", &["name", "timeout_secs"]),
            Some("timeout_secs")
        );
        assert_eq!(closest("nmae", &["name", "enabled"]), Some("name"));
        assert_eq!(closest("zzz", &["name", "enabled"]), None);
    }

    /// A document with every key the model's schema has, generated from the schema: each table
    /// of a tagged enum or other alternatives appears once per alternative (in arrays, as one
    /// entry each). Free-form tables (headers, env) hold the one key `FREE_FORM`.
    fn every_key(schema: &serde_json::Value) -> toml::Table {
        use serde_json::Value;
        struct Generate<'s> {
            defs: &'s serde_json::Map<String, Value>,
        }
        impl<'s> Generate<'s> {
            fn resolve(&self, schema: &'s Value) -> &'s Value {
                match schema.get("$ref").and_then(Value::as_str) {
                    Some(r) => self.resolve(&self.defs[r.trim_start_matches("#/$defs/")]),
                    None => schema,
                }
            }
            /// One value of each form `schema` allows, `null` left out.
            fn samples(&self, schema: &'s Value) -> Vec<toml::Value> {
                let schema = self.resolve(schema);
                if let Some(branches) = schema
                    .get("anyOf")
                    .or_else(|| schema.get("oneOf"))
                    .and_then(Value::as_array)
                {
                    return branches.iter().flat_map(|b| self.samples(b)).collect();
                }
                if let Some(value) = schema.get("const") {
                    return vec![toml::Value::try_from(value).unwrap()];
                }
                if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
                    return vec![toml::Value::try_from(first).unwrap()];
                }
                let kind = match schema.get("type") {
                    Some(Value::Array(kinds)) => kinds.iter().find(|k| *k != "null"),
                    other => other,
                };
                match kind.and_then(Value::as_str) {
                    Some("string") => vec![toml::Value::String("x".into())],
                    Some("integer") => vec![toml::Value::Integer(1)],
                    Some("number") => vec![toml::Value::Float(0.5)],
                    Some("boolean") => vec![toml::Value::Boolean(true)],
                    Some("array") => vec![toml::Value::Array(self.samples(&schema["items"]))],
                    Some("object") => self.objects(schema),
                    Some("null") => vec![],
                    _ => vec![toml::Value::String("any".into())],
                }
            }
            fn objects(&self, schema: &'s Value) -> Vec<toml::Value> {
                let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                    let mut table = toml::Table::new();
                    let value = self.samples(&schema["additionalProperties"]).remove(0);
                    table.insert("FREE_FORM".into(), value);
                    return vec![toml::Value::Table(table)];
                };
                let samples: Vec<(&String, Vec<toml::Value>)> = properties
                    .iter()
                    .map(|(key, property)| (key, self.samples(property)))
                    .filter(|(_, samples)| !samples.is_empty())
                    .collect();
                let forms = samples.iter().map(|(_, s)| s.len()).max().unwrap_or(1);
                (0..forms)
                    .map(|form| {
                        let table = samples
                            .iter()
                            .map(|(key, s)| ((*key).clone(), s[form.min(s.len() - 1)].clone()))
                            .collect();
                        toml::Value::Table(table)
                    })
                    .collect()
            }
        }
        let generate = Generate {
            defs: schema["$defs"].as_object().unwrap(),
        };
        let Some(toml::Value::Table(document)) = generate.objects(schema).into_iter().next() else {
            unreachable!()
        };
        document
    }

    /// Every fixed-key table of `value` (any table but the free-form ones), by its place in a
    /// depth-first walk, made unknown-key-bearing one at a time by `visit`.
    fn fixed_key_tables(value: &mut toml::Value, visit: &mut dyn FnMut(&mut toml::Table)) {
        match value {
            toml::Value::Table(table) => {
                if table.contains_key("FREE_FORM") {
                    return;
                }
                visit(table);
                for (_, child) in table.iter_mut() {
                    fixed_key_tables(child, visit);
                }
            }
            toml::Value::Array(items) => {
                for item in items {
                    fixed_key_tables(item, visit);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_key_the_model_accepts_is_accepted_and_every_section_reports_unknown_keys() {
        type Parses = fn(&str) -> Result<(), toml::de::Error>;
        let whole: Parses = |t| toml::from_str::<crate::Config>(t).map(drop);
        let agent_file: Parses = |t| toml::from_str::<crate::AgentConfig>(t).map(drop);
        let check_whole: fn(&str) -> Vec<Problem> = check;
        for (schema, parses, check_text) in [
            (&*unknown_keys::CONFIG, whole, check_whole),
            (&*unknown_keys::AGENT_FILE, agent_file, check_agent_file),
        ] {
            let document = toml::Value::Table(every_key(schema));
            let text = toml::to_string(&document).unwrap();
            // The schema is the model: what it lists, serde loads.
            parses(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let unknown: Vec<Problem> = check_text(&text)
                .into_iter()
                .filter(|p| p.message.starts_with("unknown key"))
                .collect();
            assert_eq!(unknown, vec![], "{text}");

            let mut tables = 0;
            fixed_key_tables(&mut document.clone(), &mut |_| tables += 1);
            assert!(tables > 1, "{text}");
            for target in 0..tables {
                let mut with_bogus = document.clone();
                let mut seen = 0;
                fixed_key_tables(&mut with_bogus, &mut |table| {
                    if seen == target {
                        table.insert("zz_not_a_key".into(), toml::Value::Integer(1));
                    }
                    seen += 1;
                });
                let text = toml::to_string(&with_bogus).unwrap();
                let bogus: Vec<Problem> = check_text(&text)
                    .into_iter()
                    .filter(|p| p.message.starts_with("unknown key `zz_not_a_key`"))
                    .collect();
                assert_eq!(bogus.len(), 1, "table {target}: {bogus:?}\n{text}");
                let line = text.lines().nth(bogus[0].line - 1).unwrap();
                assert!(
                    line.starts_with("zz_not_a_key"),
                    "{line:?} {bogus:?}\n{text}"
                );
            }
        }
    }
}
