//! Multi round-trip requests (SEP-2322, protocol 2026-07-28): the tools and the prompt that answer
//! with an `input_required` result, and complete once called again with the client's answers.
//!
//! A 2026-07-28 server never sends requests to the client mid-call. It answers
//! `{"resultType": "input_required", "inputRequests": {key: request}, "requestState": "…"}`, and the
//! client calls again with `inputResponses: {key: result}` and the `requestState` echoed. This module
//! holds every such exchange the suite's `input-required-result-*` scenarios drive, plus the 2026 form
//! of the handshake-era tools that asked the client mid-call (`test_sampling`, `test_elicitation`,
//! the SEP-1034/SEP-1330 elicitation tools), so that Portico, as a 2026 client of the fixture, can
//! relay those rounds to a 2025-11-25 client as ordinary requests.
//!
//! Each exchange is a list of rounds. The answers gathered so far and the round reached travel in
//! `requestState`, sealed with HMAC-SHA256 (rmcp's `RequestStateCodec`, a key drawn per process) and
//! bound to the tool's name, so a tampered or transplanted state is refused with `-32602`. A call
//! without (valid) answers for the current round gets that round's requests again, as SEP-2322
//! recommends, instead of an error; an answer of the wrong shape is an error.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, InputRequests, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::catalog::{self, wire};

/// How long a sealed `requestState` stays valid: long enough for a person to answer a form.
const STATE_TTL: Duration = Duration::from_secs(600);

/// The prompt the `input-required-result-non-tool-request` scenario gets.
pub const PROMPT: &str = "test_input_required_result_prompt";

/// What an exchange needs from the client in one round: keyed `inputRequests` entries.
type Round = Vec<(&'static str, Value)>;

/// One named exchange: its rounds, and how it ends once every round is answered.
struct Exchange {
    rounds: Vec<Round>,
    /// Whether rounds after the first need the sealed state (multi-round tools, and the tools whose
    /// scenarios check that the state round-trips). Single-round exchanges stay stateless: the answers
    /// alone complete them, so a client that drops `requestState` still gets its result.
    stateful: bool,
}

/// The state sealed into `requestState`: the round reached and the answers gathered before it.
#[derive(Serialize, Deserialize)]
struct SealedState {
    round: usize,
    answers: Map<String, Value>,
}

/// What a call of an exchange comes to.
pub enum Outcome {
    /// The client must answer these requests and call again.
    InputRequired(InputRequiredResult),
    /// Every round is answered: the answers, keyed as in `inputRequests`.
    Complete(Map<String, Value>),
}

/// Seals and opens `requestState` with one key, shared by every session of the process (a stateless
/// client may send each round on a new connection).
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    /// A seal with a fresh random 256-bit key.
    pub fn new() -> Self {
        // 32 random bytes meet the codec's minimum key length (checked by a unit test below).
        let key: [u8; 32] = rand::random();
        Self {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
        }
    }

    fn seal(&self, name: &str, state: &SealedState) -> Result<String, McpError> {
        let options = SealOptions::new()
            .associated_data(name.as_bytes())
            .ttl(STATE_TTL);
        self.codec.seal_json_with(state, &options).map_err(|error| {
            McpError::internal_error(format!("cannot seal requestState: {error}"), None)
        })
    }

    fn open(&self, name: &str, sealed: &str) -> Result<SealedState, McpError> {
        self.codec
            .open_json_with(sealed, name.as_bytes())
            .map_err(|error| {
                McpError::invalid_params(
                    format!(
                        "requestState failed its integrity check for {name} ({error}); call again \
                         without requestState to start over"
                    ),
                    None,
                )
            })
    }
}

impl Default for StateSeal {
    fn default() -> Self {
        Self::new()
    }
}

fn elicitation(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field]
            }
        }
    })
}

fn sampling(text: &str, max_tokens: u32) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens
        }
    })
}

