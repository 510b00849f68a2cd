//! A2A 1.0 objects in their ProtoJSON form (`a2a-1.0.proto`): camelCase JSON names, `TASK_STATE_*`
//! and `ROLE_*` enum names, `Part` as a oneof of `text`, `raw`, `url`, `data`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{TaskState, lenient_int};

/// A `google.protobuf.Struct`.
pub type Struct = Map<String, Value>;

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Role {
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER", alias = "user")]
    User,
    #[serde(rename = "ROLE_AGENT", alias = "agent")]
    Agent,
}

/// What a part holds: one of the proto's `content` oneof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PartContent {
    Text(String),
    /// File bytes, base64 as ProtoJSON writes `bytes`.
    Raw(String),
    /// A file by URL.
    Url(String),
    Data(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(flatten)]
    pub content: PartContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "media_type")]
    pub media_type: Option<String>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part {
            content: PartContent::Text(text.into()),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "task_id")]
    pub task_id: Option<String>,
    /// Required by the proto; a message without one reads as unspecified (the server takes it as
    /// the user's, as it always has).
    #[serde(default)]
    pub role: Role,
    /// Read leniently: a 0.3 part (`kind`-tagged) in a 1.0 message is understood.
    #[serde(deserialize_with = "super::v03::any_parts")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "reference_task_ids"
    )]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// The text an agent reads of it: text parts as they are, data as JSON, files by name.
    pub fn text(&self) -> String {
        let pieces: Vec<String> = self
            .parts
            .iter()
            .map(|part| match &part.content {
                PartContent::Text(text) => text.clone(),
                PartContent::Data(data) => data.to_string(),
                PartContent::Url(url) => {
                    format!("[attached: {}]", part.filename.as_deref().unwrap_or(url))
                }
                PartContent::Raw(_) => {
                    format!(
                        "[attached: {}]",
                        part.filename.as_deref().unwrap_or("a file")
                    )
                }
            })
            .collect();
        pieces.join("\n")
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    #[serde(default)]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default, alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// One event of a stream (`SendStreamingMessage`, `SubscribeToTask`) and a webhook's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent),
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// The state the event leaves its task in, if it says.
    pub fn state(&self) -> Option<TaskState> {
        match self {
            StreamResponse::Task(task) => Some(task.status.state),
            StreamResponse::StatusUpdate(update) => Some(update.status.state),
            StreamResponse::Message(_) | StreamResponse::ArtifactUpdate(_) => None,
        }
    }
}

/// What `SendMessage` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "task_id")]
    pub task_id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "accepted_output_modes"
    )]
    pub accepted_output_modes: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "task_push_notification_config"
    )]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "history_length",
        with = "lenient_int"
    )]
    pub history_length: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        alias = "return_immediately"
    )]
    pub return_immediately: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "history_length",
        with = "lenient_int"
    )]
    pub history_length: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::optional_state"
    )]
    pub status: Option<TaskState>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "page_size",
        with = "lenient_int"
    )]
    pub page_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "page_token")]
    pub page_token: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "history_length",
        with = "lenient_int"
    )]
    pub history_length: Option<u32>,
    /// RFC 3339.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "status_timestamp_after"
    )]
    pub status_timestamp_after: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "include_artifacts"
    )]
    pub include_artifacts: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: u32,
    pub total_size: u32,
}

/// `CancelTask` and `SubscribeToTask`: a task by id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// `GetTaskPushNotificationConfig` and `DeleteTaskPushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "task_id")]
    pub task_id: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Earlier Portico servers read the task as `id` here too; that is kept (unambiguous: the
    /// request has no other id).
    #[serde(alias = "task_id", alias = "id")]
    pub task_id: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "page_size",
        with = "lenient_int"
    )]
    pub page_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "page_token")]
    pub page_token: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    pub next_page_token: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetExtendedAgentCardRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// What an agent tells clients about itself (proto `AgentCard`), fields in the proto's order. The
/// security and signature fields are left out: Portico's cards use none of them yet, and a card
/// read into this type drops them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    /// The first entry is the preferred one.
    #[serde(alias = "supported_interfaces")]
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// The agent's version, not the protocol's.
    pub version: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "documentation_url"
    )]
    pub documentation_url: Option<String>,
    pub capabilities: AgentCapabilities,
    #[serde(alias = "default_input_modes")]
    pub default_input_modes: Vec<String>,
    #[serde(alias = "default_output_modes")]
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "icon_url")]
    pub icon_url: Option<String>,
}

/// Where and how to reach the agent: a URL, a binding (`JSONRPC`, `HTTP+JSON`, `GRPC`, or a
/// custom one) and the protocol version spoken there (`1.0`, `0.3`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    #[serde(alias = "protocol_binding")]
    pub protocol_binding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "protocol_version")]
    pub protocol_version: String,
}

/// Who serves the agent; the same object in 0.3. `organization` first, as Portico's cards have
/// always written it (the proto numbers `url` first; JSON readers do not care).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "push_notifications"
    )]
    pub push_notifications: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "extended_agent_card"
    )]
    pub extended_agent_card: Option<bool>,
}

