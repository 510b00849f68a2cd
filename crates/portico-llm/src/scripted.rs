//! A deterministic model for tests, demos and protocol test kits: rules pick a script by the last
//! user message, and each call plays the script's next turn.
//!
//! Where in a script a call is follows from the conversation alone (the number of assistant
//! messages after the last user message), so the driver keeps no state and any number of
//! conversations can run through one instance concurrently.

use std::ops::Range;
use std::time::Duration;

use portico_core::relay::BoxFuture;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{
    ArtifactPart, ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent,
    ToolCall, Usage, excerpt,
};
use crate::{JsonObject, LlmError};

/// Which conversations a rule applies to. Both fields absent matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleMatch {
    /// A regex searched for (not anchored) in the last user message's text.
    #[serde(default)]
    pub text: Option<String>,
    /// The last user message's `message_id` starts with this.
    #[serde(default)]
    pub message_id_prefix: Option<String>,
}

/// One rule: when it matches, its steps are the model's script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRule {
    #[serde(default)]
    pub when: RuleMatch,
    pub steps: Vec<Step>,
}

/// One step of a script. `status`, `artifact` and `wait_ms` happen within a turn; `call_tool`,
/// `reply`, `reply_message` and `fail` end it.
///
/// `reply` text, `call_tool` argument strings, status messages and artifact chunks may use
/// `{{message}}` (the last user message), `{{last_tool_result}}` (the newest tool result since
/// then, or empty) and `{{tools}}` (the offered tool names, comma-separated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Ask for a tool call. Consecutive `call_tool` steps form one turn of parallel calls.
    CallTool {
        name: String,
        #[serde(default)]
        arguments: JsonObject,
    },
    /// Give the final answer.
    Reply(String),
    /// Give the final answer as a plain message (emits [`StreamEvent::AnswerAsMessage`] first):
    /// an A2A send that waits for it is answered with a Message, not a Task.
    ReplyMessage(String),
    /// Report a status (emitted as [`StreamEvent::Status`]).
    Status {
        state: String,
        #[serde(default)]
        message: Option<String>,
    },
    /// Stream an artifact, one [`StreamEvent::Artifact`] per chunk: each of `chunks` is a text
    /// part, then each of `parts` (files, file URLs, data) is one more.
    Artifact {
        name: String,
        #[serde(default)]
        chunks: Vec<String>,
        #[serde(default)]
        parts: Vec<PartStep>,
    },
    /// Pause, as a slow model would (cancelled with the call).
    WaitMs(u64),
    /// Fail the call with [`LlmError::Script`].
    Fail(String),
}

/// A non-text part of an artifact step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PartStep {
    /// A file with inline content: `text`, as UTF-8 bytes.
    File {
        text: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        media_type: Option<String>,
    },
    /// A file by URL.
    FileUrl {
        url: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        media_type: Option<String>,
    },
    /// Structured data (a JSON object).
    Data(JsonObject),
}

impl PartStep {
    fn part(&self, context: &Context<'_>) -> ArtifactPart {
        match self {
            PartStep::File {
                text,
                name,
                media_type,
            } => ArtifactPart::File {
                bytes: context.render(text).into_bytes(),
                name: name.clone(),
                media_type: media_type.clone(),
            },
            PartStep::FileUrl {
                url,
                name,
                media_type,
            } => ArtifactPart::FileUrl {
                url: context.render(url),
                name: name.clone(),
                media_type: media_type.clone(),
            },
            PartStep::Data(data) => ArtifactPart::Data(data.clone()),
        }
    }
}

/// The deterministic driver.
#[derive(Debug, Clone)]
pub struct Scripted {
    rules: Vec<CompiledRule>,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    rule: ScriptRule,
    /// A bad pattern passed to [`Scripted::new`] is reported by the calls it would have judged.
    text: Option<Result<Regex, String>>,
    /// The steps of each turn.
    turns: Vec<Range<usize>>,
}

impl Scripted {
    /// Rules are tried in order; the first match wins. An invalid `text` regex is reported when a
    /// call reaches that rule; use [`Scripted::from_json`] to have it reported up front.
    pub fn new(rules: Vec<ScriptRule>) -> Self {
        let rules = rules
            .into_iter()
            .map(|rule| CompiledRule {
                text: rule
                    .when
                    .text
                    .as_deref()
                    .map(|p| Regex::new(p).map_err(|e| e.to_string())),
                turns: turns(&rule.steps),
                rule,
            })
            .collect();
        Scripted { rules }
    }

