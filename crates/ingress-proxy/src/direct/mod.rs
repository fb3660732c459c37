//! HTTP/1.1 requests served without hyper's server: the common Ingress request (no
//! body, no upgrade, origin form) is read with httparse, its backend head written
//! straight from the client's bytes, and the answer written back by this connection's
//! own loop.
//!
//! hyper's server made each request a `HeaderMap`, a `Uri` and a `Request`, called the
//! service through a boxed future, and the forwarder then rewrote that map header by
//! header for the backend: `benches/ingress_rate.rs` measured twice nginx's user CPU
//! per plain-HTTP request, most of it there. Any other request (a body, an upgrade,
//! `Expect`, HTTP/1.0, a Gateway listener's port, a head hyper must refuse) hands the
//! connection to hyper with the bytes read so far, and hyper serves the rest of it.
//!
//! - [`request`]: the client's head, whether it is served here, the backend's head;
//! - [`response`]: the answer's head and body onto the client connection.

pub mod request;
pub mod response;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use http::Response;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::body::{plain, ProxyBody};
use crate::connection::Connection;
use crate::forward::{ingress_backend, Forwarder};
use crate::snapshot::Backend;
use crate::sniff::Sniffed;
use request::{parse, Parsed, MAX_HEADERS};
use response::{write_body_after_head, write_response};

/// A head longer than this goes to hyper, whose limit is larger (about 400 KiB).
const MAX_HEAD: usize = 64 * 1024;
const READ_SIZE: usize = 8 * 1024;
/// Buffers grown past this (a large answer's body) are let go once it is written, so
/// an idle keep-alive connection holds little.
const KEEP_CAPACITY: usize = 16 * 1024;

/// How a connection left the direct path.
pub enum Outcome<S> {
    /// It is closed, or of no further use.
    Done,
    /// hyper serves the rest, starting with the bytes already read.
    HandOff(Sniffed<S>),
}

/// What one request head asks of the proxy.
enum Step {
    Forward(Arc<Backend>),
    Answer(Response<ProxyBody>),
}

/// What the connection needs to know of a request head besides its step.
#[derive(Clone, Copy)]
struct Head {
    len: usize,
    /// The client said `Connection: close`.
    close: bool,
    /// A HEAD request: the answer has no body.
    head_request: bool,
}

/// The per-connection state of the loop.
struct Direct<'a, S> {
    stream: S,
    buf: BytesMut,
    conn: &'a Connection,
    forwarder: &'a Forwarder,
    /// The backend head of the request in hand.
    upstream_head: Vec<u8>,
    /// The client response being written.
    out: Vec<u8>,
}

