//! Tool pins (`[policy] pin_tools`): the digest and definition of each upstream tool as first seen,
//! or as last approved, keyed by server and the upstream's own tool name; and the `definition`
//! approval requests a changed definition makes (rows of the approvals table, see `approvals`).
//!
//! A pin changes only with an approved `definition` request for exactly the new digest, and the
//! request is consumed in the same transaction, so one approval repins once.

use rusqlite::{OptionalExtension, Row, params};

use crate::approvals::{COLUMNS, SAME_BINDING, record_from_row};
use crate::{
    ApprovalBinding, ApprovalKind, ApprovalLimits, ApprovalRecord, NewApproval, Requested, Store,
    StoreError,
};

/// One upstream tool's pinned definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPin {
    /// The configured server name.
    pub server: String,
    /// The upstream's own name of the tool (not the exposed `mcp_*` name, which collisions can change).
    pub tool: String,
    pub digest: String,
    /// The digested fields of the definition, as JSON text: what an approver compares against.
    pub definition: String,
    pub pinned_at_ms: i64,
}

fn pin_from_row(row: &Row<'_>) -> rusqlite::Result<ToolPin> {
    Ok(ToolPin {
        server: row.get(0)?,
        tool: row.get(1)?,
        digest: row.get(2)?,
        definition: row.get(3)?,
        pinned_at_ms: row.get(4)?,
    })
}

