//! `TaskState`: where an A2A task is in its life, the one enum the A2A server, its client and the task
//! store share. It names its two spellings on the wire (1.0's `TASK_STATE_*` enum names, 0.3's
//! lower-case kebab names) and nothing else of A2A; the store keeps the 1.0 name in its column.

use std::fmt;

/// The state of an A2A task, in the 1.0 proto's enum order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum TaskState {
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED", alias = "submitted")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING", alias = "working")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED", alias = "completed")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED", alias = "failed")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED", alias = "canceled")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED", alias = "input-required")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED", alias = "rejected")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED", alias = "auth-required")]
    AuthRequired,
}

impl TaskState {
    /// Every state, in enum order.
    pub const ALL: [TaskState; 9] = [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The 1.0 enum name, e.g. `TASK_STATE_WORKING`: also what the task store keeps.
    pub fn v1_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// The 0.3 name, e.g. `working` (0.3 has no unspecified state: it says `unknown`).
    pub fn v03_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unknown",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::InputRequired => "input-required",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }

    /// The state a 1.0 enum name names, exactly.
    pub fn from_v1_name(name: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.v1_name() == name)
    }

    /// The state either spelling names (`working` or `TASK_STATE_WORKING`).
    pub fn from_any_name(name: &str) -> Option<TaskState> {
        TaskState::ALL
            .into_iter()
            .find(|s| s.v1_name() == name || (*s != TaskState::Unspecified && s.v03_name() == name))
    }

    /// A state no task leaves: completed, failed, canceled, rejected.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Waiting for the client (more input, or authorization): not finished, but no work runs.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// Finished or waiting for the client: a blocking send answers in it.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.v1_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_each_state_and_serde_writes_the_1_0_name() {
        for state in TaskState::ALL {
            assert_eq!(TaskState::from_v1_name(state.v1_name()), Some(state));
            assert_eq!(TaskState::from_any_name(state.v1_name()), Some(state));
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, serde_json::json!(state.v1_name()));
            assert_eq!(serde_json::from_value::<TaskState>(json).unwrap(), state);
        }
        assert_eq!(
            TaskState::from_any_name("input-required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(
            serde_json::from_str::<TaskState>("\"canceled\"").unwrap(),
            TaskState::Canceled
        );
        assert_eq!(TaskState::from_any_name("unknown"), None);
        assert_eq!(TaskState::from_v1_name("working"), None);
        assert_eq!(TaskState::InputRequired.v03_name(), "input-required");
        let terminal: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                TaskState::Completed,
                TaskState::Failed,
                TaskState::Canceled,
                TaskState::Rejected
            ]
        );
        assert!(TaskState::AuthRequired.is_interrupted() && !TaskState::AuthRequired.is_terminal());
        assert!(!TaskState::Working.is_settled());
    }
}
