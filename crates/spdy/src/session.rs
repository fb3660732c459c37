//! A server session: the client opens streams (SYN_STREAM), each is answered with a
//! SYN_REPLY and handed out with its headers, a reader and a writer. One task reads the
//! connection, one task owns its write half, so frames never interleave.
//!
//! Backpressure: a stream's incoming data goes through a bounded queue, and a full queue
//! pauses reading the whole connection (exec and port-forward streams are consumed
//! promptly; nothing is buffered without bound). Flow-control windows are not enforced
//! in either direction, as with Kubernetes' own spdystream peers.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::io::StreamReader as ChunkReader;
use tokio_util::sync::{CancellationToken, PollSender};
use tracing::debug;

use crate::frame::{Frame, INVALID_STREAM, PROTOCOL_ERROR};
use crate::headers::{HeaderDecoder, HeaderEncoder, Headers};

/// Largest DATA frame written.
const MAX_DATA: usize = 32 * 1024;
/// Queued chunks per incoming stream.
const STREAM_QUEUE: usize = 16;

/// The session's handle: close it, or wait for its end.
#[derive(Clone)]
pub struct Session {
    frames: mpsc::Sender<Frame>,
    ended: CancellationToken,
}

impl Session {
    /// GOAWAY, then the connection is closed once queued frames are written.
    pub async fn close(&self) {
        // A session already gone has nothing left to close.
        let _ = self
            .frames
            .send(Frame::GoAway {
                last_good_stream_id: 0,
                status: 0,
            })
            .await;
        self.ended.cancel();
    }

    /// Resolves when the connection ends, for whatever reason.
    pub async fn closed(&self) {
        self.ended.cancelled().await;
    }
}

/// A stream the client opened.
pub struct IncomingStream {
    pub id: u32,
    pub headers: Headers,
    pub reader: StreamReader,
    pub writer: StreamWriter,
}

impl IncomingStream {
    /// The first value of a header (names are lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Data the client sent on a stream; EOF at its FIN or reset.
pub struct StreamReader {
    inner: ChunkReader<ReceiverStream<io::Result<Bytes>>, Bytes>,
}

impl AsyncRead for StreamReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

/// Writes become DATA frames; shutdown sends the FIN.
pub struct StreamWriter {
    id: u32,
    frames: PollSender<Frame>,
    finished: bool,
}

impl StreamWriter {
    fn send(&mut self, cx: &mut Context<'_>, frame: Frame) -> Poll<io::Result<()>> {
        match self.frames.poll_reserve(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Poll::Ready(Ok(())) => Poll::Ready(
                self.frames
                    .send_item(frame)
                    .map_err(|_| io::ErrorKind::BrokenPipe.into()),
            ),
        }
    }
}

impl AsyncWrite for StreamWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let n = buf.len().min(MAX_DATA);
        let frame = Frame::Data {
            stream_id: this.id,
            fin: false,
            data: Bytes::copy_from_slice(&buf[..n]),
        };
        this.send(cx, frame).map_ok(|()| n)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Ok(()));
        }
        let fin = Frame::Data {
            stream_id: this.id,
            fin: true,
            data: Bytes::new(),
        };
        let sent = this.send(cx, fin);
        if let Poll::Ready(Ok(())) = sent {
            this.finished = true;
        }
        sent
    }
}

/// Starts serving `io`; streams the client opens arrive on the receiver.
pub fn serve<IO>(io: IO) -> (Session, mpsc::Receiver<IncomingStream>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (read_half, write_half) = tokio::io::split(io);
    let (frames_tx, frames_rx) = mpsc::channel::<Frame>(64);
    let (streams_tx, streams_rx) = mpsc::channel(16);
    let ended = CancellationToken::new();
    tokio::spawn(write_loop(write_half, frames_rx, ended.clone()));
    let reader = ReadLoop {
        frames: frames_tx.clone(),
        streams: streams_tx,
        open: HashMap::new(),
        decoder: HeaderDecoder::default(),
        encoder: HeaderEncoder::new().ok(),
    };
    tokio::spawn(reader.run(read_half, ended.clone()));
    (
        Session {
            frames: frames_tx,
            ended,
        },
        streams_rx,
    )
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut frames: mpsc::Receiver<Frame>,
    ended: CancellationToken,
) {
    let mut buf = BytesMut::with_capacity(MAX_DATA + 64);
    loop {
        let frame = tokio::select! {
            f = frames.recv() => f,
            () = ended.cancelled() => {
                // Write out what is queued (the status, the GOAWAY), then close.
                frames.close();
                frames.recv().await
            }
        };
        let Some(frame) = frame else { break };
        buf.clear();
        frame.encode(&mut buf);
        if w.write_all(&buf).await.is_err() {
            break;
        }
        if frame_is_goaway(&frame) {
            break;
        }
    }
    // The peer may be gone already.
    let _ = w.shutdown().await;
    ended.cancel();
}