/// Serves `io`'s requests until one must go to hyper, the client closes, a head takes
/// longer than `header_timeout` (counted, as hyper does, from when the proxy starts
/// waiting for it), or draining begins between requests.
pub async fn serve<S>(
    io: Sniffed<S>,
    conn: &Connection,
    forwarder: &Forwarder,
    header_timeout: Duration,
    draining: &mut watch::Receiver<bool>,
) -> Outcome<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (buf, stream) = io.into_parts();
    let mut direct = Direct {
        stream,
        buf,
        conn,
        forwarder,
        upstream_head: Vec::with_capacity(1024),
        out: Vec::with_capacity(4096),
    };
    loop {
        let deadline = tokio::time::Instant::now() + header_timeout;
        let (step, mut head) = match direct.next_head(deadline, draining).await {
            Some(Some(next)) => next,
            Some(None) => return direct.hand_off(),
            None => return Outcome::Done,
        };
        let started = Instant::now();
        direct.buf.advance(head.len);
        head.close |= *draining.borrow();
        let answered = direct.respond(step, head, started, draining).await;
        direct.shrink();
        if !matches!(answered, Ok(Keep::Open)) {
            // TLS ends with its close_notify; plain TCP's close sends the FIN anyway,
            // and a shutdown first was one more system call per connection (mostly
            // failing: the client had closed on reading the answer).
            if conn.scheme == "https" {
                let _ = direct.stream.shutdown().await;
            }
            return Outcome::Done;
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Direct<'_, S> {
    /// The next request's step and head; `Some(None)`: hyper's; `None`: the
    /// connection is done.
    async fn next_head(
        &mut self,
        deadline: tokio::time::Instant,
        draining: &mut watch::Receiver<bool>,
    ) -> Option<Option<(Step, Head)>> {
        loop {
            match self.plan() {
                Plan::Partial => {}
                Plan::HandOff => return Some(None),
                Plan::Ready(step, head) => return Some(Some((step, head))),
            }
            if self.buf.len() >= MAX_HEAD {
                return Some(None);
            }
            self.buf.reserve(READ_SIZE);
            let idle = self.buf.is_empty();
            let read = tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf));
            let read = tokio::select! {
                biased;
                read = read => read,
                // Between requests a draining connection just closes.
                _ = draining.wait_for(|d| *d), if idle => return None,
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// What the head at the front of the buffer asks for.
    fn plan(&mut self) -> Plan {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let (request, len) = match parse(&self.buf, &mut slots) {
            Parsed::Partial => return Plan::Partial,
            Parsed::HandOff => return Plan::HandOff,
            Parsed::Direct(request, len) => (request, len),
        };
        let snapshot = self.forwarder.routes().current();
        // A Gateway listener's routes come first on its port: hyper's path decides.
        if snapshot
            .gateways
            .iter()
            .any(|l| l.port == self.conn.local_port)
        {
            return Plan::HandOff;
        }
        let step = match ingress_backend(&snapshot, request.host, request.path()) {
            Err((status, why)) => Step::Answer(plain(status, &why)),
            Ok(backend) => {
                self.upstream_head.clear();
                let origin = self.conn.origin(request.host);
                request.encode_upstream(&origin, &mut self.upstream_head);
                Step::Forward(backend)
            }
        };
        let head = Head {
            len,
            close: request.close,
            head_request: request.is_head(),
        };
        Plan::Ready(step, head)
    }

    /// Answers one request and counts it; whether the connection stays open after.
    async fn respond(
        &mut self,
        step: Step,
        mut head: Head,
        started: Instant,
        draining: &watch::Receiver<bool>,
    ) -> std::io::Result<Keep> {
        let backend = match step {
            Step::Answer(answer) => {
                head.close |= *draining.borrow();
                self.answer(answer, None, head, started).await?;
                return Ok(Keep::after(head));
            }
            Step::Forward(backend) => backend,
        };
        let relayed = self.forwarder.relay_head(
            &self.upstream_head,
            &backend,
            head.head_request,
            head.close,
            &mut self.out,
        );
        match relayed.await {
            Ok((relayed, mut body)) => {
                let took = started.elapsed();
                let service = Some(&backend.service);
                self.forwarder.record(service, relayed.status, took);
                // Draining began while the backend answered: this answer is the last.
                if !head.close && *draining.borrow() {
                    head.close = true;
                    add_close(&mut self.out);
                }
                let out = &mut self.out;
                write_body_after_head(&mut self.stream, &mut body, relayed.chunked, out).await?;
            }
            Err(answer) => {
                head.close |= *draining.borrow();
                self.answer(*answer, Some(&backend), head, started).await?;
            }
        }
        Ok(Keep::after(head))
    }

    /// Lets go of buffers a large answer grew.
    fn shrink(&mut self) {
        if self.out.capacity() > KEEP_CAPACITY {
            self.out = Vec::with_capacity(4096);
        }
        if self.buf.is_empty() && self.buf.capacity() > KEEP_CAPACITY {
            self.buf = BytesMut::new();
        }
    }

    /// Writes the proxy's own answer (or a `Response` made elsewhere) and counts it.
    async fn answer(
        &mut self,
        answer: Response<ProxyBody>,
        backend: Option<&Backend>,
        head: Head,
        started: Instant,
    ) -> std::io::Result<()> {
        let service = backend.map(|b| &b.service);
        self.forwarder
            .record(service, answer.status(), started.elapsed());
        let out = &mut self.out;
        let written = write_response(&mut self.stream, answer, head.head_request, head.close, out);
        written.await
    }

    fn hand_off(self) -> Outcome<S> {
        Outcome::HandOff(Sniffed::from_parts(self.buf, self.stream))
    }
}

/// Whether a connection stays open after an answer.
enum Keep {
    Open,
    Close,
}

impl Keep {
    fn after(head: Head) -> Keep {
        match head.close {
            true => Keep::Close,
            false => Keep::Open,
        }
    }
}

/// Adds `Connection: close` to the whole head in `out` (it ends with a blank line).
fn add_close(out: &mut Vec<u8>) {
    if out.ends_with(b"\r\n\r\n") {
        let end = out.len() - 2;
        out.splice(end..end, b"connection: close\r\n".iter().copied());
    }
}

enum Plan {
    Partial,
    HandOff,
    Ready(Step, Head),
}
