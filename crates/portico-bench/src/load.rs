//! Load generators for the MCP transports wrk cannot drive: a child's stdio (what an IDE does with
//! `portico mcp` or any stdio server) and the legacy HTTP+SSE transport (answers on the GET stream).
//!
//! Both speak raw JSON-RPC with as little client work as possible, so the figures are the server's: a
//! call is written, and its answer is matched by id. A JSON-RPC error or an `isError` result stops
//! the run: a benchmark of failing calls measures nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, oneshot};

use crate::stats::Measured;

/// The handshake era the load generators speak: every door supports it, and it is what IDEs send.
const PROTOCOL_VERSION: &str = "2025-11-25";

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// One MCP session that can take concurrent calls.
#[allow(async_fn_in_trait)]
pub trait Session: Send + Sync + 'static {
    /// Sends `message` (a request with `id`) and waits for its answer.
    fn request(
        &self,
        id: u64,
        message: Value,
    ) -> impl Future<Output = anyhow::Result<Value>> + Send;
    /// Sends a notification.
    fn notify(&self, message: Value) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// What to call.
#[derive(Clone)]
pub struct Call {
    pub tool: String,
    pub arguments: Value,
}

impl Call {
    fn message(&self, id: u64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": self.tool, "arguments": self.arguments}})
    }
}

/// Ids are unique per process so that answers from any session can be matched.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

async fn call_once<S: Session>(session: &S, call: &Call) -> anyhow::Result<()> {
    let id = next_id();
    let answer = session.request(id, call.message(id)).await?;
    if let Some(error) = answer.get("error") {
        bail!("`{}` failed: {error}", call.tool);
    }
    if answer["result"]["isError"] == json!(true) {
        bail!("`{}` answered isError: {}", call.tool, answer["result"]);
    }
    Ok(())
}

pub async fn initialize<S: Session>(session: &S) -> anyhow::Result<()> {
    let id = next_id();
    let answer = session
        .request(
            id,
            json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": "portico-bench", "version": "1"}}}),
        )
        .await?;
    if answer.get("result").is_none() {
        bail!("initialize failed: {answer}");
    }
    session
        .notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
}

/// Warms up, then makes `calls` sequential calls on the first session (latency), then keeps
/// `concurrency` calls in flight for `secs` seconds, spread over `sessions` round robin (rate). With
/// `server_pid`, the CPU time that process used per call in the concurrent run is measured too.
pub async fn measure<S: Session>(
    sessions: Vec<Arc<S>>,
    call: &Call,
    calls: usize,
    secs: u64,
    concurrency: usize,
    server_pid: Option<u32>,
) -> anyhow::Result<Measured> {
    let first = sessions.first().context("no session")?.clone();
    for _ in 0..50 {
        call_once(first.as_ref(), call).await?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        call_once(first.as_ref(), call).await?;
        samples.push(started.elapsed());
    }
    let mut measured = Measured::default();
    measured.latencies(samples);

    let cpu_before = server_pid.and_then(crate::stats::cpu_time);
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let session = sessions[worker % sessions.len()].clone();
        let call = call.clone();
        let done = done.clone();
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                call_once(session.as_ref(), &call).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    measured.concurrent_calls = done.load(Ordering::Relaxed);
    measured.rate = measured.concurrent_calls as f64 / started.elapsed().as_secs_f64();
    if let (Some(before), Some(after)) = (cpu_before, server_pid.and_then(crate::stats::cpu_time))
        && measured.concurrent_calls > 0
    {
        measured.server_cpu_us =
            Some((after - before).as_secs_f64() * 1e6 / measured.concurrent_calls as f64);
    }
    Ok(measured)
}

fn deliver(pending: &Pending, message: Value) {
    let Some(id) = message.get("id").and_then(Value::as_u64) else {
        return; // a notification, or a request to the client: not what is measured
    };
    if message.get("method").is_some() {
        return;
    }
    if let Some(waiter) = pending.lock().expect("pending lock").remove(&id) {
        let _ = waiter.send(message);
    }
}

