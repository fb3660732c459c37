//! A backend's response body read off its raw connection as it is framed (a length,
//! chunks, or until close), the connection going back to the idle set once the body
//! has been read to its end and nothing stray follows it.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio_util::io::poll_read_buf;

use super::head::Framing;
use super::{BackendConn, Upstream, UpstreamError};

/// How much is read from the endpoint at a time.
const READ_SIZE: usize = 16 * 1024;
/// A chunk-size line or the trailers longer than this: an error.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines (dropped) up to an empty one.
    Trailers {
        seen: usize,
    },
}

/// A decoder of `Transfer-Encoding: chunked` (RFC 9112 §7.1).
#[derive(Debug)]
pub struct Chunked {
    state: ChunkState,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Data(Bytes),
    End,
}

impl Chunked {
    pub fn new() -> Chunked {
        Chunked {
            state: ChunkState::Size,
        }
    }

    /// The next piece of the body at the front of `buf`, taken off it; `None`: more
    /// bytes are needed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Piece>, UpstreamError> {
        loop {
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        buf.advance(used);
                        self.state = match size {
                            0 => ChunkState::Trailers { seen: 0 },
                            n => ChunkState::Data(n),
                        };
                    }
                    Ok(httparse::Status::Partial) if buf.len() <= MAX_CHUNK_LINE => {
                        return Ok(None)
                    }
                    _ => return Err(UpstreamError::Chunk("an invalid chunk size")),
                },
                ChunkState::Data(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let data = buf.split_to(take).freeze();
                    self.state = match left - take as u64 {
                        0 => ChunkState::DataEnd,
                        n => ChunkState::Data(n),
                    };
                    return Ok(Some(Piece::Data(data)));
                }
                ChunkState::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(UpstreamError::Chunk("no CRLF after a chunk"));
                    }
                    buf.advance(2);
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers { seen } => {
                    let Some(at) = buf.windows(2).position(|w| w == b"\r\n") else {
                        if seen + buf.len() > MAX_TRAILERS {
                            return Err(UpstreamError::Chunk("trailers too long"));
                        }
                        return Ok(None);
                    };
                    buf.advance(at + 2);
                    if at == 0 {
                        return Ok(Some(Piece::End));
                    }
                    self.state = ChunkState::Trailers {
                        seen: seen + at + 2,
                    };
                }
            }
        }
    }
}

impl Default for Chunked {
    fn default() -> Chunked {
        Chunked::new()
    }
}

enum Remaining {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
}

/// The response body; dropped before its end, it closes the connection.
pub struct UpstreamBody {
    /// Data already read, given before anything else.
    ready: Option<Bytes>,
    /// `None` once the body has ended.
    conn: Option<BackendConn>,
    remaining: Remaining,
    /// Where the connection goes back to at the end; `None`: not reusable.
    home: Option<(Arc<Upstream>, SocketAddr)>,
}

impl UpstreamBody {
    pub(super) fn new(
        mut conn: BackendConn,
        framing: Framing,
        home: Option<(Arc<Upstream>, SocketAddr)>,
    ) -> UpstreamBody {
        let remaining = match framing {
            Framing::Empty => Remaining::Length(0),
            Framing::Length(n) => Remaining::Length(n),
            Framing::Chunked => Remaining::Chunked(Chunked::new()),
            Framing::UntilClose => Remaining::UntilClose,
        };
        let mut body = UpstreamBody {
            ready: None,
            conn: None,
            remaining,
            home,
        };
        // Mostly the whole of a small body came with the head: the connection goes back
        // now, and the client's response is written in one go.
        if let Remaining::Length(n) = body.remaining {
            match usize::try_from(n) {
                Ok(n) if n <= conn.buf.len() => {
                    body.ready = (n > 0).then(|| conn.buf.split_to(n).freeze());
                    body.remaining = Remaining::Length(0);
                }
                _ => {}
            }
        }
        body.conn = Some(conn);
        if matches!(body.remaining, Remaining::Length(0)) {
            body.finish();
        }
        body
    }

