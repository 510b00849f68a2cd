//! What MCP clients see of Portico's own policies ("Host" policies, in front of every
//! tool): a refused call's failure envelope as the result's `structuredContent` (or a host
//! policy's own failure value), a listed tool's `_meta["portico/hostPolicy"]`, and its
//! `outputSchema` widened to admit the failure branch. The pipeline decides and says so in types
//! ([`PolicyRefusal`], [`PolicyMark`], declared failure schemas); the JSON is written here, at the
//! edge.

use std::sync::Arc;

use portico_core::{JsonObject, ToolResult};
use portico_pipeline::{CallOutcome, PipelineError, PolicyMark, PolicyRefusal, approval_path};
use serde_json::{Value, json};

/// The `_meta` key of a listed tool that a policy denies or holds for approval.
pub const HOST_POLICY_META: &str = "portico/hostPolicy";

const META: &str = "_meta";

/// What a door answers for a call that went through the pipeline: the pipeline's result, with a
/// policy refusal's envelope as its structured content.
pub(crate) fn served(outcome: CallOutcome) -> ToolResult {
    let mut result = outcome.result;
    if let Some(refusal) = outcome.error.as_ref().and_then(PipelineError::refusal) {
        result.structured_content = Some(envelope(refusal));
    } else if let Some(failure) = outcome
        .error
        .as_ref()
        .and_then(PipelineError::policy_failure)
    {
        result.structured_content = Some(failure.clone());
    }
    result
}

/// The failure envelope: `{"ok": false, "error": {"code", "tool", "reason"}}`, `code` being
/// `policy_denied` or `approval_required`. A held call's envelope also names its approval request:
/// `approvalRequestId` and `approvalPath` (where the daemon shows it), when one was made.
pub fn envelope(refusal: PolicyRefusal<'_>) -> Value {
    let mut error = JsonObject::new();
    error.insert("code".into(), refusal.code.as_str().into());
    if let Some(id) = refusal.approval_request_id {
        error.insert("approvalRequestId".into(), id.into());
        error.insert("approvalPath".into(), approval_path(id).into());
    }
    error.insert("tool".into(), refusal.tool.into());
    error.insert("reason".into(), refusal.reason.into());
    json!({"ok": false, "error": error})
}

/// A listed tool as a client sees it: its definition with the failure branch and the mark.
pub(crate) fn advertised(listed: portico_pipeline::ListedTool) -> JsonObject {
    let definition = with_failure_branch(
        (*listed.entry.definition).clone(),
        listed.mark.as_ref(),
        &listed.failure_schemas,
    );
    marked(definition, listed.mark.as_ref())
}

/// The schema of every refusal envelope [`envelope`] writes: what a tool's advertised output
/// admits besides its own when a policy may stop its calls. Extra keys are allowed, in the
/// envelope and its `error`, so an approval's id and path fit it too.
pub fn envelope_schema() -> Value {
    json!({
        "type": "object",
        "required": ["ok", "error"],
        "properties": {
            "ok": {"const": false},
            "error": {
                "type": "object",
                "required": ["code", "tool", "reason"],
                "properties": {
                    "code": {"enum": ["policy_denied", "approval_required", "policy_error"]},
                    "tool": {"type": "string"},
                    "reason": {"type": "string"},
                },
            },
        },
    })
}

const OUTPUT_SCHEMA: &str = "outputSchema";

/// A listed definition whose `outputSchema` admits the failure branch as well, when a policy may
/// stop its calls (`mark`) or a host policy declares failures for it: `{"type": "object",
/// "anyOf": [its own, the refusal envelope, each declared failure]}` (MCP wants an object root).
/// Each branch's local references (`#`, `#/$defs/...`, any `#/...` pointer) are rewritten to
/// point into the branch where it now sits (`#/anyOf/N/...`), and its `$schema` and `$id` are
/// dropped, so no branch's references land in another's. A tool without an `outputSchema` is
/// left so. Only the listing changes: the pipeline still validates the tool's own results
/// against its own schema.
pub(crate) fn with_failure_branch(
    mut definition: JsonObject,
    mark: Option<&PolicyMark>,
    declared: &[Arc<Value>],
) -> JsonObject {
    if mark.is_none() && declared.is_empty() {
        return definition;
    }
    let Some(own) = definition.get(OUTPUT_SCHEMA) else {
        return definition;
    };
    let envelope = envelope_schema();
    let schemas = std::iter::once(own)
        .chain(std::iter::once(&envelope))
        .chain(declared.iter().map(|schema| &**schema));
    let branches = schemas
        .enumerate()
        .map(|(n, schema)| branch(schema, &format!("#/anyOf/{n}")))
        .collect();
    let mut widened = JsonObject::new();
    widened.insert("type".into(), "object".into());
    widened.insert("anyOf".into(), Value::Array(branches));
    definition.insert(OUTPUT_SCHEMA.into(), Value::Object(widened));
    definition
}

