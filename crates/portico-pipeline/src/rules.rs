//! Tool policies from the config (`[[policies]]`): rules over the exposed tool name, the caller and
//! the call's validated arguments, compiled once when the pipeline is built. The first rule that
//! matches a call decides it; when none does, the default (`[policy] default`) does.
//!
//! Everything here is pure and synchronous ([`ToolRules::decide`], [`ToolRules::mark`]), so it can
//! be tested to exhaustion; [`Policy`] wraps it for the pipeline.

use portico_core::JsonObject;
use portico_core::pointer::{JsonPointer, PointerError};
use portico_core::relay::BoxFuture;
use regex::Regex;
use serde_json::Value;

use crate::context::{PatternError, Principal, ToolPatterns};
use crate::policy::{MarkedAction, Policy, PolicyDecision, PolicyMark, PolicyRequest};
use crate::source::ToolEntry;

/// What a rule does with a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    Allow,
    Deny,
    /// The call needs someone's approval: a grant for exactly this call lets it run once.
    Approve,
}

/// What happens to a call no rule matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DefaultAction {
    #[default]
    Allow,
    Deny,
}

/// One rule as written: the config's `[[policies]]` entry, not yet compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// Globs over exposed tool names.
    pub tools: Vec<String>,
    /// Globs over principals (`client:*`, `agent:code-reviewer`); `None`: every caller.
    pub callers: Option<Vec<String>>,
    /// Conditions on the arguments, all of which must hold.
    pub when: Vec<ConditionSpec>,
    pub action: RuleAction,
    pub reason: Option<String>,
}

/// One argument condition as written: a JSON pointer into the arguments and a regex its value must
/// match (searched, not anchored: write `^...$` to match the whole value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionSpec {
    pub pointer: String,
    pub matches: String,
}

/// Why the rules could not be compiled. `config check` reports the same problems with positions;
/// this is what a config that skipped it (an embedder's) gets.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("[[policies]] entry {rule}: `tools` is empty, so it matches no tool")]
    NoTools { rule: usize },
    #[error("[[policies]] entry {rule}: `{field}`: {source}")]
    Pattern {
        rule: usize,
        field: &'static str,
        #[source]
        source: PatternError,
    },
    #[error("[[policies]] entry {rule}: `when`: {source}")]
    Pointer {
        rule: usize,
        #[source]
        source: PointerError,
    },
    #[error(
        "[[policies]] entry {rule}: `when` for `{pointer}`: `matches` is not a valid regex: {source}"
    )]
    Regex {
        rule: usize,
        pointer: String,
        #[source]
        source: Box<regex::Error>,
    },
}

/// The compiled rules: globs and regexes built once, never per call.
#[derive(Debug)]
pub struct ToolRules {
    rules: Vec<Rule>,
    default: DefaultAction,
    default_reason: String,
}

#[derive(Debug)]
struct Rule {
    /// `policies[i]@digest`: the entry's place and a digest of what it says, so an approval given
    /// under it does not pass once the entry is edited.
    id: String,
    tools: ToolPatterns,
    callers: Option<ToolPatterns>,
    when: Vec<Condition>,
    action: RuleAction,
    reason: String,
}

#[derive(Debug)]
struct Condition {
    pointer: JsonPointer,
    matches: Regex,
}

/// How the rules decided one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleDecision<'r> {
    pub action: RuleAction,
    pub reason: &'r str,
    /// The 1-based number of the `[[policies]]` entry that decided, `None` for the default.
    pub rule: Option<usize>,
    /// The deciding entry's id (`policies[0]@1f2e...`, 0-based like the TOML array), `default` for
    /// the default.
    pub id: &'r str,
}

