//! A bodiless request's head as bytes, and a backend's response head parsed (httparse)
//! with how its body is framed (RFC 9112 §6.3).

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, COOKIE};
use http::{HeaderMap, Method, StatusCode, Version};

/// More response headers than this is an error, as in hyper's client (its default).
pub const MAX_HEADERS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("the endpoint's response head is not HTTP/1.x: {0}")]
    Invalid(httparse::Error),
    #[error("the endpoint's response has more than {MAX_HEADERS} headers")]
    TooManyHeaders,
    #[error("the endpoint's response head has an invalid header {0:?}")]
    Header(String),
    #[error("the endpoint's response has an invalid Content-Length")]
    ContentLength,
}

impl HeadError {
    pub fn from_httparse(e: httparse::Error) -> HeadError {
        match e {
            httparse::Error::TooManyHeaders => HeadError::TooManyHeaders,
            e => HeadError::Invalid(e),
        }
    }
}

/// `request`'s head, for HTTP/1.1 in origin form: `target` is the path and query.
pub fn encode_request(method: &Method, target: &str, headers: &HeaderMap, out: &mut Vec<u8>) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // A name's values come one after another: HTTP/2 sends a cookie in pieces, which
    // HTTP/1.1 carries as one line joined by "; " (RFC 9113 §8.2.3); any other repeated
    // header gets a line per value.
    let mut previous: Option<&HeaderName> = None;
    for (name, value) in headers {
        if previous == Some(name) && name == COOKIE {
            out.extend_from_slice(b"; ");
        } else {
            if previous.is_some() {
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
        }
        out.extend_from_slice(value.as_bytes());
        previous = Some(name);
    }
    if previous.is_some() {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
}

/// A response head from the front of `buf`, taken off it; `None`: not all of it is
/// there yet. Header values share the head's bytes rather than being copied.
pub fn parse_response(buf: &mut BytesMut) -> Result<Option<ResponseHead>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let parsed_len = parsed.parse(buf).map_err(HeadError::from_httparse);
    let len = match parsed_len? {
        httparse::Status::Partial => return Ok(None),
        httparse::Status::Complete(len) => len,
    };
    let (status, version) = status_and_version(&parsed)?;
    // Where each value lies in the head, to slice it from the frozen bytes below.
    let base = buf.as_ptr() as usize;
    let mut spans = Vec::with_capacity(parsed.headers.len());
    for header in parsed.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| HeadError::Header(header.name.to_string()))?;
        // An empty value may not point into the buffer at all.
        let start = match header.value.is_empty() {
            true => 0,
            false => (header.value.as_ptr() as usize).saturating_sub(base),
        };
        spans.push((name, start, start + header.value.len()));
    }
    let head: Bytes = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(spans.len());
    for (name, start, end) in spans {
        let bytes = head.get(start..end).map(|_| head.slice(start..end));
        let value = bytes
            .and_then(|b| HeaderValue::from_maybe_shared(b).ok())
            .ok_or_else(|| HeadError::Header(name.to_string()))?;
        headers.append(name, value);
    }
    Ok(Some(ResponseHead {
        status,
        version,
        headers,
    }))
}

/// A parsed response head's status and HTTP version.
pub fn status_and_version(
    parsed: &httparse::Response<'_, '_>,
) -> Result<(StatusCode, Version), HeadError> {
    let code = parsed.code.unwrap_or_default();
    let status =
        StatusCode::from_u16(code).map_err(|_| HeadError::Invalid(httparse::Error::Status))?;
    let version = match parsed.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    Ok((status, version))
}

/// How a response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
    /// When the endpoint closes the connection, which cannot be reused.
    UntilClose,
}

/// A response head's header lines as name and value bytes (names in any case).
pub trait Lines<'a>: Iterator<Item = (&'a [u8], &'a [u8])> + Clone {}
impl<'a, I: Iterator<Item = (&'a [u8], &'a [u8])> + Clone> Lines<'a> for I {}

/// The values of the header `name` among `lines`.
fn values<'a>(lines: impl Lines<'a>, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
    lines
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// The comma-separated tokens of `values`, trimmed.
pub fn tokens<'a>(values: impl Iterator<Item = &'a [u8]>) -> impl Iterator<Item = &'a [u8]> {
    values.flat_map(|v| v.split(|b| *b == b',').map(<[u8]>::trim_ascii))
}

/// RFC 9112 §6.3: a HEAD's response and 1xx/204/304 have no body; then
/// Transfer-Encoding (chunked last, else until close), then Content-Length (several
/// differing: an error), else until close.
pub fn framing(head: &ResponseHead, head_request: bool) -> Result<Framing, HeadError> {
    Ok(framing_and_keep_alive(head, head_request)?.0)
}

/// [`framing`] and [`keeps_alive`] of one head, its lines listed once for both.
pub fn framing_and_keep_alive(
    head: &ResponseHead,
    head_request: bool,
) -> Result<(Framing, bool), HeadError> {
    let lines = map_lines(&head.headers);
    let lines = lines.iter().copied();
    let framing = framing_of(head.status, head.version, lines.clone(), head_request)?;
    Ok((framing, keeps_alive_of(head.version, lines)))
}

