//! A2A 0.3 objects in the proto-JSON form of its HTTP+JSON binding (the 0.3 `a2a.v1` gRPC service
//! transcoded to HTTP), which differs from both the 0.3 JSON-RPC form ([`super::v03`]) and 1.0
//! ([`super::v1`]): `Message.content` (not `parts`), `ROLE_USER`/`ROLE_AGENT`, `TaskStatus.update`
//! (JSON name `message`), `TASK_STATE_CANCELLED` (two Ls), parts `{text}` /
//! `{file: {fileWithUri|fileWithBytes, mimeType, name}}` / `{data: {data: {…}}}`.
//!
//! Requests are read in either naming: the proto field names (`{"request": {"message_id": …}}`,
//! what the Python SDK sends) and the JSON names (`{"message": {"messageId": …}}`, the JS SDK).
//! Answers are written with the JSON names, which both SDKs parse. Proto3 writers send defaults
//! (`""`) for unset strings; those read as unset. `From` converts to and from 1.0.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::v1::{self, Struct};
use super::v03::{PushNotificationAuthenticationInfo, PushNotificationConfig};
use super::{TaskState, lenient_int};

/// A [`TaskState`] by its 0.3 proto name: `TASK_STATE_CANCELLED` is spelt with two Ls there.
mod state_rest03 {
    use serde::de::{Deserializer, Error};
    use serde::{Deserialize, Serializer};

    use super::TaskState;

    const CANCELLED: &str = "TASK_STATE_CANCELLED";

    pub fn serialize<S: Serializer>(state: &TaskState, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match state {
            TaskState::Canceled => CANCELLED,
            other => other.v1_name(),
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<TaskState, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == CANCELLED {
            return Ok(TaskState::Canceled);
        }
        TaskState::from_any_name(&name)
            .ok_or_else(|| D::Error::custom(format!("`{name}` is not an A2A task state")))
    }
}

/// A message's role: the proto enum by name (`ROLE_AGENT`) or number (`2`), as proto-JSON readers
/// accept both; the JSON-RPC names (`agent`) are read too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    Unspecified,
    User,
    Agent,
}

impl Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            Role::Unspecified => "ROLE_UNSPECIFIED",
            Role::User => "ROLE_USER",
            Role::Agent => "ROLE_AGENT",
        })
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Role, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NameOrNumber {
            Name(String),
            Number(u64),
            /// Proto-JSON reads `null` as the field's default.
            Null(()),
        }
        let role = match NameOrNumber::deserialize(deserializer)? {
            NameOrNumber::Name(name) => match name.as_str() {
                "ROLE_UNSPECIFIED" | "" => Some(Role::Unspecified),
                "ROLE_USER" | "user" => Some(Role::User),
                "ROLE_AGENT" | "agent" => Some(Role::Agent),
                _ => None,
            },
            NameOrNumber::Number(0) | NameOrNumber::Null(()) => Some(Role::Unspecified),
            NameOrNumber::Number(1) => Some(Role::User),
            NameOrNumber::Number(2) => Some(Role::Agent),
            NameOrNumber::Number(_) => None,
        };
        role.ok_or_else(|| {
            serde::de::Error::custom("a role is `ROLE_USER` or `ROLE_AGENT` (or 1 or 2)")
        })
    }
}

/// A `FilePart`: the file by URI or by bytes (base64), with its media type and name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_with_uri"
    )]
    pub file_with_uri: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_with_bytes"
    )]
    pub file_with_bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "mime_type")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A `DataPart`, `{"data": Struct}`. A part's `data` that is not in that shape is taken as the
/// data itself (`{"data": {"n": 1}}` as well as `{"data": {"data": {"n": 1}}}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataPart {
    pub data: Value,
}

impl<'de> Deserialize<'de> for DataPart {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<DataPart, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Proto {
            data: Value,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Forms {
            Proto(Proto),
            Bare(Value),
        }
        Ok(match Forms::deserialize(deserializer)? {
            Forms::Proto(Proto { data }) | Forms::Bare(data) => DataPart { data },
        })
    }
}

