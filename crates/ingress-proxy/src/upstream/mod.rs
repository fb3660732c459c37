//! Bodiless requests (GET, HEAD and most others; the bulk of what an ingress carries)
//! written straight onto a raw keep-alive HTTP/1.1 connection to the endpoint, in the
//! client connection's own task, and the answer's head read back there.
//!
//! hyper's client connection runs as a task of its own and takes each request through
//! a channel and gives the response back through another: two task wakeups and their
//! handoffs per proxied request, which `benches/ingress_rate.rs` showed a measurable
//! share of plain HTTP's cost against nginx. Here the request is one write and the
//! response head one read in the task that has the client's request; the framing is
//! httparse's (hyper's own parser). A request with a body or an upgrade keeps hyper's
//! client ([`crate::pool`]), which writes a body while it reads an early answer.
//!
//! - [`head`]: the request head's bytes; the response head and its body's framing;
//! - [`relay`]: the response head written as the client's HTTP/1.1 head from its bytes;
//! - [`body`]: the response body off the connection, which goes back idle at its end.

pub mod body;
pub mod head;
pub mod relay;

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::BytesMut;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::idle::{Idle, Reusable};
use crate::pool::{connect, ConnectError};
use body::UpstreamBody;
use head::{framing_and_keep_alive, parse_response, Framing, HeadError};
use relay::{relay_head, Relayed};

/// A response head longer than this: an error.
const MAX_HEAD: usize = 64 * 1024;
const HEAD_READ_SIZE: usize = 8 * 1024;
/// Interim responses (103 Early Hints and the like) passed over before the final one.
const MAX_INTERIM: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("writing the request: {0}")]
    Write(std::io::Error),
    #[error("reading the answer: {0}")]
    Read(std::io::Error),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error("the endpoint's response head is longer than {MAX_HEAD} bytes")]
    HeadTooLarge,
    #[error("the endpoint closed the connection before it answered")]
    ClosedBeforeAnswer,
    #[error("the endpoint switched protocols for a request that asked for no upgrade")]
    UnaskedUpgrade,
    #[error("the endpoint sent more than {MAX_INTERIM} interim (1xx) responses")]
    TooManyInterim,
    #[error("the endpoint's chunked body is malformed: {0}")]
    Chunk(&'static str),
    #[error("the endpoint closed the connection in the middle of the response body")]
    BodyCut,
}

/// A raw connection to an endpoint, with what has been read from it and not used.
pub struct BackendConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl Reusable for BackendConn {
    /// Asks the reactor, not the socket: a connection with no readiness since its last
    /// short read has had nothing (no FIN, no bytes) arrive, and costs no system call.
    fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut peeked = ReadBuf::new(&mut byte);
        // Ready: end of stream, an error, or bytes nobody asked for.
        self.stream.poll_peek(&mut cx, &mut peeked).is_ready()
    }
}

/// How a request on a raw connection failed.
#[derive(Debug)]
pub enum Failure {
    /// Nothing of the request reached the endpoint whole: another may be tried.
    Unsent(UpstreamError),
    /// The request was written; it is not sent again.
    Sent(UpstreamError),
}

/// One worker's raw connections to endpoints.
pub struct Upstream {
    idle: Idle<BackendConn>,
    connect_timeout: Duration,
}

impl Upstream {
    pub fn new(
        connect_timeout: Duration,
        idle_timeout: Duration,
        max_idle_per_endpoint: usize,
    ) -> Upstream {
        Upstream {
            idle: Idle::new(idle_timeout, max_idle_per_endpoint),
            connect_timeout,
        }
    }

    /// An idle connection to `endpoint` that is still open, if there is one.
    pub fn reuse(&self, endpoint: SocketAddr) -> Option<BackendConn> {
        while let Some(mut conn) = self.idle.take(endpoint) {
            if !conn.closed() {
                return Some(conn);
            }
        }
        None
    }

    /// A new connection to `endpoint`.
    pub async fn connect(&self, endpoint: SocketAddr) -> Result<BackendConn, ConnectError> {
        let stream = connect(endpoint, self.connect_timeout).await?;
        Ok(BackendConn {
            stream,
            buf: BytesMut::new(),
        })
    }

