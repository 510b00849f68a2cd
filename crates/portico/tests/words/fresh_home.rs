//! A fresh home: `portico init` then a one-shot command, as a newcomer runs them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `portico ARGS` with only HOME and PATH set: (exit code, stdout, stderr).
pub fn fresh(home: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn what_init_creates_is_owner_only_and_no_command_warns_about_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let (code, stdout, stderr) = fresh(home, &["init"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = fresh(home, &["tools"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("system_time"), "{stdout}");
    assert!(
        !stderr.contains("open to other users") && !stderr.contains("chmod"),
        "{stderr}"
    );
    let data = home.join(".local/share/portico");
    for d in [
        home.join(".local"),
        home.join(".local/share"),
        data.clone(),
        data.join("workspace"),
    ] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    let files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    assert!(
        files.iter().any(|f| f.ends_with("config.toml")),
        "{files:?}"
    );
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
}
