//! The OS keyring, through the `keyring` crate: the Secret Service on Linux (over D-Bus in pure
//! Rust, so no C library is needed), the Keychain on macOS, the Credential Manager on Windows.
//!
//! Every call runs on a thread of its own under a time limit: a keyring that never answers (a
//! D-Bus activation that hangs, an unlock prompt nobody sees) must not hold a connect or a command
//! for long, and the Secret Service client blocks.

use std::time::Duration;

/// How long asking whether the keyring is usable may take.
const PROBE_LIMIT: Duration = Duration::from_secs(3);
/// How long one read may take.
const READ_LIMIT: Duration = Duration::from_secs(10);
/// How long one write may take: it may wait for the user to unlock the keyring.
const WRITE_LIMIT: Duration = Duration::from_secs(60);

/// The account the probe asks for, which nothing stores.
const PROBE_ACCOUNT: &str = ".portico-probe";

#[cfg(target_os = "linux")]
pub(crate) const WHAT: &str = "Secret Service";
#[cfg(target_os = "macos")]
pub(crate) const WHAT: &str = "macOS Keychain";
#[cfg(target_os = "windows")]
pub(crate) const WHAT: &str = "Windows Credential Manager";
#[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
pub(crate) const WHAT: &str = "none";

/// Whether the keyring answers here; `Err` says why not, in words.
pub(crate) fn probe() -> Result<(), String> {
    #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
    {
        return Err("Portico supports no OS keyring on this system".into());
    }
    #[cfg(target_os = "linux")]
    session_bus()?;
    let answer = on_thread(PROBE_LIMIT, || {
        let entry = keyring::Entry::new(crate::KEYRING_SERVICE, PROBE_ACCOUNT)?;
        match entry.get_password() {
            Ok(_) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(error) => Err(error),
        }
    })?;
    answer.map_err(|e| cause(&e))
}

/// The Secret Service is reached over the D-Bus session bus: without one, there is nothing to ask
/// (a server, a container, a CI runner), and asking would only fail more slowly.
#[cfg(target_os = "linux")]
fn session_bus() -> Result<(), String> {
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty()) {
        return Ok(());
    }
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(format!("/run/user/{}", rustix::process::getuid().as_raw()))
        });
    if runtime_dir.join("bus").exists() {
        return Ok(());
    }
    Err("no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set".into())
}

pub(crate) fn get(name: &str) -> Result<Option<String>, String> {
    let name = name.to_string();
    let answer = on_thread(READ_LIMIT, move || {
        match keyring::Entry::new(crate::KEYRING_SERVICE, &name)?.get_password() {
            Ok(value) => Ok(Some(value)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(error) => Err(error),
        }
    })?;
    answer.map_err(|e| cause(&e))
}

pub(crate) fn set(name: &str, value: &str) -> Result<(), String> {
    let name = name.to_string();
    let value = value.to_string();
    let answer = on_thread(WRITE_LIMIT, move || {
        keyring::Entry::new(crate::KEYRING_SERVICE, &name)?.set_password(&value)
    })?;
    answer.map_err(|e| cause(&e))
}

pub(crate) fn delete(name: &str) -> Result<(), String> {
    let name = name.to_string();
    let answer = on_thread(WRITE_LIMIT, move || {
        match keyring::Entry::new(crate::KEYRING_SERVICE, &name)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(error) => Err(error),
        }
    })?;
    answer.map_err(|e| cause(&e))
}

/// A keyring error in words. (The crate's messages name entries and attributes, never a value.)
fn cause(error: &keyring::Error) -> String {
    error.to_string()
}

/// Runs `f` on a thread of its own and waits at most `limit` for its answer. A thread that does
/// not answer in time is left to finish or to end with the process.
fn on_thread<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("portico-keyring".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| format!("cannot start a thread to ask the keyring: {e}"))?;
    rx.recv_timeout(limit)
        .map_err(|_| format!("the keyring did not answer within {}s", limit.as_secs()))
}