fn list_roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// The exchange behind `name`, or `None` when `name` asks the client nothing. `arguments` feed the
/// 2026 forms of the handshake-era tools; `capabilities` are what the request declared.
fn exchange(
    name: &str,
    arguments: &Map<String, Value>,
    capabilities: &ClientCapabilities,
) -> Option<Exchange> {
    let single = |round: Round| Exchange {
        rounds: vec![round],
        stateful: false,
    };
    let string_argument = |key: &str| arguments.get(key).and_then(Value::as_str).unwrap_or("");
    Some(match name {
        "test_input_required_result_elicitation" => single(vec![(
            "user_name",
            elicitation("What is your name?", "name", "string"),
        )]),
        "test_input_required_result_sampling" => single(vec![(
            "capital_question",
            sampling("What is the capital of France?", 100),
        )]),
        "test_input_required_result_list_roots" => single(vec![("client_roots", list_roots())]),
        PROMPT => single(vec![(
            "user_context",
            elicitation("What context should the prompt use?", "context", "string"),
        )]),
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => Exchange {
            rounds: vec![vec![(
                "confirm",
                elicitation("Please confirm", "ok", "boolean"),
            )]],
            stateful: true,
        },
        "test_input_required_result_multiple_inputs" => Exchange {
            rounds: vec![vec![
                (
                    "user_name",
                    elicitation("What is your name?", "name", "string"),
                ),
                ("greeting", sampling("Generate a greeting", 50)),
                ("client_roots", list_roots()),
            ]],
            stateful: true,
        },
        "test_input_required_result_multi_round" => Exchange {
            rounds: vec![
                vec![(
                    "step1",
                    elicitation("Step 1: What is your name?", "name", "string"),
                )],
                vec![(
                    "step2",
                    elicitation("Step 2: What is your favorite color?", "color", "string"),
                )],
            ],
            stateful: true,
        },
        // Only what the request declared: sampling and elicitation each when present.
        "test_input_required_result_capabilities" => {
            let mut round = Round::new();
            if capabilities.sampling.is_some() {
                round.push(("sampling", sampling("Say something", 20)));
            }
            if capabilities.elicitation.is_some() {
                round.push(("elicitation", elicitation("Anything?", "answer", "string")));
            }
            if capabilities.roots.is_some() {
                round.push(("roots", list_roots()));
            }
            single(round)
        }
        // The 2026 forms of the tools that send requests mid-call in a handshake-era session.
        "test_sampling" => single(vec![(
            "sampling",
            json!({
                "method": "sampling/createMessage",
                "params": catalog::sampling_request(string_argument("prompt"))
            }),
        )]),
        "test_elicitation" => single(vec![(
            "elicitation",
            json!({"method": "elicitation/create", "params": catalog::elicitation_basic(string_argument("message"))}),
        )]),
        "test_elicitation_sep1034_defaults" => single(vec![(
            "elicitation",
            json!({"method": "elicitation/create", "params": catalog::elicitation_sep1034_defaults()}),
        )]),
        "test_elicitation_sep1330_enums" => single(vec![(
            "elicitation",
            json!({"method": "elicitation/create", "params": catalog::elicitation_sep1330_enums()}),
        )]),
        "test_streaming_elicitation" => single(vec![(
            "elicitation",
            elicitation("Streaming check: anything to add?", "answer", "string"),
        )]),
        _ => return None,
    })
}

/// Whether `name` is a tool or prompt that asks the client through `input_required` results.
pub fn asks_client(name: &str) -> bool {
    exchange(name, &Map::new(), &ClientCapabilities::default()).is_some()
}

/// Checks that `answer` has the shape of a result for `request` (an `ElicitResult`,
/// `CreateMessageResult` or `ListRootsResult`). Extra keys are allowed, as everywhere in MCP.
fn check_answer(key: &str, request: &Value, answer: &Value) -> Result<(), McpError> {
    let method = request["method"].as_str().unwrap_or("");
    let well_formed = match method {
        "elicitation/create" => answer["action"].as_str().is_some(),
        "sampling/createMessage" => answer.get("content").is_some_and(|c| !c.is_null()),
        "roots/list" => answer["roots"].is_array(),
        _ => true,
    };
    if well_formed {
        Ok(())
    } else {
        Err(McpError::invalid_params(
            format!("inputResponses.{key} is not a result for its {method} request: {answer}"),
            None,
        ))
    }
}

/// Runs one call of the exchange behind `name`: `None` when `name` asks nothing.
pub fn advance(
    seal: &StateSeal,
    name: &str,
    arguments: &Map<String, Value>,
    capabilities: &ClientCapabilities,
    responses: Option<&InputResponses>,
    request_state: Option<&str>,
) -> Option<Result<Outcome, McpError>> {
    let exchange = exchange(name, arguments, capabilities)?;
    Some(run(seal, name, &exchange, responses, request_state))
}