/// [`framing`] of a head's status, version and header lines.
pub fn framing_of<'a>(
    status: StatusCode,
    version: Version,
    lines: impl Lines<'a>,
    head_request: bool,
) -> Result<Framing, HeadError> {
    if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if values(lines.clone(), "transfer-encoding").next().is_some() {
        // HTTP/1.0 has no transfer codings: the connection's close ends the body.
        if version == Version::HTTP_10 {
            return Ok(Framing::UntilClose);
        }
        let last = tokens(values(lines, "transfer-encoding")).last();
        return Ok(match last {
            Some(coding) if coding.eq_ignore_ascii_case(b"chunked") => Framing::Chunked,
            _ => Framing::UntilClose,
        });
    }
    let mut length = None;
    for digits in tokens(values(lines, "content-length")) {
        // Digits only: `parse` would take a sign.
        let n = (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(digits).ok()?.parse::<u64>().ok())
            .flatten()
            .ok_or(HeadError::ContentLength)?;
        if length.is_some_and(|l| l != n) {
            return Err(HeadError::ContentLength);
        }
        length = Some(n);
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// Whether the endpoint keeps the connection open after this response: HTTP/1.1
/// unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
pub fn keeps_alive(head: &ResponseHead) -> bool {
    keeps_alive_of(head.version, map_lines(&head.headers).iter().copied())
}

/// [`keeps_alive`] of a head's version and header lines.
pub fn keeps_alive_of<'a>(version: Version, lines: impl Lines<'a>) -> bool {
    let says = |token: &str| {
        tokens(values(lines.clone(), "connection"))
            .any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
    };
    match version {
        Version::HTTP_10 => says("keep-alive"),
        _ => !says("close"),
    }
}

/// A map's lines, as [`Lines`] (its iterator cannot be cloned).
fn map_lines(headers: &HeaderMap) -> Vec<(&[u8], &[u8])> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(text: &str) -> (ResponseHead, BytesMut) {
        let mut buf = BytesMut::from(text);
        let head = parse_response(&mut buf).unwrap().unwrap();
        (head, buf)
    }

    #[test]
    fn a_request_head_is_written_in_origin_form_with_every_header() {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("foo.com"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        headers.append("cookie", HeaderValue::from_static("a=1"));
        headers.append("cookie", HeaderValue::from_static("b=2"));
        let mut out = Vec::new();
        encode_request(&Method::GET, "/p?q=1", &headers, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /p?q=1 HTTP/1.1\r\nhost: foo.com\r\nx-a: 1\r\nx-a: 2\r\ncookie: a=1; b=2\r\n\r\n"
        );
    }

    #[test]
    fn a_response_head_is_taken_off_the_buffer_and_the_body_left() {
        let (head, rest) = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(head.headers["x-a"], "b");
        assert_eq!(&rest[..], b"hello");
        assert_eq!(framing(&head, false).unwrap(), Framing::Length(5));
        assert_eq!(framing(&head, true).unwrap(), Framing::Empty);
        assert!(keeps_alive(&head));
    }

    #[test]
    fn a_partial_head_asks_for_more_and_garbage_is_an_error() {
        let mut buf = BytesMut::from("HTTP/1.1 200 OK\r\nContent-Le");
        assert!(parse_response(&mut buf).unwrap().is_none());
        assert_eq!(buf.len(), 27);
        let mut buf = BytesMut::from("SSH-2.0-OpenSSH\r\n\r\n");
        assert!(parse_response(&mut buf).is_err());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let chunked =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 9\r\n\r\n";
        assert_eq!(framing(&parse(chunked).0, false).unwrap(), Framing::Chunked);
        let gzip = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert_eq!(framing(&parse(gzip).0, false).unwrap(), Framing::UntilClose);
        let none = "HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(framing(&parse(none).0, false).unwrap(), Framing::UntilClose);
        let same = "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n";
        assert_eq!(framing(&parse(same).0, false).unwrap(), Framing::Length(3));
        let differ = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
        assert!(framing(&parse(differ).0, false).is_err());
        for bad in ["-1", "+5", "", "0x10"] {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
            assert!(framing(&parse(&head).0, false).is_err(), "{bad:?}");
        }
        let old_chunked = "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(
            framing(&parse(old_chunked).0, false).unwrap(),
            Framing::UntilClose
        );
        let no_content = "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(
            framing(&parse(no_content).0, false).unwrap(),
            Framing::Empty
        );
    }

    #[test]
    fn keep_alive_by_version_and_connection_header() {
        let close = "HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n";
        assert!(!keeps_alive(&parse(close).0));
        let old = "HTTP/1.0 200 OK\r\n\r\n";
        assert!(!keeps_alive(&parse(old).0));
        let old_kept = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n";
        assert!(keeps_alive(&parse(old_kept).0));
    }
}
