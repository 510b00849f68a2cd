//! A2A 0.3 objects in their JSON-RPC form (`a2a-0.3.0.schema.json`): `kind`-tagged objects,
//! lower-case kebab states, `user`/`agent` roles, parts `{kind: text|file|data}`; and the `From`
//! conversions to and from [`super::v1`], the form Portico works in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::v1::{self, Struct};
use super::{TaskState, lenient_int};

/// A [`TaskState`] by its 0.3 name (`input-required`); the 1.0 name is read too.
mod state_v03 {
    use serde::de::{Deserializer, Error};
    use serde::{Deserialize, Serializer};

    use super::TaskState;

    pub fn serialize<S: Serializer>(state: &TaskState, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(state.v03_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<TaskState, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == "unknown" {
            return Ok(TaskState::Unspecified);
        }
        TaskState::from_any_name(&name)
            .ok_or_else(|| D::Error::custom(format!("`{name}` is not an A2A task state")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    #[serde(alias = "ROLE_USER", alias = "ROLE_UNSPECIFIED")]
    User,
    #[serde(alias = "ROLE_AGENT")]
    Agent,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Struct>,
    },
    File {
        file: FileContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Struct>,
    },
    Data {
        data: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Struct>,
    },
}

/// The early draft's parts, tagged `type` instead of `kind`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum DraftPart {
    Text {
        text: String,
        #[serde(default)]
        metadata: Option<Struct>,
    },
    File {
        file: FileContent,
        #[serde(default)]
        metadata: Option<Struct>,
    },
    Data {
        data: Value,
        #[serde(default)]
        metadata: Option<Struct>,
    },
}

/// A part as a 0.3 client may send it: tagged `kind` (0.3), `type` (the early draft), or in the 1.0 form.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyPart {
    V03(Part),
    Draft(DraftPart),
    V1(v1::Part),
}

pub(crate) fn any_parts<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<v1::Part>, D::Error> {
    let parts = Vec::<AnyPart>::deserialize(deserializer)?;
    Ok(parts
        .into_iter()
        .map(|part| match part {
            AnyPart::V03(part) => part.into(),
            AnyPart::Draft(DraftPart::Text { text, metadata }) => {
                Part::Text { text, metadata }.into()
            }
            AnyPart::Draft(DraftPart::File { file, metadata }) => {
                Part::File { file, metadata }.into()
            }
            AnyPart::Draft(DraftPart::Data { data, metadata }) => {
                Part::Data { data, metadata }.into()
            }
            AnyPart::V1(part) => part,
        })
        .collect())
}

/// A message as a 0.3 client sends it, read straight into the 1.0 form (its parts in any form).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingMessage {
    #[serde(default, alias = "message_id")]
    pub message_id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, alias = "task_id")]
    pub task_id: Option<String>,
    #[serde(default)]
    pub role: Role,
    #[serde(deserialize_with = "any_parts")]
    pub parts: Vec<v1::Part>,
    #[serde(default)]
    pub metadata: Option<Struct>,
    #[serde(default)]
    pub extensions: Vec<String>,
    #[serde(default, alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

impl From<IncomingMessage> for v1::Message {
    fn from(m: IncomingMessage) -> v1::Message {
        v1::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts,
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "message", rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(with = "state_v03")]
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "task", rename_all = "camelCase")]
pub struct Task {
    pub id: String,
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
#[serde(tag = "kind", rename = "status-update", rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// The stream's last event: the task finished or waits for the client.
    #[serde(rename = "final")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "artifact-update", rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// A streamed event or a send's result: each kind-tagged object stands alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamEvent {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationAuthenticationInfo {
    #[serde(default)]
    pub schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushNotificationAuthenticationInfo>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(alias = "id")]
    pub task_id: String,
    pub push_notification_config: PushNotificationConfig,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration {
    #[serde(default)]
    pub accepted_output_modes: Vec<String>,
    #[serde(default)]
    pub blocking: Option<bool>,
    #[serde(default, with = "lenient_int")]
    pub history_length: Option<u32>,
    #[serde(default)]
    pub push_notification_config: Option<PushNotificationConfig>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams {
    pub message: IncomingMessage,
    #[serde(default)]
    pub configuration: Option<MessageSendConfiguration>,
    #[serde(default)]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams {
    pub id: String,
    #[serde(default, with = "lenient_int")]
    pub history_length: Option<u32>,
    #[serde(default)]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    pub id: String,
    #[serde(default)]
    pub metadata: Option<Struct>,
}

/// `tasks/pushNotificationConfig/get` (the config id is optional: without it, the task's first)
/// and `…/delete` (where it is required; the handler says so).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigParams {
    pub id: String,
    #[serde(default)]
    pub push_notification_config_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<Struct>,
}