fn run(
    seal: &StateSeal,
    name: &str,
    exchange: &Exchange,
    responses: Option<&InputResponses>,
    request_state: Option<&str>,
) -> Result<Outcome, McpError> {
    // A stateful exchange resumes where its (verified) state says; without state it starts over.
    let mut state = match (exchange.stateful, request_state) {
        (true, Some(sealed)) => seal.open(name, sealed)?,
        _ => SealedState {
            round: 0,
            answers: Map::new(),
        },
    };
    if state.round >= exchange.rounds.len() {
        return Err(McpError::invalid_params(
            format!("requestState for {name} is past its last round; call again without it"),
            None,
        ));
    }
    let responses = responses.cloned().unwrap_or_default();
    // One round per call: the answers complete the current round or it is asked again; the next
    // round's requests go out even if their keys were answered early.
    let mut complete = true;
    for (key, request) in &exchange.rounds[state.round] {
        match responses.get(*key) {
            Some(answer) => {
                check_answer(key, request, answer)?;
                state.answers.insert((*key).to_owned(), answer.clone());
            }
            None => complete = false,
        }
    }
    if complete {
        state.round += 1;
        if state.round == exchange.rounds.len() {
            return Ok(Outcome::Complete(state.answers));
        }
    }
    let round = &exchange.rounds[state.round];
    let requests: InputRequests = round
        .iter()
        .map(|(key, request)| ((*key).to_owned(), wire(request.clone())))
        .collect();
    let request_state = if exchange.stateful {
        Some(seal.seal(name, &state)?)
    } else {
        None
    };
    Ok(Outcome::InputRequired(InputRequiredResult::new(
        Some(requests),
        request_state,
    )))
}

