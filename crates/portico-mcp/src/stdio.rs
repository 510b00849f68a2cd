//! Starting a stdio upstream as a child process with a cleared environment, and stopping it.

use std::path::{Component, Path};
use std::process::Stdio;
use std::time::Duration;

use portico_config::EnvEntry;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::UpstreamError;
use crate::stderr_tail::StderrTail;

/// Variables every child gets from Portico's environment, because programs commonly break without
/// them: the basics, and the CA-bundle variables (not secrets: paths to certificates), without which
/// a child behind a TLS-intercepting proxy fails or hangs on its first download. Everything else
/// must be named in the server's `env`.
pub(crate) const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
];

/// The longest stderr line logged whole; longer lines are cut so a misbehaving child cannot flood logs.
const MAX_STDERR_LINE: usize = 4096;

pub(crate) struct StdioSpec<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a str>,
    pub env: &'a [EnvEntry],
    /// Where `env`'s names and `${VAR}`s are looked up: Portico's environment, then its secrets.
    pub vars: &'a portico_secrets::Vars,
}

/// Builds the child's environment: the base variables and the whitelisted ones from `lookup`, plus
/// literal values with `${VAR}` expanded. `${VAR}`s that `lookup` does not know are all named in
/// one [`UpstreamError::NeedsSecret`].
pub(crate) fn child_env(
    server: &str,
    env: &[EnvEntry],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, UpstreamError> {
    let mut vars = Vec::new();
    for name in BASE_ENV {
        if let Some(value) = lookup(name) {
            vars.push((name.to_string(), value));
        }
    }
    let missing = crate::upstream::MissingVars::default();
    let mut unset = Vec::new();
    for entry in env {
        match entry {
            EnvEntry::PassThrough(name) => match lookup(name) {
                Some(value) => vars.push((name.clone(), value)),
                None => unset.push(name),
            },
            EnvEntry::Literal { name, value } => {
                let value = missing
                    .expand(value, &lookup)
                    .map_err(|e| UpstreamError::Config {
                        server: server.to_string(),
                        message: format!("env `{name}`: {e}"),
                    })?;
                vars.push((name.clone(), value));
            }
        }
    }
    missing.into_result(server)?;
    // Said only of a child that starts: one that needs a secret says so instead.
    for name in unset {
        tracing::warn!(
            server,
            "env `{name}` is passed through but set neither in Portico's environment nor in its secret store; the server starts without it (`portico secret set {name}` stores it)"
        );
    }
    Ok(vars)
}

pub(crate) fn refuse_parent_dir(server: &str, command: &str) -> Result<(), UpstreamError> {
    if Path::new(command)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(UpstreamError::Config {
            server: server.to_string(),
            message: format!(
                "command `{command}` contains a `..` path component, which Portico refuses; use an absolute path or a program on PATH"
            ),
        });
    }
    Ok(())
}

/// How long a stdio child gets at each step of its stop sequence: stdin is closed, then after
/// `after_eof` its process group gets SIGTERM, then after `after_term` SIGKILL; it is reaped either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopGrace {
    pub after_eof: Duration,
    pub after_term: Duration,
}

impl StopGrace {
    /// For a long-running Portico (the daemon, `portico mcp`): a server gets time to finish what it
    /// is doing and clean up, as the MCP spec's shutdown sequence intends (rmcp's own steps are 3 s).
    pub const PATIENT: StopGrace = StopGrace {
        after_eof: Duration::from_secs(3),
        after_term: Duration::from_secs(3),
    };

    /// For one-shot commands (`portico servers`, `tools`, `call`), whose answer is already printed:
    /// a server that exits on EOF has time to, and one that does not (many keep timers running) is
    /// not allowed to hold the command for seconds.
    pub const BRIEF: StopGrace = StopGrace {
        after_eof: Duration::from_millis(100),
        after_term: Duration::from_millis(400),
    };
}

impl Default for StopGrace {
    fn default() -> Self {
        StopGrace::PATIENT
    }
}

