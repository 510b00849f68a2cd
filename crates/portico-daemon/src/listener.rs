//! The door's listener: every accepted connection gets `TCP_NODELAY`, and its peer address is what
//! routes see as connect info.
//!
//! Without `TCP_NODELAY` the last small write of a response (the end of a chunked or SSE body) waits
//! in Nagle's buffer for the client's delayed ACK: about 40 ms per call on a kept-alive connection,
//! which is how Node's `fetch`, httpx and wrk connect.

use std::net::SocketAddr;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};

pub(crate) struct DoorListener(TcpListener);

impl DoorListener {
    pub(crate) fn new(listener: TcpListener) -> Self {
        DoorListener(listener)
    }
}

/// The address a request's connection comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub SocketAddr);

impl Listener for DoorListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        // axum's accept loop for TcpListener already handles accept errors (EMFILE and the like) by
        // logging and backing off; it is reused as it is.
        let (stream, address) = Listener::accept(&mut self.0).await;
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on the connection from {address}: {e}");
        }
        (stream, address)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, DoorListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, DoorListener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}
