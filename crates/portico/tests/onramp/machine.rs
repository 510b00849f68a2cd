//! A pretend user's machine for the first-run tests (onramp.rs, export.rs).
// Each test file uses what it needs of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A pretend user's machine: a home with its config dir, Portico's data dir and a project, all in
/// one temporary directory, so the clients' usual places are the test's own.
pub struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    pub fn new() -> Machine {
        let machine = Machine {
            dir: tempfile::Builder::new()
                .prefix("portico-onramp-")
                .tempdir()
                .unwrap(),
        };
        for dir in ["home/.config", "data", "project"] {
            std::fs::create_dir_all(machine.dir.path().join(dir)).unwrap();
        }
        machine
    }

    /// The temporary directory everything is in.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.home().join(".config")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// The config Portico reads when nothing names another.
    pub fn config(&self) -> PathBuf {
        self.data().join("config.toml")
    }

    pub fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portico"));
        command
            .args(args)
            .current_dir(self.project())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env("PORTICO_HOME", self.data())
            .env_remove("PORTICO_CONFIG")
            .stdin(Stdio::null());
        command
    }

    /// Runs `portico ARGS`: (exit code, stdout, stderr).
    pub fn portico(&self, args: &[&str]) -> (i32, String, String) {
        let output = self.command(args).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}
