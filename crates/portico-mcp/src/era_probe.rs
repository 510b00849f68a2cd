//! Which protocol era a server speaks, asked before rmcp's lifecycle starts, for as long as the
//! server's start may take.
//!
//! rmcp's automatic lifecycle asks `server/discover` and gives up on it after a fixed 10 s; it then
//! sends `initialize`, and a server that was only slow to start (a cold `npx -y`, a first `uvx`, a
//! `docker run` pulling an image) answers the probe late, which breaks that handshake. So Portico
//! asks itself, on the raw transport: `server/discover` under an id of its own, waiting for the
//! answer within the server's `startup_timeout_secs`. A server that is alive but ignores the probe
//! is found by a `ping` every few seconds (allowed before the handshake in every era): one that
//! answers the ping and not the probe speaks the handshake era. rmcp then runs the one lifecycle
//! that fits, on the same transport, behind [`WithoutProbeAnswers`], which drops a late answer to
//! any of these requests instead of letting it reach the handshake.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, DiscoverRequest, DiscoverRequestParams,
    EmptyResult, ErrorCode, JsonRpcMessage, NumberOrString, PingRequest, ProtocolVersion,
    RequestMetaObject, ServerJsonRpcMessage, ServerRequest, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// Every request id of the probe starts with this; rmcp's own ids are numbers.
const PROBE_ID_PREFIX: &str = "portico-era-probe";
/// How long the probe waits for an answer before it pings, and between pings.
const PING_EVERY: Duration = Duration::from_secs(5);

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Era {
    /// `server/discover` was answered: the stateless era (2026-07-28 and later), or a modern
    /// server's refusal that rmcp's discover lifecycle reports in its own words.
    Discover,
    /// The server answered the probe with an error or with something other than a discover
    /// result, or answered a ping and not the probe: it speaks the `initialize` handshake. Says
    /// what `server/discover` was answered with, for an error if `initialize` then fails too.
    Handshake(String),
}

/// Whether the probe pings a server that has not answered yet. Over stdio a server may ignore a
/// request it does not know; over HTTP every request gets an HTTP answer, and a ping without a
/// session would be refused as a transport error, so there it waits for the probe's own answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pings {
    Send,
    None,
}

/// Why the probe could not tell.
#[derive(Debug)]
pub(crate) enum ProbeError {
    /// The transport closed before an answer: the server exited, usually.
    Closed,
    /// A request could not be sent.
    Send(String),
}

/// Asks the server which era it speaks. Waits as long as the caller lets it (the caller bounds the
/// whole start); never returns an answer to a request rmcp will make.
pub(crate) async fn probe<T: Transport<RoleClient>>(
    transport: &mut T,
    client: &ClientConfig,
    preferred: &ProtocolVersion,
    server: &str,
    pings: Pings,
) -> Result<Era, ProbeError> {
    let meta = RequestMetaObject::with_client_context(
        preferred.clone(),
        client.client_info.clone(),
        client.capabilities.clone(),
    );
    let mut discover = DiscoverRequest::new(DiscoverRequestParams {});
    discover.extensions.insert(meta);
    let discover_id = probe_id("discover");
    send(
        transport,
        ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(discover),
            discover_id.clone(),
        ),
    )
    .await?;
    let mut sent_pings: u32 = 0;
    loop {
        let message = tokio::select! {
            message = transport.receive() => message,
            _ = tokio::time::sleep(PING_EVERY), if pings == Pings::Send => {
                sent_pings += 1;
                tracing::debug!(server, sent_pings, "no answer to `server/discover` yet; pinging");
                let ping = ClientRequest::PingRequest(PingRequest::default());
                send(transport, ClientJsonRpcMessage::request(ping, probe_id(&format!("ping-{sent_pings}")))).await?;
                continue;
            }
        };
        let Some(message) = message else {
            return Err(ProbeError::Closed);
        };
        match message {
            JsonRpcMessage::Response(response) if response.id == discover_id => {
                return Ok(match response.result {
                    ServerResult::DiscoverResult(_) => Era::Discover,
                    // Servers that answer every method they do not know with `{}`.
                    _ => Era::Handshake("a result that is not a discover result".into()),
                });
            }
            JsonRpcMessage::Error(error) if error.id.as_ref() == Some(&discover_id) => {
                return Ok(if is_modern_refusal(error.error.code) {
                    Era::Discover
                } else {
                    Era::Handshake(format!(
                        "an error ({}: {})",
                        error.error.code.0, error.error.message
                    ))
                });
            }
            JsonRpcMessage::Response(response) if is_probe_id(&response.id) => {
                tracing::debug!(server, "a ping was answered and `server/discover` was not");
                return Ok(Era::Handshake("nothing, while a ping was".into()));
            }
            JsonRpcMessage::Error(error) if error.id.as_ref().is_some_and(is_probe_id) => {
                return Ok(Era::Handshake("nothing, while a ping was".into()));
            }
            JsonRpcMessage::Request(request)
                if matches!(request.request, ServerRequest::PingRequest(_)) =>
            {
                let pong = ClientJsonRpcMessage::response(
                    rmcp::model::ClientResult::EmptyResult(EmptyResult {}),
                    request.id,
                );
                send(transport, pong).await?;
            }
            other => {
                // Before any handshake a server has nothing to say; what it says anyway (a log
                // notification, a stray answer) is dropped.
                tracing::debug!(server, message = ?kind(&other), "dropped a message sent before the handshake");
            }
        }
    }
}

