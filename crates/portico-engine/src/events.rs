//! Live events: what changed in the running Portico, for whoever follows it (the daemon's
//! `/api/events`, which the dashboard reads). One bounded broadcast ([`EVENT_CAPACITY`]); a follower
//! that falls behind by more is told it lagged (tokio's `RecvError::Lagged`) and should read
//! everything again. Nothing waits for followers, and with none an event costs one failed send.
//!
//! Sources: each server's status as the hub changes it (state, catalog counts, errors: one
//! [`EngineEvent::Server`] per server whose status differs from the one last published), approval
//! requests made, answered and expired ([`Approvals::set_observer`]), every audit record as it is
//! queued ([`ObservedAudit`]), and A2A task state changes, which the A2A edge publishes itself
//! ([`Events::publish`]).

use std::collections::HashMap;
use std::sync::Arc;

use portico_core::{ServerStatus, TaskState};
use portico_hub::Hub;
use portico_pipeline::{ApprovalRecord, ApprovalStatus, Approvals, AuditSink};
use portico_store::{AuditRecord, AuditWriter};
use tokio::sync::broadcast;

/// Events kept for a follower that has not read them yet; one that falls further behind lags.
pub const EVENT_CAPACITY: usize = 1024;

/// One change.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// A server's status, whole, after it changed.
    /// (Boxed: a status is several times the size of the other events.)
    Server(Box<ServerStatus>),
    /// An approval request was made, answered or expired.
    Approval(ApprovalChange),
    /// An audit record was made (it is stored shortly after, with its id).
    Audit(AuditRecord),
    /// An A2A task moved to another state.
    Task(TaskChange),
}

/// An approval request's new status, with whom it concerns (followers with a scope see only their
/// own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalChange {
    pub id: String,
    pub tool: String,
    pub status: ApprovalStatus,
    /// The principal whose call it holds.
    pub principal: String,
    /// The client an agent's run was for, when an agent made the call.
    pub on_behalf_of: Option<String>,
}

impl ApprovalChange {
    fn of(record: &ApprovalRecord) -> Self {
        ApprovalChange {
            id: record.id.clone(),
            tool: record.binding.tool.clone(),
            status: record.status,
            principal: record.binding.principal.clone(),
            on_behalf_of: record.binding.on_behalf_of.clone(),
        }
    }
}

/// An A2A task's new state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChange {
    pub id: String,
    /// The Portico agent that runs it.
    pub agent: String,
    pub state: TaskState,
    /// The principal label of the client whose task it is.
    pub owner: String,
}

/// The engine's event broadcast. Cheap to clone.
#[derive(Clone)]
pub struct Events {
    sender: broadcast::Sender<EngineEvent>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            sender: broadcast::channel(EVENT_CAPACITY).0,
        }
    }
}

impl Events {
    /// Every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.sender.subscribe()
    }

    /// Tells every follower; nobody following is no error.
    pub fn publish(&self, event: EngineEvent) {
        let _ = self.sender.send(event);
    }

    /// Whether anyone follows: an event nobody reads need not be made (every call's audit
    /// record would otherwise be copied for nothing).
    pub fn followed(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Publishes the approval requests `approvals` makes, answers and expires.
    pub(crate) fn observe_approvals(&self, approvals: &Approvals) {
        let events = self.clone();
        approvals.set_observer(Arc::new(move |record: &ApprovalRecord| {
            events.publish(EngineEvent::Approval(ApprovalChange::of(record)));
        }));
    }

    /// Publishes each server's status when the hub changes it, until the hub shuts down.
    pub(crate) fn follow_servers(&self, hub: &Hub) {
        let events = self.clone();
        let hub = hub.clone();
        let mut changes = hub.subscribe();
        let stopped = hub.stopped();
        tokio::spawn(async move {
            let mut last: HashMap<String, ServerStatus> = hub
                .servers()
                .into_iter()
                .map(|status| (status.name.clone(), status))
                .collect();
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = stopped.cancelled() => return,
                }
                for status in changed_servers(&mut last, hub.servers()) {
                    events.publish(EngineEvent::Server(Box::new(status)));
                }
            }
        });
    }
}

/// The statuses in `now` that differ from `last`'s (a server new to it included), remembered as
/// the last ones.
fn changed_servers(
    last: &mut HashMap<String, ServerStatus>,
    now: Vec<ServerStatus>,
) -> Vec<ServerStatus> {
    let mut changed = Vec::new();
    for status in now {
        if last.get(&status.name) != Some(&status) {
            last.insert(status.name.clone(), status.clone());
            changed.push(status);
        }
    }
    changed
}

/// The store's audit writer, publishing each record as it is queued.
pub(crate) struct ObservedAudit {
    pub writer: AuditWriter,
    pub events: Events,
}

impl AuditSink for ObservedAudit {
    fn record(&self, record: AuditRecord) {
        if self.events.followed() {
            self.events.publish(EngineEvent::Audit(record.clone()));
        }
        self.writer.record(record);
    }

    fn room(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.writer.room())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_core::ServerState;

    fn status(name: &str, state: ServerState, tools: usize) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            transport: "stdio".into(),
            transport_detail: None,
            state,
            protocol_version: None,
            server_name: None,
            server_version: None,
            tools,
            resources: 0,
            resource_templates: 0,
            prompts: 0,
            last_error: None,
            stderr_tail: Vec::new(),
            missing_secrets: Vec::new(),
            connects: 0,
            enabled: true,
            connected_at: None,
            restarts: 0,
            starting_secs: None,
            last_stderr: None,
            failed_attempts: None,
            next_retry_at_ms: None,
        }
    }

    #[test]
    fn only_servers_whose_status_changed_are_published() {
        let mut last = HashMap::new();
        let first = changed_servers(
            &mut last,
            vec![
                status("a", ServerState::Starting, 0),
                status("b", ServerState::Starting, 0),
            ],
        );
        assert_eq!(first.len(), 2);
        let next = changed_servers(
            &mut last,
            vec![
                status("a", ServerState::Ready, 3),
                status("b", ServerState::Starting, 0),
            ],
        );
        assert_eq!(next, [status("a", ServerState::Ready, 3)]);
        assert!(
            changed_servers(
                &mut last,
                vec![
                    status("a", ServerState::Ready, 3),
                    status("b", ServerState::Starting, 0)
                ]
            )
            .is_empty()
        );
        // A catalog count alone is a change.
        assert_eq!(
            changed_servers(&mut last, vec![status("a", ServerState::Ready, 4)]),
            [status("a", ServerState::Ready, 4)]
        );
    }

    #[tokio::test]
    async fn a_follower_that_falls_behind_is_told_it_lagged() {
        let events = Events::default();
        let mut follower = events.subscribe();
        for i in 0..EVENT_CAPACITY + 5 {
            events.publish(EngineEvent::Task(TaskChange {
                id: format!("t{i}"),
                agent: "a".into(),
                state: TaskState::Working,
                owner: "client:x".into(),
            }));
        }
        assert!(matches!(
            follower.recv().await,
            Err(broadcast::error::RecvError::Lagged(5))
        ));
        assert!(matches!(follower.recv().await, Ok(EngineEvent::Task(t)) if t.id == "t5"));
    }
}
