//! A client connection's first bytes: the HTTP/2 preface (prior knowledge, h2c, or h2
//! after ALPN) or an HTTP/1.x request, told apart in the read that gets the request
//! anyway; what was read is served first by [`Sniffed`], so no byte is read twice.
//!
//! hyper-util's `auto` server read exactly the 24 bytes of a preface's length first and
//! the rest of the request in a second read: one more system call per new connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// As hyper's HTTP/1 read buffer starts.
const FIRST_READ: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// A connection with the bytes read ahead of its server.
pub struct Sniffed<S> {
    ahead: BytesMut,
    stream: S,
}

/// Reads until the first bytes tell the protocol; `None`: the client closed first.
pub async fn sniff<S: AsyncRead + Unpin>(
    mut stream: S,
) -> io::Result<Option<(Protocol, Sniffed<S>)>> {
    let mut ahead = BytesMut::with_capacity(FIRST_READ);
    let protocol = loop {
        if stream.read_buf(&mut ahead).await? == 0 {
            if ahead.is_empty() {
                return Ok(None);
            }
            break Protocol::Http1;
        }
        let n = ahead.len().min(PREFACE.len());
        if ahead[..n] != PREFACE[..n] {
            break Protocol::Http1;
        }
        if n == PREFACE.len() {
            break Protocol::Http2;
        }
    };
    let sniffed = Sniffed { ahead, stream };
    Ok(Some((protocol, sniffed)))
}

impl<S> Sniffed<S> {
    /// `stream` with `ahead` read from it and not yet served.
    pub fn from_parts(ahead: BytesMut, stream: S) -> Sniffed<S> {
        Sniffed { ahead, stream }
    }

    pub fn into_parts(self) -> (BytesMut, S) {
        (self.ahead, self.stream)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniffed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.ahead.is_empty() {
            let n = self.ahead.len().min(buf.remaining());
            buf.put_slice(&self.ahead[..n]);
            self.ahead.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniffed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    /// Always passed on: an upgraded connection (WebSocket) tells the client of the
    /// backend's close through it.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn sniff_sent(pieces: &[&[u8]]) -> Option<(Protocol, Vec<u8>)> {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let pieces: Vec<Vec<u8>> = pieces.iter().map(|p| p.to_vec()).collect();
        let writer = tokio::spawn(async move {
            for piece in pieces {
                client.write_all(&piece).await.unwrap();
                // Each piece its own read on the other side: wait until it is taken.
                tokio::task::yield_now().await;
            }
        });
        let sniffed = sniff(server).await.unwrap();
        writer.await.unwrap();
        let (protocol, mut io) = sniffed?;
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.unwrap();
        Some((protocol, all))
    }

    #[tokio::test]
    async fn a_preface_is_http2_even_in_pieces_and_every_byte_is_served_once() {
        let (protocol, bytes) = sniff_sent(&[b"PRI * HT", b"TP/2.0\r\n\r\nSM\r\n\r\nframes"])
            .await
            .unwrap();
        assert_eq!(protocol, Protocol::Http2);
        assert_eq!(bytes, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nframes");
    }

    #[tokio::test]
    async fn a_request_is_http1_and_a_silent_close_is_nothing() {
        let (protocol, bytes) = sniff_sent(&[b"GET / HTTP/1.1\r\n\r\n"]).await.unwrap();
        assert_eq!(
            (protocol, bytes.as_slice()),
            (Protocol::Http1, &b"GET / HTTP/1.1\r\n\r\n"[..])
        );
        let (protocol, bytes) = sniff_sent(&[b"PRI"]).await.unwrap();
        assert_eq!((protocol, bytes.as_slice()), (Protocol::Http1, &b"PRI"[..]));
        assert!(sniff_sent(&[]).await.is_none());
    }
}