/// `schema` as the branch at `base`: without the keys only a document root may carry, and its
/// local references pointed at where it now is.
fn branch(schema: &Value, base: &str) -> Value {
    let mut schema = schema.clone();
    if let Value::Object(object) = &mut schema {
        object.remove("$schema");
        object.remove("$id");
    }
    rebase_refs(&mut schema, base);
    schema
}

fn rebase_refs(value: &mut Value, base: &str) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object.iter_mut() {
                match inner {
                    Value::String(target) if key == "$ref" => {
                        if target == "#" {
                            *target = base.to_string();
                        } else if let Some(pointer) = target.strip_prefix("#/") {
                            *target = format!("{base}/{pointer}");
                        }
                    }
                    other => rebase_refs(other, base),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase_refs(item, base)),
        _ => {}
    }
}

/// A listed tool's definition with its policy mark, if it has one, in its `_meta`:
/// `{"action": "deny" | "approve" | "host", "reason": ..., "conditional": true}` (`conditional` only when the
/// call's arguments decide). The definition's own `_meta` keys are kept.
pub(crate) fn marked(mut definition: JsonObject, mark: Option<&PolicyMark>) -> JsonObject {
    let Some(mark) = mark else {
        return definition;
    };
    let mut annotation = JsonObject::new();
    annotation.insert("action".into(), mark.action.as_str().into());
    annotation.insert("reason".into(), mark.reason.clone().into());
    if mark.conditional {
        annotation.insert("conditional".into(), true.into());
    }
    let annotation = Value::Object(annotation);
    match definition.get_mut(META) {
        Some(Value::Object(meta)) => {
            meta.insert(HOST_POLICY_META.into(), annotation);
        }
        // Absent, or not an object (which MCP does not allow): ours is the only key.
        _ => {
            definition.insert(
                META.into(),
                Value::Object(JsonObject::from_iter([(
                    HOST_POLICY_META.to_string(),
                    annotation,
                )])),
            );
        }
    }
    definition
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_pipeline::{MarkedAction, Outcome, RefusalCode};

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    fn outcome(error: PipelineError) -> CallOutcome {
        CallOutcome {
            result: ToolResult::error(error.to_string()),
            outcome: error.outcome(),
            error: Some(error),
            untrusted: false,
            truncated: false,
        }
    }

    #[test]
    fn a_refused_call_carries_the_envelope_beside_its_message() {
        let denied = served(outcome(PipelineError::Refused {
            tool: "file_write".into(),
            reason: "read-only".into(),
        }));
        assert!(denied.is_error());
        assert_eq!(
            denied.first_text(),
            Some("call to `file_write` refused: read-only")
        );
        assert_eq!(
            serde_json::to_string(&denied.structured_content).unwrap(),
            r#"{"ok":false,"error":{"code":"policy_denied","tool":"file_write","reason":"read-only"}}"#
        );
        let held = served(outcome(PipelineError::ApprovalRequired {
            tool: "shell_exec".into(),
            reason: "owners approve".into(),
            request_id: None,
        }));
        assert_eq!(
            serde_json::to_string(&held.structured_content).unwrap(),
            r#"{"ok":false,"error":{"code":"approval_required","tool":"shell_exec","reason":"owners approve"}}"#
        );
        let requested = served(outcome(PipelineError::ApprovalRequired {
            tool: "shell_exec".into(),
            reason: "owners approve".into(),
            request_id: Some("apr_1".into()),
        }));
        assert_eq!(
            serde_json::to_string(&requested.structured_content).unwrap(),
            r#"{"ok":false,"error":{"code":"approval_required","approvalRequestId":"apr_1","approvalPath":"/approvals/apr_1","tool":"shell_exec","reason":"owners approve"}}"#
        );
        assert_eq!(
            requested.first_text(),
            Some(
                "call to `shell_exec` requires approval and was not run: owners approve; approve it \
                 with `portico approvals approve apr_1` or open /approvals/apr_1 on the daemon, then \
                 retry the same call"
            )
        );
        assert_eq!(
            envelope(PolicyRefusal {
                code: RefusalCode::PolicyDenied,
                tool: "t",
                reason: "r",
                approval_request_id: None,
            })["error"]["code"],
            "policy_denied"
        );
    }

    #[test]
    fn other_failures_and_answers_pass_unchanged() {
        let timeout = outcome(PipelineError::Timeout {
            tool: "slow".into(),
            after: std::time::Duration::from_secs(1),
        });
        assert_eq!(timeout.outcome, Outcome::Timeout);
        assert_eq!(served(timeout.clone()), timeout.result);
        let answer = CallOutcome {
            result: ToolResult {
                structured_content: Some(json!({"ok": true})),
                ..ToolResult::text("fine")
            },
            outcome: Outcome::Ok,
            error: None,
            untrusted: false,
            truncated: false,
        };
        assert_eq!(served(answer.clone()), answer.result);
    }

    #[test]
    fn a_mark_joins_the_definitions_own_meta() {
        let mark = PolicyMark {
            action: MarkedAction::Approve,
            reason: "owners approve".into(),
            conditional: false,
        };
        let definition = object(json!({"name": "t", "_meta": {"vendor/x": 1}}));
        assert_eq!(
            Value::Object(marked(definition.clone(), Some(&mark))),
            json!({"name": "t", "_meta": {
                "vendor/x": 1,
                "portico/hostPolicy": {"action": "approve", "reason": "owners approve"},
            }})
        );
        assert_eq!(
            marked(definition, None),
            object(json!({"name": "t", "_meta": {"vendor/x": 1}}))
        );
        let conditional = PolicyMark {
            action: MarkedAction::Deny,
            conditional: true,
            ..mark
        };
        assert_eq!(
            Value::Object(marked(object(json!({"name": "t"})), Some(&conditional))),
            json!({"name": "t", "_meta": {
                "portico/hostPolicy": {"action": "deny", "reason": "owners approve", "conditional": true},
            }})
        );
    }

    #[test]
    fn a_marked_tools_output_schema_admits_the_envelope_and_keeps_its_own_references() {
        let mark = PolicyMark {
            action: MarkedAction::Deny,
            reason: "no".into(),
            conditional: false,
        };
        let own = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://example.com/out",
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}, "again": {"$ref": "#"}},
            "$defs": {"Item": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Item"}}}},
        });
        let definition = object(json!({"name": "t", "outputSchema": own}));
        let widened = with_failure_branch(definition, Some(&mark), &[]);
        assert_eq!(
            widened["outputSchema"],
            json!({
                "type": "object",
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"item": {"$ref": "#/anyOf/0/$defs/Item"}, "again": {"$ref": "#/anyOf/0"}},
                        "$defs": {"Item": {"type": "object", "properties": {"next": {"$ref": "#/anyOf/0/$defs/Item"}}}},
                    },
                    envelope_schema(),
                ],
            })
        );
        // The references still resolve, to the same subschemas.
        let validator = jsonschema::validator_for(&widened["outputSchema"]).unwrap();
        assert!(validator.is_valid(&json!({"item": {"next": {}}, "again": {"item": {}}})));
        assert!(!validator.is_valid(&json!({"item": {"next": 3}})));
        assert!(validator.is_valid(
            &json!({"ok": false, "error": {"code": "policy_denied", "tool": "t", "reason": "no"}})
        ));

        // A declared failure's draft-07 `definitions` move with it.
        let draft7 = json!({"definitions": {"N": {"type": "integer"}}, "properties": {"n": {"$ref": "#/definitions/N"}}});
        let declared = [Arc::new(draft7)];
        let widened = with_failure_branch(
            object(json!({"name": "t", "outputSchema": {"type": "object"}})),
            None,
            &declared,
        );
        assert_eq!(
            widened["outputSchema"]["anyOf"][2],
            json!({"definitions": {"N": {"type": "integer"}}, "properties": {"n": {"$ref": "#/anyOf/2/definitions/N"}}})
        );
    }

    #[test]
    fn tools_without_an_output_schema_or_a_policy_are_listed_unchanged() {
        let mark = PolicyMark {
            action: MarkedAction::Approve,
            reason: "r".into(),
            conditional: false,
        };
        let bare = object(json!({"name": "t", "inputSchema": {"type": "object"}}));
        assert_eq!(with_failure_branch(bare.clone(), Some(&mark), &[]), bare);
        let unguarded = object(json!({"name": "t", "outputSchema": {"type": "object"}}));
        assert_eq!(with_failure_branch(unguarded.clone(), None, &[]), unguarded);
    }

    #[test]
    fn a_host_policys_failure_is_the_structured_content_and_its_json_the_text() {
        let failure = json!({"ok": false, "error": {"code": "mine"}});
        let error = PipelineError::PolicyFailed {
            tool: "t".into(),
            failure: failure.clone(),
        };
        let result = served(outcome(error));
        assert_eq!(result.structured_content, Some(failure));
        assert_eq!(
            result.first_text(),
            Some(r#"{"ok":false,"error":{"code":"mine"}}"#)
        );
        let error = PipelineError::PolicyError {
            tool: "t".into(),
            problem: "panicked".into(),
        };
        assert_eq!(
            serde_json::to_string(&served(outcome(error)).structured_content).unwrap(),
            r#"{"ok":false,"error":{"code":"policy_error","tool":"t","reason":"panicked"}}"#
        );
    }
}