/// A protocol extension the agent supports; the same object in 0.3.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Struct>,
}

/// Something the agent is good at; the same object in 0.3 (whose `security` Portico does not use,
/// like 1.0's `securityRequirements`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    /// Written even when empty, as Portico's cards always have.
    #[serde(default)]
    pub examples: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "input_modes")]
    pub input_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "output_modes")]
    pub output_modes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parts_are_a_oneof_with_name_and_media_type() {
        let parts: Vec<Part> = serde_json::from_value(json!([
            {"text": "hi"},
            {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
            {"url": "https://x/y.pdf", "media_type": "application/pdf"},
            {"data": {"a": 1}, "metadata": {"k": "v"}},
        ]))
        .unwrap();
        assert_eq!(parts[0], Part::text("hi"));
        assert_eq!(parts[1].content, PartContent::Raw("aGk=".into()));
        assert_eq!(parts[1].filename.as_deref(), Some("hi.txt"));
        assert_eq!(parts[2].media_type.as_deref(), Some("application/pdf"));
        assert_eq!(
            serde_json::to_value(&parts).unwrap(),
            json!([
                {"text": "hi"},
                {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
                {"url": "https://x/y.pdf", "mediaType": "application/pdf"},
                {"data": {"a": 1}, "metadata": {"k": "v"}},
            ])
        );
        assert!(serde_json::from_value::<Part>(json!({"filename": "x"})).is_err());
    }

    #[test]
    fn requests_take_json_and_proto_field_names_and_integers_as_text() {
        let by_proto_names: PushConfigRequest =
            serde_json::from_value(json!({"task_id": "t", "id": "c"})).unwrap();
        let by_json_names: PushConfigRequest =
            serde_json::from_value(json!({"taskId": "t", "id": "c"})).unwrap();
        assert_eq!(by_proto_names, by_json_names);
        let create: TaskPushNotificationConfig = serde_json::from_value(
            json!({"task_id": "t", "url": "https://hook", "authentication": {"scheme": "Bearer", "credentials": "k"}}),
        )
        .unwrap();
        assert_eq!(create.task_id.as_deref(), Some("t"));
        let list: ListTasksRequest =
            serde_json::from_value(json!({"pageSize": "5", "status": "TASK_STATE_WORKING"}))
                .unwrap();
        assert_eq!(list.page_size, Some(5));
        assert_eq!(list.status, Some(TaskState::Working));
        assert!(serde_json::from_value::<ListTasksRequest>(json!({"pageSize": -1})).is_err());
        let unfiltered: ListTasksRequest = serde_json::from_value(json!({"status": ""})).unwrap();
        assert_eq!(unfiltered.status, None);
        let error = serde_json::from_value::<ListTasksRequest>(json!({"status": "sleeping"}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`sleeping` is not an A2A task state"),
            "{error}"
        );
        let message: Message = serde_json::from_value(
            json!({"message_id": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}),
        )
        .unwrap();
        assert_eq!(message.message_id, "m");
        assert_eq!(message.text(), "x");
        // 0.3 parts in a 1.0 message, and no role, are read as the server always read them.
        let mixed: Message = serde_json::from_value(json!({"messageId": "m",
            "parts": [{"kind": "file", "file": {"uri": "https://x/y.pdf", "name": "y.pdf"}}]}))
        .unwrap();
        assert_eq!(mixed.role, Role::Unspecified);
        assert_eq!(
            mixed.parts[0].content,
            PartContent::Url("https://x/y.pdf".into())
        );
        assert_eq!(mixed.text(), "[attached: y.pdf]");
    }

    #[test]
    fn stream_responses_are_keyed_by_their_payload() {
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            metadata: None,
        });
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})
        );
        assert_eq!(
            serde_json::from_value::<StreamResponse>(json).unwrap(),
            event
        );
        assert_eq!(event.state(), Some(TaskState::Completed));
    }

    #[test]
    fn a_card_reads_in_json_or_proto_names_and_writes_json_names() {
        let card: AgentCard = serde_json::from_value(json!({
            "name": "a", "description": "d", "version": "1",
            "supported_interfaces": [{"url": "https://x", "protocol_binding": "GRPC",
                "protocol_version": "1.0", "tenant": "t"}],
            "capabilities": {"push_notifications": true},
            "default_input_modes": ["text/plain"], "defaultOutputModes": [],
            "skills": [{"id": "s", "name": "S", "description": "sd", "tags": [],
                "input_modes": ["image/png"]}],
            "securitySchemes": {"bearer": {}},
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_string(&card).unwrap(),
            serde_json::to_string(&json!({
                "name": "a", "description": "d",
                "supportedInterfaces": [{"url": "https://x", "protocolBinding": "GRPC",
                    "tenant": "t", "protocolVersion": "1.0"}],
                "version": "1", "capabilities": {"pushNotifications": true},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": [],
                "skills": [{"id": "s", "name": "S", "description": "sd", "tags": [],
                    "examples": [], "inputModes": ["image/png"]}],
            }))
            .unwrap()
        );
    }
}