/// The MCP transport over a child's stdin and stdout, owning the child: closing it runs the stop
/// sequence with this session's [`StopGrace`]. (rmcp's `TokioChildProcess` has the same sequence with
/// fixed 3 s steps.)
pub(crate) struct ChildTransport {
    io: AsyncRwTransport<RoleClient, ChildStdout, ChildStdin>,
    /// `None` once the child has been reaped.
    child: Option<Child>,
    /// The child's process group (its pid: it leads the group); `None` if the pid did not fit.
    group: Option<Pid>,
    grace: StopGrace,
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Closed without `close` (the session task was dropped): kill the group now, synchronously, so
        // nothing survives even if the runtime is going away, and reap in the background if it is not.
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal_group(self.group, Signal::KILL);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            DROPPED_CHILD_REAPERS.spawn_on(
                async move {
                    let _ = child.wait().await;
                },
                &runtime,
            );
        }
    }
}

/// Reapers of children whose transport was dropped without `close` (a session cancelled mid-handshake
/// at shutdown, say). Tracked so that shutdown can wait for them: a one-shot command exits right after,
/// and its runtime would otherwise drop the reaper while the killed child is still dying, leaving it
/// visible after Portico has gone.
static DROPPED_CHILD_REAPERS: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

/// Waits, at most `limit`, until every child killed by a dropped transport has been reaped. Their
/// group already got SIGKILL, so this is normally a matter of milliseconds.
pub async fn reap_dropped_children(limit: Duration) {
    DROPPED_CHILD_REAPERS.close();
    if tokio::time::timeout(limit, DROPPED_CHILD_REAPERS.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            "{} stdio child(ren) killed at shutdown were not reaped within {limit:?}",
            DROPPED_CHILD_REAPERS.len()
        );
    }
    DROPPED_CHILD_REAPERS.reopen();
}

impl ChildTransport {
    /// Closes stdin, waits, SIGTERMs the group, waits, SIGKILLs it; returns once the child is reaped.
    async fn stop(&mut self) -> std::io::Result<()> {
        self.io.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if tokio::time::timeout(self.grace.after_eof, child.wait())
            .await
            .is_err()
        {
            signal_group(self.group, Signal::TERM);
            if tokio::time::timeout(self.grace.after_term, child.wait())
                .await
                .is_err()
            {
                signal_group(self.group, Signal::KILL);
                child.wait().await?;
            }
        }
        self.child = None;
        Ok(())
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.stop()
    }
}

/// Spawns the child in its own process group (so stopping it also stops whatever it started, such as
/// the node process behind `npx`), and forwards its stderr to the log under the server's name, keeping
/// its last lines in `tail`.
pub(crate) fn spawn(
    spec: &StdioSpec<'_>,
    grace: StopGrace,
    tail: &StderrTail,
) -> Result<(ChildTransport, Option<u32>), UpstreamError> {
    refuse_parent_dir(spec.server, spec.command)?;
    let vars = child_env(spec.server, spec.env, |name| spec.vars.get(name))?;
    let mut command = tokio::process::Command::new(spec.command);
    command
        .args(spec.args)
        .env_clear()
        .envs(vars)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = spec.cwd {
        command.current_dir(cwd);
    }
    let spawn_error = |cause| UpstreamError::Spawn {
        server: spec.server.to_string(),
        command: spec.command.to_string(),
        cause,
    };
    let mut child = command.spawn().map_err(spawn_error)?;
    let pid = child.id();
    let group = pid.and_then(group_of);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        signal_group(group, Signal::KILL);
        return Err(spawn_error(std::io::Error::other(
            "the child's stdin or stdout is not a pipe",
        )));
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(log_stderr(spec.server.to_string(), stderr, tail.clone()));
    }
    let transport = ChildTransport {
        io: AsyncRwTransport::new_client(stdout, stdin),
        child: Some(child),
        group,
        grace,
    };
    Ok((transport, pid))
}

