//! Starting a stdio upstream as a child process with a cleared environment.

use std::path::{Component, Path};
use std::process::Stdio;

use portico_config::{EnvEntry, expand_vars};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;

use crate::UpstreamError;

/// Variables every child gets from Portico's environment, because programs commonly break without
/// them. Everything else must be named in the server's `env`.
pub(crate) const BASE_ENV: &[&str] = &["PATH", "HOME", "TMPDIR", "TMP", "TEMP"];

/// The longest stderr line logged whole; longer lines are cut so a misbehaving child cannot flood logs.
const MAX_STDERR_LINE: usize = 4096;

pub(crate) struct StdioSpec<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a str>,
    pub env: &'a [EnvEntry],
}

/// Builds the child's environment: the base variables and the whitelisted ones from `lookup`, plus
/// literal values with `${VAR}` expanded.
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
    for entry in env {
        match entry {
            EnvEntry::PassThrough(name) => {
                if let Some(value) = lookup(name) {
                    vars.push((name.clone(), value));
                } else {
                    tracing::warn!(
                        server,
                        "env `{name}` is whitelisted but not set in Portico's environment"
                    );
                }
            }
            EnvEntry::Literal { name, value } => {
                let value = expand_vars(value, &lookup).map_err(|e| UpstreamError::Config {
                    server: server.to_string(),
                    message: format!("env `{name}`: {e}"),
                })?;
                vars.push((name.clone(), value));
            }
        }
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

/// Spawns the child in its own process group (so stopping it also stops whatever it started, such as
/// the node process behind `npx`), and forwards its stderr to the log under the server's name.
pub(crate) fn spawn(
    spec: &StdioSpec<'_>,
) -> Result<(TokioChildProcess, Option<u32>), UpstreamError> {
    refuse_parent_dir(spec.server, spec.command)?;
    let vars = child_env(spec.server, spec.env, |name| std::env::var(name).ok())?;
    let mut command = tokio::process::Command::new(spec.command);
    command.args(spec.args).env_clear().envs(vars);
    if let Some(cwd) = spec.cwd {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    let (child, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| UpstreamError::Spawn {
            server: spec.server.to_string(),
            command: spec.command.to_string(),
            source,
        })?;
    let pid = child.id();
    if let Some(stderr) = stderr {
        tokio::spawn(log_stderr(spec.server.to_string(), stderr));
    }
    Ok((child, pid))
}

/// Kills whatever is left in the child's process group once the session has ended. A server that exits
/// cleanly on stdin EOF can leave its own children running (a wrapper script's worker, say); they were
/// started for this session and must not outlive it. The group id is the leader's pid, and this runs
/// right after the leader was reaped, so the id cannot have been reused by an unrelated group.
pub(crate) fn kill_leftover_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: killpg has no memory-safety preconditions; ESRCH (group already empty) is the common case.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

async fn log_stderr(server: String, stderr: ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if text.len() > MAX_STDERR_LINE {
                    let mut cut = MAX_STDERR_LINE;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    tracing::info!(target: "portico::upstream::stderr", server, "{}… ({} bytes)", &text[..cut], text.len());
                } else {
                    tracing::info!(target: "portico::upstream::stderr", server, "{text}");
                }
            }
        }
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
                ("TOKEN".into(), "t0k".into()),
                ("AUTH".into(), "Bearer t0k".into()),
            ]
        );
        let missing = vec![EnvEntry::Literal {
            name: "X".into(),
            value: "${NOPE}".into(),
        }];
        let err = child_env("s", &missing, outer).unwrap_err().to_string();
        assert!(err.contains("NOPE") && err.contains("`s`"), "{err}");
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
