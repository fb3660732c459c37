//! Sessions over SPDY/3.1 (`cairn_spdy`): exec and attach with one SPDY stream
//! per channel (`streamType` error, stdin, stdout, stderr, resize), and port-forward with
//! a pair of streams (error, data) per forwarded connection, keyed by `requestID`. The
//! port-forward session also runs tunnelled inside websocket binary messages.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use cairn_spdy::{self as spdy, IncomingStream};
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, Instrument};

use super::exec::{ExecIo, TerminalSize};
use super::options::{ExecOptions, Wire};
use super::portforward::{self, Target};
use super::StreamError;

/// How long the client has to open every stream it asked for (the kubelet's
/// `streamCreationTimeout` default).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

fn switching_protocols(protocol: &str) -> Response {
    let built = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1")
        .header("X-Stream-Protocol-Version", protocol)
        .body(Body::empty());
    built.unwrap_or_else(|e| StreamError::Runtime(e.to_string()).into_response())
}

/// Answers 101 and runs `run` on the upgraded connection.
fn upgrade_then<F, Fut>(req: Request, protocol: &str, run: F) -> Response
where
    F: FnOnce(TokioIo<hyper::upgrade::Upgraded>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let on_upgrade = hyper::upgrade::on(req);
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            match on_upgrade.await {
                Ok(upgraded) => run(TokioIo::new(upgraded)).await,
                Err(e) => debug!(error = %e, "SPDY upgrade failed"),
            }
        }
        .instrument(span),
    );
    switching_protocols(protocol)
}

pub fn serve_exec<F, Fut>(
    req: Request,
    protocol: String,
    options: ExecOptions,
    session: F,
) -> Response
where
    F: FnOnce(ExecIo) -> Fut + Send + 'static,
    Fut: Future<Output = Value> + Send,
{
    upgrade_then(req, &protocol, move |io| exec_session(io, options, session))
}

/// The streams of one exec, by type.
#[derive(Default)]
struct ExecStreams {
    error: Option<IncomingStream>,
    stdin: Option<IncomingStream>,
    stdout: Option<IncomingStream>,
    stderr: Option<IncomingStream>,
    resize: Option<IncomingStream>,
}

impl ExecStreams {
    fn complete(&self, o: &ExecOptions) -> bool {
        self.error.is_some()
            && (!o.stdin || self.stdin.is_some())
            && (!o.stdout || self.stdout.is_some())
            && (!o.stderr || self.stderr.is_some())
            && (!o.tty || self.resize.is_some())
    }
}

async fn collect_streams(
    incoming: &mut mpsc::Receiver<IncomingStream>,
    options: &ExecOptions,
) -> Option<ExecStreams> {
    let mut s = ExecStreams::default();
    let collected = tokio::time::timeout(STREAM_CREATION_TIMEOUT, async {
        while !s.complete(options) {
            let stream = incoming.recv().await?;
            let slot = match stream.header("streamtype") {
                Some("error") => &mut s.error,
                Some("stdin") => &mut s.stdin,
                Some("stdout") => &mut s.stdout,
                Some("stderr") => &mut s.stderr,
                Some("resize") => &mut s.resize,
                other => {
                    debug!(stream_type = ?other, "ignoring an unexpected stream");
                    continue;
                }
            };
            *slot = Some(stream);
        }
        Some(())
    })
    .await;
    match collected {
        Ok(Some(())) => Some(s),
        _ => {
            debug!("the client did not open its streams in time");
            None
        }
    }
}

async fn exec_session<IO, F, Fut>(io: IO, options: ExecOptions, session: F)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: FnOnce(ExecIo) -> Fut,
    Fut: Future<Output = Value>,
{
    let (spdy, mut incoming) = spdy::serve(io);
    let Some(streams) = collect_streams(&mut incoming, &options).await else {
        spdy.close().await;
        return;
    };
    let gone = CancellationToken::new();
    let watcher = {
        let (spdy, gone) = (spdy.clone(), gone.clone());
        tokio::spawn(async move {
            spdy.closed().await;
            gone.cancel();
        })
    };
    let mut writers = tokio::task::JoinSet::new();
    let io = ExecIo {
        stdin: streams.stdin.map(|s| reader_channel(s.reader)),
        resize: streams.resize.map(|s| resize_channel(s.reader)),
        stdout: streams
            .stdout
            .map(|s| writer_channel(s.writer, &mut writers)),
        stderr: streams
            .stderr
            .map(|s| writer_channel(s.writer, &mut writers)),
        gone,
    };
    let status = session(io).await;
    while writers.join_next().await.is_some() {}
    if let Some(mut error) = streams.error.map(|s| s.writer) {
        let body = serde_json::to_vec(&status).unwrap_or_default();
        // A client that already left needs no status.
        let _ = error.write_all(&body).await;
        let _ = error.shutdown().await;
    }
    watcher.abort();
    spdy.close().await;
}