/// Kills whatever is left in the child's process group once the session has ended. A server that exits
/// cleanly on stdin EOF can leave its own children running (a wrapper script's worker, say); they were
/// started for this session and must not outlive it. The group id is the leader's pid, and this runs
/// right after the leader was reaped, so the id cannot have been reused by an unrelated group.
pub(crate) fn kill_leftover_group(pid: u32) {
    signal_group(group_of(pid), Signal::KILL);
}

/// The process group a child spawned with `process_group(0)` leads: its pid.
fn group_of(pid: u32) -> Option<Pid> {
    i32::try_from(pid).ok().and_then(Pid::from_raw)
}

/// Kills the process group a stdio child leads (its `pid`, [`crate::HandshakeInfo::pid`]) at once,
/// without the stop sequence: for a daemon told twice to stop. The session then sees the child gone
/// and reaps it as usual.
pub fn kill_child_group_now(pid: u32) {
    signal_group(group_of(pid), Signal::KILL);
}

/// Signals every process in `group`. ESRCH (the group is already empty) is the common case after
/// the leader has gone, and harmless.
fn signal_group(group: Option<Pid>, signal: Signal) {
    let Some(group) = group else {
        return;
    };
    match kill_process_group(group, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(error) => tracing::debug!("cannot signal stdio child group {group:?}: {error}"),
    }
}

/// Logs each stderr line and keeps the last ones in `tail`. At most [`MAX_STDERR_LINE`] bytes of a
/// line are held: the rest of it, up to its newline, is counted and dropped, so a child writing
/// without newlines cannot grow the buffer.
async fn log_stderr(server: String, stderr: impl AsyncRead + Unpin, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut length = 0usize;
    loop {
        let (taken, ended) = match reader.fill_buf().await {
            Ok(buf) if !buf.is_empty() => {
                let newline = buf.iter().position(|&b| b == b'\n');
                let chunk = &buf[..newline.unwrap_or(buf.len())];
                let room = MAX_STDERR_LINE.saturating_sub(line.len());
                line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                length += chunk.len();
                (
                    chunk.len() + usize::from(newline.is_some()),
                    newline.is_some(),
                )
            }
            _ => break,
        };
        reader.consume(taken);
        if ended {
            stderr_line(&server, &line, length, &tail);
            line.clear();
            length = 0;
        }
    }
    if length > 0 {
        stderr_line(&server, &line, length, &tail);
    }
    tail.end();
}

