//! `portico chat AGENT`: a conversation with an agent in the terminal.
//!
//! With a daemon running, the messages go to its `POST /api/agents/{name}/message` (streamed), so
//! the agent runs there, with the daemon's servers and config; with `--standalone` or no daemon,
//! the agent runs in this process over the same engine (store, tools, pipeline) the daemon uses, so
//! the conversation is stored where the daemon can continue it. Text is printed as the model writes
//! it; tool calls are shown on stderr so stdout holds only the conversation. On a terminal the line
//! is edited with rustyline and kept in a history file in the data dir; from a pipe, lines are read
//! plainly.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use portico_pipeline::{ProgressEvent, ToolContext, model_text};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::daemon_client::Daemon;

/// The history file's name in the data dir.
const HISTORY_FILE: &str = "chat_history";
/// Lines the history keeps.
const HISTORY_LINES: usize = 1000;

pub async fn run(
    explicit: Option<&std::path::Path>,
    agent: &str,
    mut conversation: Option<String>,
) -> anyhow::Result<ExitCode> {
    let engine = crate::cli::start_engine(explicit).await?;
    let Some(found) = engine.agents().agent(agent) else {
        let known: Vec<String> = engine
            .agents()
            .infos()
            .into_iter()
            .map(|a| a.name)
            .collect();
        engine.shutdown().await;
        bail!(
            "no agent named `{agent}`; configured agents: {}",
            listed(&known)
        );
    };
    if let Some(fix) = found.driver.missing() {
        let fix = fix.to_string();
        engine.shutdown().await;
        bail!("{fix}, then run `portico chat {agent}` again");
    }
    let tool = found.tool_name.clone();
    let mut input = ChatInput::open();
    if input.interactive() {
        eprintln!(
            "portico: chatting with `{}` ({}). One message per line; Ctrl-D to end.",
            found.config.name,
            found.driver.describe()
        );
    }
    let mut failed = false;
    while let Some(message) = input.next_message().await? {
        let streamed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let context = ToolContext::client("cli").with_progress({
            let streamed = streamed.clone();
            Arc::new(move |event| match event {
                ProgressEvent::Text(text) => {
                    streamed.store(true, std::sync::atomic::Ordering::Relaxed);
                    print_fragment(&text);
                }
                ProgressEvent::ToolStarted { name } => eprintln!("  [calling {name}]"),
                ProgressEvent::ToolFinished {
                    name,
                    is_error: true,
                } => {
                    eprintln!("  [{name} failed]")
                }
                _ => {}
            })
        });
        let mut arguments = json!({"message": message});
        if let Some(id) = &conversation {
            arguments["conversation_id"] = Value::String(id.clone());
        }
        let outcome = engine
            .pipeline()
            .call(&tool, arguments.as_object().cloned(), &context)
            .await?;
        if outcome.is_error() {
            eprintln!("portico: {}", model_text(&outcome.result));
            failed = true;
            continue;
        }
        let reply = outcome.result.structured_content.unwrap_or_default();
        finish_reply(
            &reply,
            streamed.load(std::sync::atomic::Ordering::Relaxed),
            &mut conversation,
        );
    }
    input.close();
    engine.shutdown().await;
    Ok(exit_code(failed))
}

/// The same conversation through the running daemon's API.
pub async fn through_daemon(
    daemon: &Daemon,
    agent: &str,
    mut conversation: Option<String>,
) -> anyhow::Result<ExitCode> {
    let listed_agents = daemon.get("/api/agents", None).await?;
    let agents: Vec<portico_agents::AgentInfo> =
        serde_json::from_value(listed_agents["agents"].clone())
            .context("the daemon's /api/agents answer is not a list of agents")?;
    let Some(found) = agents.iter().find(|a| a.name == agent) else {
        let known: Vec<String> = agents.iter().map(|a| a.name.clone()).collect();
        bail!(
            "no agent named `{agent}` in {}; its agents: {}",
            daemon.describe(),
            listed(&known)
        );
    };
    if let Some(fix) = &found.needs_model {
        bail!(
            "{}",
            daemon_needs_a_model(daemon, agent, fix, &|name| std::env::var(name).ok())
        );
    }
    let mut input = ChatInput::open();
    if input.interactive() {
        eprintln!(
            "portico: chatting with `{agent}` through {}. One message per line; Ctrl-D to end.",
            daemon.describe()
        );
    }
    let path = format!("/api/agents/{agent}/message");
    let mut failed = false;
    while let Some(message) = input.next_message().await? {
        let mut body = json!({"message": message, "stream": true});
        if let Some(id) = &conversation {
            body["conversation_id"] = Value::String(id.clone());
        }
        match stream_reply(daemon, &path, &body, &mut conversation).await {
            Ok(true) => {}
            Ok(false) => failed = true,
            Err(error) => {
                eprintln!("portico: {error:#}");
                failed = true;
            }
        }
    }
    input.close();
    Ok(exit_code(failed))
}

