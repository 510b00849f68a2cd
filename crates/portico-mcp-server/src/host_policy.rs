//! What MCP clients see of Portico's own policies (seed 002's "Host" policies, in front of every
//! tool): a refused call's failure envelope as the result's `structuredContent`, and a listed
//! tool's `_meta["portico/hostPolicy"]`. The pipeline decides and says so in types
//! ([`PolicyRefusal`], [`PolicyMark`]); the JSON is written here, at the edge.

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
    }
    result
}

/// Seed 002's failure envelope: `{"ok": false, "error": {"code", "tool", "reason"}}`, `code` being
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

/// A listed tool's definition with its policy mark, if it has one, in its `_meta`:
/// `{"action": "deny" | "approve", "reason": ..., "conditional": true}` (`conditional` only when the
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
}
