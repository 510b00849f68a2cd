use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use portico_config::SecretStoreChoice;

use super::*;

const SENTINEL: &str = "sentinel-9f3c2a-do-not-print";

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "portico-secrets-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn file_store(dir: &TempDir) -> Arc<SecretStore> {
    SecretStore::open(&dir.0, SecretStoreChoice::File)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_secret_set_in_the_file_store_is_owner_only_and_read_back() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    assert_eq!(store.names().unwrap(), vec![]);
    assert_eq!(store.get("GITHUB_TOKEN").unwrap(), None);
    assert!(!store.path().exists(), "reading creates nothing");

    assert_eq!(store.set("GITHUB_TOKEN", SENTINEL).unwrap(), Place::File);
    assert_eq!(mode(store.path()), 0o600);
    assert_eq!(mode(&store.path().with_extension("json.lock")), 0o600);
    assert_eq!(
        store.get("GITHUB_TOKEN").unwrap().as_deref(),
        Some(SENTINEL)
    );

    // A second process reading the same dir sees it.
    let other = file_store(&dir);
    assert_eq!(
        other.get("GITHUB_TOKEN").unwrap().as_deref(),
        Some(SENTINEL)
    );
}

#[test]
fn writes_replace_the_file_whole_and_leave_no_temporary_behind() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    store.set("A", "one").unwrap();
    let first = store.stamp().unwrap();
    // Held open: a file rewritten in place would show the new text through this handle.
    let mut old = std::fs::File::open(store.path()).unwrap();
    store.set("B", "two").unwrap();
    store.set("A", "three").unwrap();
    assert_ne!(store.stamp().unwrap(), first);
    let mut old_text = String::new();
    std::io::Read::read_to_string(&mut old, &mut old_text).unwrap();
    assert!(
        old_text.contains("\"one\"") && !old_text.contains("\"two\""),
        "{old_text}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["secrets.json", "secrets.json.lock"]);
    assert_eq!(store.get("A").unwrap().as_deref(), Some("three"));
    assert_eq!(store.get("B").unwrap().as_deref(), Some("two"));
    let text = std::fs::read_to_string(store.path()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "version": 1,
            "secrets": {
                "A": {"in": "file", "value": "three"},
                "B": {"in": "file", "value": "two"},
            }
        })
    );
}

#[test]
fn a_file_made_readable_by_others_is_made_owner_only_at_the_next_read() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    store.set("A", "one").unwrap();
    std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(store.get("A").unwrap().as_deref(), Some("one"));
    assert_eq!(mode(store.path()), 0o600);
}

#[test]
fn names_are_listed_sorted_without_values_and_removed_one_by_one() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    store.set("ZED", SENTINEL).unwrap();
    store.set("ALPHA", SENTINEL).unwrap();
    assert_eq!(
        store.names().unwrap(),
        vec![
            ("ALPHA".to_string(), Place::File),
            ("ZED".into(), Place::File)
        ]
    );
    assert!(store.remove("ALPHA").unwrap());
    assert!(!store.remove("ALPHA").unwrap(), "already gone");
    assert_eq!(
        store.names().unwrap(),
        vec![("ZED".to_string(), Place::File)]
    );
    assert_eq!(store.get("ALPHA").unwrap(), None);
}

#[test]
fn names_and_values_are_checked_and_errors_never_carry_a_value() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    for bad in ["", "1ABC", "A-B", "A B", "${A}"] {
        let error = store.set(bad, SENTINEL).unwrap_err();
        assert!(matches!(error, SecretError::BadName(_)), "{bad}: {error}");
        assert!(!error.to_string().contains(SENTINEL));
    }
    let empty = store.set("A", "").unwrap_err();
    assert_eq!(
        empty.to_string(),
        "the value of `A` is empty; give the secret's value"
    );
    let two_lines = store.set("A", &format!("{SENTINEL}\nmore")).unwrap_err();
    assert!(matches!(two_lines, SecretError::BadValue { .. }));
    assert!(!two_lines.to_string().contains(SENTINEL));
    let long = store
        .set("A", &"x".repeat(MAX_SECRET_BYTES + 1))
        .unwrap_err();
    assert!(matches!(long, SecretError::TooLong { .. }));
    assert!(!store.path().exists(), "nothing was written");
}

#[test]
fn a_damaged_file_is_an_error_naming_it_and_not_its_text() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    std::fs::write(store.path(), format!("{{\"secrets\": \"{SENTINEL}")).unwrap();
    let error = store.get("A").unwrap_err().to_string();
    assert!(error.contains("secrets.json"), "{error}");
    assert!(error.contains("set the secrets again"), "{error}");
    assert!(!error.contains(SENTINEL), "{error}");
}

