//! A backend's response head written as the client's HTTP/1.1 head straight from its
//! bytes, for the direct path ([`crate::direct`]): no `HeaderMap` is made of it.
//!
//! The client's head keeps the backend's header lines but the hop-by-hop ones (and
//! those its `Connection` names), and frames the body itself: a known length as
//! `Content-Length`, anything else in chunks; a bodiless answer keeps the length its
//! GET would have had.

use bytes::{Buf, BytesMut};
use http::StatusCode;

use super::head::{
    framing_of, keeps_alive_of, status_and_version, tokens, Framing, HeadError, MAX_HEADERS,
};
use crate::headers::hop_by_hop;
use crate::wire::{write_date, write_line, write_status};

/// What the client's head said of the backend's answer.
#[derive(Debug, Clone, Copy)]
pub struct Relayed {
    pub status: StatusCode,
    /// How the backend frames the body.
    pub framing: Framing,
    /// The body goes to the client in chunks.
    pub chunked: bool,
    /// The backend keeps the connection open after the body.
    pub reusable: bool,
}

/// The response head at the front of `buf`: `None` while it is not all there; once it
/// is, taken off `buf`, and (unless interim, 1xx) the client's head written to `out`,
/// with `Connection: close` when `close`.
pub fn relay_head(
    buf: &mut BytesMut,
    head_request: bool,
    close: bool,
    out: &mut Vec<u8>,
) -> Result<Option<(StatusCode, Relayed)>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let len = match parsed.parse(buf).map_err(HeadError::from_httparse)? {
        httparse::Status::Partial => return Ok(None),
        httparse::Status::Complete(len) => len,
    };
    let (status, version) = status_and_version(&parsed)?;
    let lines = parsed.headers.iter().map(|h| (h.name.as_bytes(), h.value));
    let framing = framing_of(status, version, lines.clone(), head_request)?;
    let relayed = Relayed {
        status,
        framing,
        chunked: matches!(framing, Framing::Chunked | Framing::UntilClose),
        reusable: keeps_alive_of(version, lines.clone()) && framing != Framing::UntilClose,
    };
    if !status.is_informational() {
        out.clear();
        write_status(out, status);
        let named = |name: &[u8]| {
            let connection = lines
                .clone()
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"));
            tokens(connection.map(|(_, v)| v)).any(|t| t.eq_ignore_ascii_case(name))
        };
        let mut dated = false;
        for (name, value) in lines.clone() {
            let length = name.eq_ignore_ascii_case(b"content-length");
            if hop_by_hop(name) || named(name) || length {
                continue;
            }
            dated |= name.eq_ignore_ascii_case(b"date");
            write_line(out, name, value);
        }
        if !dated {
            write_date(out);
        }
        // A HEAD answer says the length its GET would have had (checked, and said
        // once); 204 and 304 say none, as hyper's server sends them.
        let no_content = status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED;
        // Only a HEAD answer's length is read a second time, not every answer's.
        let head_length = match head_request && !no_content {
            true => match framing_of(status, version, lines, false) {
                Ok(Framing::Length(n)) => Some(n),
                _ => None,
            },
            false => None,
        };
        end_head(out, framing, head_length, close);
    }
    buf.advance(len);
    Ok(Some((status, relayed)))
}

/// The framing and connection lines, and the blank line that ends the head.
fn end_head(out: &mut Vec<u8>, framing: Framing, head_length: Option<u64>, close: bool) {
    match framing {
        Framing::Empty => {
            if let Some(n) = head_length {
                write_line(out, b"content-length", n.to_string().as_bytes());
            }
        }
        Framing::Length(n) => {
            write_line(out, b"content-length", n.to_string().as_bytes());
        }
        Framing::Chunked | Framing::UntilClose => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        }
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn relay_of(head: &str, head_request: bool, close: bool) -> (Relayed, String, BytesMut) {
        let mut buf = BytesMut::from(head);
        let mut out = Vec::new();
        let (_, relayed) = relay_head(&mut buf, head_request, close, &mut out)
            .unwrap()
            .unwrap();
        (relayed, String::from_utf8(out).unwrap(), buf)
    }

    #[test]
    fn hop_by_hop_lines_go_and_the_body_is_framed_anew() {
        let head = "HTTP/1.1 200 OK\r\nDate: D\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
                    Keep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\
                    X-A: b\r\n\r\n5\r\nhello";
        let (relayed, out, rest) = relay_of(head, false, true);
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nDate: D\r\nX-A: b\r\ntransfer-encoding: chunked\r\n\
             connection: close\r\n\r\n"
        );
        assert_eq!((relayed.framing, relayed.chunked), (Framing::Chunked, true));
        assert!(relayed.reusable);
        assert_eq!(&rest[..], b"5\r\nhello");
        let length = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nDate: D\r\n\r\nno\n";
        let (relayed, out, rest) = relay_of(length, false, false);
        assert_eq!(
            out,
            "HTTP/1.1 404 Not Found\r\nDate: D\r\ncontent-length: 3\r\n\r\n"
        );
        assert_eq!(
            (relayed.framing, &rest[..]),
            (Framing::Length(3), &b"no\n"[..])
        );
    }

    #[test]
    fn a_head_answer_keeps_its_length_a_204_has_none_and_an_old_close_is_not_reused() {
        let (relayed, out, _) = relay_of(
            "HTTP/1.1 200 OK\r\nContent-Length: 42\r\nDate: D\r\n\r\n",
            true,
            false,
        );
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nDate: D\r\ncontent-length: 42\r\n\r\n"
        );
        assert_eq!(relayed.framing, Framing::Empty);
        let (_, out, _) = relay_of(
            "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\nDate: D\r\n\r\n",
            false,
            false,
        );
        assert_eq!(out, "HTTP/1.1 204 No Content\r\nDate: D\r\n\r\n");
        let (relayed, out, _) = relay_of("HTTP/1.0 200 OK\r\n\r\nbody", false, false);
        assert!(out.contains("date: ") && out.contains("transfer-encoding: chunked"));
        assert_eq!(relayed.framing, Framing::UntilClose);
        assert!(!relayed.reusable);
    }

    #[test]
    fn an_interim_head_is_taken_off_and_writes_nothing() {
        let mut buf = BytesMut::from("HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200");
        let mut out = b"kept".to_vec();
        let (status, _) = relay_head(&mut buf, false, false, &mut out)
            .unwrap()
            .unwrap();
        assert_eq!((status.as_u16(), out.as_slice()), (103, &b"kept"[..]));
        assert_eq!(&buf[..], b"HTTP/1.1 200");
        assert!(relay_head(&mut buf, false, false, &mut out)
            .unwrap()
            .is_none());
    }
}
