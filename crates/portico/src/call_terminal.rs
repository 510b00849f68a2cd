//! The terminal as the client of a `portico call`: a [`Caller`] that shows the call's progress and
//! log messages on one updating line of stderr (only when stderr is a terminal, never on stdout,
//! which is the result's), asks the tool's questions (elicitation) field by field on the terminal or
//! answers them as `--elicit` says, and answers requests for a model completion (sampling) with the
//! configured model, or refuses them saying why.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use portico_config::{Config, ModelConfig};
use portico_core::JsonObject;
use portico_core::relay::{
    BoxFuture, Caller, RelayError, RelayNotification, RelayRequest, SamplingAnswer, SamplingError,
    SamplingRequest,
};
use portico_llm::ModelDriver;
use portico_mcp::call_notices::{LogNotice, ProgressNotice, log_notice, progress_notice};
use portico_mcp::elicitation_form::{
    ElicitationAnswer, ElicitationAsk, FieldKind, FormField, elicitation_ask, elicitation_result,
    form_defaults,
};
use serde_json::Value;

use crate::call_cli::{CallArgs, ElicitMode};

/// JSON-RPC's "invalid request": what a refused sampling request answers.
const REFUSED: i32 = -32600;

pub(crate) struct TerminalCaller {
    elicit: ElicitMode,
    /// Questions can be asked: stdin is a terminal.
    can_ask: bool,
    screen: Screen,
    models: Models,
    /// One question on the terminal at a time (a round may bring several).
    asking: tokio::sync::Mutex<()>,
    /// Cancelled when the call is: what is still being asked or sampled ends then.
    gone: tokio_util::sync::CancellationToken,
}

impl TerminalCaller {
    pub(crate) fn new(args: &CallArgs, models: Models) -> TerminalCaller {
        TerminalCaller {
            elicit: args.elicit,
            can_ask: std::io::stdin().is_terminal(),
            screen: Screen::new(),
            models,
            asking: tokio::sync::Mutex::new(()),
            gone: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// The call was cancelled: a question still open, or a model still answering, ends now, so
    /// the sessions that wait on them close at once.
    pub(crate) fn hang_up(&self) {
        self.gone.cancel();
    }

    pub(crate) fn screen(&self) -> &Screen {
        &self.screen
    }

    async fn elicit(&self, params: JsonObject) -> Result<JsonObject, RelayError> {
        let ask = elicitation_ask(&params).map_err(|e| RelayError {
            code: -32602,
            message: format!("portico call cannot show this elicitation request: {e}"),
        })?;
        let _turn = self.asking.lock().await;
        self.screen.clear();
        let answer = match (self.elicit, self.can_ask) {
            (ElicitMode::Decline, _) => {
                note("declined the tool's question (--elicit decline)");
                ElicitationAnswer::Decline
            }
            (ElicitMode::Cancel, _) => {
                note("cancelled the tool's question (--elicit cancel)");
                ElicitationAnswer::Cancel
            }
            (ElicitMode::Defaults, _) => from_defaults(&ask),
            (ElicitMode::Ask, true) => {
                // Progress and logs would land in the middle of the questions: none meanwhile.
                self.screen.pause(true);
                // A thread of its own, not the runtime's blocking pool: a Ctrl-C leaves it waiting
                // on the terminal, and the runtime would wait for it at exit.
                let (answered, answer) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    let stdin = std::io::stdin();
                    let _ = answered.send(ask_on(&mut stdin.lock(), &mut std::io::stderr(), &ask));
                });
                let answer = answer.await.unwrap_or(ElicitationAnswer::Cancel);
                self.screen.pause(false);
                answer
            }
            (ElicitMode::Ask, false) => {
                note(&format!(
                    "declined the tool's question ({}): stdin is not a terminal to ask it on; pass --elicit defaults to accept the form's defaults, or run the call on a terminal",
                    summary(&ask)
                ));
                ElicitationAnswer::Decline
            }
        };
        Ok(elicitation_result(&answer))
    }