/// When `tool` is the tool of one of the daemon's agents that has no model: why it cannot answer, in
/// the daemon's terms (see [`daemon_needs_a_model`]). `None` for any other tool, or when the daemon
/// does not say.
pub(crate) async fn daemon_agent_without_model(daemon: &Daemon, tool: &str) -> Option<String> {
    if !tool.starts_with("portico_agent_") {
        return None;
    }
    let listed = daemon.get("/api/agents", None).await.ok()?;
    let agents: Vec<portico_agents::AgentInfo> =
        serde_json::from_value(listed["agents"].clone()).ok()?;
    let agent = agents.iter().find(|agent| agent.tool == tool)?;
    let fix = agent.needs_model.as_deref()?;
    Some(daemon_needs_a_model(daemon, &agent.name, fix, &|name| {
        std::env::var(name).ok()
    }))
}

/// Why `agent` in the daemon cannot answer: it has no model. When this shell has what would give it
/// one, the daemon lacks it only because it keeps the environment it started with.
fn daemon_needs_a_model(
    daemon: &Daemon,
    agent: &str,
    fix: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let here: Vec<&str> = portico_agents::MODEL_VARIABLES
        .into_iter()
        .filter(|name| env(name).is_some_and(|value| !value.is_empty()))
        .collect();
    let restart = "restart it from a shell that has it: `portico stop`, then `portico serve`";
    match here.as_slice() {
        [] => format!(
            "{fix}. {} has its own environment, read when it started: set the variable where it \
             runs, then {restart}",
            daemon.describe()
        ),
        set => format!(
            "agent `{agent}` has no model in {}: this shell sets {}, but the daemon keeps the \
             environment it started with; {restart}",
            daemon.describe(),
            set.join(" and ")
        ),
    }
}

