//! `portico-tidy` is test tooling, not product: plain `#[test]`s that read the source tree and fail
//! when one of ARCHITECTURE.md's checked invariants stops holding, in the style of rust-analyzer's
//! `xtask/src/tidy.rs`. It has no code of its own outside `cfg(test)` and nothing depends on it.
//!
//! - `layers`: the normal dependency edges between workspace crates (`cargo metadata --no-deps`) are
//!   exactly the ones in ARCHITECTURE.md's `layers` block, and that block lists each crate above
//!   everything it depends on.
//! - `wire_literals`: no MCP result/request keys or method names as string literals outside the MCP
//!   edge crates, except the listed ones being removed.
//! - `crate_docs`: every crate root (`src/lib.rs`, `src/main.rs`) opens with a `//!` doc.
//! - `unsafe_code`: no `unsafe` outside an allow-list that gives each use its reason.
//! - `no_mod_rs`: no `mod.rs` under `crates/` (`foo.rs` beside `foo/`).
//! - `blocking_work`: no `spawn_blocking` outside an allow-list: store work from async code goes
//!   through `Store::run`, which bounds it.
//! - `comment_citations`: no comment cites an issue or a seed by number.
//!
//! `source` reads the tree and tells literals and identifiers from comments; `allow_list` is the
//! counted allow-list `unsafe_code` and `blocking_work` share.
//!
//! Why a crate of its own and not `crates/portico/tests/tidy.rs`: a test there would build the binary
//! and all its dev-dependencies before it could run; this crate depends on `serde_json` alone, so
//! `cargo test -p portico-tidy` answers in seconds, even while the product does not compile. It runs
//! in `cargo test --workspace` like any other member.

#[cfg(test)]
mod source;

#[cfg(test)]
mod allow_list;

#[cfg(test)]
mod blocking_work;
#[cfg(test)]
mod comment_citations;
#[cfg(test)]
mod crate_docs;
#[cfg(test)]
mod layers;
#[cfg(test)]
mod no_mod_rs;
#[cfg(test)]
mod unsafe_code;
#[cfg(test)]
mod wire_literals;
