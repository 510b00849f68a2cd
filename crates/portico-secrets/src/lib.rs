//! Portico's secret store, and the one lookup of `${VAR}`: Portico's environment, then the store.
//!
//! `portico secret set NAME` keeps a value in the OS keyring where one is usable (the Secret Service
//! on Linux, the Keychain on macOS: service [`KEYRING_SERVICE`], account `NAME`), else in
//! [`SECRETS_FILE`] in the data dir, readable by its owner only (`[secrets] store` chooses). That
//! file is also the index of the store: it names every stored secret and says where each is kept,
//! because a keyring cannot list its entries. So a lookup of a name that was never stored is one
//! small file read, and never a keyring round-trip.
//!
//! [`Vars`] is the lookup every `${NAME}` in `env` values and `headers`, and every bare name passed
//! through with `env = ["NAME"]`, goes through. An IDE starts `portico mcp` without the user's
//! shell environment; what the user stored is found all the same.
//!
//! What it is not: a vault with policies or versions, or a place that ever shows a value: no
//! error, log line or `Debug` output here carries one.
//!
//! ```no_run
//! use portico_secrets::{SecretStore, Vars};
//! # fn main() -> Result<(), portico_secrets::SecretError> {
//! let store = SecretStore::open(&portico_config::data_dir(), Default::default());
//! store.set("GITHUB_TOKEN", "ghp_...")?;
//! let vars = Vars::with_store(store);
//! assert!(vars.get("GITHUB_TOKEN").is_some());
//! # Ok(())
//! # }
//! ```

mod file;
mod keyring;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use portico_config::SecretStoreChoice;

pub use file::FileStamp;

/// The file of the store in the data dir: the index of every stored secret, and the values kept
/// in the file rather than the keyring. Mode 0600.
pub const SECRETS_FILE: &str = "secrets.json";

/// The service name of Portico's entries in the OS keyring; each entry's account is the secret's
/// name.
pub const KEYRING_SERVICE: &str = "portico";

/// The longest secret value taken (a token or a key; a certificate fits).
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// What went wrong with the store. Never carries a secret's value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "`{0}` is not a variable name: use letters, digits and `_`, not starting with a digit (as `${{NAME}}` refers to it)"
    )]
    BadName(String),
    #[error("the value of `{name}` is empty; give the secret's value")]
    Empty { name: String },
    #[error("the value of `{name}` is longer than {MAX_SECRET_BYTES} bytes")]
    TooLong { name: String },
    #[error("the value of `{name}` holds a NUL byte or a line break; give it on one line")]
    BadValue { name: String },
    #[error("cannot read the secret store {path}: {cause}")]
    Read { path: String, cause: String },
    #[error(
        "the secret store {path} is not readable as Portico's ({cause}); move it away and set the secrets again"
    )]
    Corrupt { path: String, cause: String },
    #[error("cannot write the secret store {path}: {cause}")]
    Write { path: String, cause: String },
    #[error(
        "the OS keyring cannot be used here: {why}; set [secrets] store = \"file\" (or \"auto\") to keep secrets in a file instead"
    )]
    KeyringUnusable { why: String },
    #[error("the OS keyring failed on `{name}`: {cause}")]
    Keyring { name: String, cause: String },
}

/// Where one secret is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    Keyring,
    File,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Place::Keyring => "keyring",
            Place::File => "file",
        })
    }
}

