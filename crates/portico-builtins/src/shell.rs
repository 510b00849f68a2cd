//! `shell_exec`: `/bin/sh -c COMMAND` in the workspace. Registered only when the operator enables it.
//!
//! A shell can do anything the Portico process can, so the tool is marked sensitive (the taint rule
//! guards it) and runs as contained as a plain child process allows:
//! - a cleared environment (`PATH`, `HOME` = the workspace, `LANG`), so Portico's own secrets (API
//!   keys, tokens in its environment) are not handed to whatever the command runs;
//! - the workspace as working directory and stdin from `/dev/null`;
//! - its own process group, killed whole (SIGKILL to the group) on timeout, when the call is cancelled
//!   (its future dropped), and right after the shell exits, so nothing it started in the background
//!   outlives the call;
//! - stdout and stderr each capped at [`MAX_OUTPUT_BYTES`]; the rest is read and discarded so the
//!   command never blocks on a full pipe.
//!
//! It is not a sandbox: the command has the Portico process's user, filesystem and network.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use portico_pipeline::LocalTool;
use rustix::process::{Pid, Signal, kill_process_group};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::text::decode;
use crate::workspace::Workspace;

/// The most bytes of stdout, and of stderr, a call returns.
pub(crate) const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// `PATH` for commands: the system's standard directories, not whatever Portico was started with.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long output readers may take to finish after the process group was killed. Only a process that
/// left the group (`setsid`) while holding the pipes can make them wait; its output is then given up.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Input of `shell_exec`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellExecInput {
    /// The command line, run as `/bin/sh -c COMMAND` in the workspace directory.
    command: String,
    /// Seconds before the command and everything it started are killed. Defaults to, and is capped
    /// at, the configured timeout (30 s unless configured otherwise).
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
}