/// Codes a 2026-07-28 server answers `server/discover` with when it refuses this client's request
/// (so it is modern, and rmcp's discover lifecycle negotiates or reports it).
fn is_modern_refusal(code: ErrorCode) -> bool {
    code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        || code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        || code == ErrorCode::HEADER_MISMATCH
}

fn probe_id(what: &str) -> NumberOrString {
    NumberOrString::String(Arc::from(format!("{PROBE_ID_PREFIX}-{what}")))
}

fn is_probe_id(id: &NumberOrString) -> bool {
    matches!(id, NumberOrString::String(id) if id.starts_with(PROBE_ID_PREFIX))
}

fn kind(message: &ServerJsonRpcMessage) -> &'static str {
    match message {
        JsonRpcMessage::Request(_) => "request",
        JsonRpcMessage::Response(_) => "response",
        JsonRpcMessage::Notification(_) => "notification",
        JsonRpcMessage::Error(_) => "error",
    }
}

async fn send<T: Transport<RoleClient>>(
    transport: &mut T,
    message: TxJsonRpcMessage<RoleClient>,
) -> Result<(), ProbeError> {
    transport
        .send(message)
        .await
        .map_err(|e| ProbeError::Send(e.to_string()))
}

/// A transport that drops answers to the probe's requests, so an answer that comes after the probe
/// was decided (a ping answered after `server/discover`, say) never reaches rmcp, which would take
/// it for an answer to its own request of the same place in line.
pub(crate) struct WithoutProbeAnswers<T> {
    inner: T,
    server: String,
}

impl<T> WithoutProbeAnswers<T> {
    pub(crate) fn new(inner: T, server: &str) -> Self {
        WithoutProbeAnswers {
            inner,
            server: server.to_string(),
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for WithoutProbeAnswers<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            let late = match &message {
                JsonRpcMessage::Response(response) => is_probe_id(&response.id),
                JsonRpcMessage::Error(error) => error.id.as_ref().is_some_and(is_probe_id),
                _ => false,
            };
            if !late {
                return Some(message);
            }
            tracing::debug!(
                server = self.server,
                "dropped a late answer to the era probe"
            );
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientCapabilities, Implementation};
    use tokio::sync::mpsc;

    /// A scripted server: what the client sends is recorded; `answer` decides what comes back.
    struct Scripted {
        sent: mpsc::UnboundedSender<ClientJsonRpcMessage>,
        incoming: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    }

    impl Transport<RoleClient> for Scripted {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let _ = self.sent.send(item);
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.incoming.recv().await
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn client() -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("portico", "test"),
        )
    }

