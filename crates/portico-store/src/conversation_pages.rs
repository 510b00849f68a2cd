//! Conversations a page at a time, newest activity first, for `GET /api/conversations` and
//! `portico conversations`: each with its first user message, so a list can say what it was about
//! without reading every message.

use crate::conversations::{CONVERSATION_COLUMNS, conversation_from_row};
use crate::db::{Dialect, params};
use crate::{Conversation, Store, StoreError};

/// The most conversations one page holds, whatever is asked.
pub const MAX_CONVERSATION_PAGE: usize = 200;

/// Where a page ends: the last conversation it held, by last activity then id (the order pages
/// are read in), so the next page starts after it even when others were updated meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationCursor {
    pub updated_at_ms: i64,
    pub id: String,
}

impl ConversationCursor {
    /// The cursor's text: `{updated_at_ms}.{id}`, URL-safe as ids are.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.updated_at_ms, self.id)
    }

    /// Reads [`ConversationCursor::encode`]'s text; `None` for anything else.
    pub fn decode(text: &str) -> Option<ConversationCursor> {
        let (ms, id) = text.split_once('.')?;
        let fine_id = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        Some(ConversationCursor {
            updated_at_ms: ms.parse().ok()?,
            id: fine_id.then(|| id.to_string())?,
        })
    }
}

/// One listed conversation and the content of its first user message, as stored (opaque JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    pub conversation: Conversation,
    pub first_message: Option<serde_json::Value>,
}