/// A `Part`: the proto's `part` oneof, one of `text`, `file` and `data` set (proto-JSON writes a
/// oneof as its one field). A part with none of them reads as empty text.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FilePart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
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
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub content: Vec<Part>,
    /// Not the proto form: a message written the way the other bindings write one (`parts`, in
    /// the 0.3 JSON-RPC or the 1.0 form), read as they read it. Never written.
    #[serde(default, skip_serializing, deserialize_with = "super::v03::any_parts")]
    pub parts: Vec<v1::Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(with = "state_rest03")]
    pub state: TaskState,
    /// The proto field is `update`; its JSON name is `message`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "update")]
    pub message: Option<Message>,
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
    #[serde(default)]
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
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    /// The stream's last event: the task finished or waits for the client.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default, alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// One streamed event, keyed by its payload as in 1.0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// What `SendMessage` answers: `{"task": …}` or `{"message": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default, alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, alias = "push_notification")]
    pub push_notification: Option<PushNotificationConfig>,
    #[serde(default, alias = "history_length", with = "lenient_int")]
    pub history_length: Option<u32>,
    /// A plain proto3 bool: a configuration without `blocking: true` asks for an immediate answer
    /// (no configuration at all means blocking), as the SDK servers read it.
    #[serde(default)]
    pub blocking: bool,
}

/// The body of `POST v1/message:send` and `v1/message:stream`. The message is `message` (its JSON
/// name) or `request` (its field name).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(alias = "request")]
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// A push config with its resource name, `tasks/{task}/pushNotificationConfigs/{id}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default)]
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "push_notification_config"
    )]
    pub push_notification_config: Option<PushNotificationConfig>,
}

impl TaskPushNotificationConfig {
    /// The config id its resource name ends in, if it names one.
    fn id_in_name(&self) -> Option<&str> {
        self.name
            .rsplit_once("/pushNotificationConfigs/")
            .map(|(_, id)| id)
            .filter(|id| !id.is_empty())
    }
}

/// The body of `POST v1/tasks/{id}/pushNotificationConfigs`, in any of the shapes clients send:
/// the HTTP rule's body, a [`TaskPushNotificationConfig`] (the JS SDK); the whole
/// `CreateTaskPushNotificationConfigRequest`, `{"parent", "config_id", "config"}` (the Python SDK);
/// or a bare [`PushNotificationConfig`].
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatePushConfigBody {
    #[serde(default, alias = "config_id")]
    pub config_id: Option<String>,
    #[serde(default)]
    pub config: Option<TaskPushNotificationConfig>,
    #[serde(flatten)]
    pub named: TaskPushNotificationConfig,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub authentication: Option<PushNotificationAuthenticationInfo>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    #[serde(default)]
    pub next_page_token: String,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------------------------------
// 0.3 proto-JSON → 1.0

impl From<Role> for v1::Role {
    /// A message without a role is the user's, as the server always took it.
    fn from(role: Role) -> v1::Role {
        match role {
            Role::Agent => v1::Role::Agent,
            Role::User | Role::Unspecified => v1::Role::User,
        }
    }
}

impl From<Part> for v1::Part {
    fn from(part: Part) -> v1::Part {
        let Part {
            text,
            file,
            data,
            metadata,
        } = part;
        if let Some(text) = text {
            return v1::Part {
                metadata,
                ..v1::Part::text(text)
            };
        }
        if let Some(file) = file {
            return v1::Part {
                content: match (file.file_with_uri, file.file_with_bytes) {
                    (Some(uri), _) => v1::PartContent::Url(uri),
                    (None, Some(bytes)) => v1::PartContent::Raw(bytes),
                    (None, None) => v1::PartContent::Raw(String::new()),
                },
                metadata,
                filename: non_empty(file.name),
                media_type: non_empty(file.mime_type),
            };
        }
        v1::Part {
            content: match data {
                Some(DataPart { data }) => v1::PartContent::Data(data),
                None => v1::PartContent::Text(String::new()),
            },
            metadata,
            filename: None,
            media_type: None,
        }
    }
}

impl From<Message> for v1::Message {
    fn from(m: Message) -> v1::Message {
        let parts = if m.content.is_empty() {
            m.parts
        } else {
            m.content.into_iter().map(Into::into).collect()
        };
        v1::Message {
            message_id: m.message_id,
            context_id: non_empty(m.context_id),
            task_id: non_empty(m.task_id),
            role: m.role.into(),
            parts,
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: Vec::new(),
        }
    }
}

impl From<SendMessageRequest> for v1::SendMessageRequest {
    fn from(request: SendMessageRequest) -> v1::SendMessageRequest {
        v1::SendMessageRequest {
            tenant: None,
            message: request.message.into(),
            configuration: request.configuration.map(|c| v1::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes,
                task_push_notification_config: c.push_notification.map(Into::into),
                history_length: c.history_length,
                return_immediately: !c.blocking,
            }),
            metadata: request.metadata,
        }
    }
}

