//! The Kubernetes channel protocol over websocket (`v4.channel.k8s.io`,
//! `v5.channel.k8s.io`): binary messages whose first byte is the channel (0 stdin,
//! 1 stdout, 2 stderr, 3 error, 4 resize); in v5 `[255, ch]` from the client closes that
//! channel. The session ends with the Status on channel 3 and a close frame.

use std::future::Future;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use futures::stream::SplitStream;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::exec::{ExecIo, TerminalSize};
use super::options::ExecOptions;

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: the client closes a channel (`[CLOSE, channel]`).
pub const CLOSE: u8 = 255;

/// A message on `channel`.
pub fn frame(channel: u8, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 1);
    b.put_u8(channel);
    b.put_slice(data);
    b.freeze()
}

/// How a channel protocol frames its messages: binary with the channel as the first byte,
/// or (`*base64.channel.k8s.io`) text with the channel as an ASCII digit and the data in
/// base64. Clients may send either message type; both are read, as the API server does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    pub base64: bool,
}

impl Codec {
    pub fn of(protocol: &str) -> Codec {
        Codec {
            base64: super::options::is_base64(protocol),
        }
    }

    /// The message carrying `data` on `channel`.
    pub fn encode(self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let digit = char::from(b'0'.wrapping_add(channel));
            Message::Text(format!("{digit}{}", BASE64.encode(data)).into())
        } else {
            Message::Binary(frame(channel, data))
        }
    }

    /// A client's data message as `[channel, data...]`; `None` for control messages and
    /// for base64 that does not decode.
    pub fn decode(self, msg: &Message) -> Option<Bytes> {
        let raw = match msg {
            Message::Binary(b) => b.clone(),
            Message::Text(t) => Bytes::copy_from_slice(t.as_str().as_bytes()),
            _ => return None,
        };
        if !self.base64 {
            return Some(raw);
        }
        let (&digit, rest) = raw.split_first()?;
        let data = BASE64.decode(rest).ok()?;
        Some(frame(digit.wrapping_sub(b'0'), &data))
    }
}

/// What one client message means.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientMessage {
    Stdin(Bytes),
    Resize(TerminalSize),
    CloseStdin,
    Ignored,
}

/// Decodes a binary message from the client (pure).
pub fn decode(data: &Bytes, v5: bool) -> ClientMessage {
    match data.first() {
        Some(&STDIN) => ClientMessage::Stdin(data.slice(1..)),
        Some(&RESIZE) => serde_json::from_slice(&data[1..])
            .map(ClientMessage::Resize)
            .unwrap_or(ClientMessage::Ignored),
        Some(&CLOSE) if v5 && data.get(1) == Some(&STDIN) => ClientMessage::CloseStdin,
        _ => ClientMessage::Ignored,
    }
}

fn channel<T>(wanted: bool) -> (Option<mpsc::Sender<T>>, Option<mpsc::Receiver<T>>) {
    if wanted {
        let (tx, rx) = mpsc::channel(16);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    }
}

/// Serves one exec or attach session: `session` gets the client's side as channels and
/// returns the Status for the error channel.
pub async fn serve<F, Fut>(socket: WebSocket, protocol: &str, options: &ExecOptions, session: F)
where
    F: FnOnce(ExecIo) -> Fut,
    Fut: Future<Output = Value>,
{
    let (mut sink, stream) = socket.split();
    let gone = CancellationToken::new();
    let (stdin_tx, stdin_rx) = channel(options.stdin);
    let (resize_tx, resize_rx) = channel(options.tty);
    let (out_tx, mut out_rx) = channel(options.stdout);
    let (err_tx, mut err_rx) = channel(options.stderr);
    let v5 = protocol == "v5.channel.k8s.io";
    let codec = Codec::of(protocol);
    let client = ClientSide {
        stdin: stdin_tx,
        resize: resize_tx,
        v5,
        codec,
    };
    let reader = tokio::spawn(read_client(stream, client, gone.clone()));
    let io = ExecIo {
        stdin: stdin_rx,
        resize: resize_rx,
        stdout: out_tx,
        stderr: err_tx,
        gone: gone.clone(),
    };
    let writer = async {
        loop {
            let (ch, data) = tokio::select! {
                Some(d) = recv(&mut out_rx) => (STDOUT, d),
                Some(d) = recv(&mut err_rx) => (STDERR, d),
                else => return true,
            };
            if sink.send(codec.encode(ch, &data)).await.is_err() {
                gone.cancel();
                return false;
            }
        }
    };
    let (status, connected) = tokio::join!(session(io), writer);
    if connected {
        let body = serde_json::to_vec(&status).unwrap_or_default();
        // The client may have gone between the last output and now: nothing to tell it.
        let _ = sink.send(codec.encode(ERROR, &body)).await;
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code: 1000,
                reason: "".into(),
            })))
            .await;
    }
    reader.abort();
}

