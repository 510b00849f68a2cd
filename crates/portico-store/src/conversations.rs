//! Conversations with agents and their messages, with token totals kept on the conversation so that
//! listing them never has to sum messages.

use serde::{Deserialize, Serialize};

use crate::db::{Db, DbError, Row, params};
use crate::{Store, StoreError, from_sql_int, now_ms, sql_limit, to_sql_int};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub agent: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub message_count: u64,
    /// The client that started it (`client:a`), the only one that may read or continue it; `None`
    /// for one started before owners were recorded, or through [`Store::create_conversation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Conversation {
    /// Whether `client` (a principal's label) may read and continue it: its owner, or anyone for
    /// a conversation without one. Callers at a door without tokens are one anonymous client
    /// (`client:http`, `client:api`, ... all name the same person), so any of them is the owner
    /// of what another started.
    pub fn is_for(&self, client: &str) -> bool {
        match self.owner.as_deref() {
            None => true,
            Some(owner) => owner == client || (is_door(owner) && is_door(client)),
        }
    }
}

/// A caller no token identified: a door's own label. `[[server.clients]]` cannot take these names.
fn is_door(label: &str) -> bool {
    matches!(
        label,
        "client:stdio" | "client:cli" | "client:http" | "client:api" | "client:a2a" | "client:mcp"
    )
}

/// A message to append. `role` is conventionally `"user"`, `"assistant"` or `"tool"`; the store does not
/// police it, so new roles need no migration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    pub role: String,
    pub content: serde_json::Value,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub conversation_id: String,
    /// 1 for the first message of a conversation, then consecutive.
    pub seq: i64,
    pub role: String,
    pub content: serde_json::Value,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub created_at_ms: i64,
}

pub(crate) const CONVERSATION_COLUMNS: &str =
    "id, agent, created_at_ms, updated_at_ms, input_tokens, output_tokens, message_count, owner";

pub(crate) fn conversation_from_row(row: &Row<'_>) -> Result<Conversation, DbError> {
    Ok(Conversation {
        id: row.get(0)?,
        agent: row.get(1)?,
        created_at_ms: row.get(2)?,
        updated_at_ms: row.get(3)?,
        input_tokens: from_sql_int(row.get(4)?),
        output_tokens: from_sql_int(row.get(5)?),
        message_count: from_sql_int(row.get(6)?),
        owner: row.get(7)?,
    })
}

impl Store {
    /// Starts a conversation with `agent` under a fresh id (`c_` and 32 hex digits: the creation time in
    /// milliseconds, then 80 random bits, so ids sort by creation and new rows land at the end of the
    /// index rather than on a random page of it).
    pub fn create_conversation(&self, agent: &str) -> Result<Conversation, StoreError> {
        self.with_db_store_error("creating a conversation", |db| {
            self.insert_conversation(db, agent, None)
        })
    }

    /// [`Store::create_conversation`] on the caller's connection or transaction.
    pub(crate) fn insert_conversation(
        &self,
        db: &Db<'_>,
        agent: &str,
        owner: Option<&str>,
    ) -> Result<Conversation, StoreError> {
        let now = now_ms();
        let random = rand::random::<u128>() >> 48;
        let conversation = Conversation {
            id: format!("c_{:012x}{random:020x}", now & 0xffff_ffff_ffff),
            agent: agent.to_string(),
            created_at_ms: now,
            updated_at_ms: now,
            input_tokens: 0,
            output_tokens: 0,
            message_count: 0,
            owner: owner.map(str::to_string),
        };
        db.execute(
            "INSERT INTO conversations (id, agent, created_at_ms, updated_at_ms, owner) \
             VALUES (?1, ?2, ?3, ?3, ?4)",
            params![conversation.id, conversation.agent, now, conversation.owner],
        )
        .map_err(self.sql_error("creating a conversation"))?;
        Ok(conversation)
    }