/// Where new secrets go, and why: what `portico doctor` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The OS keyring (`what` names it: the Secret Service, the macOS Keychain).
    Keyring { what: &'static str },
    /// The file, because `[secrets] store = "file"` says so (`why` is `None`) or because no keyring
    /// is usable here (`why` says what was found).
    File { path: PathBuf, why: Option<String> },
    /// `[secrets] store = "keyring"`, but none is usable here: setting a secret fails.
    Unusable { why: String },
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Keyring { what } => {
                write!(f, "the OS keyring ({what}, service `{KEYRING_SERVICE}`)")
            }
            Backend::File { path, why: None } => {
                write!(
                    f,
                    "the file {} ([secrets] store = \"file\")",
                    path.display()
                )
            }
            Backend::File {
                path,
                why: Some(why),
            } => write!(
                f,
                "the file {}, as no OS keyring is usable here ({why})",
                path.display()
            ),
            Backend::Unusable { why } => write!(
                f,
                "the OS keyring, which cannot be used here ({why}); secrets cannot be set"
            ),
        }
    }
}

/// The secret store of one data dir. Opening it does nothing: the file is read at each lookup and
/// the keyring is asked whether it is usable only when a secret is set, or one kept there is read.
pub struct SecretStore {
    file: file::SecretsFile,
    choice: SecretStoreChoice,
    /// Whether the OS keyring answers here (`Err`: why not), asked once per process.
    keyring: OnceLock<Result<(), String>>,
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretStore")
            .field("path", &self.file.path())
            .field("choice", &self.choice)
            .finish_non_exhaustive()
    }
}

impl SecretStore {
    /// The store of the data dir `dir`, as `[secrets] store` chooses.
    pub fn open(dir: &Path, choice: SecretStoreChoice) -> Arc<SecretStore> {
        Arc::new(SecretStore {
            file: file::SecretsFile::new(dir.join(SECRETS_FILE)),
            choice,
            keyring: OnceLock::new(),
        })
    }

    /// The store `config` chooses, in Portico's data dir.
    pub fn for_config(config: &portico_config::Config) -> Arc<SecretStore> {
        Self::open(&portico_config::data_dir(), config.secrets.store)
    }

    /// The store's file (the index, and the values kept in the file).
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Where a secret set now would go. Asks the keyring whether it is usable (once per process,
    /// within a couple of seconds) unless `[secrets] store = "file"`.
    pub fn backend(&self) -> Backend {
        let file = |why| Backend::File {
            path: self.file.path().to_path_buf(),
            why,
        };
        match self.choice {
            SecretStoreChoice::File => file(None),
            SecretStoreChoice::Auto => match self.keyring_usable() {
                Ok(()) => Backend::Keyring {
                    what: keyring::WHAT,
                },
                Err(why) => file(Some(why)),
            },
            SecretStoreChoice::Keyring => match self.keyring_usable() {
                Ok(()) => Backend::Keyring {
                    what: keyring::WHAT,
                },
                Err(why) => Backend::Unusable { why },
            },
        }
    }

    fn keyring_usable(&self) -> Result<(), String> {
        self.keyring.get_or_init(keyring::probe).clone()
    }

    /// Stores `value` under `name`, where [`SecretStore::backend`] says; a value kept elsewhere
    /// before is removed there. Returns where it went.
    pub fn set(&self, name: &str, value: &str) -> Result<Place, SecretError> {
        check_name(name)?;
        check_value(name, value)?;
        let place = match self.backend() {
            Backend::Keyring { .. } => Place::Keyring,
            Backend::File { .. } => Place::File,
            Backend::Unusable { why } => return Err(SecretError::KeyringUnusable { why }),
        };
        let before = self.file.read()?.place_of(name);
        if place == Place::Keyring {
            keyring::set(name, value).map_err(|cause| SecretError::Keyring {
                name: name.to_string(),
                cause,
            })?;
        }
        // The index changes last, so a failed keyring write leaves it as it was.
        self.file.update(|contents| match place {
            Place::Keyring => contents.keep_in_keyring(name),
            Place::File => contents.keep_value(name, value),
        })?;
        if before == Some(Place::Keyring) && place == Place::File {
            // Best effort: the index no longer sends anyone there.
            let _ = keyring::delete(name);
        }
        Ok(place)
    }

    /// The value stored under `name`; `None` when nothing is.
    pub fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        let contents = self.file.read()?;
        match contents.place_of(name) {
            None => Ok(None),
            Some(Place::File) => Ok(contents.value_of(name).map(str::to_string)),
            Some(Place::Keyring) => {
                self.keyring_usable()
                    .map_err(|why| SecretError::KeyringUnusable { why })?;
                keyring::get(name).map_err(|cause| SecretError::Keyring {
                    name: name.to_string(),
                    cause,
                })
            }
        }
    }

