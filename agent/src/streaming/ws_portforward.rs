//! Port-forward over the websocket channel protocol, as the kubelet serves it to clients
//! that do not tunnel SPDY (the official Python client's `portforward()`): for port `i` of
//! `?ports=`, channel `2i` carries data both ways and `2i+1` errors to the client; each
//! channel's first message is the port number (two bytes, little-endian). The session
//! ends when every port's connection has ended or the client leaves.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tracing::debug;

use super::portforward::{self, Target};
use super::websocket::Codec;

const CHUNK: usize = 32 * 1024;

pub async fn serve(socket: WebSocket, codec: Codec, ports: Vec<u16>, target: Target) {
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(32);
    let mut to_ports = Vec::with_capacity(ports.len());
    let mut relays = tokio::task::JoinSet::new();
    for (i, &port) in ports.iter().enumerate() {
        let (data, error) = channels_of(i);
        for ch in [data, error] {
            // The writer below drains the queue; it only fails once the client is gone.
            let _ = out_tx.send(codec.encode(ch, &port.to_le_bytes())).await;
        }
        let (tx, rx) = mpsc::channel::<Bytes>(16);
        to_ports.push(tx);
        let port = PortIo {
            port,
            data,
            error,
            codec,
            out: out_tx.clone(),
            from_client: rx,
        };
        relays.spawn(forward_port(port, target.clone()));
    }
    drop(out_tx);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            if sink.send(msg).await.is_err() {
                return;
            }
        }
        let normal = CloseFrame {
            code: 1000,
            reason: "".into(),
        };
        // A close the client never reads is harmless.
        let _ = sink.send(Message::Close(Some(normal))).await;
    });
    let reader = async {
        while let Some(Ok(msg)) = stream.next().await {
            if matches!(msg, Message::Close(_)) {
                break;
            }
            let Some(frame) = codec.decode(&msg) else {
                continue;
            };
            let Some((&ch, data)) = frame.split_first() else {
                continue;
            };
            let port = to_ports.get(usize::from(ch / 2)).filter(|_| ch % 2 == 0);
            if let (Some(tx), false) = (port, data.is_empty()) {
                // A port whose connection ended takes no more data.
                let _ = tx.send(frame.slice(1..)).await;
            }
        }
        // The client left: every connection sees its EOF.
        to_ports.clear();
    };
    let all_done = async { while relays.join_next().await.is_some() {} };
    tokio::select! {
        () = reader => { while relays.join_next().await.is_some() {} }
        () = all_done => {}
    }
    // Every sender is gone once the relays are: the writer sends the close and ends.
    let _ = writer.await;
}

/// Data and error channel of the `i`th port.
fn channels_of(i: usize) -> (u8, u8) {
    let data = u8::try_from(i * 2).unwrap_or(u8::MAX - 1);
    (data, data.saturating_add(1))
}

/// One port's share of the session.
struct PortIo {
    port: u16,
    data: u8,
    error: u8,
    codec: Codec,
    out: mpsc::Sender<Message>,
    from_client: mpsc::Receiver<Bytes>,
}

async fn forward_port(mut io: PortIo, target: Target) {
    let conn = match portforward::dial(&target.netns, io.port).await {
        Ok(c) => c,
        Err(e) => {
            let message = format!(
                "error forwarding port {} to pod {}: {e}",
                io.port, target.pod
            );
            debug!(%message, "port-forward failed");
            let _ = io
                .out
                .send(io.codec.encode(io.error, message.as_bytes()))
                .await;
            return;
        }
    };
    let (mut conn_read, mut conn_write) = conn.into_split();
    let upstream = async {
        while let Some(chunk) = io.from_client.recv().await {
            if conn_write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // The pod sees the client's end as a FIN.
        let _ = conn_write.shutdown().await;
    };
    let downstream = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match conn_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let msg = io.codec.encode(io.data, &buf[..n]);
                    if io.out.send(msg).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    // The pod closing its side ends the port: the client gets the close once every port
    // is done (the kubelet closes the channel the same way).
    tokio::select! {
        () = downstream => {}
        () = upstream => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_port_has_a_data_and_an_error_channel() {
        assert_eq!(channels_of(0), (0, 1));
        assert_eq!(channels_of(2), (4, 5));
    }
}