fn stderr_line(server: &str, line: &[u8], length: usize, tail: &StderrTail) {
    let text = String::from_utf8_lossy(line);
    // The child writes what it likes: a line of it must stay one line in the log and on a terminal.
    let text = portico_core::text::log_safe(text.trim_end());
    let text = text.as_ref();
    tail.push(text);
    if length > MAX_STDERR_LINE {
        tracing::info!(target: "portico::upstream::stderr", server, "{text}… ({length} bytes)");
    } else {
        tracing::info!(target: "portico::upstream::stderr", server, "{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_is_cleared_but_for_base_and_whitelist() {
        let outer = |name: &str| match name {
            "PATH" => Some("/usr/bin".to_string()),
            "HOME" => Some("/home/u".to_string()),
            "NODE_EXTRA_CA_CERTS" => Some("/etc/corp-ca.pem".to_string()),
            "SECRET" => Some("hunter2".to_string()),
            "TOKEN" => Some("t0k".to_string()),
            _ => None,
        };
        let env = vec![
            EnvEntry::PassThrough("TOKEN".into()),
            EnvEntry::PassThrough("UNSET".into()),
            EnvEntry::Literal {
                name: "AUTH".into(),
                value: "Bearer ${TOKEN}".into(),
            },
        ];
        let vars = child_env("s", &env, outer).unwrap();
        assert_eq!(
            vars,
            vec![
                ("PATH".into(), "/usr/bin".into()),
                ("HOME".into(), "/home/u".into()),
                // CA bundles are not secrets: passed by default.
                ("NODE_EXTRA_CA_CERTS".into(), "/etc/corp-ca.pem".into()),
                ("TOKEN".into(), "t0k".into()),
                ("AUTH".into(), "Bearer t0k".into()),
            ]
        );
        let missing = vec![
            EnvEntry::Literal {
                name: "X".into(),
                value: "${NOPE} and ${TOKEN} and ${ALSO_NOT}".into(),
            },
            EnvEntry::Literal {
                name: "Y".into(),
                value: "${NOPE}".into(),
            },
        ];
        let err = child_env("s", &missing, outer).unwrap_err();
        assert!(
            matches!(&err, UpstreamError::NeedsSecret { server, names }
                if server == "s" && names == &["NOPE".to_string(), "ALSO_NOT".to_string()]),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "server `s` needs secrets NOPE, ALSO_NOT: set neither in Portico's environment nor in its secret store; run `portico secret set NOPE` and `portico secret set ALSO_NOT`"
        );
        let malformed = vec![EnvEntry::Literal {
            name: "X".into(),
            value: "${input:token} ${NOPE}".into(),
        }];
        assert_eq!(
            child_env("s", &malformed, outer).unwrap_err().to_string(),
            "server `s`: `${input:token}` does not name a variable: write `${NAME}` with letters, digits and `_`"
        );
    }

    #[tokio::test]
    async fn stderr_lines_are_cut_and_kept_in_the_tail() {
        use tokio::io::AsyncWriteExt;
        let (mut writer, reader) = tokio::io::duplex(1024);
        let tail = StderrTail::default();
        let reading = tokio::spawn(log_stderr("s".into(), reader, tail.clone()));
        writer.write_all(b"first\r\nsecond\n").await.unwrap();
        // One line of 100 000 bytes, written in pieces: only its first 4096 are held.
        for _ in 0..100 {
            writer.write_all(&[b'y'; 1000]).await.unwrap();
        }
        writer.write_all(b"\nlast, unterminated").await.unwrap();
        drop(writer);
        reading.await.unwrap();
        // The 4 KiB bound of the tail leaves the cut line's successor only.
        assert_eq!(tail.lines(), vec!["last, unterminated".to_string()]);

        let (mut writer, reader) = tokio::io::duplex(1024);
        let tail = StderrTail::default();
        let reading = tokio::spawn(log_stderr("s".into(), reader, tail.clone()));
        writer.write_all(b"first\r\nsecond\n").await.unwrap();
        writer.write_all(&[b'y'; 5000]).await.unwrap();
        drop(writer);
        reading.await.unwrap();
        assert_eq!(tail.lines(), vec!["y".repeat(MAX_STDERR_LINE)]);
    }

    #[tokio::test]
    async fn a_stderr_line_cannot_forge_another_or_reorder_what_is_shown() {
        use tokio::io::AsyncWriteExt;
        let (mut writer, reader) = tokio::io::duplex(1024);
        let tail = StderrTail::default();
        let reading = tokio::spawn(log_stderr("s".into(), reader, tail.clone()));
        writer
            .write_all("ok\rERROR forged\u{1b}[2K \u{202e}txt.exe\n".as_bytes())
            .await
            .unwrap();
        drop(writer);
        reading.await.unwrap();
        assert_eq!(
            tail.lines(),
            vec!["ok\\rERROR forged\\u{1b}[2K \\u{202e}txt.exe".to_string()]
        );
    }

    #[test]
    fn parent_dir_commands_are_refused() {
        assert!(refuse_parent_dir("s", "../evil").is_err());
        assert!(refuse_parent_dir("s", "/usr/../bin/sh").is_err());
        assert!(refuse_parent_dir("s", "npx").is_ok());
        assert!(refuse_parent_dir("s", "/usr/bin/node").is_ok());
        assert!(refuse_parent_dir("s", "./my..server").is_ok());
    }
}
