//! The A2A protocol objects as Rust types: [`v1`] (the 1.0 proto's ProtoJSON form, which Portico
//! works in), [`v03`] (the 0.3 JSON-RPC form) and [`v03_rest`] (the 0.3 HTTP+JSON binding's
//! proto-JSON form), the 0.3 forms converted to and from 1.0 with `From` at the edge.
//! Serde only, no I/O: the server (`portico-a2a`) and the client read and write requests and answers
//! through these.
//!
//! Readers are lenient where the spec is: ProtoJSON parsers accept the proto field names
//! (`task_id`) as well as the JSON names (`taskId`), and integers as numbers or strings. A 0.3 part
//! may arrive in the 1.0 form, since a mixed client costs nothing to understand.

pub mod v03;
pub mod v03_rest;
pub mod v1;

pub use portico_core::TaskState;

/// Reads an optional integer written as a number or as a decimal string (ProtoJSON writes 64-bit
/// integers as strings, and clients do so for 32-bit ones too).
pub(crate) mod lenient_int {
    use serde::de::{Deserializer, Error, Unexpected};
    use serde::{Deserialize, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(i64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<u32>, D::Error> {
        let Some(value) = Option::<NumberOrText>::deserialize(deserializer)? else {
            return Ok(None);
        };
        let number = match value {
            NumberOrText::Number(n) => n,
            NumberOrText::Text(text) => text
                .trim()
                .parse()
                .map_err(|_| D::Error::invalid_value(Unexpected::Str(&text), &"an integer"))?,
        };
        u32::try_from(number).map(Some).map_err(|_| {
            D::Error::invalid_value(Unexpected::Signed(number), &"a non-negative integer")
        })
    }

    pub fn serialize<S: Serializer>(value: &Option<u32>, serializer: S) -> Result<S::Ok, S::Error> {
        value.serialize(serializer)
    }
}

/// Reads an optional state where an empty string means none (what a client that writes proto3
/// defaults sends for "no filter").
pub(crate) mod optional_state {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::TaskState;

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<TaskState>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum StateOrEmpty {
            State(TaskState),
            Empty(String),
        }
        match Option::<StateOrEmpty>::deserialize(deserializer)? {
            None => Ok(None),
            Some(StateOrEmpty::State(state)) => Ok(Some(state)),
            Some(StateOrEmpty::Empty(text)) if text.is_empty() => Ok(None),
            Some(StateOrEmpty::Empty(text)) => Err(serde::de::Error::custom(format!(
                "`{text}` is not an A2A task state (TASK_STATE_WORKING, ...)"
            ))),
        }
    }

    pub fn serialize<S: Serializer>(
        value: &Option<TaskState>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(serializer)
    }
}
