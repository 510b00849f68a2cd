//! Log output on stderr: the filter (`-v`, `-q`, `PORTICO_LOG`) and the format (`--log-format`,
//! `PORTICO_LOG_FORMAT`); and, with `[telemetry]`, the layer that turns Portico's call spans into
//! OpenTelemetry spans. A `PORTICO_LOG` that is not a filter is an error, never silently taken:
//! tracing would read a stray word as a target name and show nothing.
//!
//! Each layer has its own filter: the log's (the levels above) does not decide which spans are
//! traced, and the trace layer takes the spans of `portico_core::trace::SPAN_TARGET` only, never
//! another crate's spans or a log event (which could quote arguments).

use opentelemetry_sdk::trace::SdkTracer;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;

use crate::oneview_cli::{GlobalFlags, LogFormat};

/// The levels a bare `PORTICO_LOG` directive may be.
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

pub struct LogSetup {
    filter: String,
    json: bool,
    /// A one-shot command's log: each line `warning: WORDS` (the level as a word, the message alone),
    /// no timestamp, target or fields. Its answer is the command's output; a line here is only what
    /// the user must act on, and reads like the command's own `warning:` and `error:` lines.
    plain: bool,
}

/// What is wrong with the log settings in the environment: the command does not run.
#[derive(Debug, thiserror::Error)]
pub enum LogSetupError {
    #[error(
        "PORTICO_LOG=`{value}` is not a log filter: {problem}. Set a level or TARGET=LEVEL list, e.g. PORTICO_LOG=debug or PORTICO_LOG=info,portico_hub=trace, or unset it"
    )]
    Filter { value: String, problem: String },
    #[error("PORTICO_LOG_FORMAT=`{0}` is not a log format: use text or json, or unset it")]
    Format(String),
}

impl LogSetup {
    pub fn from_env(flags: &GlobalFlags, default: &str) -> Result<LogSetup, LogSetupError> {
        Self::from_vars(
            flags,
            default,
            std::env::var("PORTICO_LOG").ok(),
            std::env::var("PORTICO_LOG_FORMAT").ok(),
        )
    }

    fn from_vars(
        flags: &GlobalFlags,
        default: &str,
        log: Option<String>,
        format: Option<String>,
    ) -> Result<LogSetup, LogSetupError> {
        let filter = match log.filter(|value| !value.trim().is_empty()) {
            Some(value) => match check_filter(&value) {
                Ok(()) => value,
                Err(problem) => return Err(LogSetupError::Filter { value, problem }),
            },
            None => default.to_string(),
        };
        let json = match (flags.log_format, format.as_deref().map(str::trim)) {
            (Some(chosen), _) => chosen == LogFormat::Json,
            (None, None | Some("") | Some("text")) => false,
            (None, Some("json")) => true,
            (None, Some(other)) => return Err(LogSetupError::Format(other.to_string())),
        };
        Ok(LogSetup {
            filter,
            json,
            plain: false,
        })
    }

    /// For a one-shot command run without `-v`: its log lines in plain words (see [`LogSetup`]).
    pub fn plain(mut self, plain: bool) -> LogSetup {
        self.plain = plain;
        self
    }

    /// Installs the log, and the trace layer when `tracer` is given (`[telemetry]`).
    pub fn install(self, tracer: Option<SdkTracer>) {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = || EnvFilter::try_new(&self.filter).unwrap_or_else(|_| EnvFilter::new("warn"));
        let client_gone = crate::log_filters::QuietClientGone::for_filter(&filter());
        let plain = (!self.json && self.plain).then(|| {
            use tracing_subscriber::filter::FilterExt;
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(Plain)
                .with_filter(
                    filter().and(tracing_subscriber::filter::filter_fn(|metadata| {
                        !is_connection_attempt_warning(metadata)
                    })),
                )
        });
        let text = (!self.json && !self.plain).then(|| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .fmt_fields(log_safe_fields())
                .with_filter(filter())
        });
        let json = self.json.then(|| {
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(false)
                .with_filter(filter())
        });
        let traces = tracer.map(|tracer| {
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_level(false)
                .with_tracked_inactivity(false)
                .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
                    metadata.is_span() && metadata.target() == portico_core::trace::SPAN_TARGET
                }))
        });
        tracing_subscriber::registry()
            .with(client_gone)
            .with(crate::log_filters::NoMessageBodies)
            .with(plain)
            .with(text)
            .with(json)
            .with(traces)
            .init();
    }
}

/// A server's connection attempt that failed, as the hub logs it (with a `server` field): a one-shot
/// command says what it means for its own answer, once, after it (the servers it needed that are
/// down, with their state and cause), so the attempt's own line would only say it twice.
fn is_connection_attempt_warning(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() == tracing::Level::WARN
        && metadata.target().starts_with("portico_hub")
        && metadata.fields().field("server").is_some()
}

