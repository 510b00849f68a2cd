//! The `portico` binary: command-line parsing and output over the library crates. No protocol or
//! domain logic lives here; see ARCHITECTURE.md for where it does.

mod a2a_cli;
mod allocator;
mod approvals_cli;
mod audit_cli;
mod auth_cli;
mod call_cli;
mod call_terminal;
mod chat;
mod cli;
mod clients_cli;
mod daemon_client;
mod doctor_cli;
mod export_cli;
mod help;
mod import_cli;
mod lifecycle_cli;
mod log_filters;
mod logging;
mod oneview_cli;
mod onramp_cli;
mod output;
mod progress;
mod registry_cli;
mod secret_cli;
mod serve_signals;
mod stdio_door;
mod stdio_transport;
mod telemetry;

use std::process::ExitCode;

/// mimalloc instead of glibc malloc: a call through the gateway allocates a lot of small, short-lived
/// buffers across threads, where glibc's arenas spent ~20% of the CPU (and contended on their locks).
/// How it is made to give freed memory back: `allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = help::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(allocator::on_idle)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.spawn(allocator::heartbeat());
    let traces = match init_logging(&args, runtime.handle()) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(cli::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    };
    // While the runtime still runs: the last spans are exported on it.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    code
}

/// Installs the log, and for the commands that serve, `[telemetry]`'s traces (their exporter,
/// returned, is shut down at exit to send what is queued). A bad `PORTICO_LOG` or `[telemetry]`
/// is an error: the command does not run.
fn init_logging(
    args: &cli::Cli,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<Option<telemetry::Traces>> {
    let default = match (args.verbose, args.command.is_daemon()) {
        _ if args.oneview.quiet => "error",
        // rmcp logs every handshake in full at info level; keep that for -vv. Its transport worker
        // logs a failed connection as an ERROR in Rust debug form; Portico's own error says the
        // same in words (`cannot reach URL: connection refused`), so that one is kept for -vv too.
        (0, true) => "info,rmcp=warn,rmcp::transport::worker=off",
        // A one-shot command's refusals of what a server asks (`portico call` declining sampling)
        // are its own, said in words; rmcp's warning repeats them in Rust debug form.
        (0, false) => "warn,rmcp::transport::worker=off,rmcp::service=error",
        (1, _) => "info,rmcp=warn,rmcp::transport::worker=off",
        (2, _) => "debug",
        _ => "trace",
    };
    oneview_cli::set_quiet(args.oneview.quiet);
    let setup = logging::LogSetup::from_env(&args.oneview, default)?
        .plain(args.verbose == 0 && !args.command.is_daemon());
    // Read before the command reads it (again, and reports what is wrong with it): the trace
    // layer is part of the log, installed once, now. A config that does not load has no traces.
    let telemetry = match args.command.is_daemon() {
        true => portico_config::load(args.config.as_deref())
            .ok()
            .map(|(config, _)| config.telemetry),
        false => None,
    };
    let (traces, tracer) = match telemetry {
        Some(section) => match telemetry::Traces::start(&section, runtime.clone())? {
            Some((traces, tracer)) => (Some(traces), Some(tracer)),
            None => (None, None),
        },
        None => (None, None),
    };
    setup.install(tracer);
    Ok(traces)
}

/// An error and its causes, a cause left out when the text before it already says it: the store's and
/// the net client's errors put their cause in their own sentence, and `{:#}` repeated it after.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store db: {0}; check it")]
    struct Open(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let said = anyhow::Error::new(Open(Inner));
        assert_eq!(
            super::error_text(&said),
            "cannot open the store db: connection refused; check it"
        );
        let added = anyhow::Error::new(Inner).context("reading the config");
        assert_eq!(
            super::error_text(&added),
            "reading the config: connection refused"
        );
    }
}