    /// Rules from configuration: the JSON form of an array of `{when, steps}` tables.
    pub fn from_json(value: &Value) -> Result<Self, LlmError> {
        let Value::Array(items) = value else {
            return Err(script(format!(
                "the script must be an array of rules ({{when, steps}} tables), not {}",
                kind(value)
            )));
        };
        let mut rules = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let rule: ScriptRule = serde_json::from_value(item.clone())
                .map_err(|e| script(format!("rule {}: {e}", i + 1)))?;
            rules.push(rule);
        }
        let scripted = Scripted::new(rules);
        for (i, rule) in scripted.rules.iter().enumerate() {
            if let Some(Err(e)) = &rule.text {
                return Err(invalid_regex(i, &rule.rule, e));
            }
        }
        Ok(scripted)
    }

    async fn run(&self, request: &ChatRequest, events: &EventSink) -> Result<ModelTurn, LlmError> {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| matches!(m, ChatMessage::User { .. }));
        let (message, message_id) = match last_user.map(|i| &request.messages[i]) {
            Some(ChatMessage::User { text, message_id }) => (text.as_str(), message_id.as_deref()),
            _ => ("", None),
        };
        let since_user = &request.messages[last_user.map_or(0, |i| i + 1)..];

        let rule = self.matching_rule(message, message_id)?;
        let context = Context {
            message,
            last_tool_result: since_user
                .iter()
                .rev()
                .find_map(|m| match m {
                    ChatMessage::Tool { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .unwrap_or(""),
            tools: request
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        };
        let input_tokens = estimate_tokens(request_chars(request));
        let position = since_user
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .count();
        let steps = match rule.turns.get(position) {
            Some(range) => &rule.rule.steps[range.clone()],
            None => &[][..],
        };

        let mut calls = Vec::new();
        for step in steps {
            match step {
                Step::Status { state, message } => events(StreamEvent::Status {
                    state: state.clone(),
                    message: message.as_deref().map(|m| context.render(m)),
                }),
                Step::Artifact {
                    name,
                    chunks,
                    parts,
                } => {
                    let mut all: Vec<ArtifactPart> = chunks
                        .iter()
                        .map(|chunk| ArtifactPart::Text(context.render(chunk)))
                        .chain(parts.iter().map(|part| part.part(&context)))
                        .collect();
                    if all.is_empty() {
                        all.push(ArtifactPart::Text(String::new()));
                    }
                    let count = all.len();
                    for (i, part) in all.into_iter().enumerate() {
                        events(StreamEvent::Artifact {
                            name: name.clone(),
                            part,
                            last_chunk: i + 1 == count,
                        });
                    }
                }
                Step::WaitMs(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                Step::CallTool { name, arguments } => calls.push((name, arguments)),
                Step::Reply(text) => {
                    let text = context.render(text);
                    return Ok(final_turn(text, input_tokens, events));
                }
                Step::ReplyMessage(text) => {
                    events(StreamEvent::AnswerAsMessage);
                    let text = context.render(text);
                    return Ok(final_turn(text, input_tokens, events));
                }
                Step::Fail(message) => return Err(script(context.render(message))),
            }
        }
        if calls.is_empty() {
            // Past the end of the script: answer with what the last tool said, so a script that
            // only calls tools still ends.
            return Ok(final_turn(
                context.last_tool_result.to_owned(),
                input_tokens,
                events,
            ));
        }

        // Numbered after every call already in the conversation, so ids never repeat in it.
        let earlier: usize = request
            .messages
            .iter()
            .map(|m| match m {
                ChatMessage::Assistant { tool_calls, .. } => tool_calls.len(),
                _ => 0,
            })
            .sum();
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("call_{}", earlier + i + 1),
                name: name.clone(),
                arguments: arguments
                    .iter()
                    .map(|(k, v)| (k.clone(), context.render_value(v)))
                    .collect(),
            })
            .collect();
        let output_chars = tool_calls
            .iter()
            .map(|c| {
                c.name.chars().count()
                    + Value::Object(c.arguments.clone())
                        .to_string()
                        .chars()
                        .count()
            })
            .sum();
        Ok(ModelTurn {
            text: String::new(),
            tool_calls,
            usage: Usage {
                input_tokens,
                output_tokens: estimate_tokens(output_chars),
            },
            stop_reason: Some("tool_use".to_owned()),
        })
    }

    fn matching_rule(
        &self,
        message: &str,
        message_id: Option<&str>,
    ) -> Result<&CompiledRule, LlmError> {
        for (i, rule) in self.rules.iter().enumerate() {
            if let Some(prefix) = &rule.rule.when.message_id_prefix
                && !message_id.is_some_and(|id| id.starts_with(prefix.as_str()))
            {
                continue;
            }
            match &rule.text {
                None => {}
                Some(Ok(regex)) if regex.is_match(message) => {}
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(invalid_regex(i, &rule.rule, e)),
            }
            return Ok(rule);
        }
        Err(script(format!(
            "no rule matches the last user message {:?}{}; add a rule whose `when` matches it, \
             or a last rule without `when` to catch everything",
            excerpt(message, 120),
            message_id
                .map(|id| format!(" (message_id {id:?})"))
                .unwrap_or_default()
        )))
    }
}