    pub fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        self.with_db("reading a conversation", |db| {
            db.query_opt(
                &format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1"),
                params![id],
                conversation_from_row,
            )
        })
    }

    /// Conversations, most recently active first, optionally only those with `agent`. A `limit` of 0
    /// means [`crate::DEFAULT_LIMIT`].
    pub fn conversations(
        &self,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        // rowid breaks ties between conversations touched in the same millisecond: later-created
        // first. On PostgreSQL `rowid` is an identity column (see `migrations::postgres_ddl`) drawn
        // when the row is inserted, so it counts insertions across replicas as SQLite's rowid does.
        self.with_db("listing conversations", |db| match agent {
            Some(agent) => db.query_map(
                &format!(
                    "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE agent = ?1 \
                     ORDER BY updated_at_ms DESC, rowid DESC LIMIT ?2"
                ),
                params![agent, sql_limit(limit)],
                conversation_from_row,
            ),
            None => db.query_map(
                &format!(
                    "SELECT {CONVERSATION_COLUMNS} FROM conversations \
                     ORDER BY updated_at_ms DESC, rowid DESC LIMIT ?1"
                ),
                params![sql_limit(limit)],
                conversation_from_row,
            ),
        })
    }

    /// Appends a message as the conversation's next `seq`, adds its tokens to the conversation's totals
    /// and marks the conversation as updated, all in one transaction.
    pub fn append_message(
        &self,
        conversation_id: &str,
        message: &NewMessage,
    ) -> Result<StoredMessage, StoreError> {
        self.in_row_locked_transaction("appending a message", |db| {
            self.insert_message(db, conversation_id, message)
                .map(|(stored, _)| stored)
        })
    }

    /// [`Store::append_message`] inside the caller's transaction, which must be `IMMEDIATE` on SQLite
    /// and any transaction on PostgreSQL, so that another writer cannot slip in between reading the
    /// next seq and inserting it. On PostgreSQL the first statement, the update of the
    /// conversation's row, locks that row until the commit: a concurrent append waits for it
    /// (`READ COMMITTED`, then numbering after this one's message) or fails and is run again
    /// (`SERIALIZABLE`). Also returns the conversation as it is after the message.
    pub(crate) fn insert_message(
        &self,
        db: &Db<'_>,
        conversation_id: &str,
        message: &NewMessage,
    ) -> Result<(StoredMessage, Conversation), StoreError> {
        let content =
            serde_json::to_string(&message.content).map_err(|source| StoreError::CorruptJson {
                path: self.label().to_path_buf(),
                what: format!("new message content for conversation {conversation_id:?}"),
                source,
            })?;
        let now = now_ms();
        let error = || self.sql_error("appending a message");
        // Never earlier than it was, so updated_at stays monotonic if the wall clock steps back
        // (a CASE rather than SQLite's two-argument max(), which PostgreSQL spells greatest()).
        let conversation = db
            .query_opt(
                &format!(
                    "UPDATE conversations SET \
                       input_tokens = input_tokens + ?2, \
                       output_tokens = output_tokens + ?3, \
                       message_count = message_count + 1, \
                       updated_at_ms = CASE WHEN updated_at_ms > ?4 THEN updated_at_ms ELSE ?4 END \
                     WHERE id = ?1 RETURNING {CONVERSATION_COLUMNS}"
                ),
                params![
                    conversation_id,
                    to_sql_int(message.input_tokens),
                    to_sql_int(message.output_tokens),
                    now
                ],
                conversation_from_row,
            )
            .map_err(error())?;
        let Some(conversation) = conversation else {
            return Err(StoreError::ConversationNotFound {
                path: self.label().to_path_buf(),
                id: conversation_id.to_string(),
            });
        };
        let seq: i64 = db
            .query_one(
                "SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE conversation_id = ?1",
                params![conversation_id],
                |row| row.get(0),
            )
            .map_err(error())?;
        db.execute(
            "INSERT INTO messages \
               (conversation_id, seq, role, content, input_tokens, output_tokens, created_at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                conversation_id,
                seq,
                message.role,
                content,
                to_sql_int(message.input_tokens),
                to_sql_int(message.output_tokens),
                now
            ],
        )
        .map_err(error())?;
        let stored = StoredMessage {
            conversation_id: conversation_id.to_string(),
            seq,
            role: message.role.clone(),
            content: message.content.clone(),
            input_tokens: message.input_tokens,
            output_tokens: message.output_tokens,
            created_at_ms: now,
        };
        Ok((stored, conversation))
    }

    /// All messages of a conversation in `seq` order; empty for an unknown conversation.
    pub fn messages(&self, conversation_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self.with_db("reading messages", |db| {
            db.query_map(
                "SELECT seq, role, content, input_tokens, output_tokens, created_at_ms \
                 FROM messages WHERE conversation_id = ?1 ORDER BY seq",
                params![conversation_id],
                |row| {
                    Ok((
                        row.get::<i64>(0)?,
                        row.get::<String>(1)?,
                        row.get::<String>(2)?,
                        row.get::<i64>(3)?,
                        row.get::<i64>(4)?,
                        row.get::<i64>(5)?,
                    ))
                },
            )
        })?;
        // JSON is parsed after the connection is given back: large histories should not hold up
        // other callers.
        rows.into_iter()
            .map(
                |(seq, role, content, input_tokens, output_tokens, created_at_ms)| {
                    let content = serde_json::from_str(&content).map_err(|source| {
                        StoreError::CorruptJson {
                            path: self.label().to_path_buf(),
                            what: format!("message {seq} of conversation {conversation_id:?}"),
                            source,
                        }
                    })?;
                    Ok(StoredMessage {
                        conversation_id: conversation_id.to_string(),
                        seq,
                        role,
                        content,
                        input_tokens: from_sql_int(input_tokens),
                        output_tokens: from_sql_int(output_tokens),
                        created_at_ms,
                    })
                },
            )
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::both_backends;

    fn start(store: &Store, owner: Option<&str>) -> Conversation {
        store
            .with_db_store_error("test", |db| store.insert_conversation(db, "echo", owner))
            .unwrap()
    }

    both_backends! {
        fn a_conversation_is_its_owners_and_the_anonymous_doors_are_one_client(store) {
            let owned = start(&store, Some("client:a"));
            let read = store.conversation(&owned.id).unwrap().unwrap();
            assert_eq!(read.owner.as_deref(), Some("client:a"));
            assert!(read.is_for("client:a"));
            assert!(!read.is_for("client:b"));
            assert!(!read.is_for("client:http"));
            let anonymous = start(&store, Some("client:http"));
            assert!(anonymous.is_for("client:api"));
            assert!(!anonymous.is_for("client:a"));
            // Stored before owners were: anyone's, as it was.
            let old = store.create_conversation("echo").unwrap();
            assert_eq!(store.conversation(&old.id).unwrap().unwrap().owner, None);
            assert!(old.is_for("client:b"));
        }
    }

    fn message(role: &str, text: &str, input_tokens: u64, output_tokens: u64) -> NewMessage {
        NewMessage {
            role: role.to_string(),
            content: json!([{"type": "text", "text": text}]),
            input_tokens,
            output_tokens,
        }
    }

    both_backends! {
        fn created_conversation_is_empty_and_readable(store) {
            let created = store.create_conversation("planner").unwrap();
            assert!(created.id.starts_with("c_"));
            assert_eq!(created.id.len(), 34);
            assert!(created.id[2..].chars().all(|c| c.is_ascii_hexdigit()));
            assert_eq!(created.agent, "planner");
            assert_eq!(created.created_at_ms, created.updated_at_ms);
            assert_eq!(
                (
                    created.input_tokens,
                    created.output_tokens,
                    created.message_count
                ),
                (0, 0, 0)
            );
            assert_eq!(store.conversation(&created.id).unwrap(), Some(created));
            assert_eq!(store.conversation("c_missing").unwrap(), None);
        }
    }

    both_backends! {
        fn ids_are_unique(store) {
            let a = store.create_conversation("x").unwrap();
            let b = store.create_conversation("x").unwrap();
            assert_ne!(a.id, b.id);
        }
    }

    both_backends! {
        fn append_numbers_messages_and_sums_tokens(store) {
            let conversation = store.create_conversation("planner").unwrap();
            let first = store
                .append_message(&conversation.id, &message("user", "hi", 10, 0))
                .unwrap();
            let second = store
                .append_message(&conversation.id, &message("assistant", "hello", 12, 30))
                .unwrap();
            let third = store
                .append_message(&conversation.id, &message("tool", "{}", 0, 5))
                .unwrap();
            assert_eq!((first.seq, second.seq, third.seq), (1, 2, 3));

            let stored = store.messages(&conversation.id).unwrap();
            assert_eq!(stored, vec![first, second.clone(), third]);
            assert_eq!(stored[1].role, "assistant");
            assert_eq!(
                stored[1].content,
                json!([{"type": "text", "text": "hello"}])
            );
            assert_eq!((stored[1].input_tokens, stored[1].output_tokens), (12, 30));

            let updated = store.conversation(&conversation.id).unwrap().unwrap();
            assert_eq!(
                (
                    updated.input_tokens,
                    updated.output_tokens,
                    updated.message_count
                ),
                (22, 35, 3)
            );
            assert!(updated.updated_at_ms >= conversation.updated_at_ms);
            assert_eq!(updated.created_at_ms, conversation.created_at_ms);
        }
    }

    both_backends! {
        fn seq_is_per_conversation(store) {
            let a = store.create_conversation("x").unwrap();
            let b = store.create_conversation("x").unwrap();
            store
                .append_message(&a.id, &message("user", "1", 0, 0))
                .unwrap();
            store
                .append_message(&a.id, &message("user", "2", 0, 0))
                .unwrap();
            let in_b = store
                .append_message(&b.id, &message("user", "1", 0, 0))
                .unwrap();
            assert_eq!(in_b.seq, 1);
            assert_eq!(store.messages(&a.id).unwrap().len(), 2);
            assert_eq!(store.messages(&b.id).unwrap().len(), 1);
            assert_eq!(store.messages("c_missing").unwrap(), vec![]);
        }
    }

    both_backends! {
        fn append_to_missing_conversation_fails_and_writes_nothing(store) {
            let err = store
                .append_message("c_nope", &message("user", "hi", 1, 1))
                .unwrap_err();
            assert!(
                matches!(&err, StoreError::ConversationNotFound { id, .. } if id == "c_nope"),
                "{err}"
            );
            assert!(
                err.to_string()
                    .contains(&store.location().display().to_string()),
                "{err}"
            );
            let count: i64 = store
                .with_db("test", |db| {
                    db.query_one("SELECT count(*) FROM messages", params![], |row| row.get(0))
                })
                .unwrap();
            assert_eq!(count, 0);
        }
    }

    both_backends! {
        fn listing_is_most_recently_active_first_and_filters_by_agent(store) {
            let a = store.create_conversation("planner").unwrap();
            let b = store.create_conversation("coder").unwrap();
            let c = store.create_conversation("planner").unwrap();
            // Make `a` the most recently active, in a later millisecond than any creation.
            std::thread::sleep(Duration::from_millis(5));
            store
                .append_message(&a.id, &message("user", "bump", 0, 0))
                .unwrap();

            let ids = |list: Vec<Conversation>| list.into_iter().map(|c| c.id).collect::<Vec<_>>();
            assert_eq!(
                ids(store.conversations(None, 0).unwrap()),
                vec![a.id.clone(), c.id.clone(), b.id.clone()]
            );
            assert_eq!(
                ids(store.conversations(Some("planner"), 10).unwrap()),
                vec![a.id.clone(), c.id.clone()]
            );
            assert_eq!(ids(store.conversations(None, 1).unwrap()), vec![a.id]);
            assert_eq!(store.conversations(Some("nobody"), 10).unwrap(), vec![]);
        }
    }

    /// Three replicas (three stores on one PostgreSQL schema), twelve writers in all, appending to
    /// one conversation at once: none runs out of retries, every message gets its own seq, and the
    /// totals count each once.
    #[test]
    fn replicas_appending_to_one_conversation_number_messages_once() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let replicas = [
            Store::open_postgres(&url, 4).unwrap(),
            Store::open_postgres(&url, 4).unwrap(),
            Store::open_postgres(&url, 4).unwrap(),
        ];
        let conversation = replicas[0].create_conversation("x").unwrap();
        std::thread::scope(|scope| {
            for (r, replica) in replicas.iter().enumerate() {
                for t in 0..4 {
                    let id = &conversation.id;
                    scope.spawn(move || {
                        for i in 0..25 {
                            replica
                                .append_message(id, &message("user", &format!("{r}/{t}/{i}"), 1, 2))
                                .unwrap();
                        }
                    });
                }
            }
        });
        let seqs: Vec<i64> = replicas[1]
            .messages(&conversation.id)
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(seqs, (1..=300).collect::<Vec<_>>());
        let totals = replicas[1].conversation(&conversation.id).unwrap().unwrap();
        assert_eq!(
            (
                totals.input_tokens,
                totals.output_tokens,
                totals.message_count
            ),
            (300, 600, 300)
        );
    }

    /// Rows as a store would have them, at `updated_at_ms` 1000, inserted in `ids` order.
    pub(crate) fn insert_at_the_same_instant(store: &Store, agent: &str, ids: &[&str]) {
        for id in ids {
            store
                .with_db("test", |db| {
                    db.execute(
                        "INSERT INTO conversations (id, agent, created_at_ms, updated_at_ms) \
                         VALUES (?1, ?2, 1000, 1000)",
                        params![id, agent],
                    )
                })
                .unwrap();
        }
    }

    both_backends! {
        fn ties_in_activity_list_the_later_created_first(store) {
            // Inserted out of id order, so that only the insertion order (rowid) gives this answer.
            insert_at_the_same_instant(&store, "x", &["c_b", "c_a", "c_c"]);
            let listed: Vec<String> = store
                .conversations(None, 0)
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect();
            assert_eq!(listed, ["c_c", "c_a", "c_b"]);
            let listed: Vec<String> = store
                .conversations(Some("x"), 2)
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect();
            assert_eq!(listed, ["c_c", "c_a"]);
        }
    }

    both_backends! {
        fn corrupt_content_is_reported_with_its_location(store) {
            let conversation = store.create_conversation("x").unwrap();
            store
                .append_message(&conversation.id, &message("user", "hi", 0, 0))
                .unwrap();
            store
                .with_db("test", |db| {
                    db.execute("UPDATE messages SET content = 'not json'", params![])
                })
                .unwrap();
            let err = store.messages(&conversation.id).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("message 1 of conversation"), "{text}");
            assert!(text.contains(&conversation.id), "{text}");
        }
    }

    both_backends! {
        fn store_is_usable_from_many_threads(store) {
            let conversation = store.create_conversation("x").unwrap();
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let store = store.clone();
                    let id = conversation.id.clone();
                    std::thread::spawn(move || {
                        for i in 0..25 {
                            store
                                .append_message(&id, &message("user", &format!("{t}/{i}"), 1, 2))
                                .unwrap();
                        }
                    })
                })
                .collect();
            for handle in handles {
                handle.join().unwrap();
            }
            let seqs: Vec<i64> = store
                .messages(&conversation.id)
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect();
            assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
            let totals = store.conversation(&conversation.id).unwrap().unwrap();
            assert_eq!(
                (
                    totals.input_tokens,
                    totals.output_tokens,
                    totals.message_count
                ),
                (100, 200, 100)
            );
        }
    }
}
