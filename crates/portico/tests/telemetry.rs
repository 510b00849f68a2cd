//! Observability of the real binary: OpenTelemetry traces received by an OTLP/HTTP collector the
//! test runs, with the `traceparent` an HTTP upstream saw; and the log's settings.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "telemetry/logs.rs"]
mod logs;
#[path = "telemetry/traces.rs"]
mod traces;
