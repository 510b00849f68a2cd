//! `system_time`: the current time, in UTC. Models have no clock; this is theirs.
//!
use std::convert::Infallible;
use std::time::SystemTime;

use portico_core::time::{rfc3339, unix_ms};
use portico_pipeline::LocalTool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Input of `system_time`: nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SystemTimeInput {}

/// Output of `system_time`.
#[derive(Debug, Serialize, JsonSchema)]
struct SystemTimeOutput {
    /// The current time as an RFC 3339 timestamp in UTC, with milliseconds, e.g.
    /// `2025-03-01T14:05:09.123Z`.
    utc_rfc3339: String,
    /// The current time in milliseconds since the Unix epoch.
    unix_ms: i64,
    /// The time zone of `utc_rfc3339`: always `UTC`.
    timezone: String,
}

pub(crate) fn system_time() -> LocalTool {
    LocalTool::typed(
        "system_time",
        "Get the current date and time in UTC, as an RFC 3339 timestamp and as Unix milliseconds.",
        |_: SystemTimeInput| async move {
            let unix_ms = unix_ms(SystemTime::now());
            Ok::<_, Infallible>(SystemTimeOutput {
                utc_rfc3339: rfc3339(unix_ms),
                unix_ms,
                timezone: "UTC".to_string(),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_support::{call, ok};

    #[tokio::test]
    async fn reports_now_in_utc() {
        let before = unix_ms(SystemTime::now());
        let result = call(&system_time(), json!({})).await;
        let after = unix_ms(SystemTime::now());
        let output = ok(&result);
        let now = output["unix_ms"].as_i64().unwrap();
        assert!(before <= now && now <= after, "{before} {now} {after}");
        assert_eq!(output["timezone"], "UTC");
        assert_eq!(output["utc_rfc3339"], rfc3339(now));
    }
}
