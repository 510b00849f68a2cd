//! `portico chat AGENT`: a conversation with an agent in the terminal.
//!
//! The agent runs in this process, over the same engine (store, tools, pipeline) the daemon uses, so
//! the conversation is stored where the daemon can continue it. Text is printed as the model writes
//! it; tool calls are shown on stderr so stdout holds only the conversation.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use portico_pipeline::{ProgressEvent, ToolContext, model_text};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

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
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        );
    };
    let tool = found.tool_name.clone();
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "portico: chatting with `{}` ({}). One message per line; Ctrl-D to end.",
            found.config.name,
            found.driver.describe()
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut failed = false;
    loop {
        if interactive {
            eprint!("you> ");
        }
        let Some(line) = lines.next_line().await.context("reading stdin")? else {
            break;
        };
        let message = line.trim();
        if message.is_empty() {
            continue;
        }
        let streamed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let context = ToolContext::client("cli").with_progress({
            let streamed = streamed.clone();
            Arc::new(move |event| match event {
                ProgressEvent::Text(text) => {
                    streamed.store(true, std::sync::atomic::Ordering::Relaxed);
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
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
        if !streamed.load(std::sync::atomic::Ordering::Relaxed) {
            print!(
                "{}",
                reply
                    .get("reply")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
        }
        println!();
        if let Some(id) = reply.get("conversation_id").and_then(Value::as_str)
            && conversation.as_deref() != Some(id)
        {
            eprintln!("portico: conversation {id}");
            conversation = Some(id.to_string());
        }
    }
    engine.shutdown().await;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