/// Output of `shell_exec`.
#[derive(Debug, Serialize, JsonSchema)]
struct ShellExecOutput {
    /// The shell's exit code; null when it was ended by a signal (see `signal`).
    exit_code: Option<i32>,
    /// The signal that ended the shell, if one did (9 when killed on timeout).
    signal: Option<i32>,
    /// Standard output, decoded as UTF-8; cut at 64 KiB with a marker saying how much was dropped.
    stdout: String,
    /// Standard error, decoded as UTF-8; cut at 64 KiB with a marker saying how much was dropped.
    stderr: String,
    /// True when the command ran past its timeout and was killed.
    timed_out: bool,
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
enum ShellError {
    #[error("the command is empty; give a shell command line to run")]
    EmptyCommand,
    #[error("could not start /bin/sh in the workspace {workspace}: {source}")]
    Spawn {
        workspace: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not wait for the command `{command}`: {source}")]
    Wait {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn shell_exec(workspace: Arc<Workspace>, max_timeout: Duration) -> LocalTool {
    LocalTool::typed(
        "shell_exec",
        "Run a shell command (`/bin/sh -c`) in the workspace directory and return its exit code, \
         stdout and stderr. The environment is minimal (PATH, HOME, LANG), stdin is empty, output is \
         cut at 64 KiB per stream, and the command is killed with everything it started when it \
         times out.",
        move |input: ShellExecInput| {
            let workspace = workspace.clone();
            async move { run(&workspace, input, max_timeout).await }
        },
    )
    .sensitive()
}

async fn run(
    workspace: &Workspace,
    input: ShellExecInput,
    max_timeout: Duration,
) -> Result<ShellExecOutput, ShellError> {
    if input.command.trim().is_empty() {
        return Err(ShellError::EmptyCommand);
    }
    let timeout = input.timeout_secs.map_or(max_timeout, |secs| {
        Duration::from_secs(secs.max(1)).min(max_timeout)
    });
    let root = workspace.root();

    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(&input.command)
        .env_clear()
        .env("PATH", CHILD_PATH)
        .env("HOME", root)
        .env("LANG", "C.UTF-8")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so one signal to the group reaches everything the command starts.
        .process_group(0)
        // Reaps the shell itself if this future is dropped; the group guard takes care of the rest.
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|source| ShellError::Spawn {
        workspace: root.display().to_string(),
        source,
    })?;
    let mut group = GroupGuard::new(child.id());
    let stdout = Reader::spawn(child.stdout.take());
    let stderr = Reader::spawn(child.stderr.take());

    let waited = tokio::time::timeout(timeout, child.wait()).await;
    let timed_out = waited.is_err();
    let status = match waited {
        Ok(status) => status,
        Err(_elapsed) => {
            group.kill();
            child.wait().await
        }
    };
    // The shell is gone (and reaped); whatever it left running in its group goes too, which also
    // closes the pipes so the readers finish.
    group.kill();
    group.disarm();
    let status = status.map_err(|source| ShellError::Wait {
        command: input.command.clone(),
        source,
    })?;

    let stdout = stdout.finish().await;
    let stderr = stderr.finish().await;
    Ok(ShellExecOutput {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        timed_out,
    })
}

/// Kills the child's process group when dropped, so cancelling the call (dropping its future) cannot
/// leave the command or its children running.
struct GroupGuard {
    group: Option<Pid>,
}

impl GroupGuard {
    fn new(pid: Option<u32>) -> Self {
        GroupGuard {
            group: pid
                .and_then(|pid| i32::try_from(pid).ok())
                .and_then(Pid::from_raw),
        }
    }

    fn kill(&self) {
        if let Some(group) = self.group {
            // ESRCH (the group is already empty) is the common case and harmless.
            match kill_process_group(group, Signal::KILL) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                Err(error) => tracing::debug!("cannot kill shell_exec group {group:?}: {error}"),
            }
        }
    }

    /// Stops the guard from killing on drop. Called once the shell has been reaped and its group
    /// killed: from then on the id may be reused by an unrelated process group, which must not be hit.
    fn disarm(&mut self) {
        self.group = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads one output stream to its end, keeping the first [`MAX_OUTPUT_BYTES`] and counting the rest.
/// Aborted if dropped, so a cancelled call leaves no reader task behind.
struct Reader(Option<JoinHandle<(Vec<u8>, u64)>>);

impl Reader {
    fn spawn(stream: Option<impl AsyncRead + Unpin + Send + 'static>) -> Self {
        Reader(stream.map(|stream| tokio::spawn(read_capped(stream, MAX_OUTPUT_BYTES))))
    }

    /// The stream's text, with a marker when it was cut.
    async fn finish(mut self) -> String {
        let Some(handle) = self.0.as_mut() else {
            return String::new();
        };
        let (kept, total) = match tokio::time::timeout(DRAIN_GRACE, handle).await {
            Ok(Ok(read)) => read,
            Ok(Err(_)) => return "[output unavailable: reading it failed]".to_string(),
            Err(_) => {
                return "[output unavailable: a process outside the command's group kept the \
                        stream open]"
                    .to_string();
            }
        };
        let truncated = total > kept.len() as u64;
        let (mut text, shown) = decode(kept, truncated);
        if truncated {
            text.push_str(&format!(
                "\n[output truncated: {total} bytes in all, the first {shown} shown]"
            ));
        }
        text
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// Keeps up to `cap` bytes and drains the rest; returns what was kept and the total length.
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::test_support::{call, err, ok};

    fn tool(max_timeout: Duration) -> (tempfile::TempDir, Arc<Workspace>, LocalTool) {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Arc::new(Workspace::open(dir.path(), &[]).unwrap());
        let tool = shell_exec(workspace.clone(), max_timeout);
        (dir, workspace, tool)
    }

    #[tokio::test]
    async fn runs_and_reports_exit_code_and_streams() {
        let (_dir, _workspace, tool) = tool(Duration::from_secs(30));
        let result = call(&tool, json!({"command": "echo hi; echo err >&2; exit 3"})).await;
        assert_eq!(
            ok(&result),
            &json!({"exit_code": 3, "signal": null, "stdout": "hi\n", "stderr": "err\n", "timed_out": false})
        );
    }

    #[tokio::test]
    async fn environment_is_cleared_and_cwd_is_the_workspace() {
        // SAFETY: Rust-side environment access is serialised by std's lock, and nothing in this test
        // binary reads the environment through libc's getenv concurrently (no DNS lookups, and every
        // child is spawned with an explicit, cleared environment).
        unsafe { std::env::set_var("PORTICO_SECRET_TEST", "hunter2") };
        let (_dir, workspace, tool) = tool(Duration::from_secs(30));
        let result = call(&tool, json!({"command": "env; pwd"})).await;
        let stdout = ok(&result)["stdout"].as_str().unwrap().to_string();
        assert!(!stdout.contains("PORTICO_SECRET_TEST"), "{stdout}");
        assert!(!stdout.contains("hunter2"), "{stdout}");
        let root = workspace.root().display().to_string();
        assert!(stdout.contains(&format!("PATH={CHILD_PATH}\n")), "{stdout}");
        assert!(stdout.contains(&format!("HOME={root}\n")), "{stdout}");
        assert!(stdout.contains("LANG=C.UTF-8\n"), "{stdout}");
        assert!(stdout.ends_with(&format!("\n{root}\n")), "{stdout}");
        let names: Vec<&str> = stdout
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name))
            .filter(|name| !name.starts_with('/'))
            .collect();
        // The shell itself may add PWD, SHLVL and `_`; nothing else comes from Portico.
        for name in names {
            assert!(
                ["PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
                "unexpected variable {name} in {stdout}"
            );
        }
        // The command's input is empty, not Portico's stdin.
        let result = call(&tool, json!({"command": "cat; echo done"})).await;
        assert_eq!(ok(&result)["stdout"], "done\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_command_and_its_children() {
        let (dir, _workspace, tool) = tool(Duration::from_secs(30));
        let marker = dir.path().join("survived");
        let started = Instant::now();
        // The background sleeper would create the marker if it outlived the kill.
        let command = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let result = call(&tool, json!({"command": command, "timeout_secs": 1})).await;
        let elapsed = started.elapsed();
        let output = ok(&result);
        assert_eq!(output["timed_out"], true);
        assert_eq!(output["exit_code"], serde_json::Value::Null);
        assert_eq!(output["signal"], libc::SIGKILL);
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !marker.exists(),
            "a child of the timed-out command survived"
        );
    }

    #[tokio::test]
    async fn the_configured_timeout_is_a_ceiling() {
        let (_dir, _workspace, tool) = tool(Duration::from_secs(1));
        let started = Instant::now();
        let result = call(&tool, json!({"command": "sleep 30", "timeout_secs": 600})).await;
        assert_eq!(ok(&result)["timed_out"], true);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn background_children_do_not_hold_the_call_open() {
        let (_dir, _workspace, tool) = tool(Duration::from_secs(30));
        let started = Instant::now();
        let result = call(&tool, json!({"command": "sleep 30 & echo started"})).await;
        assert_eq!(ok(&result)["stdout"], "started\n");
        assert_eq!(ok(&result)["exit_code"], 0);
        assert_eq!(ok(&result)["timed_out"], false);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_group() {
        let (dir, _workspace, tool) = tool(Duration::from_secs(30));
        let marker = dir.path().join("survived");
        let command = format!("sleep 2; touch {}", marker.display());
        let call = call(&tool, json!({"command": command}));
        assert!(
            tokio::time::timeout(Duration::from_millis(500), call)
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!marker.exists(), "the command survived its cancelled call");
    }

    #[tokio::test]
    async fn output_is_capped_with_a_marker() {
        let (_dir, _workspace, tool) = tool(Duration::from_secs(30));
        let result = call(
            &tool,
            json!({"command": "head -c 100000 /dev/zero | tr '\\0' a; printf x >&2"}),
        )
        .await;
        let output = ok(&result);
        let stdout = output["stdout"].as_str().unwrap();
        let (kept, marker) = stdout.split_at(MAX_OUTPUT_BYTES);
        assert_eq!(kept, "a".repeat(MAX_OUTPUT_BYTES));
        assert_eq!(
            marker,
            "\n[output truncated: 100000 bytes in all, the first 65536 shown]"
        );
        assert_eq!(output["stderr"], "x");
    }

    #[tokio::test]
    async fn empty_commands_are_refused() {
        let (_dir, _workspace, tool) = tool(Duration::from_secs(30));
        let message = err(&call(&tool, json!({"command": "  "})).await);
        assert!(message.contains("command is empty"), "{message}");
    }
}