impl ModelDriver for Scripted {
    fn describe(&self) -> String {
        format!("scripted model ({} rules)", self.rules.len())
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Result<ModelTurn, LlmError>> {
        Box::pin(self.run(request, events))
    }
}

/// Splits steps into turns: each turn runs up to and including its `reply`, `fail` or run of
/// `call_tool` steps. Steps after the last of those form a final turn that ends the script.
fn turns(steps: &[Step]) -> Vec<Range<usize>> {
    let mut turns = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < steps.len() {
        match steps[i] {
            Step::CallTool { .. } => {
                while matches!(steps.get(i), Some(Step::CallTool { .. })) {
                    i += 1;
                }
            }
            Step::Reply(_) | Step::ReplyMessage(_) | Step::Fail(_) => i += 1,
            _ => {
                i += 1;
                continue;
            }
        }
        turns.push(start..i);
        start = i;
    }
    if start < steps.len() {
        turns.push(start..steps.len());
    }
    turns
}

fn final_turn(text: String, input_tokens: u64, events: &EventSink) -> ModelTurn {
    // In a few pieces, so streaming consumers see more than one delta.
    for piece in text.split_inclusive(' ') {
        events(StreamEvent::TextDelta(piece.to_owned()));
    }
    ModelTurn {
        usage: Usage {
            input_tokens,
            output_tokens: estimate_tokens(text.chars().count()),
        },
        text,
        tool_calls: Vec::new(),
        stop_reason: Some("end_turn".to_owned()),
    }
}

/// The values placeholders stand for.
struct Context<'a> {
    message: &'a str,
    last_tool_result: &'a str,
    tools: String,
}

impl Context<'_> {
    /// Replaces known `{{name}}` placeholders in one pass, so text substituted in (a user message
    /// containing `{{tools}}`, say) is never expanded again. Unknown ones are left as written.
    fn render(&self, template: &str) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                out.push_str(&rest[open..]);
                return out;
            };
            match after[..close].trim() {
                "message" => out.push_str(self.message),
                "last_tool_result" => out.push_str(self.last_tool_result),
                "tools" => out.push_str(&self.tools),
                _ => out.push_str(&rest[open..open + 2 + close + 2]),
            }
            rest = &after[close + 2..];
        }
        out.push_str(rest);
        out
    }

    fn render_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.render(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.render_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.render_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// A stand-in for token counts: a quarter of the characters, deterministic so tests can assert it.
fn estimate_tokens(chars: usize) -> u64 {
    (chars / 4) as u64
}

fn request_chars(request: &ChatRequest) -> usize {
    let system = request.system.as_deref().map_or(0, |s| s.chars().count());
    let messages: usize = request
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::User { text, .. }
            | ChatMessage::Assistant { text, .. }
            | ChatMessage::Tool { text, .. } => text.chars().count(),
        })
        .sum();
    system + messages
}

fn invalid_regex(index: usize, rule: &ScriptRule, error: &str) -> LlmError {
    script(format!(
        "rule {}: `when.text` {:?} is not a valid regex: {error}",
        index + 1,
        rule.when.text.as_deref().unwrap_or_default()
    ))
}

fn script(detail: String) -> LlmError {
    LlmError::Script { detail }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn turns_split_on_terminal_steps() {
        let steps: Vec<Step> = serde_json::from_value(json!([
            {"status": {"state": "working"}},
            {"call_tool": {"name": "a"}},
            {"call_tool": {"name": "b"}},
            {"wait_ms": 1},
            {"reply": "done"},
            {"artifact": {"name": "x", "chunks": []}},
        ]))
        .unwrap();
        assert_eq!(turns(&steps), vec![0..3, 3..5, 5..6]);
        assert_eq!(turns(&[]), Vec::<Range<usize>>::new());
    }

    #[test]
    fn templates_expand_once() {
        let ctx = Context {
            message: "say {{tools}}",
            last_tool_result: "42",
            tools: "a,b".into(),
        };
        assert_eq!(
            ctx.render("{{message}} / {{ last_tool_result }} / {{tools}} / {{other}} / {{"),
            "say {{tools}} / 42 / a,b / {{other}} / {{"
        );
    }

    #[test]
    fn config_errors_name_the_rule() {
        let err = Scripted::from_json(&json!({"steps": []})).unwrap_err();
        assert!(err.to_string().contains("array of rules"), "{err}");
        let err =
            Scripted::from_json(&json!([{"steps": []}, {"steps": [{"shout": "x"}]}])).unwrap_err();
        assert!(err.to_string().contains("rule 2"), "{err}");
        let err = Scripted::from_json(&json!([{"when": {"text": "("}, "steps": []}])).unwrap_err();
        assert!(
            err.to_string().contains("rule 1: `when.text` \"(\""),
            "{err}"
        );
        let err = Scripted::from_json(&json!([{"when": {"txt": "a"}, "steps": []}])).unwrap_err();
        assert!(err.to_string().contains("txt"), "{err}");
    }
}
