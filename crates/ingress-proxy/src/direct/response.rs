//! A response written to an HTTP/1.1 client: its head, then its body framed by length
//! when the length is known and in chunks when not, the head and as much of the body
//! as is ready in one write.

use std::future::poll_fn;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::Poll;

use bytes::{Buf, Bytes};
use http::header::{CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::body::{BoxError, ProxyBody};
use crate::wire::{write_date, write_line, write_plain_closing, write_status};

/// Buffered output past this is written before more is added.
const WRITE_AT: usize = 64 * 1024;

/// Writes `response` to `stream`; `head_request`: the request was HEAD, so no body
/// goes out; `close`: the connection closes after it. An error: the connection is of no
/// further use (a body that fails half-way can only be cut off).
pub async fn write_response<S: AsyncWrite + Unpin>(
    stream: &mut S,
    response: Response<ProxyBody>,
    head_request: bool,
    close: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    // These never have a body, nor a length (RFC 9110 §8.6).
    let no_content = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let length = body.size_hint().exact();
    out.clear();
    write_status(out, status);
    for (name, value) in &parts.headers {
        // The framing is this connection's own.
        if name != TRANSFER_ENCODING && name != CONTENT_LENGTH {
            write_line(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    if !parts.headers.contains_key(DATE) {
        write_date(out);
    }
    let chunked = !no_content && length.is_none();
    match length {
        _ if no_content => {}
        // A HEAD answer says the length its GET would have had.
        Some(n) => {
            let _ = write!(out, "content-length: {n}\r\n");
        }
        None if head_request => {}
        None => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if head_request || no_content {
        return write_out(stream, out).await;
    }
    write_body_after_head(stream, &mut body, chunked, out).await
}

async fn write_out<S: AsyncWrite + Unpin>(stream: &mut S, out: &[u8]) -> io::Result<()> {
    stream.write_all(out).await?;
    stream.flush().await
}

/// Writes `out` (a head) and `body` after it, `chunked` if the head said so: what is
/// ready is added to `out`, which is written whenever the body must be waited for.
pub async fn write_body_after_head<S, B>(
    stream: &mut S,
    body: &mut B,
    chunked: bool,
    out: &mut Vec<u8>,
) -> io::Result<()>
where
    S: AsyncWrite + Unpin,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    // Whether any of the answer has gone out: until then a failing body can still be
    // answered with a 502.
    let mut sent = false;
    loop {
        let ready = poll_fn(|cx| Poll::Ready(Pin::new(&mut *body).poll_frame(cx))).await;
        let frame = match ready {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                stream.write_all(out).await?;
                stream.flush().await?;
                out.clear();
                sent = true;
                body.frame().await
            }
        };
        let data = match frame {
            None => break,
            Some(Err(e)) => {
                let e = e.into();
                if !sent {
                    let why = format!("the backend's body failed before any of it: {e}");
                    write_plain_closing(out, StatusCode::BAD_GATEWAY, &why);
                    write_out(stream, out).await?;
                }
                return Err(io::Error::other(e));
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers are not sent on HTTP/1.1
            },
        };
        if data.is_empty() {
            continue;
        }
        if chunked {
            let _ = write!(out, "{:x}\r\n", data.len());
        }
        if out.len() + data.len() > WRITE_AT {
            stream.write_all(out).await?;
            out.clear();
            sent = true;
            stream.write_all(data.chunk()).await?;
        } else {
            out.extend_from_slice(data.chunk());
        }
        if chunked {
            out.extend_from_slice(b"\r\n");
        }
    }
    if chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    write_out(stream, out).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::body::plain;
    use bytes::Bytes;

    async fn written(response: Response<ProxyBody>, head_request: bool, close: bool) -> String {
        let (mut out, mut wire) = (Vec::new(), Vec::new());
        write_response(&mut wire, response, head_request, close, &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(wire).unwrap();
        // The date changes; its presence is what counts.
        let (before, after) = text.split_once("date: ").unwrap();
        let (_, rest) = after.split_once("\r\n").unwrap();
        format!("{before}date: D\r\n{rest}")
    }

    #[tokio::test]
    async fn a_known_length_is_sent_as_such_even_to_head_and_never_with_204() {
        let text = written(plain(StatusCode::NOT_FOUND, "no"), false, true).await;
        assert_eq!(
            text,
            "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain; charset=utf-8\r\ndate: D\r\n\
             content-length: 3\r\nconnection: close\r\n\r\nno\n"
        );
        let text = written(plain(StatusCode::NOT_FOUND, "no"), true, false).await;
        assert!(
            text.ends_with("date: D\r\ncontent-length: 3\r\n\r\n"),
            "{text}"
        );
        let mut no_content = plain(StatusCode::NO_CONTENT, "");
        no_content.headers_mut().insert(CONTENT_LENGTH, 0.into());
        let text = written(no_content, false, false).await;
        assert!(text.ends_with("charset=utf-8\r\ndate: D\r\n\r\n"), "{text}");
    }

    /// A body of `pieces` whose length is not known ahead.
    struct Pieces(std::collections::VecDeque<&'static str>);

    impl Body for Pieces {
        type Data = Bytes;
        type Error = crate::body::BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            let piece = self.0.pop_front();
            Poll::Ready(piece.map(|p| Ok(http_body::Frame::data(Bytes::from(p)))))
        }
    }

    #[tokio::test]
    async fn an_unknown_length_goes_in_chunks() {
        let body = Pieces(["hello", "", ", world"].into()).boxed();
        let mut response = Response::new(body);
        response
            .headers_mut()
            .insert(TRANSFER_ENCODING, "chunked".parse().unwrap());
        let text = written(response, false, false).await;
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ndate: D\r\ntransfer-encoding: chunked\r\n\r\n\
             5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n"
        );
    }
}