impl Store {
    /// Every pin, by server and tool.
    pub fn tool_pins(&self) -> Result<Vec<ToolPin>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT server, tool, digest, definition, pinned_at_ms FROM tool_pins \
                 ORDER BY server, tool",
            )
            .and_then(|mut stmt| stmt.query_map([], pin_from_row)?.collect())
            .map_err(self.sql_error("reading tool pins"))
    }

    /// Pins a tool seen for the first time. Returns the pin that stands: `pin` if there was none,
    /// else the one already stored (another process may have pinned it first), unchanged.
    pub fn tool_pin_first(&self, pin: &ToolPin) -> Result<(ToolPin, bool), StoreError> {
        self.in_sqlite_transaction("pinning a tool", |conn| {
            let sql_error = self.sql_error("pinning a tool");
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO tool_pins (server, tool, digest, definition, pinned_at_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (server, tool) DO NOTHING",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        pin.server,
                        pin.tool,
                        pin.digest,
                        pin.definition,
                        pin.pinned_at_ms
                    ])
                })
                .map_err(sql_error)?;
            if inserted == 1 {
                return Ok((pin.clone(), true));
            }
            let stored = conn
                .prepare_cached(
                    "SELECT server, tool, digest, definition, pinned_at_ms FROM tool_pins \
                     WHERE server = ?1 AND tool = ?2",
                )
                .and_then(|mut stmt| stmt.query_row(params![pin.server, pin.tool], pin_from_row))
                .map_err(self.sql_error("pinning a tool"))?;
            Ok((stored, false))
        })
    }

    /// Stores a pending `definition` request for `new`'s binding (its `definition_digest` the new
    /// definition's), or returns the one already pending; bounded like call requests.
    pub fn definition_request(
        &self,
        new: &NewApproval,
        previous_definition: &str,
        new_definition: &str,
        limits: ApprovalLimits,
    ) -> Result<Requested, StoreError> {
        self.request_of_kind(
            new,
            limits,
            ApprovalKind::Definition,
            Some((previous_definition, new_definition)),
        )
    }

    /// The approved, unexpired `definition` request for `binding`, if any.
    pub fn definition_approved(
        &self,
        binding: &ApprovalBinding,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.definition_query(
            binding,
            "status = 'approved' AND expires_at_ms > ?6",
            now_ms,
        )
    }

    /// The newest denied `definition` request for `binding`. Unlike a call's, a definition's denial
    /// stands for as long as the request is kept (until it is swept): the definition itself was
    /// refused, and asking again every few minutes would wear the approver down.
    pub fn definition_denial(
        &self,
        binding: &ApprovalBinding,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.definition_query(binding, "status = 'denied' AND ?6 = ?6", 0)
    }

    fn definition_query(
        &self,
        binding: &ApprovalBinding,
        condition: &str,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE {SAME_BINDING} AND kind = 'definition' \
                 AND {condition} ORDER BY coalesce(decided_at_ms, created_at_ms) DESC LIMIT 1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(binding.sql_params(&now_ms).as_slice(), record_from_row)
                    .optional()
            })
            .map_err(self.sql_error("reading definition approvals"))
    }

    /// Moves `pin` to its new digest and definition by consuming the approved request `approval_id`,
    /// in one transaction: `None` (and no change) when that request is no longer approved and
    /// unexpired (another process used it, or its time ran out).
    pub fn tool_repin(
        &self,
        pin: &ToolPin,
        approval_id: &str,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.in_sqlite_transaction("repinning a tool", |conn| {
            let consumed = conn
                .prepare_cached(&format!(
                    "UPDATE approvals SET status = 'consumed', consumed_at_ms = ?2 \
                     WHERE id = ?1 AND kind = 'definition' AND status = 'approved' \
                       AND expires_at_ms > ?2 \
                     RETURNING {COLUMNS}"
                ))
                .and_then(|mut stmt| {
                    stmt.query_row(params![approval_id, now_ms], record_from_row)
                        .optional()
                })
                .map_err(self.sql_error("repinning a tool"))?;
            if consumed.is_none() {
                return Ok(None);
            }
            conn.prepare_cached(
                "INSERT INTO tool_pins (server, tool, digest, definition, pinned_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (server, tool) DO UPDATE SET \
                   digest = excluded.digest, definition = excluded.definition, \
                   pinned_at_ms = excluded.pinned_at_ms",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    pin.server,
                    pin.tool,
                    pin.digest,
                    pin.definition,
                    pin.pinned_at_ms
                ])
            })
            .map_err(self.sql_error("repinning a tool"))?;
            Ok(consumed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApprovalAnswer, ApprovalStatus, Decided};

    fn pin(digest: &str) -> ToolPin {
        ToolPin {
            server: "docs".into(),
            tool: "search".into(),
            digest: digest.into(),
            definition: format!(r#"{{"description":"{digest}"}}"#),
            pinned_at_ms: 10,
        }
    }

    fn binding(digest: &str) -> ApprovalBinding {
        ApprovalBinding {
            principal: "server:docs".into(),
            tool: "mcp_docs_search".into(),
            arguments_digest: String::new(),
            policy: "pin_tools".into(),
            definition_digest: digest.into(),
            on_behalf_of: None,
        }
    }

    fn request(store: &Store, digest: &str, now_ms: i64) -> Requested {
        store
            .definition_request(
                &NewApproval {
                    binding: binding(digest),
                    arguments: "{}".into(),
                    reason: "changed".into(),
                    now_ms,
                    ttl_ms: 1_000,
                },
                r#"{"description":"a"}"#,
                &format!(r#"{{"description":"{digest}"}}"#),
                ApprovalLimits::default(),
            )
            .unwrap()
    }

    #[test]
    fn the_first_pin_stands_and_an_approved_definition_repins_once() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.tool_pin_first(&pin("a")).unwrap(), (pin("a"), true));
        // A second first sighting (another digest) does not move the pin.
        assert_eq!(store.tool_pin_first(&pin("b")).unwrap(), (pin("a"), false));

        let Requested::Created(created) = request(&store, "b", 100) else {
            panic!("not created")
        };
        assert_eq!(created.kind, ApprovalKind::Definition);
        assert_eq!(created.arguments, "{}");
        assert_eq!(
            created.previous_definition.as_deref(),
            Some(r#"{"description":"a"}"#)
        );
        assert_eq!(
            created.new_definition.as_deref(),
            Some(r#"{"description":"b"}"#)
        );
        // One pending request per tool and new digest.
        assert_eq!(
            request(&store, "b", 200),
            Requested::Reused(created.clone())
        );
        let read = store.approval(&created.id).unwrap().unwrap();
        assert_eq!(read, created);

        // Not approved yet: nothing to repin with.
        assert_eq!(store.definition_approved(&binding("b"), 300).unwrap(), None);
        assert_eq!(store.tool_repin(&pin("b"), &created.id, 300).unwrap(), None);
        assert_eq!(store.tool_pins().unwrap(), vec![pin("a")]);

        let Decided::Done(_) = store
            .approval_decide(
                &created.id,
                &ApprovalAnswer::Approve,
                "client:x",
                "api",
                400,
                1_000,
            )
            .unwrap()
        else {
            panic!("not approved")
        };
        let approved = store
            .definition_approved(&binding("b"), 500)
            .unwrap()
            .unwrap();
        assert_eq!(approved.id, created.id);
        let consumed = store
            .tool_repin(&pin("b"), &created.id, 600)
            .unwrap()
            .unwrap();
        assert_eq!(consumed.status, ApprovalStatus::Consumed);
        assert_eq!(store.tool_pins().unwrap(), vec![pin("b")]);
        // Used: a second repin with it does nothing.
        assert_eq!(store.tool_repin(&pin("c"), &created.id, 700).unwrap(), None);
        assert_eq!(store.tool_pins().unwrap(), vec![pin("b")]);
    }

    #[test]
    fn a_denied_definition_stands_past_its_expiry() {
        let store = Store::open_in_memory().unwrap();
        let Requested::Created(created) = request(&store, "b", 100) else {
            panic!("not created")
        };
        store
            .approval_decide(
                &created.id,
                &ApprovalAnswer::Deny {
                    reason: Some("no".into()),
                },
                "client:x",
                "api",
                200,
                1_000,
            )
            .unwrap();
        store.approvals_expire(10_000).unwrap();
        let denial = store.definition_denial(&binding("b")).unwrap().unwrap();
        assert_eq!(
            (denial.id.as_str(), denial.status),
            (created.id.as_str(), ApprovalStatus::Denied)
        );
        assert_eq!(store.definition_denial(&binding("c")).unwrap(), None);
        // A call request's binding never matches a definition's query.
        assert_eq!(store.definition_approved(&binding("b"), 300).unwrap(), None);
    }
}