/// A page of tasks (`tasks/list`, which 0.3 lacks; offered in 1.0's shape with 0.3 tasks).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: u32,
    pub total_size: u32,
}

/// The 0.3 agent card: one main `url` with its `preferredTransport`, the others in
/// `additionalInterfaces`, and the protocol version at the top. Skills, provider and extensions
/// are the 1.0 objects, which 0.3 shares. Security and signature fields are left out, as in
/// [`v1::AgentCard`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub protocol_version: String,
    pub name: String,
    pub description: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_interfaces: Vec<AgentInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<v1::AgentProvider>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    pub capabilities: AgentCapabilities,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<v1::AgentSkill>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_authenticated_extended_card: Option<bool>,
}

/// A URL and the transport spoken there (`JSONRPC`, `HTTP+JSON`, `GRPC`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentInterface {
    pub url: String,
    pub transport: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_history: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<v1::AgentExtension>,
}

// ---------------------------------------------------------------------------------------------------
// 0.3 → 1.0

impl From<Role> for v1::Role {
    fn from(role: Role) -> v1::Role {
        match role {
            Role::User => v1::Role::User,
            Role::Agent => v1::Role::Agent,
        }
    }
}

impl From<Part> for v1::Part {
    fn from(part: Part) -> v1::Part {
        match part {
            Part::Text { text, metadata } => v1::Part {
                metadata,
                ..v1::Part::text(text)
            },
            Part::Data { data, metadata } => v1::Part {
                content: v1::PartContent::Data(data),
                metadata,
                filename: None,
                media_type: None,
            },
            Part::File { file, metadata } => v1::Part {
                content: match (file.bytes, file.uri) {
                    (Some(bytes), _) => v1::PartContent::Raw(bytes),
                    (None, Some(uri)) => v1::PartContent::Url(uri),
                    (None, None) => v1::PartContent::Raw(String::new()),
                },
                metadata,
                filename: file.name,
                media_type: file.mime_type,
            },
        }
    }
}