impl From<CreatePushConfigBody> for v1::TaskPushNotificationConfig {
    /// The config is the request's `config`'s, else the body's own `pushNotificationConfig`, else
    /// the body itself. Its id is its own, else the request's `config_id`, else the one its
    /// resource name ends in. (A config without `url` is refused where configs are registered.)
    fn from(body: CreatePushConfigBody) -> v1::TaskPushNotificationConfig {
        let named = body.config.unwrap_or(body.named.clone());
        let name_id = named
            .id_in_name()
            .or_else(|| body.named.id_in_name())
            .map(str::to_string);
        let mut config = named
            .push_notification_config
            .or(body.named.push_notification_config)
            .unwrap_or(PushNotificationConfig {
                id: body.id,
                url: body.url.unwrap_or_default(),
                token: body.token,
                authentication: body.authentication,
            });
        config.id = non_empty(config.id)
            .or(non_empty(body.config_id))
            .or(name_id);
        config.into()
    }
}

// ---------------------------------------------------------------------------------------------------
// 1.0 → 0.3 proto-JSON

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
        let file = |file_with_uri, file_with_bytes| FilePart {
            file_with_uri,
            file_with_bytes,
            mime_type: part.media_type.clone(),
            name: part.filename.clone(),
        };
        let (text, file, data) = match part.content {
            v1::PartContent::Text(text) => (Some(text), None, None),
            v1::PartContent::Url(url) => (None, Some(file(Some(url), None)), None),
            v1::PartContent::Raw(raw) => (None, Some(file(None, Some(raw))), None),
            // A `Struct`: data that is not an object is wrapped.
            v1::PartContent::Data(data) => {
                let data = match data {
                    Value::Object(map) => Value::Object(map),
                    other => Value::Object(Struct::from_iter([("value".to_string(), other)])),
                };
                (None, None, Some(DataPart { data }))
            }
        };
        Part {
            text,
            file,
            data,
            metadata: part.metadata,
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
            content: m.parts.into_iter().map(Into::into).collect(),
            parts: Vec::new(),
            metadata: m.metadata,
            extensions: m.extensions,
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

impl From<v1::StreamResponse> for StreamResponse {
    fn from(event: v1::StreamResponse) -> StreamResponse {
        match event {
            v1::StreamResponse::Task(task) => StreamResponse::Task(task.into()),
            v1::StreamResponse::Message(message) => StreamResponse::Message(message.into()),
            v1::StreamResponse::StatusUpdate(update) => {
                StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: update.task_id,
                    context_id: update.context_id,
                    is_final: update.status.state.is_settled(),
                    status: update.status.into(),
                    metadata: update.metadata,
                })
            }
            v1::StreamResponse::ArtifactUpdate(update) => {
                StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
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

impl From<v1::SendMessageResponse> for SendMessageResponse {
    fn from(response: v1::SendMessageResponse) -> SendMessageResponse {
        match response {
            v1::SendMessageResponse::Task(task) => SendMessageResponse::Task(task.into()),
            v1::SendMessageResponse::Message(message) => {
                SendMessageResponse::Message(message.into())
            }
        }
    }
}

impl From<v1::TaskPushNotificationConfig> for TaskPushNotificationConfig {
    fn from(config: v1::TaskPushNotificationConfig) -> TaskPushNotificationConfig {
        let name = format!(
            "tasks/{}/pushNotificationConfigs/{}",
            config.task_id.as_deref().unwrap_or_default(),
            config.id.as_deref().unwrap_or_default()
        );
        TaskPushNotificationConfig {
            name,
            push_notification_config: Some(
                super::v03::TaskPushNotificationConfig::from(config).push_notification_config,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn to_v1_send(body: Value) -> Value {
        let request: SendMessageRequest = serde_json::from_value(body).unwrap();
        serde_json::to_value(v1::SendMessageRequest::from(request)).unwrap()
    }

    #[test]
    fn both_sdk_send_bodies_become_the_same_1_0_send() {
        // What the Python SDK sends (proto field names), and what the JS SDK sends (JSON names).
        let python = json!({"request": {"message_id": "m1", "context_id": "c1", "task_id": "t1",
            "role": "ROLE_USER", "content": [{"text": "hi"}]}, "configuration": {"blocking": true}});
        let js = json!({"message": {"messageId": "m1", "contextId": "c1", "taskId": "t1",
            "role": "ROLE_USER", "content": [{"text": "hi"}]}, "configuration": {"blocking": true}});
        let expected = json!({"message": {"messageId": "m1", "contextId": "c1", "taskId": "t1",
            "role": "ROLE_USER", "parts": [{"text": "hi"}]}, "configuration": {}});
        assert_eq!(to_v1_send(python), expected);
        assert_eq!(to_v1_send(js), expected);
        // `{}` is what both send for "return immediately"; no configuration means blocking.
        let immediate =
            to_v1_send(json!({"message": {"messageId": "m", "content": []}, "configuration": {}}));
        assert_eq!(
            immediate["configuration"],
            json!({"returnImmediately": true})
        );
        let bare = to_v1_send(json!({"message": {"messageId": "m", "content": []}}));
        assert_eq!(
            bare,
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}})
        );
        // A push config given with the send is the task's first push config.
        let configured = to_v1_send(json!({"request": {"message_id": "m", "content": []},
            "configuration": {"blocking": true, "history_length": "2",
                "push_notification": {"url": "https://hook", "token": "t"}}}));
        assert_eq!(
            configured["configuration"],
            json!({"historyLength": 2,
                "taskPushNotificationConfig": {"url": "https://hook", "token": "t"}})
        );
        // Proto3 defaults are unset values.
        let defaults = to_v1_send(json!({"request": {"message_id": "m", "context_id": "",
            "task_id": "", "role": 2, "metadata": null, "content": [{"file": {"file_with_uri": "u", "mime_type": "",
            "name": ""}}]}}));
        assert_eq!(
            defaults["message"],
            json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"url": "u"}]})
        );
        let unset_role = to_v1_send(json!({"message": {"messageId": "m", "role": null}}));
        assert_eq!(unset_role["message"]["role"], "ROLE_USER");
    }

    #[test]
    fn wrong_shapes_are_refused_by_name() {
        for (body, field) in [
            (
                json!({"message": {"messageId": "m", "content": 3}}),
                "expected a sequence",
            ),
            (
                json!({"message": {"messageId": "m", "role": "ROLE_BOSS"}}),
                "ROLE_USER",
            ),
            (json!({"message": {"content": []}}), "messageId"),
            (json!({"configuration": {}}), "message"),
        ] {
            let error = serde_json::from_value::<SendMessageRequest>(body.clone())
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{body}: {error}");
        }
    }

    #[test]
    fn parts_cross_both_ways() {
        let message: Message = serde_json::from_value(json!({"message_id": "m", "role": "ROLE_AGENT",
        "content": [
            {"text": "a", "metadata": {"k": 1}},
            {"file": {"file_with_uri": "https://x/y.pdf", "mime_type": "application/pdf", "name": "y.pdf"}},
            {"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}},
            {"data": {"data": {"n": 1}}},
            {"data": {"n": 2, "m": 3}},
            {},
        ]}))
        .unwrap();
        let message = v1::Message::from(message);
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [
                {"text": "a", "metadata": {"k": 1}},
                {"url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf"},
                {"raw": "aGk=", "mediaType": "text/plain"},
                {"data": {"n": 1}},
                {"data": {"n": 2, "m": 3}},
                {"text": ""},
            ]})
        );
        assert_eq!(
            serde_json::to_value(Message::from(message)).unwrap(),
            json!({"messageId": "m", "role": "ROLE_AGENT", "content": [
                {"text": "a", "metadata": {"k": 1}},
                {"file": {"fileWithUri": "https://x/y.pdf", "mimeType": "application/pdf", "name": "y.pdf"}},
                {"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}},
                {"data": {"data": {"n": 1}}},
                {"data": {"data": {"n": 2, "m": 3}}},
                {"text": ""},
            ]})
        );
        // Data that is not an object still fits a `Struct`.
        let listed = Part::from(v1::Part {
            content: v1::PartContent::Data(json!([1, 2])),
            metadata: None,
            filename: None,
            media_type: None,
        });
        assert_eq!(
            serde_json::to_value(listed).unwrap(),
            json!({"data": {"data": {"value": [1, 2]}}})
        );
        // A message in the 0.3 JSON-RPC form is read too.
        let jsonrpc: Message = serde_json::from_value(json!({"messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "x"}]}))
        .unwrap();
        assert_eq!(v1::Message::from(jsonrpc).parts, vec![v1::Part::text("x")]);
    }

    #[test]
    fn tasks_and_events_take_the_proto_shape() {
        let task: v1::Task = serde_json::from_value(json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_CANCELED", "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "stop"}]}},
            "artifacts": [{"artifactId": "a", "name": "response", "parts": [{"text": "x"}]}],
            "history": [{"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "go"}]}]}))
        .unwrap();
        let rest = serde_json::to_value(Task::from(task.clone())).unwrap();
        assert_eq!(
            rest,
            json!({"id": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_CANCELLED", "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"messageId": "m", "role": "ROLE_AGENT", "content": [{"text": "stop"}]}},
                "artifacts": [{"artifactId": "a", "name": "response", "parts": [{"text": "x"}]}],
                "history": [{"messageId": "u", "role": "ROLE_USER", "content": [{"text": "go"}]}]})
        );
        let back: Task = serde_json::from_value(rest).unwrap();
        assert_eq!(back.status.state, TaskState::Canceled);
        let event = |json: Value| {
            let event: v1::StreamResponse = serde_json::from_value(json).unwrap();
            serde_json::to_value(StreamResponse::from(event)).unwrap()
        };
        assert_eq!(
            event(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "final": true,
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        );
        assert_eq!(
            event(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING"}}}))["statusUpdate"]["final"],
            false
        );
        assert_eq!(
            event(json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}, "append": true}})),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}, "append": true,
                "lastChunk": false}})
        );
        assert_eq!(
            serde_json::to_value(StreamResponse::from(v1::StreamResponse::Task(task))).unwrap()["task"]
                ["status"]["state"],
            "TASK_STATE_CANCELLED"
        );
    }

    #[test]
    fn push_configs_from_both_sdks() {
        let create = |body: Value| {
            let body: CreatePushConfigBody = serde_json::from_value(body).unwrap();
            serde_json::to_value(v1::TaskPushNotificationConfig::from(body)).unwrap()
        };
        let js = json!({"name": "tasks/t/pushNotificationConfigs/c1",
            "pushNotificationConfig": {"url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}});
        let python = json!({"parent": "tasks/t", "config_id": "c1", "config": {
            "name": "tasks/t/pushNotificationConfigs/c1",
            "push_notification_config": {"id": "", "url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}});
        let expected = json!({"id": "c1", "url": "https://hook", "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "s"}});
        assert_eq!(create(js), expected);
        assert_eq!(create(python), expected);
        assert_eq!(
            create(json!({"url": "https://hook"})),
            json!({"url": "https://hook"})
        );
        assert_eq!(create(json!({"token": "t"}))["url"], "");
        assert!(serde_json::from_value::<CreatePushConfigBody>(json!({"url": 5})).is_err());
        let stored = v1::TaskPushNotificationConfig {
            task_id: Some("t".into()),
            ..serde_json::from_value(expected).unwrap()
        };
        assert_eq!(
            serde_json::to_value(TaskPushNotificationConfig::from(stored)).unwrap(),
            json!({"name": "tasks/t/pushNotificationConfigs/c1", "pushNotificationConfig": {
                "id": "c1", "url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}})
        );
    }
}