async fn recv(rx: &mut Option<mpsc::Receiver<Bytes>>) -> Option<Bytes> {
    match rx {
        Some(rx) => rx.recv().await,
        None => None,
    }
}

/// Where a session's client messages go.
struct ClientSide {
    stdin: Option<mpsc::Sender<Bytes>>,
    resize: Option<mpsc::Sender<TerminalSize>>,
    v5: bool,
    codec: Codec,
}

async fn read_client(
    mut stream: SplitStream<WebSocket>,
    client: ClientSide,
    gone: CancellationToken,
) {
    let ClientSide {
        mut stdin,
        resize,
        v5,
        codec,
    } = client;
    while let Some(msg) = stream.next().await {
        let data = match msg {
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(m) => match codec.decode(&m) {
                Some(data) => data,
                None => continue,
            },
        };
        match decode(&data, v5) {
            ClientMessage::Stdin(d) => {
                if let Some(tx) = &stdin {
                    if !d.is_empty() && tx.send(d).await.is_err() {
                        stdin = None;
                    }
                }
            }
            ClientMessage::Resize(size) => {
                if let Some(tx) = &resize {
                    // A full queue of sizes: the newest of them will follow.
                    let _ = tx.try_send(size);
                }
            }
            ClientMessage::CloseStdin => stdin = None,
            ClientMessage::Ignored => debug!(len = data.len(), "ignored websocket message"),
        }
    }
    gone.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_client_messages() {
        let b = |s: &[u8]| Bytes::copy_from_slice(s);
        assert_eq!(
            decode(&b(b"\x00ls\n"), true),
            ClientMessage::Stdin(b(b"ls\n"))
        );
        assert_eq!(
            decode(&b(b"\x04{\"Width\":80,\"Height\":24}"), false),
            ClientMessage::Resize(TerminalSize {
                width: 80,
                height: 24
            })
        );
        assert_eq!(decode(&b(b"\xff\x00"), true), ClientMessage::CloseStdin);
        assert_eq!(decode(&b(b"\xff\x00"), false), ClientMessage::Ignored);
        assert_eq!(decode(&b(b"\x04not json"), true), ClientMessage::Ignored);
        assert_eq!(decode(&b(b""), true), ClientMessage::Ignored);
    }

    #[test]
    fn frames_carry_the_channel_first() {
        assert_eq!(&frame(STDOUT, b"hi")[..], b"\x01hi");
    }

    #[test]
    fn text_messages_and_base64_are_read_like_binary() {
        let binary = Codec::of("v4.channel.k8s.io");
        // The Python client's write_stdin("x") sends a text message.
        let text = Message::Text("\u{0}test-close\n".into());
        assert_eq!(&binary.decode(&text).unwrap()[..], b"\x00test-close\n");
        let b64 = Codec::of("v4.base64.channel.k8s.io");
        assert_eq!(
            &b64.decode(&Message::Text("0aGk=".into())).unwrap()[..],
            b"\x00hi"
        );
        assert_eq!(b64.encode(STDOUT, b"hi"), Message::Text("1aGk=".into()));
        assert_eq!(
            binary.encode(STDOUT, b"hi"),
            Message::Binary(frame(STDOUT, b"hi"))
        );
        assert_eq!(b64.decode(&Message::Text("0!!".into())), None);
        assert_eq!(binary.decode(&Message::Ping(Bytes::new())), None);
    }
}
