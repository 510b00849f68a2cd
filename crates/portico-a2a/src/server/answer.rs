//! What a send is answered with: its task or, when the agent answered with a plain message before
//! anyone heard of its task, that message (A2A lets an agent answer a send either way).

use serde_json::{Value, json};

use crate::wire;

pub(crate) enum SendAnswer {
    Task(Value),
    Message(Value),
}

impl SendAnswer {
    /// The 1.0 `SendMessageResponse`: `{"task": …}` or `{"message": …}`.
    pub(crate) fn v1(self) -> Value {
        match self {
            SendAnswer::Task(task) => json!({"task": task}),
            SendAnswer::Message(message) => json!({"message": message}),
        }
    }

    /// The 0.3 JSON-RPC result: the task or the message itself, with its `kind`.
    pub(crate) fn v03(self) -> Value {
        match self {
            SendAnswer::Task(task) => wire::task_to_v03(&task),
            SendAnswer::Message(message) => wire::message_to_v03(&message),
        }
    }

    /// The 0.3 HTTP+JSON answer: `{"task": …}` or `{"message": …}` in the 0.3 proto's JSON.
    pub(crate) fn rest03(self) -> Value {
        match self {
            SendAnswer::Task(task) => json!({"task": crate::rest03::task_to_rest03(&task)}),
            SendAnswer::Message(message) => {
                json!({"message": crate::rest03::message_to_rest03(&message)})
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_answer_has_each_bindings_form() {
        let message = json!({"messageId": "m1", "contextId": "c1", "role": "ROLE_AGENT",
            "parts": [{"text": "Direct message response"}]});
        assert_eq!(
            SendAnswer::Message(message.clone()).v1(),
            json!({"message": message})
        );
        assert_eq!(
            SendAnswer::Message(message.clone()).v03(),
            json!({"kind": "message", "messageId": "m1", "contextId": "c1", "role": "agent",
                "parts": [{"kind": "text", "text": "Direct message response"}]})
        );
        assert_eq!(
            SendAnswer::Message(message).rest03(),
            json!({"message": {"messageId": "m1", "contextId": "c1", "role": "ROLE_AGENT",
                "content": [{"text": "Direct message response"}]}})
        );
    }
}