/// Fields as tracing's default writes them, each value through `log_safe`: whichever call site
/// logged text a client or an upstream controls (a name, an error's message, a header), it cannot
/// end the record, forge another line or move the terminal's cursor. The JSON format escapes by
/// itself.
fn log_safe_fields() -> impl for<'writer> tracing_subscriber::fmt::FormatFields<'writer> + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let value = format!("{value:?}");
        let value = portico_core::text::log_safe(&value);
        if field.name() == "message" {
            write!(writer, "{value}")
        } else {
            write!(writer, "{field}={value}")
        }
    })
    .delimited(" ")
}

/// The one-shot commands' line format: `warning: MESSAGE`, `error: MESSAGE`, `note: MESSAGE`.
struct Plain;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Plain
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        writeln!(
            writer,
            "{}: {}",
            level_word(*event.metadata().level()),
            message_of(event)
        )
    }
}

fn level_word(level: tracing::Level) -> &'static str {
    match level {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warning",
        tracing::Level::INFO => "note",
        tracing::Level::DEBUG => "debug",
        tracing::Level::TRACE => "trace",
    }
}

/// The event's message, as written (its other fields are for the daemon's log).
fn message_of(event: &tracing::Event<'_>) -> String {
    struct Message(String);
    impl tracing::field::Visit for Message {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if field.name() == "message" {
                self.0 = value.to_string();
            }
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }
    let mut message = Message(String::new());
    event.record(&mut message);
    portico_core::text::log_safe(&message.0).into_owned()
}

/// Each comma-separated directive is a level, or `TARGET=LEVEL` (tracing's own syntax, which is
/// then asked too).
fn check_filter(value: &str) -> Result<(), String> {
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = match directive.rsplit_once('=') {
            Some((target, level)) if !target.is_empty() => level,
            _ => directive,
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "`{directive}` is neither a level ({}) nor TARGET=LEVEL",
                LEVELS.join(", ")
            ));
        }
    }
    EnvFilter::try_new(value)
        .map(|_| ())
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a subscriber wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_a_peer_controls_cannot_forge_a_log_line_in_any_field() {
        use tracing_subscriber::layer::SubscriberExt;
        let captured = Captured::default();
        let writer = captured.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_target(false)
            .with_ansi(false)
            .without_time()
            .fmt_fields(log_safe_fields());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let name = "evil\nERROR forged \u{1b}[2J\u{202e}";
            tracing::warn!(server = %name, "connecting {name} failed");
        });
        let written = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            written,
            " WARN connecting evil\\nERROR forged \\u{1b}[2J\\u{202e} failed server=evil\\nERROR forged \\u{1b}[2J\\u{202e}\n"
        );
    }

    fn flags(log_format: Option<LogFormat>) -> GlobalFlags {
        GlobalFlags {
            quiet: false,
            log_format,
        }
    }

    #[test]
    fn a_filter_that_is_not_one_is_an_error_naming_it_with_examples() {
        let error = LogSetup::from_vars(&flags(None), "warn", Some("garbage".into()), None)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "PORTICO_LOG=`garbage` is not a log filter: `garbage` is neither a level (trace, debug, info, warn, error, off) nor TARGET=LEVEL. Set a level or TARGET=LEVEL list, e.g. PORTICO_LOG=debug or PORTICO_LOG=info,portico_hub=trace, or unset it"
        );
        for fine in [
            "debug",
            "info,portico_hub=trace",
            "rmcp=WARN",
            "portico_mcp::stdio=debug",
        ] {
            let setup = LogSetup::from_vars(&flags(None), "warn", Some(fine.into()), None);
            assert_eq!(setup.unwrap().filter, fine);
        }
        let error = LogSetup::from_vars(&flags(None), "warn", Some("hub=loud".into()), None);
        assert!(matches!(error, Err(LogSetupError::Filter { value, .. }) if value == "hub=loud"));
        // Unset or blank: the command's default.
        for unset in [None, Some("  ".to_string())] {
            let setup = LogSetup::from_vars(&flags(None), "warn", unset, None);
            assert_eq!(setup.unwrap().filter, "warn");
        }
    }

    #[test]
    fn the_format_comes_from_the_flag_then_the_environment() {
        let json = |flag, env: Option<&str>| {
            LogSetup::from_vars(&flags(flag), "warn", None, env.map(str::to_string))
                .map(|setup| setup.json)
                .map_err(|e| e.to_string())
        };
        assert_eq!(json(None, None), Ok(false));
        assert_eq!(json(None, Some("json")), Ok(true));
        assert_eq!(json(Some(LogFormat::Text), Some("json")), Ok(false));
        assert_eq!(json(Some(LogFormat::Json), None), Ok(true));
        assert_eq!(
            json(None, Some("yaml")),
            Err(
                "PORTICO_LOG_FORMAT=`yaml` is not a log format: use text or json, or unset it"
                    .into()
            )
        );
        // The flag wins over a bad variable.
        assert_eq!(json(Some(LogFormat::Text), Some("yaml")), Ok(false));
    }
}
