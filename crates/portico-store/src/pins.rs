//! Tool pins (`[policy] pin_tools`): the digest and definition of each upstream tool as first seen,
//! or as last approved, keyed by server and the upstream's own tool name; and the `definition`
//! approval requests a changed definition makes (rows of the approvals table, see `approvals`).
//!
//! A pin changes only with an approved `definition` request for exactly the new digest, and the
//! request is consumed in the same transaction, so one approval repins once, whichever replica
//! uses it.

use crate::approvals::{COLUMNS, SAME_BINDING, record_from_row};
use crate::db::{DbError, Row, ToParam, params};
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

fn pin_from_row(row: &Row<'_>) -> Result<ToolPin, DbError> {
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
        self.with_db("reading tool pins", |db| {
            db.query_map(
                "SELECT server, tool, digest, definition, pinned_at_ms FROM tool_pins \
                 ORDER BY server, tool",
                params![],
                pin_from_row,
            )
        })
    }

    /// Pins a tool seen for the first time. Returns the pin that stands: `pin` if there was none,
    /// else the one already stored (another replica may have pinned it first), unchanged.
    pub fn tool_pin_first(&self, pin: &ToolPin) -> Result<(ToolPin, bool), StoreError> {
        // `ON CONFLICT DO NOTHING` rather than an insert that may fail: on PostgreSQL a failed
        // statement would abort the transaction the read after it needs.
        self.in_db_transaction("pinning a tool", |db| {
            let inserted = db.execute(
                "INSERT INTO tool_pins (server, tool, digest, definition, pinned_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (server, tool) DO NOTHING",
                params![
                    pin.server,
                    pin.tool,
                    pin.digest,
                    pin.definition,
                    pin.pinned_at_ms
                ],
            )?;
            if inserted == 1 {
                return Ok((pin.clone(), true));
            }
            let stored = db.query_one(
                "SELECT server, tool, digest, definition, pinned_at_ms FROM tool_pins \
                 WHERE server = ?1 AND tool = ?2",
                params![pin.server, pin.tool],
                pin_from_row,
            )?;
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
            "status = 'approved' AND expires_at_ms > ?7",
            &binding.params_at(&now_ms),
        )
    }

    /// The newest denied `definition` request for `binding`. Unlike a call's, a definition's denial
    /// stands for as long as the request is kept (until it is swept): the definition itself was
    /// refused, and asking again every few minutes would wear the approver down.
    pub fn definition_denial(
        &self,
        binding: &ApprovalBinding,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.definition_query("status = 'denied'", &binding.params())
    }

    /// The newest `definition` request matching [`SAME_BINDING`] and `condition`; `params` are the
    /// binding's, and `now_ms` as ?7 when `condition` reads it.
    fn definition_query(
        &self,
        condition: &str,
        params: &[&dyn ToParam],
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.with_db("reading definition approvals", |db| {
            db.query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM approvals WHERE {SAME_BINDING} AND kind = 'definition' \
                     AND {condition} ORDER BY coalesce(decided_at_ms, created_at_ms) DESC, id LIMIT 1"
                ),
                params,
                record_from_row,
            )
        })
    }

    /// Moves `pin` to its new digest and definition by consuming the approved request `approval_id`,
    /// in one transaction: `None` (and no change) when that request is no longer approved and
    /// unexpired (another replica used it, or its time ran out).
    pub fn tool_repin(
        &self,
        pin: &ToolPin,
        approval_id: &str,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.in_db_transaction("repinning a tool", |db| {
            let consumed = db.query_opt(
                &format!(
                    "UPDATE approvals SET status = 'consumed', consumed_at_ms = ?2 \
                     WHERE id = ?1 AND kind = 'definition' AND status = 'approved' \
                       AND expires_at_ms > ?2 \
                     RETURNING {COLUMNS}"
                ),
                params![approval_id, now_ms],
                record_from_row,
            )?;
            if consumed.is_none() {
                return Ok(None);
            }
            db.execute(
                "INSERT INTO tool_pins (server, tool, digest, definition, pinned_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (server, tool) DO UPDATE SET \
                   digest = excluded.digest, definition = excluded.definition, \
                   pinned_at_ms = excluded.pinned_at_ms",
                params![
                    pin.server,
                    pin.tool,
                    pin.digest,
                    pin.definition,
                    pin.pinned_at_ms
                ],
            )?;
            Ok(consumed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::replicas;
    use crate::both_backends;
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

    both_backends! {
        fn the_first_pin_stands_and_an_approved_definition_repins_once(store) {
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
    }

    both_backends! {
        fn a_denied_definition_stands_past_its_expiry(store) {
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

    #[test]
    fn replicas_pinning_a_new_tool_at_once_keep_one_pin() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        let results = replicas::race([&a, &b], 6, |store, replica, thread| {
            store
                .tool_pin_first(&pin(&format!("r{replica}t{thread}")))
                .unwrap()
        });
        let firsts: Vec<&ToolPin> = results
            .iter()
            .filter(|(_, first)| *first)
            .map(|(p, _)| p)
            .collect();
        assert_eq!(firsts.len(), 1, "{results:#?}");
        // Everyone was given the pin that stands.
        assert!(results.iter().all(|(p, _)| p == firsts[0]), "{results:#?}");
        assert_eq!(b.tool_pins().unwrap(), vec![firsts[0].clone()]);
    }

    #[test]
    fn replicas_repinning_with_one_approval_at_once_repin_once() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        a.tool_pin_first(&pin("a")).unwrap();
        let id = request(&a, "b", 100).record().id.clone();
        b.approval_decide(&id, &ApprovalAnswer::Approve, "client:x", "api", 200, 1_000)
            .unwrap();
        let results = replicas::race([&a, &b], 6, |store, replica, thread| {
            let mut repinned = pin("b");
            repinned.pinned_at_ms = i64::try_from(replica * 100 + thread).unwrap();
            store
                .tool_repin(&repinned, &id, 300)
                .unwrap()
                .map(|_| repinned)
        });
        let won: Vec<ToolPin> = results.into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "{won:#?}");
        // The pin is the winner's, written once.
        assert_eq!(a.tool_pins().unwrap(), won);
        assert_eq!(
            b.approval(&id).unwrap().unwrap().status,
            ApprovalStatus::Consumed
        );
    }
}