impl ToolRules {
    pub fn compile(specs: &[RuleSpec], default: DefaultAction) -> Result<ToolRules, RuleError> {
        let rules = specs
            .iter()
            .enumerate()
            .map(|(index, spec)| Rule::compile(index + 1, spec))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ToolRules {
            rules,
            default,
            default_reason:
                "no [[policies]] entry allows this call, and [policy] default is \"deny\"".into(),
        })
    }

    /// Whether these rules can refuse anything: without rules and with the default `allow`, the
    /// pipeline need not run them at all.
    pub fn allows_everything(&self) -> bool {
        self.rules.is_empty() && self.default == DefaultAction::Allow
    }

    /// Decides a call of `tool` by `caller` (a principal's label) with `arguments`: the first rule
    /// whose tools, callers and conditions all match, else the default.
    pub fn decide<'r>(
        &'r self,
        tool: &str,
        caller: &str,
        arguments: &JsonObject,
    ) -> RuleDecision<'r> {
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.applies_to(tool, caller) && rule.when.iter().all(|c| c.holds(arguments)) {
                return RuleDecision {
                    action: rule.action,
                    reason: &rule.reason,
                    rule: Some(index + 1),
                    id: &rule.id,
                };
            }
        }
        match self.default {
            DefaultAction::Allow => RuleDecision {
                action: RuleAction::Allow,
                reason: "",
                rule: None,
                id: "default",
            },
            DefaultAction::Deny => RuleDecision {
                action: RuleAction::Deny,
                reason: &self.default_reason,
                rule: None,
                id: "default",
            },
        }
    }

    /// How a listing marks `tool` for `caller`, before any arguments are known: the first rule
    /// that could decide a call of it, if that rule denies or needs approval. Rules with `when`
    /// conditions could apply or not: an `allow` one is passed over (the call may still fall
    /// through to a later rule), a `deny` or `approve` one marks the tool. The mark is
    /// `conditional` when a rule with conditions was met on the way, so whether a call is
    /// refused depends on its arguments.
    pub fn mark(&self, tool: &str, caller: &str) -> Option<PolicyMark> {
        let mut conditional = false;
        for rule in &self.rules {
            if !rule.applies_to(tool, caller) {
                continue;
            }
            conditional |= !rule.when.is_empty();
            let action = match rule.action {
                RuleAction::Allow if rule.when.is_empty() => return None,
                RuleAction::Allow => continue,
                RuleAction::Deny => MarkedAction::Deny,
                RuleAction::Approve => MarkedAction::Approve,
            };
            return Some(PolicyMark {
                action,
                reason: rule.reason.clone(),
                conditional,
            });
        }
        match self.default {
            DefaultAction::Allow => None,
            DefaultAction::Deny => Some(PolicyMark {
                action: MarkedAction::Deny,
                reason: self.default_reason.clone(),
                conditional,
            }),
        }
    }
}

impl Rule {
    fn compile(rule: usize, spec: &RuleSpec) -> Result<Rule, RuleError> {
        if spec.tools.is_empty() {
            return Err(RuleError::NoTools { rule });
        }
        let tools = ToolPatterns::new(&spec.tools).map_err(|source| RuleError::Pattern {
            rule,
            field: "tools",
            source,
        })?;
        let callers = spec
            .callers
            .as_ref()
            .map(|callers| ToolPatterns::new(callers))
            .transpose()
            .map_err(|source| RuleError::Pattern {
                rule,
                field: "callers",
                source,
            })?;
        let when = spec
            .when
            .iter()
            .map(|condition| {
                let pointer = JsonPointer::parse(&condition.pointer)
                    .map_err(|source| RuleError::Pointer { rule, source })?;
                let matches =
                    Regex::new(&condition.matches).map_err(|source| RuleError::Regex {
                        rule,
                        pointer: condition.pointer.clone(),
                        source: Box::new(source),
                    })?;
                Ok(Condition { pointer, matches })
            })
            .collect::<Result<Vec<_>, RuleError>>()?;
        let reason = spec.reason.clone().unwrap_or_else(|| match spec.action {
            RuleAction::Allow => String::new(),
            RuleAction::Deny => format!("[[policies]] entry {rule} denies it"),
            RuleAction::Approve => format!("[[policies]] entry {rule} requires an approval"),
        });
        Ok(Rule {
            id: format!("policies[{}]@{}", rule - 1, &spec_digest(spec)[..12]),
            tools,
            callers,
            when,
            action: spec.action,
            reason,
        })
    }

    /// Whether the rule's tools and callers name this call (its conditions aside).
    fn applies_to(&self, tool: &str, caller: &str) -> bool {
        self.tools.matches(tool) && self.callers.as_ref().is_none_or(|c| c.matches(caller))
    }
}

/// A digest of everything a rule says, so editing any of it changes the rule's id.
fn spec_digest(spec: &RuleSpec) -> String {
    let when: Vec<Value> = spec
        .when
        .iter()
        .map(|c| Value::from(vec![c.pointer.clone(), c.matches.clone()]))
        .collect();
    crate::audit::arguments_digest(&Value::from(vec![
        Value::from(spec.tools.clone()),
        spec.callers.clone().map(Value::from).unwrap_or(Value::Null),
        Value::from(when),
        Value::from(format!("{:?}", spec.action)),
        spec.reason.clone().map(Value::from).unwrap_or(Value::Null),
    ]))
}