    /// Removes `name`; false when nothing was stored under it.
    pub fn remove(&self, name: &str) -> Result<bool, SecretError> {
        check_name(name)?;
        let Some(place) = self.file.read()?.place_of(name) else {
            return Ok(false);
        };
        if place == Place::Keyring {
            self.keyring_usable()
                .map_err(|why| SecretError::KeyringUnusable { why })?;
            keyring::delete(name).map_err(|cause| SecretError::Keyring {
                name: name.to_string(),
                cause,
            })?;
        }
        self.file.update(|contents| contents.forget(name))
    }

    /// Every stored secret's name, sorted, with where it is kept. Values are not read.
    pub fn names(&self) -> Result<Vec<(String, Place)>, SecretError> {
        Ok(self.file.read()?.names())
    }

    /// The store's current version: it changes whenever a secret is set or removed, so a waiter
    /// can look again only then.
    pub fn stamp(&self) -> Option<FileStamp> {
        self.file.stamp()
    }
}

/// Refuses a name `${NAME}` could not refer to.
pub fn check_name(name: &str) -> Result<(), SecretError> {
    if portico_config::is_variable_name(name) {
        Ok(())
    } else {
        Err(SecretError::BadName(name.to_string()))
    }
}

fn check_value(name: &str, value: &str) -> Result<(), SecretError> {
    let name = name.to_string();
    if value.is_empty() {
        return Err(SecretError::Empty { name });
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(SecretError::TooLong { name });
    }
    if value.contains(['\0', '\n', '\r']) {
        return Err(SecretError::BadValue { name });
    }
    Ok(())
}

/// Reads one environment variable.
type EnvFn = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The one lookup of a variable's value: Portico's environment, then the secret store. Cheap to
/// clone.
#[derive(Clone)]
pub struct Vars {
    env: Arc<EnvFn>,
    store: Option<Arc<SecretStore>>,
}

impl std::fmt::Debug for Vars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vars")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Default for Vars {
    fn default() -> Self {
        Vars::environment()
    }
}

impl Vars {
    /// Portico's environment only.
    pub fn environment() -> Vars {
        Vars {
            env: Arc::new(|name| std::env::var(name).ok()),
            store: None,
        }
    }

    /// Portico's environment, then `store`.
    pub fn with_store(store: Arc<SecretStore>) -> Vars {
        Vars {
            store: Some(store),
            ..Vars::environment()
        }
    }

    /// `env` in place of Portico's environment (tests), then `store` if given.
    pub fn from_fn(
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
        store: Option<Arc<SecretStore>>,
    ) -> Vars {
        Vars {
            env: Arc::new(env),
            store,
        }
    }

    /// The value of `name`: the environment's, else the store's. A store that cannot be read
    /// is logged (never a value) and counts as not having it.
    pub fn get(&self, name: &str) -> Option<String> {
        if let Some(value) = (self.env)(name) {
            return Some(value);
        }
        match self.store.as_ref()?.get(name) {
            Ok(value) => value,
            Err(error) => {
                tracing::warn!("secret `{name}`: {error}");
                None
            }
        }
    }

    /// The store behind the environment, if any.
    pub fn store(&self) -> Option<&Arc<SecretStore>> {
        self.store.as_ref()
    }

    /// The store's version (see [`SecretStore::stamp`]); `None` without a store or a file.
    pub fn stamp(&self) -> Option<FileStamp> {
        self.store.as_ref()?.stamp()
    }
}

#[cfg(test)]
mod tests;