    async fn sample_request(&self, params: JsonObject) -> Result<JsonObject, RelayError> {
        let refuse = |reason: String| {
            note(&format!(
                "refused the tool's request for a model completion: {reason}"
            ));
            RelayError {
                code: REFUSED,
                message: format!("portico call refused the sampling request: {reason}"),
            }
        };
        let request = portico_mcp::sampling_request(&params).map_err(&refuse)?;
        let driver = self.models.driver().map_err(&refuse)?;
        note(&format!(
            "answering the tool's request for a model completion with {}",
            driver.describe()
        ));
        let answer = portico_llm::complete_sampling(&*driver, &request)
            .await
            .map_err(|e| RelayError {
                code: -32603,
                message: format!("the model ({}) failed: {e}", driver.describe()),
            })?;
        Ok(portico_mcp::sampling_result(&answer))
    }
}

impl Caller for TerminalCaller {
    fn accepts(&self, request: RelayRequest) -> bool {
        // Roots: a terminal has no workspace to offer, so the upstream is told there are none.
        matches!(request, RelayRequest::Elicitation | RelayRequest::Sampling)
    }

    /// Approvals are answered with `portico approvals`, not at this prompt.
    fn can_confirm(&self) -> bool {
        false
    }

    fn request<'a>(
        &'a self,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        Box::pin(async move {
            let answer = async {
                match request {
                    RelayRequest::Elicitation => self.elicit(params).await,
                    RelayRequest::Sampling => self.sample_request(params).await,
                    // Not declared (see `accepts`), so not asked.
                    RelayRequest::Roots => Err(RelayError {
                        code: -32601,
                        message: "portico call offers no roots".into(),
                    }),
                }
            };
            tokio::select! {
                answer = answer => answer,
                () = self.gone.cancelled() => Err(hung_up()),
            }
        })
    }

    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
        portico_mcp::sample_through(self, request)
    }

    fn notify<'a>(
        &'a self,
        notification: RelayNotification,
        params: JsonObject,
    ) -> BoxFuture<'a, ()> {
        match notification {
            RelayNotification::Progress => {
                self.screen.status(progress_line(&progress_notice(&params)))
            }
            RelayNotification::Log => self.screen.line(&log_line(&log_notice(&params))),
        }
        Box::pin(std::future::ready(()))
    }
}

/// What a request still open when the call was cancelled answers.
fn hung_up() -> RelayError {
    RelayError {
        code: -32800,
        message: "the call was cancelled".into(),
    }
}

/// A note on stderr, unless `-q`.
fn note(text: &str) {
    if !crate::oneview_cli::quiet() {
        eprintln!("portico: {text}");
    }
}

/// The question in a few words, for the note that says it was not asked.
fn summary(ask: &ElicitationAsk) -> String {
    match ask {
        ElicitationAsk::Form { message, .. } => format!("“{message}”"),
        ElicitationAsk::Url { message, url } => format!("“{message}” at {url}"),
    }
}

/// `--elicit defaults`: the form accepted with its defaults; declined when a required field has
/// none, or when it asks for a URL to be visited.
fn from_defaults(ask: &ElicitationAsk) -> ElicitationAnswer {
    match ask {
        ElicitationAsk::Form { fields, .. } => match form_defaults(fields) {
            Ok(content) => ElicitationAnswer::Accept(content),
            Err(missing) => {
                note(&format!(
                    "declined the tool's question ({}): {} required and without a default, which --elicit defaults cannot answer",
                    summary(ask),
                    crate::output::names(missing.iter().map(String::as_str))
                ));
                ElicitationAnswer::Decline
            }
        },
        ElicitationAsk::Url { .. } => {
            note(&format!(
                "declined the tool's request to visit a URL ({}): --elicit defaults visits none",
                summary(ask)
            ));
            ElicitationAnswer::Decline
        }
    }
}