/// Client data on a stream, as channel messages; the channel closes at the stream's end.
fn reader_channel<R: AsyncRead + Unpin + Send + 'static>(mut reader: R) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        while let Ok(n) = reader.read(&mut buf).await {
            if n == 0 || tx.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// Terminal sizes: JSON values one per line, as Go's json.Encoder writes them.
fn resize_channel<R: AsyncRead + Unpin + Send + 'static>(
    reader: R,
) -> mpsc::Receiver<TerminalSize> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<TerminalSize>(line.trim()) {
                Ok(size) if tx.send(size).await.is_ok() => {}
                Ok(_) => break,
                Err(e) => debug!(error = %e, "ignoring a malformed terminal size"),
            }
        }
    });
    rx
}

/// A channel whose messages are written to the stream, which is closed (FIN) when the
/// channel closes.
fn writer_channel<W: AsyncWrite + Unpin + Send + 'static>(
    mut writer: W,
    tasks: &mut tokio::task::JoinSet<()>,
) -> mpsc::Sender<Bytes> {
    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
    tasks.spawn(async move {
        while let Some(data) = rx.recv().await {
            if writer.write_all(&data).await.is_err() {
                return;
            }
        }
        // The client may be gone; there is nobody to tell.
        let _ = writer.shutdown().await;
    });
    tx
}

/// Port-forward over SPDY, or over SPDY tunnelled through websocket.
pub async fn serve_port_forward(req: Request, wire: Wire, target: Target) -> Response {
    match wire {
        Wire::Spdy { protocol } => {
            upgrade_then(req, &protocol, move |io| port_forward_session(io, target))
        }
        Wire::SpdyOverWebSocket { protocol } => {
            let (mut parts, _body) = req.into_parts();
            let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
                Ok(u) => u,
                Err(rejection) => return rejection.into_response(),
            };
            let span = tracing::Span::current();
            upgrade.protocols([protocol]).on_upgrade(move |socket| {
                port_forward_session(websocket_bytes(socket), target).instrument(span)
            })
        }
        Wire::WebSocket { .. } | Wire::PortForwardChannels { .. } => {
            StreamError::BadRequest("not a SPDY port-forward protocol".into()).into_response()
        }
    }
}

async fn port_forward_session<IO>(io: IO, target: Target)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (spdy, mut incoming) = spdy::serve(io);
    let mut halves: HashMap<String, (Option<IncomingStream>, Option<IncomingStream>)> =
        HashMap::new();
    while let Some(stream) = incoming.recv().await {
        let request_id = stream.header("requestid").unwrap_or_default().to_string();
        let entry = halves.entry(request_id.clone()).or_default();
        match stream.header("streamtype") {
            Some("error") => entry.0 = Some(stream),
            Some("data") => entry.1 = Some(stream),
            other => {
                debug!(stream_type = ?other, "ignoring an unexpected port-forward stream");
                continue;
            }
        }
        if matches!(halves.get(&request_id), Some((Some(_), Some(_)))) {
            if let Some((Some(error), Some(data))) = halves.remove(&request_id) {
                tokio::spawn(forward_one(error, data, target.clone()));
            }
        }
    }
    spdy.close().await;
}

async fn forward_one(error: IncomingStream, data: IncomingStream, target: Target) {
    let port = data.header("port").unwrap_or_default().to_string();
    let mut error_writer = error.writer;
    let dialed = match super::options::parse_port(&port) {
        Ok(p) => portforward::dial(&target.netns, p)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match dialed {
        Ok(conn) => portforward::relay(data.reader, data.writer, conn).await,
        Err(e) => {
            let message = format!("error forwarding port {port} to pod {}: {e}", target.pod);
            debug!(%message, "port-forward failed");
            // The client may have gone already; nobody else can be told.
            let _ = error_writer.write_all(message.as_bytes()).await;
            let mut data_writer = data.writer;
            let _ = data_writer.shutdown().await;
        }
    }
    let _ = error_writer.shutdown().await;
}

/// The websocket's binary messages as one byte stream (the SPDY tunnel of kubectl ≥ 1.31:
/// raw SPDY bytes in binary messages, no channel byte).
fn websocket_bytes(socket: WebSocket) -> tokio::io::DuplexStream {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (mut from_us, mut to_us) = tokio::io::split(ours);
    let (mut sink, mut stream) = socket.split();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            let stop = match msg {
                Message::Binary(b) => to_us.write_all(&b).await.is_err(),
                Message::Close(_) => true,
                _ => false,
            };
            if stop {
                break;
            }
        }
        // Our side may be closed already.
        let _ = to_us.shutdown().await;
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from_us.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let msg = Message::Binary(Bytes::copy_from_slice(&buf[..n]));
                    if sink.send(msg).await.is_err() {
                        return;
                    }
                }
            }
        }
        // A close the client never reads is harmless.
        let normal = axum::extract::ws::CloseFrame {
            code: 1000,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(normal))).await;
    });
    theirs
}