impl Condition {
    /// Whether the value at the pointer matches: a string as it is, a number or a boolean as its
    /// JSON text (`42`, `true`). A missing value, `null`, an array or an object never matches.
    fn holds(&self, arguments: &JsonObject) -> bool {
        match self.pointer.get(arguments) {
            Some(Value::String(text)) => self.matches.is_match(text),
            Some(value @ (Value::Number(_) | Value::Bool(_))) => {
                self.matches.is_match(&value.to_string())
            }
            _ => false,
        }
    }
}

impl Policy for ToolRules {
    fn check<'a>(&'a self, request: &'a PolicyRequest<'a>) -> BoxFuture<'a, PolicyDecision> {
        let decision = self.decide(
            &request.entry.name,
            &request.principal.label(),
            request.arguments,
        );
        let decision = match decision.action {
            RuleAction::Allow => PolicyDecision::Allow,
            RuleAction::Deny => PolicyDecision::Deny(decision.reason.to_string()),
            RuleAction::Approve => PolicyDecision::RequireApproval {
                policy: decision.id.to_string(),
                reason: decision.reason.to_string(),
            },
        };
        Box::pin(async move { decision })
    }

    fn mark(&self, entry: &ToolEntry, principal: &Principal) -> Option<PolicyMark> {
        ToolRules::mark(self, &entry.name, &principal.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(tools: &[&str], action: RuleAction) -> RuleSpec {
        RuleSpec {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            callers: None,
            when: Vec::new(),
            action,
            reason: Some(format!("{action:?} {}", tools.join(","))),
        }
    }

    fn callers(mut spec: RuleSpec, callers: &[&str]) -> RuleSpec {
        spec.callers = Some(callers.iter().map(|c| c.to_string()).collect());
        spec
    }

    fn when(mut spec: RuleSpec, pointer: &str, matches: &str) -> RuleSpec {
        spec.when.push(ConditionSpec {
            pointer: pointer.into(),
            matches: matches.into(),
        });
        spec
    }

    fn args(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    fn compile(specs: &[RuleSpec], default: DefaultAction) -> ToolRules {
        ToolRules::compile(specs, default).unwrap()
    }

    /// The action and deciding rule of a call with no arguments.
    fn decided(rules: &ToolRules, tool: &str, caller: &str) -> (RuleAction, Option<usize>) {
        let decision = rules.decide(tool, caller, &JsonObject::new());
        (decision.action, decision.rule)
    }

    #[test]
    fn tool_globs_match_whole_exposed_names() {
        let rules = compile(
            &[rule(
                &["mcp_github_create_*", "file_write", "shell_?xec"],
                RuleAction::Deny,
            )],
            DefaultAction::Allow,
        );
        for denied in ["mcp_github_create_issue", "file_write", "shell_exec"] {
            assert_eq!(
                decided(&rules, denied, "client:http"),
                (RuleAction::Deny, Some(1)),
                "{denied}"
            );
        }
        for allowed in [
            "mcp_github_list_issues",
            "file_write_more",
            "xfile_write",
            "shell_eexec",
        ] {
            assert_eq!(
                decided(&rules, allowed, "client:http"),
                (RuleAction::Allow, None),
                "{allowed}"
            );
        }
    }

    #[test]
    fn callers_restrict_a_rule_to_the_principals_they_match() {
        let rules = compile(
            &[callers(
                rule(&["*"], RuleAction::Deny),
                &["client:*", "agent:code-reviewer"],
            )],
            DefaultAction::Allow,
        );
        assert_eq!(decided(&rules, "t", "client:http").0, RuleAction::Deny);
        assert_eq!(decided(&rules, "t", "client:stdio").0, RuleAction::Deny);
        assert_eq!(
            decided(&rules, "t", "agent:code-reviewer").0,
            RuleAction::Deny
        );
        assert_eq!(decided(&rules, "t", "agent:assistant").0, RuleAction::Allow);
        assert_eq!(
            decided(&rules, "t", "agent:code-reviewer-2").0,
            RuleAction::Allow
        );
    }

    #[test]
    fn conditions_read_the_arguments_through_pointers_and_all_must_hold() {
        let protected = when(
            when(
                rule(&["push"], RuleAction::Approve),
                "/branch",
                "^(main|release/.*)$",
            ),
            "/force",
            "^true$",
        );
        let rules = compile(&[protected], DefaultAction::Allow);
        let decide =
            |arguments: Value| rules.decide("push", "client:http", &args(arguments)).action;
        assert_eq!(
            decide(json!({"branch": "main", "force": true})),
            RuleAction::Approve
        );
        assert_eq!(
            decide(json!({"branch": "release/1.2", "force": true})),
            RuleAction::Approve
        );
        // One condition failing is enough to pass the rule over.
        assert_eq!(
            decide(json!({"branch": "main", "force": false})),
            RuleAction::Allow
        );
        assert_eq!(
            decide(json!({"branch": "mainline", "force": true})),
            RuleAction::Allow
        );
        // A missing pointer does not match, nor does a value that is no string, number or boolean.
        assert_eq!(decide(json!({"force": true})), RuleAction::Allow);
        assert_eq!(
            decide(json!({"branch": ["main"], "force": true})),
            RuleAction::Allow
        );
        assert_eq!(
            decide(json!({"branch": null, "force": true})),
            RuleAction::Allow
        );
        assert_eq!(
            decide(json!({"branch": {"name": "main"}, "force": true})),
            RuleAction::Allow
        );
        // The `force` condition compared the boolean's JSON text, not a string "true".
        assert_eq!(
            decide(json!({"branch": "main", "force": "true"})),
            RuleAction::Approve
        );
    }

    #[test]
    fn numbers_and_nested_values_are_compared_as_their_json_text() {
        let rules = compile(
            &[
                when(rule(&["pay"], RuleAction::Deny), "/amount", "^[0-9]{4,}$"),
                when(rule(&["pay"], RuleAction::Deny), "/to/0/iban", "^XX"),
                when(rule(&["pay"], RuleAction::Deny), "/rate", r"^0\.5$"),
            ],
            DefaultAction::Allow,
        );
        let rule_of = |arguments: Value| rules.decide("pay", "c", &args(arguments)).rule;
        assert_eq!(rule_of(json!({"amount": 12000})), Some(1));
        assert_eq!(rule_of(json!({"amount": 120})), None);
        assert_eq!(rule_of(json!({"to": [{"iban": "XX12"}]})), Some(2));
        assert_eq!(rule_of(json!({"to": [{"iban": "DE12"}]})), None);
        assert_eq!(rule_of(json!({"rate": 0.5})), Some(3));
        // A regex is searched, not anchored.
        let unanchored = compile(
            &[when(rule(&["t"], RuleAction::Deny), "/p", "etc")],
            DefaultAction::Allow,
        );
        assert_eq!(
            unanchored
                .decide("t", "c", &args(json!({"p": "/etc/passwd"})))
                .action,
            RuleAction::Deny
        );
    }

    #[test]
    fn the_first_matching_rule_wins() {
        let rules = compile(
            &[
                when(rule(&["file_write"], RuleAction::Deny), "/path", "^secret/"),
                rule(&["file_*"], RuleAction::Allow),
                rule(&["*"], RuleAction::Approve),
            ],
            DefaultAction::Deny,
        );
        let decide = |tool: &str, arguments: Value| {
            let d = rules.decide(tool, "client:http", &args(arguments));
            (d.action, d.rule, d.reason.to_string())
        };
        assert_eq!(
            decide("file_write", json!({"path": "secret/key"})),
            (RuleAction::Deny, Some(1), "Deny file_write".to_string())
        );
        assert_eq!(
            decide("file_write", json!({"path": "notes.txt"})),
            (RuleAction::Allow, Some(2), "Allow file_*".to_string())
        );
        assert_eq!(
            decide("shell_exec", json!({})),
            (RuleAction::Approve, Some(3), "Approve *".to_string())
        );
    }

    #[test]
    fn with_default_deny_a_call_no_rule_matches_is_denied() {
        let rules = compile(
            &[rule(&["system_time"], RuleAction::Allow)],
            DefaultAction::Deny,
        );
        assert_eq!(
            decided(&rules, "system_time", "client:http"),
            (RuleAction::Allow, Some(1))
        );
        let refused = rules.decide("file_read", "client:http", &JsonObject::new());
        assert_eq!((refused.action, refused.rule), (RuleAction::Deny, None));
        assert!(
            refused.reason.contains("default is \"deny\""),
            "{refused:?}"
        );
        assert!(!rules.allows_everything());
        let open = compile(&[], DefaultAction::Allow);
        assert_eq!(
            decided(&open, "anything", "client:x"),
            (RuleAction::Allow, None)
        );
        assert!(open.allows_everything());
        assert!(!compile(&[], DefaultAction::Deny).allows_everything());
    }

    #[test]
    fn a_rule_without_a_reason_gets_one_naming_it() {
        let mut approve = rule(&["a"], RuleAction::Approve);
        approve.reason = None;
        let mut deny = rule(&["b"], RuleAction::Deny);
        deny.reason = None;
        let rules = compile(&[approve, deny], DefaultAction::Allow);
        let empty = JsonObject::new();
        assert_eq!(
            rules.decide("a", "c", &empty).reason,
            "[[policies]] entry 1 requires an approval"
        );
        assert_eq!(
            rules.decide("b", "c", &empty).reason,
            "[[policies]] entry 2 denies it"
        );
    }

    #[test]
    fn bad_rules_are_refused_naming_the_entry_and_the_field() {
        let error = |spec: RuleSpec| {
            ToolRules::compile(
                &[rule(&["ok"], RuleAction::Allow), spec],
                DefaultAction::Allow,
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            error(rule(&[], RuleAction::Deny)),
            "[[policies]] entry 2: `tools` is empty, so it matches no tool"
        );
        assert!(
            error(rule(&["file_[read"], RuleAction::Deny))
                .starts_with("[[policies]] entry 2: `tools`: tool pattern `file_[read`"),
        );
        assert!(
            error(callers(rule(&["x"], RuleAction::Deny), &["client:[a"]))
                .starts_with("[[policies]] entry 2: `callers`: tool pattern `client:[a`"),
        );
        assert!(
            error(when(rule(&["x"], RuleAction::Deny), "branch", "."))
                .starts_with("[[policies]] entry 2: `when`: JSON pointer `branch` does not start"),
        );
        assert!(
            error(when(rule(&["x"], RuleAction::Deny), "/branch", "(main")).starts_with(
                "[[policies]] entry 2: `when` for `/branch`: `matches` is not a valid regex"
            ),
        );
    }

    #[test]
    fn listings_are_marked_by_the_first_rule_that_could_apply() {
        let rules = compile(
            &[
                rule(&["open"], RuleAction::Allow),
                rule(&["gone", "open"], RuleAction::Deny),
                callers(rule(&["held"], RuleAction::Approve), &["client:*"]),
                when(rule(&["guarded"], RuleAction::Allow), "/mode", "^safe$"),
                rule(&["guarded"], RuleAction::Deny),
                when(rule(&["branchy"], RuleAction::Approve), "/branch", "^main$"),
            ],
            DefaultAction::Allow,
        );
        let mark = |tool: &str, caller: &str| {
            rules
                .mark(tool, caller)
                .map(|m| (m.action, m.reason, m.conditional))
        };
        // An unconditional allow earlier shadows a later deny.
        assert_eq!(mark("open", "client:http"), None);
        assert_eq!(
            mark("gone", "client:http"),
            Some((MarkedAction::Deny, "Deny gone,open".into(), false))
        );
        // Callers are known when listing: the principal the listing is for.
        assert_eq!(
            mark("held", "client:http"),
            Some((MarkedAction::Approve, "Approve held".into(), false))
        );
        assert_eq!(mark("held", "agent:x"), None);
        // A conditional allow may not apply: the deny behind it marks the tool, as conditional.
        assert_eq!(
            mark("guarded", "client:http"),
            Some((MarkedAction::Deny, "Deny guarded".into(), true))
        );
        assert_eq!(
            mark("branchy", "client:http"),
            Some((MarkedAction::Approve, "Approve branchy".into(), true))
        );
        assert_eq!(mark("unruled", "client:http"), None);

        let closed = compile(
            &[when(rule(&["t"], RuleAction::Allow), "/x", "y")],
            DefaultAction::Deny,
        );
        let default = closed.mark("t", "client:http").unwrap();
        assert_eq!(
            (default.action, default.conditional),
            (MarkedAction::Deny, true)
        );
        let other = closed.mark("u", "client:http").unwrap();
        assert_eq!(
            (other.action, other.conditional),
            (MarkedAction::Deny, false)
        );
    }
}