/// Asks `ask` on a terminal: `input` its keyboard, `out` where the questions go (stderr). End of
/// input (Ctrl-D) cancels.
pub(crate) fn ask_on(
    input: &mut impl BufRead,
    out: &mut impl Write,
    ask: &ElicitationAsk,
) -> ElicitationAnswer {
    match ask {
        ElicitationAsk::Url { message, url } => {
            let _ = writeln!(
                out,
                "\nThe tool asks you to open this URL: {message}\n  {url}"
            );
            match prompt(
                input,
                out,
                "Press Enter once done; d to decline, c to cancel: ",
            )
            .as_deref()
            .map(str::trim)
            {
                None | Some("c" | "cancel") => ElicitationAnswer::Cancel,
                Some("d" | "decline") => ElicitationAnswer::Decline,
                Some(_) => ElicitationAnswer::Accept(JsonObject::new()),
            }
        }
        ElicitationAsk::Form { message, fields } => {
            let _ = writeln!(out, "\nThe tool asks: {message}");
            match prompt(input, out, "Answer? [Y]es, [d]ecline, [c]ancel: ")
                .as_deref()
                .map(|s| s.trim().to_ascii_lowercase())
                .as_deref()
            {
                None | Some("c" | "cancel") => return ElicitationAnswer::Cancel,
                Some("d" | "decline") => return ElicitationAnswer::Decline,
                Some(_) => {}
            }
            let mut content = JsonObject::new();
            for field in fields {
                let Some(value) = ask_field(input, out, field) else {
                    return ElicitationAnswer::Cancel;
                };
                if let Some(value) = value {
                    content.insert(field.name.clone(), value);
                }
            }
            ElicitationAnswer::Accept(content)
        }
    }
}

/// One field, asked until what is typed fits it; `None` at the end of input.
fn ask_field(
    input: &mut impl BufRead,
    out: &mut impl Write,
    field: &FormField,
) -> Option<Option<Value>> {
    if let FieldKind::Choice(choices) | FieldKind::MultiChoice(choices) = &field.kind {
        let listed: Vec<String> = choices
            .iter()
            .enumerate()
            .map(|(n, choice)| format!("{}) {}", n + 1, choice.label))
            .collect();
        let _ = writeln!(out, "  {}", listed.join("  "));
    }
    let question = field_prompt(field);
    loop {
        let typed = prompt(input, out, &question)?;
        match field.read(&typed) {
            Ok(value) => return Some(value),
            Err(problem) => {
                let _ = writeln!(out, "  {problem}");
            }
        }
    }
}

/// `  Name (User name) [John Doe]: `, with what kind of answer fits, `*` when required.
fn field_prompt(field: &FormField) -> String {
    let mut prompt = format!("  {}", field.label);
    if let Some(description) = field.description.as_deref().filter(|d| *d != field.label) {
        prompt.push_str(&format!(" ({description})"));
    }
    let hint = match &field.kind {
        FieldKind::Boolean => Some("y/n"),
        FieldKind::Number => Some("a number"),
        FieldKind::Integer => Some("a whole number"),
        FieldKind::Choice(_) => Some("a number or a value"),
        FieldKind::MultiChoice(_) => Some("numbers or values, separated by commas"),
        FieldKind::Text => None,
    };
    if let Some(hint) = hint {
        prompt.push_str(&format!(", {hint}"));
    }
    match field
        .default
        .as_ref()
        .map(|default| shown_default(field, default))
    {
        Some(default) => prompt.push_str(&format!(" [{default}]")),
        None if field.required => prompt.push_str(" *"),
        None => {}
    }
    prompt.push_str(": ");
    prompt
}

/// A default as the person reads it: a choice by its label, several joined, `y`/`n`, text as is.
fn shown_default(field: &FormField, default: &Value) -> String {
    let label = |value: &Value| match (&field.kind, value) {
        (FieldKind::Choice(choices) | FieldKind::MultiChoice(choices), Value::String(value)) => {
            choices
                .iter()
                .find(|choice| &choice.value == value)
                .map_or_else(|| value.clone(), |choice| choice.label.clone())
        }
        (_, Value::String(text)) => text.clone(),
        (_, Value::Bool(yes)) => if *yes { "y" } else { "n" }.to_string(),
        (_, other) => other.to_string(),
    };
    match default {
        Value::Array(values) => values.iter().map(label).collect::<Vec<_>>().join(", "),
        one => label(one),
    }
}

