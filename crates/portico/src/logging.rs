//! Log output on stderr: the filter (`-v`, `-q`, `PORTICO_LOG`) and the format (`--log-format`,
//! `PORTICO_LOG_FORMAT`). A `PORTICO_LOG` that is not a filter is reported and the default used,
//! never silently taken: tracing would read a stray word as a target name and show nothing.

use tracing_subscriber::EnvFilter;

use crate::oneview_cli::{GlobalFlags, LogFormat};

/// The levels a bare `PORTICO_LOG` directive may be.
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

pub struct LogSetup {
    filter: String,
    json: bool,
    /// What was wrong with the environment, each said once on stderr before logging starts.
    pub problems: Vec<String>,
}

impl LogSetup {
    pub fn from_env(flags: &GlobalFlags, default: &str) -> LogSetup {
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
    ) -> LogSetup {
        let mut problems = Vec::new();
        let filter = match log.filter(|value| !value.trim().is_empty()) {
            Some(value) => match check_filter(&value) {
                Ok(()) => value,
                Err(problem) => {
                    problems.push(format!(
                        "PORTICO_LOG=`{value}` is not a log filter: {problem}; using `{default}`. Examples: PORTICO_LOG=debug, PORTICO_LOG=info,portico_hub=trace"
                    ));
                    default.to_string()
                }
            },
            None => default.to_string(),
        };
        let json = match (flags.log_format, format.as_deref().map(str::trim)) {
            (Some(chosen), _) => chosen == LogFormat::Json,
            (None, None | Some("") | Some("text")) => false,
            (None, Some("json")) => true,
            (None, Some(other)) => {
                problems.push(format!(
                    "PORTICO_LOG_FORMAT=`{other}` is not a log format (text or json); using text"
                ));
                false
            }
        };
        LogSetup {
            filter,
            json,
            problems,
        }
    }

    pub fn install(self) {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = EnvFilter::try_new(&self.filter).unwrap_or_else(|_| EnvFilter::new("warn"));
        let client_gone = crate::log_filters::QuietClientGone::for_filter(&filter);
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_target(false);
        if self.json {
            builder
                .json()
                .with_ansi(false)
                .finish()
                .with(client_gone)
                .with(crate::log_filters::NoOAuthDebug)
                .init();
        } else {
            builder
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .finish()
                .with(client_gone)
                .with(crate::log_filters::NoOAuthDebug)
                .init();
        }
    }
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

    fn flags(log_format: Option<LogFormat>) -> GlobalFlags {
        GlobalFlags {
            standalone: false,
            quiet: false,
            log_format,
        }
    }

    #[test]
    fn a_filter_that_is_not_one_is_reported_and_the_default_used() {
        let setup = LogSetup::from_vars(&flags(None), "warn", Some("garbage".into()), None);
        assert_eq!(setup.filter, "warn");
        assert_eq!(
            setup.problems,
            [
                "PORTICO_LOG=`garbage` is not a log filter: `garbage` is neither a level (trace, debug, info, warn, error, off) nor TARGET=LEVEL; using `warn`. Examples: PORTICO_LOG=debug, PORTICO_LOG=info,portico_hub=trace"
            ]
        );
        for fine in [
            "debug",
            "info,portico_hub=trace",
            "rmcp=WARN",
            "portico_mcp::stdio=debug",
        ] {
            let setup = LogSetup::from_vars(&flags(None), "warn", Some(fine.into()), None);
            assert_eq!((setup.filter.as_str(), setup.problems.len()), (fine, 0));
        }
        let setup = LogSetup::from_vars(&flags(None), "warn", Some("hub=loud".into()), None);
        assert_eq!(setup.filter, "warn");
        assert_eq!(setup.problems.len(), 1);
    }

    #[test]
    fn the_format_comes_from_the_flag_then_the_environment() {
        let json = |flag, env: Option<&str>| {
            let setup = LogSetup::from_vars(&flags(flag), "warn", None, env.map(str::to_string));
            (setup.json, setup.problems.len())
        };
        assert_eq!(json(None, None), (false, 0));
        assert_eq!(json(None, Some("json")), (true, 0));
        assert_eq!(json(Some(LogFormat::Text), Some("json")), (false, 0));
        assert_eq!(json(Some(LogFormat::Json), None), (true, 0));
        assert_eq!(json(None, Some("yaml")), (false, 1));
    }
}