    /// Writes `request` (a whole bodiless request's head) on `conn` and reads the
    /// answer's head, as `want` asks; its body reads on from the connection.
    pub async fn exchange(
        self: &Arc<Self>,
        mut conn: BackendConn,
        endpoint: SocketAddr,
        request: &[u8],
        head_request: bool,
        want: &mut Want<'_>,
    ) -> Result<Exchanged, Failure> {
        // A head written in part is no request the endpoint can act on.
        if let Err(e) = conn.stream.write_all(request).await {
            return Err(Failure::Unsent(UpstreamError::Write(e)));
        }
        match want {
            Want::Response => {
                let response = self.response(conn, endpoint, head_request).await?;
                Ok(Exchanged::Response(response))
            }
            Want::Relay { close, out } => {
                let close = *close;
                let relay = |buf: &mut BytesMut| relay_head(buf, head_request, close, out);
                let relayed = read_head_by(&mut conn, relay).await;
                let relayed = relayed.map_err(Failure::Sent)?;
                let home = relayed.reusable.then(|| (self.clone(), endpoint));
                let body = UpstreamBody::new(conn, relayed.framing, home);
                Ok(Exchanged::Relayed(relayed, body))
            }
        }
    }

    /// The answer as a `Response`, its head parsed into a `HeaderMap`.
    async fn response(
        self: &Arc<Self>,
        mut conn: BackendConn,
        endpoint: SocketAddr,
        head_request: bool,
    ) -> Result<Response<UpstreamBody>, Failure> {
        let parse = |buf: &mut BytesMut| {
            let head = parse_response(buf)?;
            Ok(head.map(|h| (h.status, h)))
        };
        let mut head = read_head_by(&mut conn, parse)
            .await
            .map_err(Failure::Sent)?;
        let (framing, keeps_alive) =
            framing_and_keep_alive(&head, head_request).map_err(|e| Failure::Sent(e.into()))?;
        // RFC 9112 §6.3: with a transfer coding, a Content-Length is wrong and must go.
        if head.headers.contains_key(TRANSFER_ENCODING) {
            head.headers.remove(CONTENT_LENGTH);
        }
        let reusable = keeps_alive && framing != Framing::UntilClose;
        let home = reusable.then(|| (self.clone(), endpoint));
        // The version stays the proxy's own (RFC 9110 §6.2), not the endpoint's.
        let mut response = Response::new(UpstreamBody::new(conn, framing, home));
        *response.status_mut() = head.status;
        *response.headers_mut() = head.headers;
        Ok(response)
    }
}

/// What the caller of [`Upstream::exchange`] wants of the answer.
pub enum Want<'o> {
    /// A `Response` (hyper's server writes it).
    Response,
    /// The client's HTTP/1.1 head written to `out` ([`relay`]), `Connection: close`
    /// when `close`.
    Relay { close: bool, out: &'o mut Vec<u8> },
}

/// The answer, as it was wanted.
pub enum Exchanged {
    Response(Response<UpstreamBody>),
    Relayed(Relayed, UpstreamBody),
}

/// The final response head, as `parse` takes it off the buffer with its status (interim
/// 1xx ones, e.g. 103 Early Hints, are passed over).
async fn read_head_by<T>(
    conn: &mut BackendConn,
    mut parse: impl FnMut(&mut BytesMut) -> Result<Option<(StatusCode, T)>, HeadError>,
) -> Result<T, UpstreamError> {
    let mut interim = 0;
    loop {
        if let Some((status, head)) = parse(&mut conn.buf)? {
            match status.as_u16() {
                101 => return Err(UpstreamError::UnaskedUpgrade),
                100..=199 if interim < MAX_INTERIM => {
                    interim += 1;
                    continue;
                }
                100..=199 => return Err(UpstreamError::TooManyInterim),
                _ => return Ok(head),
            }
        }
        if conn.buf.len() >= MAX_HEAD {
            return Err(UpstreamError::HeadTooLarge);
        }
        conn.buf.reserve(HEAD_READ_SIZE);
        let read = conn.stream.read_buf(&mut conn.buf).await;
        if read.map_err(UpstreamError::Read)? == 0 {
            return Err(UpstreamError::ClosedBeforeAnswer);
        }
    }
}
