//! What an upstream tells its client during a call, read as typed values for a client that shows
//! it to a person (`portico call`): a progress notification's numbers and message, a log
//! message's level, logger and data.

use portico_core::JsonObject;
use serde_json::Value;

/// A `notifications/progress` (its token already taken off by the relay).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressNotice {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// A `notifications/message`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogNotice {
    /// `debug` to `emergency`, as the server spelled it.
    pub level: String,
    pub logger: Option<String>,
    /// Any JSON: a string most often.
    pub data: Value,
}

/// Reads a progress notification's params; missing numbers read as 0.
pub fn progress_notice(params: &JsonObject) -> ProgressNotice {
    ProgressNotice {
        progress: params
            .get("progress")
            .and_then(Value::as_f64)
            .unwrap_or_default(),
        total: params.get("total").and_then(Value::as_f64),
        message: params
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// Reads a log notification's params; a missing level reads as `info`.
pub fn log_notice(params: &JsonObject) -> LogNotice {
    LogNotice {
        level: params
            .get("level")
            .and_then(Value::as_str)
            .unwrap_or("info")
            .to_owned(),
        logger: params
            .get("logger")
            .and_then(Value::as_str)
            .map(str::to_owned),
        data: params.get("data").cloned().unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn notices_are_read_from_their_params() {
        let params = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            progress_notice(&params(
                json!({"progress": 3, "total": 10, "message": "copying"})
            )),
            ProgressNotice {
                progress: 3.0,
                total: Some(10.0),
                message: Some("copying".into())
            }
        );
        assert_eq!(
            log_notice(&params(
                json!({"level": "warning", "logger": "db", "data": {"n": 1}})
            )),
            LogNotice {
                level: "warning".into(),
                logger: Some("db".into()),
                data: json!({"n": 1})
            }
        );
        assert_eq!(log_notice(&JsonObject::new()).level, "info");
    }
}