/// Writes `question` and reads one line; `None` at the end of input.
fn prompt(input: &mut impl BufRead, out: &mut impl Write, question: &str) -> Option<String> {
    let _ = write!(out, "{question}");
    let _ = out.flush();
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => {
            let _ = writeln!(out);
            None
        }
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
    }
}

/// `progress 3/10: copying`.
pub(crate) fn progress_line(notice: &ProgressNotice) -> String {
    let mut line = format!("progress {}", shown_number(notice.progress));
    if let Some(total) = notice.total {
        line.push_str(&format!("/{}", shown_number(total)));
    }
    if let Some(message) = &notice.message {
        line.push_str(&format!(": {message}"));
    }
    line
}

fn shown_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// `log warning (db): disk almost full`.
pub(crate) fn log_line(notice: &LogNotice) -> String {
    let data = match &notice.data {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match &notice.logger {
        Some(logger) => format!("log {} ({logger}): {data}", notice.level),
        None => format!("log {}: {data}", notice.level),
    }
}

/// Stderr while the call runs: one status line that each progress notification rewrites, and
/// whole lines (log messages) printed above it. Nothing at all when stderr is not a terminal, or
/// with `-q`.
pub(crate) struct Screen {
    live: bool,
    /// A question is being asked: nothing else is written meanwhile.
    paused: std::sync::atomic::AtomicBool,
    status: Mutex<Option<String>>,
}

impl Screen {
    fn new() -> Screen {
        Screen {
            live: std::io::stderr().is_terminal() && !crate::oneview_cli::quiet(),
            paused: std::sync::atomic::AtomicBool::new(false),
            status: Mutex::new(None),
        }
    }

    fn pause(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    fn shows(&self) -> bool {
        self.live && !self.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn status(&self, text: String) {
        if !self.shows() {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{text}");
        let _ = stderr.flush();
        *self.status.lock().expect("status line lock") = Some(text);
    }

    fn line(&self, text: &str) {
        if !self.shows() {
            return;
        }
        let status = self.status.lock().expect("status line lock");
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "\r\x1b[2K{text}");
        if let Some(status) = status.as_deref() {
            let _ = write!(stderr, "{status}");
        }
        let _ = stderr.flush();
    }

    /// Takes the status line away, before a question or the result; ends the line of a question
    /// left unanswered (the call was cancelled meanwhile).
    pub(crate) fn clear(&self) {
        if self.live && self.paused.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!();
        }
        if self
            .status
            .lock()
            .expect("status line lock")
            .take()
            .is_some()
        {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        }
    }
}

/// The model that answers sampling requests, chosen on the first one: the config is read then
/// (through the daemon, this process has not read it otherwise).
pub(crate) struct Models {
    config: Source,
    sample_with: Option<String>,
    chosen: OnceLock<Result<Arc<dyn ModelDriver>, String>>,
}

enum Source {
    Loaded(Box<Config>),
    File(Option<PathBuf>),
}

impl Models {
    pub(crate) fn loaded(config: Config, sample_with: Option<String>) -> Models {
        Models {
            config: Source::Loaded(Box::new(config)),
            sample_with,
            chosen: OnceLock::new(),
        }
    }

    pub(crate) fn from_config_file(
        explicit: Option<&std::path::Path>,
        sample_with: Option<String>,
    ) -> Models {
        Models {
            config: Source::File(explicit.map(Into::into)),
            sample_with,
            chosen: OnceLock::new(),
        }
    }

    /// The model, or why there is none.
    fn driver(&self) -> Result<Arc<dyn ModelDriver>, String> {
        self.chosen
            .get_or_init(|| {
                let loaded;
                let config = match &self.config {
                    Source::Loaded(config) => config,
                    Source::File(explicit) => {
                        loaded = portico_config::load(explicit.as_deref())
                            .map_err(|e| format!("the config does not load: {e}"))?
                            .0;
                        &loaded
                    }
                };
                sampling_driver(config, self.sample_with.as_deref())
            })
            .clone()
    }
}

/// The model of the agent `sample_with` names, else of the first enabled agent, else the one
/// Portico's environment names; `Err` says why there is none.
fn sampling_driver(
    config: &Config,
    sample_with: Option<&str>,
) -> Result<Arc<dyn ModelDriver>, String> {
    let agent = match sample_with {
        Some(name) => Some(
            config
                .agents
                .iter()
                .find(|agent| agent.name == name)
                .ok_or_else(|| {
                    format!(
                        "--sample-with names no agent `{name}`; the config has: {}",
                        crate::output::names(config.agents.iter().map(|a| a.name.as_str()))
                    )
                })?,
        ),
        None => config.agents.iter().find(|agent| agent.enabled),
    };
    let (name, model) = match agent {
        Some(agent) => (agent.name.as_str(), agent.model.clone()),
        None => ("portico call", ModelConfig::default()),
    };
    let client = portico_net::LazyClient::new(|| {
        portico_net::SafeClient::builder()
            // Local model servers (Ollama, vLLM) live on loopback or the LAN, as for agents.
            .policy(portico_net::NetPolicy::allow_private_network())
            .credentials(portico_net::CredentialScope::Everywhere)
            .user_agent(concat!("portico/", env!("CARGO_PKG_VERSION")))
            .build()
    });
    match portico_agents::choose(name, &model, &|var| std::env::var(var).ok(), &client) {
        portico_agents::DriverChoice::Ready(driver) => Ok(driver),
        portico_agents::DriverChoice::Sampling => Err(format!(
            "agent `{name}`'s model is the calling client's (provider = \"sampling\"), and portico call has no client above it; pass --sample-with naming an agent with a model"
        )),
        portico_agents::DriverChoice::Unavailable(why) => Err(match agent {
            // Written for the daemon's agents; this command reads the environment afresh.
            Some(_) => why.trim_end_matches(", then restart Portico").to_string(),
            None => "no model is configured: the config has no agent, and Portico's environment names no model (set OPENAI_API_KEY, ANTHROPIC_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server), or pass --sample-with naming an agent with a model".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_mcp::elicitation_form::Choice;
    use serde_json::json;

    fn field(name: &str, kind: FieldKind, default: Option<Value>) -> FormField {
        FormField {
            name: name.into(),
            label: name.into(),
            description: None,
            kind,
            default,
            required: false,
        }
    }

    fn choices(pairs: &[(&str, &str)]) -> Vec<Choice> {
        pairs
            .iter()
            .map(|(value, label)| Choice {
                value: (*value).into(),
                label: (*label).into(),
            })
            .collect()
    }

    fn form() -> ElicitationAsk {
        ElicitationAsk::Form {
            message: "About you".into(),
            fields: vec![
                FormField {
                    description: Some("User name".into()),
                    ..field("name", FieldKind::Text, Some(json!("John Doe")))
                },
                FormField {
                    required: true,
                    ..field("age", FieldKind::Integer, None)
                },
                field(
                    "status",
                    FieldKind::Choice(choices(&[("active", "active"), ("inactive", "inactive")])),
                    Some(json!("active")),
                ),
                field("verified", FieldKind::Boolean, Some(json!(true))),
            ],
        }
    }

    fn answer(typed: &str, asked: &ElicitationAsk) -> (ElicitationAnswer, String) {
        let mut out = Vec::new();
        let answer = ask_on(&mut typed.as_bytes(), &mut out, asked);
        (answer, String::from_utf8(out).unwrap())
    }

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_form_is_asked_field_by_field_with_defaults_offered_and_required_checked() {
        let (answered, shown) = answer("y\n\nold\n41\n2\nn\n", &form());
        assert_eq!(
            answered,
            ElicitationAnswer::Accept(object(
                json!({"name": "John Doe", "age": 41, "status": "inactive", "verified": false})
            ))
        );
        assert_eq!(
            shown,
            "\nThe tool asks: About you\n\
             Answer? [Y]es, [d]ecline, [c]ancel: \
             \x20 name (User name) [John Doe]: \
             \x20 age, a whole number *: \
             \x20 type a whole number\n\
             \x20 age, a whole number *: \
             \x20 1) active  2) inactive\n\
             \x20 status, a number or a value [active]: \
             \x20 verified, y/n [y]: "
        );
    }

    #[test]
    fn defaults_are_offered_as_the_person_reads_them() {
        let fields = [
            field(
                "hero",
                FieldKind::Choice(choices(&[("h1", "Superman"), ("h2", "Batman")])),
                Some(json!("h2")),
            ),
            field(
                "fish",
                FieldKind::MultiChoice(choices(&[("f1", "Tuna"), ("f2", "Trout")])),
                Some(json!(["f1", "f2"])),
            ),
        ];
        let prompts: Vec<String> = fields.iter().map(field_prompt).collect();
        assert_eq!(
            prompts,
            [
                "  hero, a number or a value [Batman]: ",
                "  fish, numbers or values, separated by commas [Tuna, Trout]: "
            ]
        );
    }

    #[test]
    fn a_form_can_be_declined_or_cancelled_and_the_end_of_input_cancels() {
        assert_eq!(answer("d\n", &form()).0, ElicitationAnswer::Decline);
        assert_eq!(answer("c\n", &form()).0, ElicitationAnswer::Cancel);
        assert_eq!(answer("y\n\n", &form()).0, ElicitationAnswer::Cancel);
        assert_eq!(answer("", &form()).0, ElicitationAnswer::Cancel);
    }

    #[test]
    fn a_url_is_shown_and_enter_accepts() {
        let url = ElicitationAsk::Url {
            message: "Log in".into(),
            url: "https://example.com/a".into(),
        };
        let (answered, shown) = answer("\n", &url);
        assert_eq!(answered, ElicitationAnswer::Accept(JsonObject::new()));
        assert_eq!(
            shown,
            "\nThe tool asks you to open this URL: Log in\n  https://example.com/a\nPress Enter once done; d to decline, c to cancel: "
        );
        assert_eq!(answer("d\n", &url).0, ElicitationAnswer::Decline);
    }

    #[test]
    fn defaults_answer_what_they_can_and_decline_the_rest() {
        assert_eq!(from_defaults(&form()), ElicitationAnswer::Decline);
        let all_defaults = ElicitationAsk::Form {
            message: "m".into(),
            fields: vec![field("n", FieldKind::Number, Some(json!(95.5)))],
        };
        assert_eq!(
            from_defaults(&all_defaults),
            ElicitationAnswer::Accept(object(json!({"n": 95.5})))
        );
    }

    #[test]
    fn progress_and_log_lines_say_what_the_server_sent() {
        let progress = |progress: f64, total: Option<f64>, message: Option<&str>| ProgressNotice {
            progress,
            total,
            message: message.map(str::to_owned),
        };
        assert_eq!(
            progress_line(&progress(3.0, Some(10.0), Some("copying"))),
            "progress 3/10: copying"
        );
        assert_eq!(progress_line(&progress(0.5, None, None)), "progress 0.5");
        let log = |logger: Option<&str>, data: Value| LogNotice {
            level: "warning".into(),
            logger: logger.map(str::to_owned),
            data,
        };
        assert_eq!(
            log_line(&log(Some("db"), json!("disk almost full"))),
            "log warning (db): disk almost full"
        );
        assert_eq!(
            log_line(&log(None, json!({"n": 1}))),
            "log warning: {\"n\":1}"
        );
    }

    #[test]
    fn without_a_model_sampling_is_refused_with_the_reason() {
        let config = portico_config::parse("test", "[builtins]\nenabled = false\n").unwrap();
        let Err(why) = sampling_driver(&config, Some("nobody")) else {
            panic!("an agent that does not exist answered");
        };
        assert!(
            why.starts_with("--sample-with names no agent `nobody`"),
            "{why}"
        );
    }
}
