//! `portico doctor` and the errors people can act on: each class of problem found with
//! its exact line and exit code, a clean setup passing, and the texts of upstream failures in
//! `portico servers`, `config check` and the calls that meet them.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doctor/checks.rs"]
mod checks;
#[path = "doctor/errors.rs"]
mod errors;