fn frame_is_goaway(f: &Frame) -> bool {
    matches!(f, Frame::GoAway { .. })
}

struct ReadLoop {
    frames: mpsc::Sender<Frame>,
    streams: mpsc::Sender<IncomingStream>,
    open: HashMap<u32, mpsc::Sender<io::Result<Bytes>>>,
    decoder: HeaderDecoder,
    encoder: Option<HeaderEncoder>,
}

impl ReadLoop {
    async fn run<R: AsyncRead + Unpin>(mut self, mut r: R, ended: CancellationToken) {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        loop {
            loop {
                match Frame::decode(&mut buf) {
                    Ok(Some(frame)) => {
                        if !self.handle(frame).await {
                            ended.cancel();
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        debug!(error = %e, "SPDY protocol error");
                        self.protocol_error().await;
                        return;
                    }
                }
            }
            let read = tokio::select! {
                r = r.read_buf(&mut buf) => r,
                () = ended.cancelled() => return,
            };
            match read {
                Ok(0) | Err(_) => {
                    ended.cancel();
                    return;
                }
                Ok(_) => {}
            }
        }
    }

    async fn protocol_error(&mut self) {
        // The session ends either way; the peer may not read this.
        let _ = self
            .frames
            .send(Frame::GoAway {
                last_good_stream_id: 0,
                status: PROTOCOL_ERROR,
            })
            .await;
    }

    /// Acts on one frame; false ends the session.
    async fn handle(&mut self, frame: Frame) -> bool {
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                header_block,
            } => self.open_stream(stream_id, fin, &header_block).await,
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                match self.open.get(&stream_id) {
                    Some(tx) => {
                        if !data.is_empty() && tx.send(Ok(data)).await.is_err() {
                            debug!(stream_id, "data for a stream nobody reads");
                        }
                        if fin {
                            self.open.remove(&stream_id);
                        }
                    }
                    None if fin && data.is_empty() => {}
                    None => {
                        let rst = Frame::RstStream {
                            stream_id,
                            status: INVALID_STREAM,
                        };
                        return self.frames.send(rst).await.is_ok();
                    }
                }
                true
            }
            Frame::RstStream { stream_id, .. } => {
                self.open.remove(&stream_id);
                true
            }
            Frame::Ping { id } => self.frames.send(Frame::Ping { id }).await.is_ok(),
            Frame::GoAway { .. } => false,
            Frame::SynReply { .. } | Frame::Ignored { .. } => true,
        }
    }

    async fn open_stream(&mut self, stream_id: u32, fin: bool, header_block: &[u8]) -> bool {
        let headers = match self.decoder.decode(header_block) {
            Ok(h) => h,
            Err(e) => {
                debug!(stream_id, error = %e, "undecodable SPDY headers");
                self.protocol_error().await;
                return false;
            }
        };
        let Some(reply) = self.encoder.as_mut().and_then(|e| e.encode(&[]).ok()) else {
            return false;
        };
        if self
            .frames
            .send(Frame::SynReply {
                stream_id,
                fin: false,
                header_block: reply,
            })
            .await
            .is_err()
        {
            return false;
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        if !fin {
            self.open.insert(stream_id, tx);
        }
        let stream = IncomingStream {
            id: stream_id,
            headers,
            reader: StreamReader {
                inner: ChunkReader::new(ReceiverStream::new(rx)),
            },
            writer: StreamWriter {
                id: stream_id,
                frames: PollSender::new(self.frames.clone()),
                finished: false,
            },
        };
        self.streams.send(stream).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::DuplexStream;

    /// The client side: frames out, frames in.
    struct Client {
        io: DuplexStream,
        buf: BytesMut,
        enc: HeaderEncoder,
        dec: HeaderDecoder,
    }

    impl Client {
        async fn send(&mut self, f: Frame) {
            let mut b = BytesMut::new();
            f.encode(&mut b);
            self.io.write_all(&b).await.unwrap();
        }
        async fn open(&mut self, id: u32, stream_type: &str) {
            let hb = self
                .enc
                .encode(&[("streamtype".into(), stream_type.into())])
                .unwrap();
            self.send(Frame::SynStream {
                stream_id: id,
                fin: false,
                header_block: hb,
            })
            .await;
        }
        async fn next(&mut self) -> Option<Frame> {
            loop {
                if let Some(f) = Frame::decode(&mut self.buf).unwrap() {
                    return Some(f);
                }
                if self.io.read_buf(&mut self.buf).await.unwrap() == 0 {
                    return None;
                }
            }
        }
    }

    fn pair() -> (Client, Session, mpsc::Receiver<IncomingStream>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let (session, streams) = serve(b);
        let client = Client {
            io: a,
            buf: BytesMut::new(),
            enc: HeaderEncoder::new().unwrap(),
            dec: HeaderDecoder::default(),
        };
        (client, session, streams)
    }

    #[tokio::test]
    async fn streams_carry_data_both_ways() {
        let (mut c, session, mut streams) = pair();
        c.open(1, "stdin").await;
        let Some(Frame::SynReply {
            stream_id: 1,
            header_block,
            ..
        }) = c.next().await
        else {
            panic!("no SYN_REPLY")
        };
        assert!(c.dec.decode(&header_block).unwrap().is_empty());
        let mut s = streams.recv().await.unwrap();
        assert_eq!(s.header("streamtype"), Some("stdin"));
        let big = vec![7u8; 200_000];
        for chunk in big.chunks(30_000) {
            c.send(Frame::Data {
                stream_id: 1,
                fin: false,
                data: Bytes::copy_from_slice(chunk),
            })
            .await;
        }
        c.send(Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::new(),
        })
        .await;
        let mut got = Vec::new();
        s.reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, big);
        s.writer.write_all(b"answer").await.unwrap();
        s.writer.shutdown().await.unwrap();
        assert_eq!(
            c.next().await,
            Some(Frame::Data {
                stream_id: 1,
                fin: false,
                data: Bytes::from_static(b"answer")
            })
        );
        assert_eq!(
            c.next().await,
            Some(Frame::Data {
                stream_id: 1,
                fin: true,
                data: Bytes::new()
            })
        );
        c.send(Frame::Ping { id: 3 }).await;
        assert_eq!(c.next().await, Some(Frame::Ping { id: 3 }));
        c.send(Frame::Data {
            stream_id: 9,
            fin: false,
            data: Bytes::from_static(b"?"),
        })
        .await;
        assert_eq!(
            c.next().await,
            Some(Frame::RstStream {
                stream_id: 9,
                status: INVALID_STREAM
            })
        );
        session.close().await;
        assert!(matches!(c.next().await, Some(Frame::GoAway { .. })));
        assert_eq!(c.next().await, None);
    }

    #[tokio::test]
    async fn garbage_ends_the_session_with_goaway() {
        let (mut c, session, _streams) = pair();
        c.io.write_all(b"\x80\x02\x00\x01\x00\x00\x00\x00")
            .await
            .unwrap();
        assert_eq!(
            c.next().await,
            Some(Frame::GoAway {
                last_good_stream_id: 0,
                status: PROTOCOL_ERROR
            })
        );
        tokio::time::timeout(std::time::Duration::from_secs(5), session.closed())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_vanished_client_ends_readers_and_writers() {
        let (mut c, session, mut streams) = pair();
        c.open(1, "stdout").await;
        let mut s = streams.recv().await.unwrap();
        drop(c);
        tokio::time::timeout(std::time::Duration::from_secs(5), session.closed())
            .await
            .unwrap();
        let mut got = Vec::new();
        s.reader.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty());
        // Writes fail once the writer task has gone.
        let mut failed = false;
        for _ in 0..100 {
            if s.writer.write_all(b"x").await.is_err() {
                failed = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(failed);
    }
}