impl From<Message> for v1::Message {
    fn from(m: Message) -> v1::Message {
        v1::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

impl From<PushNotificationConfig> for v1::TaskPushNotificationConfig {
    fn from(config: PushNotificationConfig) -> v1::TaskPushNotificationConfig {
        v1::TaskPushNotificationConfig {
            tenant: None,
            id: config.id,
            task_id: None,
            url: config.url,
            token: config.token,
            authentication: config.authentication.map(|auth| v1::AuthenticationInfo {
                scheme: auth
                    .schemes
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| "Bearer".into()),
                credentials: auth.credentials,
            }),
        }
    }
}

impl From<TaskPushNotificationConfig> for v1::TaskPushNotificationConfig {
    fn from(config: TaskPushNotificationConfig) -> v1::TaskPushNotificationConfig {
        v1::TaskPushNotificationConfig {
            task_id: Some(config.task_id),
            ..config.push_notification_config.into()
        }
    }
}

impl From<MessageSendParams> for v1::SendMessageRequest {
    fn from(params: MessageSendParams) -> v1::SendMessageRequest {
        v1::SendMessageRequest {
            tenant: None,
            message: params.message.into(),
            configuration: params.configuration.map(|c| v1::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes,
                task_push_notification_config: c.push_notification_config.map(Into::into),
                history_length: c.history_length,
                return_immediately: c.blocking == Some(false),
            }),
            metadata: params.metadata,
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// 1.0 → 0.3

impl From<v1::Role> for Role {
    fn from(role: v1::Role) -> Role {
        match role {
            v1::Role::Agent => Role::Agent,
            v1::Role::User | v1::Role::Unspecified => Role::User,
        }
    }
}

impl From<v1::Part> for Part {
    fn from(part: v1::Part) -> Part {
        let metadata = part.metadata;
        let file = |bytes, uri| FileContent {
            bytes,
            uri,
            mime_type: part.media_type.clone(),
            name: part.filename.clone(),
        };
        match part.content {
            v1::PartContent::Text(text) => Part::Text { text, metadata },
            v1::PartContent::Data(data) => Part::Data { data, metadata },
            v1::PartContent::Raw(bytes) => Part::File {
                file: file(Some(bytes), None),
                metadata,
            },
            v1::PartContent::Url(uri) => Part::File {
                file: file(None, Some(uri)),
                metadata,
            },
        }
    }
}

impl From<v1::Message> for Message {
    fn from(m: v1::Message) -> Message {
        Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

impl From<v1::TaskStatus> for TaskStatus {
    fn from(status: v1::TaskStatus) -> TaskStatus {
        TaskStatus {
            state: status.state,
            message: status.message.map(Into::into),
            timestamp: status.timestamp,
        }
    }
}

impl From<v1::Artifact> for Artifact {
    fn from(a: v1::Artifact) -> Artifact {
        Artifact {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: a.parts.into_iter().map(Into::into).collect(),
            metadata: a.metadata,
            extensions: a.extensions,
        }
    }
}

impl From<v1::Task> for Task {
    fn from(t: v1::Task) -> Task {
        Task {
            id: t.id,
            context_id: t.context_id,
            status: t.status.into(),
            artifacts: t.artifacts.into_iter().map(Into::into).collect(),
            history: t.history.into_iter().map(Into::into).collect(),
            metadata: t.metadata,
        }
    }
}

impl From<v1::StreamResponse> for StreamEvent {
    fn from(event: v1::StreamResponse) -> StreamEvent {
        match event {
            v1::StreamResponse::Task(task) => StreamEvent::Task(task.into()),
            v1::StreamResponse::Message(message) => StreamEvent::Message(message.into()),
            v1::StreamResponse::StatusUpdate(update) => {
                StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: update.task_id,
                    context_id: update.context_id,
                    is_final: update.status.state.is_settled(),
                    status: update.status.into(),
                    metadata: update.metadata,
                })
            }
            v1::StreamResponse::ArtifactUpdate(update) => {
                StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: update.task_id,
                    context_id: update.context_id,
                    artifact: update.artifact.into(),
                    append: update.append,
                    last_chunk: update.last_chunk,
                    metadata: update.metadata,
                })
            }
        }
    }
}

impl From<v1::SendMessageResponse> for StreamEvent {
    fn from(response: v1::SendMessageResponse) -> StreamEvent {
        match response {
            v1::SendMessageResponse::Task(task) => StreamEvent::Task(task.into()),
            v1::SendMessageResponse::Message(message) => StreamEvent::Message(message.into()),
        }
    }
}

impl From<v1::ListTasksResponse> for ListTasksResponse {
    fn from(page: v1::ListTasksResponse) -> ListTasksResponse {
        ListTasksResponse {
            tasks: page.tasks.into_iter().map(Into::into).collect(),
            next_page_token: page.next_page_token,
            page_size: page.page_size,
            total_size: page.total_size,
        }
    }
}

impl From<v1::TaskPushNotificationConfig> for TaskPushNotificationConfig {
    fn from(config: v1::TaskPushNotificationConfig) -> TaskPushNotificationConfig {
        TaskPushNotificationConfig {
            task_id: config.task_id.unwrap_or_default(),
            push_notification_config: PushNotificationConfig {
                id: config.id,
                url: config.url,
                token: config.token,
                authentication: config.authentication.map(|auth| {
                    PushNotificationAuthenticationInfo {
                        schemes: vec![auth.scheme],
                        credentials: auth.credentials,
                    }
                }),
            },
        }
    }
}

/// A 1.0 card in the 0.3 form, for 0.3 clients: its 0.3 interfaces (`protocolVersion` `0.x`) are
/// the 0.3 card's, the first of them the main `url`. A card with no 0.3 interface falls back to its
/// preferred one, so the 0.3 card still names the agent's URL.
impl From<v1::AgentCard> for AgentCard {
    fn from(card: v1::AgentCard) -> AgentCard {
        let additional_interfaces: Vec<AgentInterface> = card
            .supported_interfaces
            .iter()
            .filter(|interface| interface.protocol_version.trim().starts_with("0."))
            .map(|interface| AgentInterface {
                url: interface.url.clone(),
                transport: interface.protocol_binding.clone(),
            })
            .collect();
        let main = additional_interfaces.first().cloned().or_else(|| {
            card.supported_interfaces
                .first()
                .map(|interface| AgentInterface {
                    url: interface.url.clone(),
                    transport: interface.protocol_binding.clone(),
                })
        });
        AgentCard {
            protocol_version: "0.3.0".into(),
            name: card.name,
            description: card.description,
            url: main.as_ref().map(|m| m.url.clone()).unwrap_or_default(),
            preferred_transport: main.map(|m| m.transport),
            additional_interfaces,
            icon_url: card.icon_url,
            provider: card.provider,
            version: card.version,
            documentation_url: card.documentation_url,
            capabilities: AgentCapabilities {
                streaming: card.capabilities.streaming,
                push_notifications: card.capabilities.push_notifications,
                // 1.0 dropped the flag with the feature: no 1.0 operation returns a status history.
                state_transition_history: Some(false),
                extensions: card.capabilities.extensions,
            },
            default_input_modes: card.default_input_modes,
            default_output_modes: card.default_output_modes,
            skills: card.skills,
            // Absent is 0.3's "no": a card without an extended card says nothing.
            supports_authenticated_extended_card: card
                .capabilities
                .extended_agent_card
                .filter(|&offered| offered),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_cross_between_forms() {
        let v03 = json!({"kind": "message", "messageId": "m1", "role": "user", "contextId": "c",
            "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"a": 1}},
                      {"kind": "file", "file": {"uri": "https://x/y.pdf", "mimeType": "application/pdf", "name": "y.pdf"}}]});
        let v1: v1::Message = serde_json::from_value::<IncomingMessage>(v03.clone())
            .unwrap()
            .into();
        assert_eq!(
            serde_json::to_value(&v1).unwrap(),
            json!({"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
            "parts": [{"text": "hi"}, {"data": {"a": 1}}, {"url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf"}]})
        );
        assert_eq!(
            serde_json::to_value(Message::from(v1.clone())).unwrap(),
            v03
        );
        assert_eq!(v1.text(), "hi\n{\"a\":1}\n[attached: y.pdf]");
    }

    #[test]
    fn a_0_3_message_may_carry_1_0_and_draft_parts() {
        let mixed = json!({"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hi"},
            {"data": {"a": 1}}, {"type": "text", "text": "draft"}, {"url": "https://x/y.pdf", "mediaType": "application/pdf"}]});
        let v1: v1::Message = serde_json::from_value::<IncomingMessage>(mixed)
            .unwrap()
            .into();
        assert_eq!(
            serde_json::to_value(&v1.parts).unwrap(),
            json!([{"text": "hi"}, {"data": {"a": 1}}, {"text": "draft"},
                   {"url": "https://x/y.pdf", "mediaType": "application/pdf"}])
        );
    }