    /// The body is read whole: the connection goes home when nothing stray is left.
    fn finish(&mut self) {
        if let (Some(conn), Some((upstream, endpoint))) = (self.conn.take(), self.home.take()) {
            if conn.buf.is_empty() {
                upstream.idle.put(endpoint, conn);
            }
        }
    }

    /// The next piece from what has been read, if any.
    fn piece(&mut self) -> Result<Option<Piece>, UpstreamError> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(Some(Piece::End));
        };
        let buf = &mut conn.buf;
        match &mut self.remaining {
            Remaining::Length(0) => Ok(Some(Piece::End)),
            Remaining::Length(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= take as u64;
                Ok(Some(Piece::Data(buf.split_to(take).freeze())))
            }
            Remaining::Chunked(chunked) => chunked.decode(buf),
            Remaining::UntilClose if buf.is_empty() => Ok(None),
            Remaining::UntilClose => Ok(Some(Piece::Data(buf.split().freeze()))),
        }
    }

    fn ended(&self) -> bool {
        self.ready.is_none() && self.conn.is_none()
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        let this = &mut *self;
        if let Some(data) = this.ready.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        loop {
            match this.piece() {
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Ok(Some(Piece::End)) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Ok(Some(Piece::Data(data))) => {
                    if matches!(this.remaining, Remaining::Length(0)) {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(None) => {}
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            conn.buf.reserve(READ_SIZE);
            let read = ready!(poll_read_buf(Pin::new(&mut conn.stream), cx, &mut conn.buf));
            match read {
                Ok(0) if matches!(this.remaining, Remaining::UntilClose) => {
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(UpstreamError::BodyCut)));
                }
                Ok(_) => {}
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(UpstreamError::Read(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended()
    }

    fn size_hint(&self) -> SizeHint {
        let ready = self.ready.as_ref().map_or(0, |d| d.len() as u64);
        match (&self.remaining, self.conn.is_some()) {
            (_, false) => SizeHint::with_exact(ready),
            (Remaining::Length(n), true) => SizeHint::with_exact(ready + n),
            _ => {
                let mut hint = SizeHint::new();
                hint.set_lower(ready);
                hint
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Feeds `wire` one byte at a time, collecting the decoded body.
    fn decode_bytewise(wire: &[u8]) -> (Vec<u8>, bool, usize) {
        let (mut chunked, mut buf, mut body) = (Chunked::new(), BytesMut::new(), Vec::new());
        for (i, b) in wire.iter().enumerate() {
            buf.extend_from_slice(&[*b]);
            while let Some(piece) = chunked.decode(&mut buf).unwrap() {
                match piece {
                    Piece::Data(d) => body.extend_from_slice(&d),
                    Piece::End => return (body, true, wire.len() - i - 1),
                }
            }
        }
        (body, false, 0)
    }

    #[test]
    fn chunks_with_extensions_and_trailers_decode_whole_or_byte_by_byte() {
        let wire = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (body, ended, _) = decode_bytewise(&wire[..wire.len() - 4]);
        assert_eq!((body.as_slice(), ended), (&b"hello, world"[..], true));
        let (mut chunked, mut buf) = (Chunked::new(), BytesMut::from(&wire[..]));
        let mut got = Vec::new();
        while let Piece::Data(d) = chunked.decode(&mut buf).unwrap().unwrap() {
            got.extend_from_slice(&d);
        }
        assert_eq!(got, b"hello, world");
        assert_eq!(&buf[..], b"NEXT", "bytes after the body are left alone");
    }

    #[test]
    fn malformed_chunks_are_errors() {
        for wire in [&b"zz\r\n"[..], b"3\r\nabcX\r\n", b"3\rxabc"] {
            let mut buf = BytesMut::from(wire);
            let mut chunked = Chunked::new();
            let mut result = Ok(None);
            for _ in 0..4 {
                result = chunked.decode(&mut buf);
                if !matches!(result, Ok(Some(Piece::Data(_)))) {
                    break;
                }
            }
            assert!(result.is_err(), "{:?}", String::from_utf8_lossy(wire));
        }
        let mut long = BytesMut::from("1;");
        long.extend_from_slice(&[b'a'; MAX_CHUNK_LINE]);
        assert!(Chunked::new().decode(&mut long).is_err());
    }
}