/// The text of a completed exchange's result.
pub fn completion_text(name: &str, answers: &Map<String, Value>) -> String {
    // Every key of every round is present once an exchange completes; a missing one reads as null
    // rather than panicking.
    let answer = |key: &str| answers.get(key).unwrap_or(&Value::Null);
    let elicited = |key: &str, field: &str| -> String {
        answer(key)["content"][field]
            .as_str()
            .map_or_else(|| answer(key)["content"][field].to_string(), str::to_owned)
    };
    let sampled = |key: &str| sampled_text(answer(key));
    match name {
        "test_input_required_result_elicitation" => {
            format!("Hello, {}!", elicited("user_name", "name"))
        }
        "test_input_required_result_sampling" => {
            format!("LLM response: {}", sampled("capital_question"))
        }
        "test_input_required_result_list_roots" => {
            let roots: Vec<&str> = answer("client_roots")["roots"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|root| root["uri"].as_str())
                .collect();
            format!("Client roots: {}", roots.join(", "))
        }
        "test_input_required_result_request_state" => format!(
            "state-ok: confirmation {} arrived with a verified requestState",
            answer("confirm")["content"]["ok"]
        ),
        "test_input_required_result_tampered_state" => {
            "state-ok: the requestState passed its integrity check".to_owned()
        }
        "test_input_required_result_multiple_inputs" => format!(
            "Received all inputs: name={}, greeting={}, roots={}",
            elicited("user_name", "name"),
            sampled("greeting"),
            answer("client_roots")["roots"]
                .as_array()
                .map_or(0, Vec::len)
        ),
        "test_input_required_result_multi_round" => format!(
            "Completed after two rounds: name={}, color={}",
            elicited("step1", "name"),
            elicited("step2", "color")
        ),
        "test_sampling" => format!("LLM response: {}", sampled("sampling")),
        "test_elicitation" => elicitation_summary("User response", answer("elicitation")),
        "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
            elicitation_summary("Elicitation completed", answer("elicitation"))
        }
        _ => format!(
            "{name} completed with answers for: {}",
            answers.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `label: action=…, content=…`, the same text the handshake-era tools answer with.
pub fn elicitation_summary(label: &str, result: &Value) -> String {
    let content = result.get("content").cloned().unwrap_or_else(|| json!({}));
    format!(
        "{label}: action={}, content={content}",
        result["action"].as_str().unwrap_or("?")
    )
}

/// The text of a `CreateMessageResult`, whose `content` is one block or (2025-11-25) an array of them.
pub fn sampled_text(result: &Value) -> String {
    let content = &result["content"];
    let block = if content.is_array() {
        &content[0]
    } else {
        content
    };
    block["text"]
        .as_str()
        .map_or_else(|| content.to_string(), str::to_owned)
}

/// The `prompts/get` result of [`PROMPT`] once its context was elicited.
pub fn prompt_result(answers: &Map<String, Value>) -> Value {
    let context = answers
        .get("user_context")
        .and_then(|answer| answer["content"]["context"].as_str())
        .unwrap_or("");
    json!({"messages": [{
        "role": "user",
        "content": {"type": "text", "text": format!("Answer using this context: {context}")}
    }]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(content: Value) -> Value {
        json!({"action": "accept", "content": content})
    }

    fn call(
        seal: &StateSeal,
        name: &str,
        responses: Option<Value>,
        state: Option<&str>,
    ) -> Result<Outcome, McpError> {
        let responses: Option<InputResponses> =
            responses.map(|value| serde_json::from_value(value).unwrap());
        advance(
            seal,
            name,
            &Map::new(),
            &ClientCapabilities::default(),
            responses.as_ref(),
            state,
        )
        .expect("an exchange")
    }

    fn input_required(outcome: Outcome) -> Value {
        match outcome {
            Outcome::InputRequired(result) => serde_json::to_value(result).unwrap(),
            Outcome::Complete(answers) => panic!("expected input_required, got {answers:?}"),
        }
    }

    #[test]
    fn the_key_is_long_enough_for_the_codec() {
        assert!(RequestStateCodec::try_new([0u8; 32].to_vec()).is_ok());
    }

    #[test]
    fn single_round_asks_then_completes_without_state() {
        let seal = StateSeal::new();
        let first = input_required(
            call(&seal, "test_input_required_result_elicitation", None, None).unwrap(),
        );
        assert_eq!(first["resultType"], "input_required");
        assert_eq!(
            first["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        assert_eq!(first.get("requestState"), None);
        let done = call(
            &seal,
            "test_input_required_result_elicitation",
            Some(json!({"user_name": accept(json!({"name": "Alice"})), "extra": {"x": 1}})),
            None,
        )
        .unwrap();
        let Outcome::Complete(answers) = done else {
            panic!("not complete")
        };
        assert_eq!(
            completion_text("test_input_required_result_elicitation", &answers),
            "Hello, Alice!"
        );
    }

    #[test]
    fn wrong_keys_are_asked_again_and_wrong_shapes_refused() {
        let seal = StateSeal::new();
        let again = input_required(
            call(
                &seal,
                "test_input_required_result_elicitation",
                Some(json!({"wrong_key": accept(json!({}))})),
                None,
            )
            .unwrap(),
        );
        assert!(again["inputRequests"]["user_name"].is_object(), "{again}");
        let Err(error) = call(
            &seal,
            "test_input_required_result_elicitation",
            Some(json!({"user_name": 12345})),
            None,
        ) else {
            panic!("a number was accepted as an ElicitResult")
        };
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn multi_round_state_evolves_and_tampering_is_refused() {
        let seal = StateSeal::new();
        let name = "test_input_required_result_multi_round";
        let first = input_required(call(&seal, name, None, None).unwrap());
        let state1 = first["requestState"].as_str().unwrap().to_owned();
        assert!(first["inputRequests"]["step1"].is_object());
        let second = input_required(
            call(
                &seal,
                name,
                Some(json!({"step1": accept(json!({"name": "Alice"}))})),
                Some(&state1),
            )
            .unwrap(),
        );
        let state2 = second["requestState"].as_str().unwrap().to_owned();
        assert_ne!(state1, state2);
        assert!(second["inputRequests"]["step2"].is_object(), "{second}");

        let tampered = format!("{state2}-TAMPERED");
        let refused = call(
            &seal,
            name,
            Some(json!({"step2": accept(json!({"color": "blue"}))})),
            Some(&tampered),
        );
        assert!(matches!(refused, Err(ref e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS));
        // A state sealed for one tool does not open for another.
        let transplanted = call(
            &seal,
            "test_input_required_result_request_state",
            Some(json!({"confirm": accept(json!({"ok": true}))})),
            Some(&state2),
        );
        assert!(transplanted.is_err());

        let Outcome::Complete(answers) = call(
            &seal,
            name,
            Some(json!({"step2": accept(json!({"color": "blue"}))})),
            Some(&state2),
        )
        .unwrap() else {
            panic!("round 3 did not complete")
        };
        assert_eq!(
            completion_text(name, &answers),
            "Completed after two rounds: name=Alice, color=blue"
        );
    }

    #[test]
    fn capability_tool_asks_only_for_what_was_declared() {
        let seal = StateSeal::new();
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"sampling": {}})).unwrap();
        let outcome = advance(
            &seal,
            "test_input_required_result_capabilities",
            &Map::new(),
            &capabilities,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        let result = input_required(outcome);
        let keys: Vec<&String> = result["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["sampling"]);
    }

    #[test]
    fn every_request_decodes_as_an_rmcp_input_request() {
        let everything: ClientCapabilities =
            serde_json::from_value(json!({"sampling": {}, "elicitation": {}, "roots": {}}))
                .unwrap();
        for name in [
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_tampered_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_capabilities",
            "test_sampling",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "test_streaming_elicitation",
            PROMPT,
        ] {
            let exchange = exchange(name, &Map::new(), &everything).unwrap();
            for round in &exchange.rounds {
                for (key, request) in round {
                    let decoded: rmcp::model::InputRequest =
                        serde_json::from_value(request.clone())
                            .unwrap_or_else(|e| panic!("{name}.{key}: {e}"));
                    assert_eq!(
                        serde_json::to_value(decoded).unwrap()["method"],
                        request["method"]
                    );
                }
            }
        }
    }
}
