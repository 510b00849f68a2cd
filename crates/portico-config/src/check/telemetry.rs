//! `[telemetry]`: the OTLP endpoint, the service name and the sample ratio, checked as the binary
//! will use them. Unknown keys: `unknown_keys`, from the model.

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry};

impl Checker<'_> {
    pub(super) fn telemetry_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[telemetry]") else {
            return;
        };
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "otlp_endpoint" => {
                    if let Some(url) = self.expect_string(value, "[telemetry] otlp_endpoint")
                        && let Some(problem) = otlp_endpoint_problem(url)
                    {
                        self.report(
                            value.span(),
                            format!("[telemetry] otlp_endpoint `{url}` {problem}"),
                            Some("the collector's OTLP/HTTP traces URL, e.g. \"http://127.0.0.1:4318/v1/traces\"".into()),
                        );
                    }
                }
                "service_name" => {
                    if let Some(name) = self.expect_string(value, "[telemetry] service_name")
                        && name.trim().is_empty()
                    {
                        self.report(
                            value.span(),
                            "[telemetry] service_name is empty",
                            Some("leave it out for the default, \"portico\"".into()),
                        );
                    }
                }
                "sample_ratio" => {
                    let ratio = match value.get_ref() {
                        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
                        DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
                        other => {
                            self.wrong_type(
                                value.span(),
                                "[telemetry] sample_ratio",
                                "a number",
                                other,
                            );
                            continue;
                        }
                    };
                    if !ratio.is_some_and(|r| (0.0..=1.0).contains(&r)) {
                        self.report(
                            value.span(),
                            "[telemetry] sample_ratio must be from 0.0 to 1.0",
                            Some("the share of new traces sampled: 1.0 (the default) keeps every one, 0.1 one in ten".into()),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// What is wrong with an `otlp_endpoint`, if anything: it must be an http(s) URL with a host. A
/// value with `${VAR}` in it is checked when it is expanded, at start.
pub(crate) fn otlp_endpoint_problem(url: &str) -> Option<&'static str> {
    if url.contains("${") {
        return None;
    }
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => None,
        Ok(_) => Some("is not an http(s) URL"),
        Err(_) => Some("is not a URL"),
    }
}