    #[test]
    fn tasks_and_events_take_the_0_3_shape() {
        let task: v1::Task = serde_json::from_value(json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}], "history": []}))
        .unwrap();
        let v03 = serde_json::to_value(Task::from(task)).unwrap();
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "input-required");
        assert_eq!(v03["status"]["message"]["role"], "agent");
        assert_eq!(
            v03["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "x"})
        );
        let event: v1::StreamResponse =
            serde_json::from_value(json!({"statusUpdate": {"taskId": "t",
            "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}))
            .unwrap();
        assert_eq!(
            serde_json::to_value(StreamEvent::from(event)).unwrap(),
            json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
                   "status": {"state": "completed"}})
        );
    }

    #[test]
    fn push_configs_cross_between_forms() {
        let v03: TaskPushNotificationConfig = serde_json::from_value(json!({"taskId": "t",
            "pushNotificationConfig": {"url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Basic"], "credentials": "k"}}}))
        .unwrap();
        let v1 = v1::TaskPushNotificationConfig::from(v03.clone());
        assert_eq!(
            serde_json::to_value(&v1).unwrap(),
            json!({"taskId": "t", "url": "https://hook", "token": "tok",
                   "authentication": {"scheme": "Basic", "credentials": "k"}})
        );
        assert_eq!(TaskPushNotificationConfig::from(v1), v03);
    }

    fn interface(url: &str, binding: &str, version: &str) -> v1::AgentInterface {
        v1::AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            tenant: Some("acme".into()),
            protocol_version: version.into(),
        }
    }

    #[test]
    fn a_1_0_card_becomes_a_0_3_card_of_its_0_3_interfaces() {
        let card = v1::AgentCard {
            name: "a".into(),
            description: "d".into(),
            supported_interfaces: vec![
                interface("https://x/v1", "JSONRPC", "1.0"),
                interface("https://x/rest", "HTTP+JSON", "0.3"),
                interface("https://x/rpc", "JSONRPC", " 0.3.0"),
            ],
            version: "7".into(),
            icon_url: Some("https://x/icon.png".into()),
            capabilities: v1::AgentCapabilities {
                streaming: Some(false),
                extensions: vec![v1::AgentExtension {
                    uri: "urn:x".into(),
                    required: true,
                    ..Default::default()
                }],
                extended_agent_card: Some(true),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&AgentCard::from(card)).unwrap(),
            serde_json::to_string(&json!({
                "protocolVersion": "0.3.0", "name": "a", "description": "d",
                "url": "https://x/rest", "preferredTransport": "HTTP+JSON",
                "additionalInterfaces": [
                    {"url": "https://x/rest", "transport": "HTTP+JSON"},
                    {"url": "https://x/rpc", "transport": "JSONRPC"},
                ],
                "iconUrl": "https://x/icon.png", "version": "7",
                "capabilities": {"streaming": false, "stateTransitionHistory": false,
                    "extensions": [{"uri": "urn:x", "required": true}]},
                "defaultInputModes": [], "defaultOutputModes": [], "skills": [],
                "supportsAuthenticatedExtendedCard": true,
            }))
            .unwrap()
        );
    }

    #[test]
    fn a_1_0_card_without_a_0_3_interface_still_names_its_url_in_0_3() {
        let card = v1::AgentCard {
            supported_interfaces: vec![interface("https://x/v1", "JSONRPC", "1.0")],
            capabilities: v1::AgentCapabilities {
                extended_agent_card: Some(false),
                ..Default::default()
            },
            ..Default::default()
        };
        let v03 = AgentCard::from(card);
        assert_eq!(v03.url, "https://x/v1");
        assert_eq!(v03.preferred_transport.as_deref(), Some("JSONRPC"));
        assert_eq!(v03.additional_interfaces, []);
        assert_eq!(v03.supports_authenticated_extended_card, None);
        let none = AgentCard::from(v1::AgentCard::default());
        assert_eq!((none.url.as_str(), none.preferred_transport), ("", None));
    }
}
