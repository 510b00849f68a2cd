//! The one running Portico the door targets talk to, built once per process.
//!
//! An engine with a scripted agent and one host tool, no upstream servers and no built-in tools
//! (fuzzed `tools/call`s must not write files, run commands or fetch URLs), the HTTP door's real
//! router over it, and the current-thread runtime every input runs on (the engine's background tasks
//! run whenever an input does).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use portico_config::Config;
use portico_engine::{Engine, EngineOptions};
use portico_mcp_server::{Backend, HostTool, PorticoServer, ServerOptions};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// The address the door believes it listens on; requests carry it as their `Host`.
pub const LISTEN: &str = "127.0.0.1:4200";

/// The configuration of the fuzzed Portico. Rate limits are on (their key derivation is fuzzed too)
/// but too high to refuse anything, so inputs are judged on what they say, not on how many came
/// before.
pub const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:4200"
max_message_bytes = 65536

[server.rate_limit]
per_second = 1000000000
burst = 1000000000

[builtins]
enabled = false

[a2a]
max_tasks = 64

[[agents]]
name = "echo"
description = "Echoes what it is told"
tools = ["echo"]
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^ask" }, steps = [
      { status = { state = "input-required", message = "which colour?" } },
      { reply = "which colour?" } ] },
  { when = { text = "^report" }, steps = [
      { artifact = { name = "report", chunks = ["part 1", "part 2"] } },
      { reply = "report ready" } ] },
  { when = { text = "^login" }, steps = [
      { status = { state = "auth-required", message = "sign in first" } },
      { reply = "sign in first" } ] },
  { when = { text = "^forbidden" }, steps = [
      { status = { state = "rejected", message = "not doing that" } },
      { reply = "not doing that" } ] },
  { when = { text = "^fail" }, steps = [ { fail = "it broke" } ] },
  { when = { text = "^tool" }, steps = [
      { call_tool = { name = "echo", arguments = { message = "{{message}}" } } },
      { reply = "tool said {{last_tool_result}}" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]
"#;

/// The runtime every target runs on.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime builds")
    })
}

/// The running Portico.
pub struct Door {
    pub config: Config,
    pub engine: Engine,
    /// The MCP server every door serves (the stdio target serves `for_session()` of it).
    pub server: PorticoServer,
    /// `portico_daemon::app_with_server` over the engine and server.
    pub router: axum::Router,
    /// This process's data dir (removed by the next process, see [`data_dir`]).
    pub data: PathBuf,
}

/// The door, started on first use.
pub fn door() -> &'static Door {
    static DOOR: OnceLock<Door> = OnceLock::new();
    DOOR.get_or_init(start)
}

fn start() -> Door {
    let config = portico_config::parse("<fuzz>", CONFIG).expect("the fuzz config is valid");
    let data = data_dir();
    let _enter = runtime().enter();
    let mut options = EngineOptions::in_dir(&data);
    // Nothing of the fuzzing machine's environment leaks in (API keys, `${VAR}`s).
    options.env = Box::new(|_| None);
    let engine = Engine::start(&config, options).expect("the fuzz engine starts");
    let door_config =
        portico_daemon::DoorConfig::from_config(&config).expect("the fuzz door config is valid");
    let server = PorticoServer::new(
        Backend::Local(engine.clone()),
        ServerOptions {
            door: "fuzz".into(),
            ..door_config.server.clone()
        },
    );
    server.host_tools().register(echo_tool());
    let router = portico_daemon::app_with_server(
        engine.clone(),
        &config,
        &door_config,
        server.clone(),
        CancellationToken::new(),
    );
    Door {
        config,
        engine,
        server,
        router,
        data,
    }
}

/// A fresh data dir for this process, on a RAM disk when there is one (every A2A task and
/// conversation is committed to SQLite). The door lives in a static, which is never dropped, so
/// nothing removes the dir at exit; instead each process first removes those of processes that are
/// gone (a fuzzer stopped at its RSS limit or by a crash leaves its dir behind too).
fn data_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(DATA_PREFIX))
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("{DATA_PREFIX}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a data dir for the fuzzed Portico");
    dir
}

const DATA_PREFIX: &str = "portico-fuzz-data-";

/// A host tool with a schema, so calls reach validation and a real result.
fn echo_tool() -> HostTool {
    let definition = serde_json::json!({
        "name": "echo",
        "description": "Echoes its message",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "maxLength": 1000}},
            "required": ["message"]
        }
    });
    HostTool::raw(
        definition.as_object().cloned().unwrap_or_default(),
        |arguments, _context| {
            let message = arguments
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or_default()
                .to_string();
            Box::pin(async move { portico_mcp_server::ToolResult::text(message) })
        },
    )
}