#[test]
fn the_environment_comes_before_the_store() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    store.set("BOTH", "from-store").unwrap();
    store.set("STORED", "from-store").unwrap();
    let vars = Vars::from_fn(
        |name| match name {
            "BOTH" => Some("from-env".into()),
            "ENV_ONLY" => Some("from-env".into()),
            _ => None,
        },
        Some(store.clone()),
    );
    assert_eq!(vars.get("BOTH").as_deref(), Some("from-env"));
    assert_eq!(vars.get("ENV_ONLY").as_deref(), Some("from-env"));
    assert_eq!(vars.get("STORED").as_deref(), Some("from-store"));
    assert_eq!(vars.get("NOWHERE"), None);

    let without_store = Vars::from_fn(|_| None, None);
    assert_eq!(without_store.get("STORED"), None);
    assert_eq!(without_store.stamp(), None);
}

#[test]
fn the_stamp_changes_with_every_set_and_removal() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    let vars = Vars::with_store(store.clone());
    assert_eq!(vars.stamp(), None);
    store.set("A", "1").unwrap();
    let one = vars.stamp().unwrap();
    store.set("A", "2").unwrap();
    let two = vars.stamp().unwrap();
    assert_ne!(one, two);
    store.remove("A").unwrap();
    assert_ne!(vars.stamp().unwrap(), two);
}

#[test]
fn debug_output_shows_no_value() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    store.set("A", SENTINEL).unwrap();
    let vars = Vars::with_store(store.clone());
    assert_eq!(vars.get("A").as_deref(), Some(SENTINEL));
    let shown = format!("{store:?} {vars:?}");
    assert!(!shown.contains(SENTINEL), "{shown}");
}

#[test]
fn the_file_store_is_used_when_asked_for_and_says_so() {
    let dir = TempDir::new();
    let store = file_store(&dir);
    let backend = store.backend();
    assert_eq!(
        backend,
        Backend::File {
            path: dir.0.join(SECRETS_FILE),
            why: None
        }
    );
    assert_eq!(
        backend.to_string(),
        format!(
            "the file {} ([secrets] store = \"file\")",
            dir.0.join(SECRETS_FILE).display()
        )
    );
}

#[test]
fn two_writers_at_once_both_land() {
    let dir = TempDir::new();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let store = file_store(&dir);
            std::thread::spawn(move || store.set(&format!("S{i}"), "v").unwrap())
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(file_store(&dir).names().unwrap().len(), 8);
}

/// On this kind of machine (no D-Bus session bus: a server, a container, CI) `auto` falls back to
/// the file at once, saying why; where a keyring answers, it is used.
#[test]
fn auto_falls_back_to_the_file_quickly_where_no_keyring_answers() {
    let dir = TempDir::new();
    let store = SecretStore::open(&dir.0, SecretStoreChoice::Auto);
    let started = std::time::Instant::now();
    let backend = store.backend();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    match backend {
        Backend::Keyring { .. } => {}
        Backend::File { why, .. } => assert!(why.is_some()),
        Backend::Unusable { why } => panic!("auto is never unusable: {why}"),
    }
}

/// The keyring for real. Run it where one answers, e.g. on Linux:
/// `dbus-run-session -- sh -c 'printf pw | gnome-keyring-daemon --unlock --components=secrets
/// >/dev/null; cargo test -p portico-secrets -- --ignored'`.
#[test]
#[ignore = "needs an OS keyring that answers (a Secret Service on Linux)"]
fn the_keyring_keeps_a_value_the_file_only_names() {
    let dir = TempDir::new();
    let store = SecretStore::open(&dir.0, SecretStoreChoice::Keyring);
    assert!(matches!(store.backend(), Backend::Keyring { .. }));
    let name = format!("PORTICO_TEST_{}", std::process::id());
    assert_eq!(store.set(&name, SENTINEL).unwrap(), Place::Keyring);
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert!(!text.contains(SENTINEL), "{text}");
    assert_eq!(store.names().unwrap(), vec![(name.clone(), Place::Keyring)]);
    assert_eq!(store.get(&name).unwrap().as_deref(), Some(SENTINEL));
    // Moved to the file: the keyring's entry goes.
    let file = SecretStore::open(&dir.0, SecretStoreChoice::File);
    assert_eq!(file.set(&name, "in-the-file").unwrap(), Place::File);
    assert_eq!(keyring::get(&name).unwrap(), None);
    assert_eq!(store.set(&name, SENTINEL).unwrap(), Place::Keyring);
    assert!(store.remove(&name).unwrap());
    assert_eq!(keyring::get(&name).unwrap(), None);
    assert_eq!(store.get(&name).unwrap(), None);
}