    fn scripted() -> (
        Scripted,
        mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
        mpsc::UnboundedSender<ServerJsonRpcMessage>,
    ) {
        let (sent_tx, sent_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        (
            Scripted {
                sent: sent_tx,
                incoming: in_rx,
            },
            sent_rx,
            in_tx,
        )
    }

    fn answer(json: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(json).unwrap()
    }

    fn id_of(message: &ClientJsonRpcMessage) -> serde_json::Value {
        serde_json::to_value(message).unwrap()["id"].clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_discover_result_is_waited_for_through_pings_nobody_answers() {
        let (mut transport, mut sent, server) = scripted();
        let probing = tokio::spawn(async move {
            let era = probe(
                &mut transport,
                &client(),
                &ProtocolVersion::V_2026_07_28,
                "s",
                Pings::Send,
            )
            .await;
            (era, transport)
        });
        let discover = sent.recv().await.unwrap();
        let discover_id = id_of(&discover);
        assert_eq!(discover_id, "portico-era-probe-discover");
        assert_eq!(
            serde_json::to_value(&discover).unwrap()["method"],
            "server/discover"
        );
        // 42 s of silence: a ping every 5 s, none answered, no `initialize`.
        tokio::time::sleep(Duration::from_secs(42)).await;
        let mut pings = 0;
        while let Ok(message) = sent.try_recv() {
            assert_eq!(serde_json::to_value(&message).unwrap()["method"], "ping");
            pings += 1;
        }
        assert_eq!(pings, 8);
        server
            .send(answer(serde_json::json!({
                "jsonrpc": "2.0", "id": discover_id,
                "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                           "capabilities": {}, "ttlMs": 0, "cacheScope": "private"}
            })))
            .unwrap();
        let (era, transport) = probing.await.unwrap();
        assert_eq!(era.unwrap(), Era::Discover);

        // The pings' late answers never reach the lifecycle; rmcp's own answers do.
        let mut filtered = WithoutProbeAnswers::new(transport, "s");
        server
            .send(answer(serde_json::json!({"jsonrpc": "2.0", "id": "portico-era-probe-ping-3", "result": {}})))
            .unwrap();
        server
            .send(answer(
                serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
            ))
            .unwrap();
        let through = filtered.receive().await.unwrap();
        assert_eq!(serde_json::to_value(&through).unwrap()["id"], 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_answer_or_a_ping_answer_means_the_handshake_era() {
        let handshake = |why: &str| Era::Handshake(why.to_string());
        for (reply, expected) in [
            (
                serde_json::json!({"jsonrpc": "2.0", "id": "portico-era-probe-discover",
                                   "error": {"code": -32601, "message": "Method not found"}}),
                handshake("an error (-32601: Method not found)"),
            ),
            (
                serde_json::json!({"jsonrpc": "2.0", "id": "portico-era-probe-discover", "result": {}}),
                handshake("a result that is not a discover result"),
            ),
            (
                serde_json::json!({"jsonrpc": "2.0", "id": "portico-era-probe-discover",
                                   "error": {"code": -32022, "message": "unsupported",
                                             "data": {"supported": ["2027-01-01"]}}}),
                Era::Discover,
            ),
            (
                serde_json::json!({"jsonrpc": "2.0", "id": "portico-era-probe-ping-1", "result": {}}),
                handshake("nothing, while a ping was"),
            ),
        ] {
            let (mut transport, mut sent, server) = scripted();
            let probing = tokio::spawn(async move {
                probe(
                    &mut transport,
                    &client(),
                    &ProtocolVersion::V_2026_07_28,
                    "s",
                    Pings::Send,
                )
                .await
            });
            sent.recv().await.unwrap();
            // A log line before any answer is dropped, not taken for one.
            server
                .send(answer(
                    serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
                                                "params": {"level": "info", "data": "booting"}}),
                ))
                .unwrap();
            server.send(answer(reply.clone())).unwrap();
            assert_eq!(probing.await.unwrap().unwrap(), expected, "{reply}");
        }
    }

    #[tokio::test]
    async fn a_server_that_exits_before_answering_closes_the_probe() {
        let (mut transport, _sent, server) = scripted();
        drop(server);
        let era = probe(
            &mut transport,
            &client(),
            &ProtocolVersion::V_2026_07_28,
            "s",
            Pings::Send,
        )
        .await;
        assert!(matches!(era, Err(ProbeError::Closed)));
    }
}
