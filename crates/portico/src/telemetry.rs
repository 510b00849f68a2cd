//! `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP (protobuf), through portico-net's
//! `SafeClient`. Which spans there are, and what they carry, is `portico_core::trace`; this module
//! only sends them. Read once at start, for the commands that serve (`serve`, `mcp`).

use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use opentelemetry::trace::TracerProvider;
use opentelemetry_http::{HttpClient, HttpError, ResponseBodyTooLarge};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use portico_config::TelemetrySection;
use portico_net::{NetPolicy, SafeClient};

/// How long one export may take, connection included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// What Portico reads of a collector's answer (it says only whether the spans were taken).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The exporter while Portico runs; [`Traces::shutdown`] sends what is still queued.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts exporting to `[telemetry] otlp_endpoint`, if set: the tracer for the tracing layer,
    /// and the W3C propagator for the doors and upstream calls. `runtime` runs the exports' HTTP.
    pub fn start(
        section: &TelemetrySection,
        runtime: tokio::runtime::Handle,
    ) -> anyhow::Result<Option<(Traces, SdkTracer)>> {
        let Some(raw) = &section.otlp_endpoint else {
            return Ok(None);
        };
        let endpoint = portico_config::expand_vars(raw, |var| std::env::var(var).ok())
            .with_context(|| format!("[telemetry] otlp_endpoint `{raw}`"))?;
        let client = collector_client()?;
        let url = client.check_url(&endpoint).with_context(|| {
            format!(
                "[telemetry] otlp_endpoint `{endpoint}` cannot be used (an http(s) URL such as http://127.0.0.1:4318/v1/traces)"
            )
        })?;
        let ratio = section.sample_ratio();
        if !(0.0..=1.0).contains(&ratio) {
            bail!("[telemetry] sample_ratio {ratio} is not from 0.0 to 1.0");
        }
        let exporter = SpanExporter::builder()
            .with_http()
            .with_http_client(CollectorClient {
                client,
                endpoint: url.clone(),
                runtime,
            })
            .with_endpoint(url.as_str())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .context("cannot build the OTLP exporter for [telemetry]")?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            // A caller's sampling decision (its `traceparent`'s flag) is kept; new traces get the ratio.
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                ratio,
            ))))
            .with_resource(
                Resource::builder()
                    .with_service_name(section.service_name().to_string())
                    .build(),
            )
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let tracer = provider.tracer("portico");
        Ok(Some((Traces { provider }, tracer)))
    }

    /// Exports the spans still queued (bounded by the export timeout) and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("warning: [telemetry] the last spans were not all exported: {error}");
        }
    }
}

/// The collector's client. The endpoint is one the operator configured, so loopback and private
/// addresses are allowed (a collector is usually a local agent or a sidecar); cloud metadata and
/// link-local stay refused, as everywhere. The exporter sends only to that endpoint (checked per
/// request below), and never follows a redirect: a collector has no reason to send one, and a
/// redirect would take the spans somewhere nobody configured.
fn collector_client() -> anyhow::Result<SafeClient> {
    SafeClient::builder()
        .policy(NetPolicy::allow_private_network())
        .follow_redirects(false)
        .timeout(EXPORT_TIMEOUT)
        .build()
        .context("cannot build the HTTP client for [telemetry]")
}

/// opentelemetry-http's client over `SafeClient`. The SDK exports from a thread of its own, outside
/// tokio, so each request runs on Portico's runtime and is awaited from there.
struct CollectorClient {
    client: SafeClient,
    endpoint: url::Url,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for CollectorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectorClient")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl HttpClient for CollectorClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = url::Url::parse(&parts.uri.to_string())?;
        if url != self.endpoint {
            return Err(format!(
                "refused to send spans to {url}: only [telemetry] otlp_endpoint {} is configured",
                self.endpoint
            )
            .into());
        }
        let request = self
            .client
            .http()
            .request(parts.method, url)
            .headers(parts.headers)
            .body(body);
        let answer = self
            .runtime
            .spawn(async move {
                let mut response = request.send().await?;
                let mut answer = http::Response::builder().status(response.status());
                if let Some(headers) = answer.headers_mut() {
                    *headers = std::mem::take(response.headers_mut());
                }
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await? {
                    if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(Box::new(ResponseBodyTooLarge::new()) as HttpError);
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(answer.body(Bytes::from(body))?)
            })
            .await??;
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(endpoint: Option<&str>, ratio: Option<f64>) -> anyhow::Result<bool> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let section = TelemetrySection {
            otlp_endpoint: endpoint.map(str::to_string),
            service_name: None,
            sample_ratio: ratio,
        };
        let started = Traces::start(&section, runtime.handle().clone())?;
        Ok(started.map(|(traces, _)| traces.shutdown()).is_some())
    }

    #[test]
    fn an_endpoint_is_required_usable_and_not_a_metadata_address() {
        assert!(!start(None, None).unwrap());
        let refused =
            |endpoint: &str, ratio| format!("{:#}", start(Some(endpoint), ratio).unwrap_err());
        assert!(
            refused("ftp://collector/v1/traces", None).starts_with(
                "[telemetry] otlp_endpoint `ftp://collector/v1/traces` cannot be used"
            ),
        );
        assert!(
            refused("http://169.254.169.254/v1/traces", None).contains("cloud metadata"),
            "{}",
            refused("http://169.254.169.254/v1/traces", None)
        );
        assert!(
            refused("${PORTICO_TEST_SURELY_UNSET_OTLP}", None)
                .starts_with("[telemetry] otlp_endpoint `${PORTICO_TEST_SURELY_UNSET_OTLP}`")
        );
        assert_eq!(
            refused("http://127.0.0.1:4318/v1/traces", Some(2.0)),
            "[telemetry] sample_ratio 2 is not from 0.0 to 1.0"
        );
        // A loopback collector is fine: the operator named it.
        assert!(start(Some("http://127.0.0.1:4318/v1/traces"), None).unwrap());
    }
}