impl Store {
    /// Up to `limit` conversations (at most [`MAX_CONVERSATION_PAGE`]; 0 means that many), most
    /// recently active first, optionally only `agent`'s, starting after `after`.
    pub fn conversation_page(
        &self,
        agent: Option<&str>,
        after: Option<&ConversationCursor>,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError> {
        let limit = match limit {
            0 => MAX_CONVERSATION_PAGE,
            n => n.min(MAX_CONVERSATION_PAGE),
        };
        let rows = self.with_db("listing conversations", |db| {
            // Ids are compared byte by byte, as SQLite does, whatever the PostgreSQL database's
            // collation: a cursor handed out on one replica must continue the same order on another,
            // and `id < ?3` must agree with `ORDER BY id` (the casts let PostgreSQL type a parameter
            // that is compared with NULL).
            let id = match db.dialect() {
                Dialect::Sqlite => "c.id",
                Dialect::Postgres => "c.id COLLATE \"C\"",
            };
            db.query_map(
                &format!(
                    "SELECT {CONVERSATION_COLUMNS}, \
                       (SELECT m.content FROM messages m WHERE m.conversation_id = c.id \
                        AND m.role = 'user' ORDER BY m.seq LIMIT 1) \
                     FROM conversations c \
                     WHERE (CAST(?1 AS TEXT) IS NULL OR agent = ?1) \
                       AND (CAST(?2 AS BIGINT) IS NULL OR updated_at_ms < ?2 \
                            OR (updated_at_ms = ?2 AND {id} < ?3)) \
                     ORDER BY updated_at_ms DESC, {id} DESC LIMIT ?4"
                ),
                params![
                    agent,
                    after.map(|a| a.updated_at_ms),
                    after.map(|a| a.id.as_str()),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |row| Ok((conversation_from_row(row)?, row.get::<Option<String>>(8)?)),
            )
        })?;
        // A message that is not JSON is shown as nothing rather than failing the whole list.
        Ok(rows
            .into_iter()
            .map(|(conversation, first)| ConversationSummary {
                conversation,
                first_message: first.and_then(|text| serde_json::from_str(&text).ok()),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::NewMessage;
    use crate::both_backends;

    fn message(role: &str, text: &str) -> NewMessage {
        NewMessage {
            role: role.into(),
            content: json!({"role": role, "text": text}),
            input_tokens: 0,
            output_tokens: 0,
        }
    }

    both_backends! {
        fn pages_follow_each_other_newest_first_with_each_first_user_message(store) {
            let mut ids = Vec::new();
            for n in 0..5 {
                let agent = if n % 2 == 0 { "even" } else { "odd" };
                let c = store.create_conversation(agent).unwrap();
                store
                    .append_message(&c.id, &message("user", &format!("hello {n}")))
                    .unwrap();
                store
                    .append_message(&c.id, &message("assistant", "hi"))
                    .unwrap();
                ids.push(c.id);
                // Distinct update times, so the order is by activity and not only by id.
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let first = store.conversation_page(None, None, 2).unwrap();
            let shown: Vec<(&str, u64, Option<&serde_json::Value>)> = first
                .iter()
                .map(|s| {
                    (
                        s.conversation.id.as_str(),
                        s.conversation.message_count,
                        s.first_message.as_ref(),
                    )
                })
                .collect();
            assert_eq!(
                shown,
                [
                    (
                        ids[4].as_str(),
                        2,
                        Some(&json!({"role": "user", "text": "hello 4"}))
                    ),
                    (
                        ids[3].as_str(),
                        2,
                        Some(&json!({"role": "user", "text": "hello 3"}))
                    ),
                ]
            );
            let cursor = ConversationCursor {
                updated_at_ms: first[1].conversation.updated_at_ms,
                id: first[1].conversation.id.clone(),
            };
            let rest: Vec<String> = store
                .conversation_page(None, Some(&cursor), 10)
                .unwrap()
                .into_iter()
                .map(|s| s.conversation.id)
                .collect();
            assert_eq!(rest, [ids[2].clone(), ids[1].clone(), ids[0].clone()]);
            let odd: Vec<String> = store
                .conversation_page(Some("odd"), None, 0)
                .unwrap()
                .into_iter()
                .map(|s| s.conversation.id)
                .collect();
            assert_eq!(odd, [ids[3].clone(), ids[1].clone()]);

            // A conversation with no message yet is listed with none.
            let empty = store.create_conversation("even").unwrap();
            let top = store.conversation_page(None, None, 1).unwrap();
            assert_eq!(top[0].conversation.id, empty.id);
            assert_eq!(top[0].first_message, None);
        }
    }

    both_backends! {
        fn ties_in_activity_are_paged_in_byte_order_of_id(store) {
            // Byte order, descending; a linguistic collation would put these otherwise (it looks
            // past `_` and `-` and folds case first).
            let by_bytes = ["cb", "c_a", "cA", "c-c", "c-B"];
            crate::conversations::tests::insert_at_the_same_instant(
                &store,
                "x",
                &["c-B", "cA", "cb", "c-c", "c_a"],
            );
            let whole: Vec<String> = store
                .conversation_page(None, None, 0)
                .unwrap()
                .into_iter()
                .map(|s| s.conversation.id)
                .collect();
            assert_eq!(whole, by_bytes);
            // One at a time, each page after the last one's cursor: the same order, none twice.
            let mut paged = Vec::new();
            let mut after: Option<ConversationCursor> = None;
            loop {
                let page = store.conversation_page(Some("x"), after.as_ref(), 1).unwrap();
                let Some(last) = page.last() else { break };
                after = ConversationCursor::decode(
                    &ConversationCursor {
                        updated_at_ms: last.conversation.updated_at_ms,
                        id: last.conversation.id.clone(),
                    }
                    .encode(),
                );
                paged.push(last.conversation.id.clone());
                assert!(paged.len() <= by_bytes.len(), "{paged:?}");
            }
            assert_eq!(paged, by_bytes);
        }
    }

    #[test]
    fn cursors_read_back_and_nothing_else_reads_as_one() {
        let cursor = ConversationCursor {
            updated_at_ms: 1_700_000_000_123,
            id: "c_0123abc".into(),
        };
        assert_eq!(cursor.encode(), "1700000000123.c_0123abc");
        assert_eq!(ConversationCursor::decode(&cursor.encode()), Some(cursor));
        for bad in ["", "12", ".c_1", "x.c_1", "12.", "12.c 1", "12.c_1/../x"] {
            assert_eq!(ConversationCursor::decode(bad), None, "{bad}");
        }
    }
}