/// Sends one message and prints the streamed answer; `false` when the agent failed.
async fn stream_reply(
    daemon: &Daemon,
    path: &str,
    body: &Value,
    conversation: &mut Option<String>,
) -> anyhow::Result<bool> {
    let response = daemon
        .request(reqwest::Method::POST, path)
        .json(body)
        .send()
        .await
        .with_context(|| format!("{} did not answer {path}", daemon.describe()))?;
    let status = response.status();
    if !status.is_success() {
        let error: Value = response.json().await.unwrap_or_default();
        bail!(
            "{}",
            error["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("the daemon answered {path} with HTTP {status}"))
        );
    }
    let mut events = portico_net::sse::SseStream::new(
        Box::pin(response.bytes_stream()),
        portico_net::sse::SseLimits::default(),
    );
    let mut streamed = false;
    while let Some(event) = events.next().await {
        let event = event.context("reading the daemon's answer")?;
        let data: Value = serde_json::from_str(&event.data).unwrap_or_default();
        match event.event.as_str() {
            "text" => {
                streamed = true;
                print_fragment(data["text"].as_str().unwrap_or_default());
            }
            "tool" => match data["state"].as_str() {
                Some("started") => {
                    eprintln!("  [calling {}]", data["name"].as_str().unwrap_or("?"))
                }
                Some("failed") => eprintln!("  [{} failed]", data["name"].as_str().unwrap_or("?")),
                _ => {}
            },
            "reply" => {
                finish_reply(&data, streamed, conversation);
                return Ok(true);
            }
            "error" => {
                eprintln!(
                    "portico: {}",
                    data["error"].as_str().unwrap_or("the agent failed")
                );
                return Ok(false);
            }
            _ => {}
        }
    }
    bail!("the daemon's answer ended before the agent's reply")
}

fn print_fragment(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Ends an answer: the reply when it was not streamed, a newline, and the conversation's id the
/// first time it is known.
fn finish_reply(reply: &Value, streamed: bool, conversation: &mut Option<String>) {
    if !streamed {
        print!("{}", reply["reply"].as_str().unwrap_or_default());
    }
    println!();
    if let Some(id) = reply["conversation_id"].as_str()
        && conversation.as_deref() != Some(id)
    {
        eprintln!("portico: conversation {id}");
        *conversation = Some(id.to_string());
    }
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn exit_code(failed: bool) -> ExitCode {
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Where messages come from: an edited line on a terminal (rustyline on a thread of its own, as it
/// blocks on the terminal), else stdin's lines as they come.
enum ChatInput {
    Terminal(Editor),
    Piped(tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>),
}

impl ChatInput {
    fn open() -> ChatInput {
        if std::io::stdin().is_terminal() {
            match Editor::start(portico_config::data_dir().join(HISTORY_FILE)) {
                Ok(editor) => return ChatInput::Terminal(editor),
                Err(error) => eprintln!("portico: no line editing ({error}); reading plain lines"),
            }
        }
        ChatInput::Piped(tokio::io::BufReader::new(tokio::io::stdin()).lines())
    }

    fn interactive(&self) -> bool {
        matches!(self, ChatInput::Terminal(_))
    }

    /// The next non-empty message, trimmed; `None` at the end of input (Ctrl-D).
    async fn next_message(&mut self) -> anyhow::Result<Option<String>> {
        loop {
            let line = match self {
                ChatInput::Terminal(editor) => editor.read_line().await?,
                ChatInput::Piped(lines) => lines.next_line().await.context("reading stdin")?,
            };
            let Some(line) = line else {
                return Ok(None);
            };
            let message = line.trim();
            if !message.is_empty() {
                return Ok(Some(message.to_string()));
            }
        }
    }

    /// Saves the history (on a terminal).
    fn close(self) {
        if let ChatInput::Terminal(editor) = self {
            editor.close();
        }
    }
}

/// rustyline's editor on its own thread: a line is asked for, and read, one at a time.
struct Editor {
    ask: std::sync::mpsc::Sender<()>,
    lines: tokio::sync::mpsc::Receiver<Result<Option<String>, String>>,
    thread: std::thread::JoinHandle<()>,
}

impl Editor {
    fn start(history: std::path::PathBuf) -> Result<Editor, rustyline::error::ReadlineError> {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_LINES)?
            .auto_add_history(true)
            .build();
        let mut editor = rustyline::DefaultEditor::with_config(config)?;
        // No history yet is the usual first run.
        let _ = editor.load_history(&history);
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (answer, lines) = tokio::sync::mpsc::channel(1);
        let thread = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                let line = loop {
                    match editor.readline("you> ") {
                        Ok(line) => break Ok(Some(line)),
                        // Ctrl-C clears the line, as in a shell; Ctrl-D ends.
                        Err(rustyline::error::ReadlineError::Interrupted) => continue,
                        Err(rustyline::error::ReadlineError::Eof) => break Ok(None),
                        Err(error) => break Err(error.to_string()),
                    }
                };
                if answer.blocking_send(line).is_err() {
                    break;
                }
            }
            if let Some(parent) = history.parent() {
                let _ = portico_config::create_private_dir_all(parent);
            }
            if let Err(error) = editor.save_history(&history) {
                eprintln!(
                    "portico: could not save the chat history to {}: {error}",
                    history.display()
                );
            }
        });
        Ok(Editor { ask, lines, thread })
    }

    async fn read_line(&mut self) -> anyhow::Result<Option<String>> {
        if self.ask.send(()).is_err() {
            return Ok(None);
        }
        match self.lines.recv().await {
            Some(Ok(line)) => Ok(line),
            Some(Err(error)) => bail!("reading the terminal: {error}"),
            None => Ok(None),
        }
    }

    fn close(self) {
        drop(self.ask);
        let _ = self.thread.join();
    }
}
