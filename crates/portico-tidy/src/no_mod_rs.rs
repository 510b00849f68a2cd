//! No `mod.rs` anywhere under `crates/`: a module `foo` with submodules is `foo.rs` beside `foo/`, so
//! an editor's tabs and a stack trace name the module, not a row of files all called `mod.rs`.

use crate::source::files_under;

#[test]
fn no_mod_rs_under_crates() {
    let found: Vec<String> = files_under("crates", ".rs")
        .into_iter()
        .filter(|path| path.ends_with("/mod.rs"))
        .collect();
    assert!(
        found.is_empty(),
        "found mod.rs files: {}; move each `foo/mod.rs` to `foo.rs` beside `foo/` \
         (the guide's rule: no mod.rs)",
        found.join(", ")
    );
}