/// Registers a waiter for answer `id` (before sending: the answer may come back at once), sends,
/// and waits for the answer.
async fn send_and_wait(
    pending: &Pending,
    id: u64,
    send: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Value> {
    let (sender, receiver) = oneshot::channel();
    pending.lock().expect("pending lock").insert(id, sender);
    send.await?;
    tokio::time::timeout(Duration::from_secs(30), receiver)
        .await
        .with_context(|| format!("no answer to request {id} within 30 s"))?
        .with_context(|| format!("the server went away before answering request {id}"))
}

/// MCP over a child's stdin/stdout, newline-delimited JSON.
pub struct StdioSession {
    stdin: Mutex<tokio::process::ChildStdin>,
    pending: Pending,
    child: tokio::process::Child,
}

impl StdioSession {
    /// Spawns `command` and initializes a session with it.
    pub async fn spawn(mut command: tokio::process::Command) -> anyhow::Result<Arc<StdioSession>> {
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start the stdio server")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let pending: Pending = Arc::default();
        let reader_pending = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(message) = serde_json::from_str::<Value>(&line) {
                    deliver(&reader_pending, message);
                }
            }
            // The server closed stdout: fail every waiter instead of letting it hang.
            reader_pending.lock().expect("pending lock").clear();
        });
        let session = Arc::new(StdioSession {
            stdin: Mutex::new(stdin),
            pending,
            child,
        });
        initialize(session.as_ref()).await?;
        Ok(session)
    }

    /// The server's process id, for its CPU figures.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn write(&self, message: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(&line)
            .await
            .context("the stdio server closed its stdin")?;
        stdin.flush().await?;
        Ok(())
    }
}

impl Session for StdioSession {
    async fn request(&self, id: u64, message: Value) -> anyhow::Result<Value> {
        send_and_wait(&self.pending, id, self.write(&message)).await
    }

    async fn notify(&self, message: Value) -> anyhow::Result<()> {
        self.write(&message).await
    }
}

/// The legacy HTTP+SSE transport (2024-11-05): a `GET /sse` stream that first names the endpoint to
/// POST to, then carries every answer.
pub struct SseSession {
    http: reqwest::Client,
    endpoint: String,
    pending: Pending,
    _stream: tokio::task::JoinHandle<()>,
}

impl SseSession {
    /// Opens the stream at `base/sse`, learns the endpoint, and initializes a session.
    pub async fn open(http: reqwest::Client, base: &str) -> anyhow::Result<Arc<SseSession>> {
        let response = http
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .with_context(|| format!("GET {base}/sse"))?
            .error_for_status()?;
        let mut bytes = response.bytes_stream();
        let mut buffer = Vec::new();
        let endpoint = loop {
            if let Some((event, data)) = next_event(&mut buffer) {
                if event == "endpoint" {
                    break data;
                }
                continue;
            }
            let chunk = bytes
                .next()
                .await
                .context("the SSE stream ended before naming its endpoint")??;
            buffer.extend_from_slice(&chunk);
        };
        let pending: Pending = Arc::default();
        let stream_pending = pending.clone();
        let stream = tokio::spawn(async move {
            loop {
                while let Some((event, data)) = next_event(&mut buffer) {
                    if event == "message"
                        && let Ok(message) = serde_json::from_str::<Value>(&data)
                    {
                        deliver(&stream_pending, message);
                    }
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            stream_pending.lock().expect("pending lock").clear();
        });
        let endpoint = if endpoint.starts_with('/') {
            format!("{base}{endpoint}")
        } else {
            endpoint
        };
        let session = Arc::new(SseSession {
            http,
            endpoint,
            pending,
            _stream: stream,
        });
        initialize(session.as_ref()).await?;
        Ok(session)
    }

    async fn post(&self, message: &Value) -> anyhow::Result<()> {
        let status = self
            .http
            .post(&self.endpoint)
            .json(message)
            .send()
            .await
            .context("POST to the legacy endpoint")?
            .status();
        if !status.is_success() {
            bail!("POST {} answered {status}", self.endpoint);
        }
        Ok(())
    }
}

impl Drop for SseSession {
    fn drop(&mut self) {
        self._stream.abort();
    }
}

impl Session for SseSession {
    async fn request(&self, id: u64, message: Value) -> anyhow::Result<Value> {
        send_and_wait(&self.pending, id, self.post(&message)).await
    }

    async fn notify(&self, message: Value) -> anyhow::Result<()> {
        self.post(&message).await
    }
}

/// Takes one complete server-sent event (`event`, joined `data`) off the front of `buffer`.
fn next_event(buffer: &mut Vec<u8>) -> Option<(String, String)> {
    let end = buffer.windows(2).position(|w| w == b"\n\n")?;
    let block: Vec<u8> = buffer.drain(..end + 2).collect();
    let text = String::from_utf8_lossy(&block);
    let mut event = "message".to_string();
    let mut data = Vec::new();
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            event = value.trim().to_string();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
        }
    }
    Some((event, data.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_and_their_data_joined() {
        let mut buffer =
            b"event: endpoint\ndata: /message?sessionId=1\n\ndata: {\"a\":\ndata: 1}\n\npartial"
                .to_vec();
        assert_eq!(
            next_event(&mut buffer),
            Some(("endpoint".into(), "/message?sessionId=1".into()))
        );
        assert_eq!(
            next_event(&mut buffer),
            Some(("message".into(), "{\"a\":\n1}".into()))
        );
        assert_eq!(next_event(&mut buffer), None);
        assert_eq!(buffer, b"partial");
    }
}
