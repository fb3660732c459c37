//! A client's request head as httparse reads it, whether the direct path serves it,
//! and the head the backend gets, written from the client's bytes.

use httparse::{Header, Status};

use crate::headers::{replaced_on_the_way, Origin};
use crate::wire::write_line;

/// More request headers than this: hyper's limit, so hyper answers it (431).
pub const MAX_HEADERS: usize = 100;
/// `Connection` headers a request may carry on the direct path.
const MAX_CONNECTION_HEADERS: usize = 4;

/// A bodiless HTTP/1.1 request in origin form with one `Host`.
#[derive(Debug)]
pub struct ClientRequest<'h, 'b> {
    pub method: &'b str,
    /// The path and query.
    pub target: &'b str,
    pub host: &'b str,
    /// The client said `Connection: close`.
    pub close: bool,
    headers: &'h [Header<'b>],
    /// The `Connection` headers' values: the headers they name stay behind too.
    connection: [&'b [u8]; MAX_CONNECTION_HEADERS],
}

#[derive(Debug)]
pub enum Parsed<'h, 'b> {
    /// Not all of the head is there yet.
    Partial,
    /// Served by hyper: a body, an upgrade, `Expect`, HTTP/1.0, another form of
    /// target, a missing or repeated `Host`, or a head hyper must refuse.
    HandOff,
    /// The request, and its head's length.
    Direct(ClientRequest<'h, 'b>, usize),
}

/// The request head at the front of `buf`.
pub fn parse<'h, 'b>(buf: &'b [u8], slots: &'h mut [Header<'b>]) -> Parsed<'h, 'b> {
    let mut request = httparse::Request::new(slots);
    let len = match request.parse(buf) {
        Ok(Status::Complete(len)) => len,
        Ok(Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::HandOff,
    };
    let (Some(method), Some(target), Some(1)) = (request.method, request.path, request.version)
    else {
        return Parsed::HandOff;
    };
    if method == "CONNECT" || !plain_target(target) {
        return Parsed::HandOff;
    }
    let headers: &'h [Header<'b>] = request.headers;
    match facts(headers) {
        Some((host, connection, close)) => {
            let request = ClientRequest {
                method,
                target,
                host,
                close,
                headers,
                connection,
            };
            Parsed::Direct(request, len)
        }
        None => Parsed::HandOff,
    }
}

/// The longest target hyper's `Uri` takes (a longer one: 414).
const MAX_TARGET: usize = 65534;

/// An origin-form target whose bytes hyper's `Uri` takes as they are: anything else
/// (a fragment hyper drops, a byte it refuses, a length it refuses) is hyper's to
/// answer, so both paths route the same path.
fn plain_target(target: &str) -> bool {
    target.starts_with('/')
        && target.len() <= MAX_TARGET
        && !target.bytes().any(|b| b"#<>`\"{}|\\^".contains(&b))
}

type Facts<'b> = (&'b str, [&'b [u8]; MAX_CONNECTION_HEADERS], bool);

/// The `Host`, the `Connection` values and whether they say close; `None`: a header
/// the direct path leaves to hyper.
fn facts<'b>(headers: &[Header<'b>]) -> Option<Facts<'b>> {
    let mut host = None;
    let mut connection = [&b""[..]; MAX_CONNECTION_HEADERS];
    let mut connections = 0;
    for header in headers {
        let name = header.name;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return None;
            }
            host = Some(header.value);
        } else if name.eq_ignore_ascii_case("connection") {
            *connection.get_mut(connections)? = header.value;
            connections += 1;
        } else if name.eq_ignore_ascii_case("content-length") {
            if header.value != b"0" {
                return None;
            }
        } else if ["transfer-encoding", "expect", "upgrade"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
        {
            return None;
        }
    }
    let host = host.filter(|h| !h.is_empty() && h.iter().all(u8::is_ascii_graphic))?;
    let host = std::str::from_utf8(host).ok()?;
    let close = tokens(&connection).any(|t| t.eq_ignore_ascii_case(b"close"));
    Some((host, connection, close))
}

/// The comma-separated tokens of `values`.
fn tokens<'a>(values: &'a [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'a {
    values
        .iter()
        .flat_map(|v| v.split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

impl ClientRequest<'_, '_> {
    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(self.target, |(p, _)| p)
    }

    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The head for the backend: the client's headers but the hop-by-hop ones (and
    /// those its `Connection` names), then `X-Forwarded-*` and `Host` from `origin`, as
    /// [`crate::headers::set_forwarded`] sets them on hyper's path.
    pub fn encode_upstream(&self, origin: &Origin<'_>, out: &mut Vec<u8>) {
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for header in self.headers {
            if replaced_on_the_way(header.name) || self.named_by_connection(header.name) {
                continue;
            }
            write_line(out, header.name.as_bytes(), header.value);
        }
        let client = origin.client.as_bytes();
        write_line(out, b"x-forwarded-for", client);
        write_line(out, b"x-real-ip", client);
        write_line(out, b"x-forwarded-proto", origin.scheme.as_bytes());
        write_line(out, b"x-forwarded-port", origin.port.as_bytes());
        write_line(out, b"x-forwarded-host", origin.host.as_bytes());
        write_line(out, b"host", origin.host.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    fn named_by_connection(&self, name: &str) -> bool {
        let connection = &self.connection;
        tokens(connection).any(|t| t.eq_ignore_ascii_case(name.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http::HeaderValue;

    fn direct(head: &str) -> Option<(String, String, String, bool, usize)> {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match parse(head.as_bytes(), &mut slots) {
            Parsed::Direct(r, len) => Some((
                r.method.to_string(),
                r.path().to_string(),
                r.host.to_string(),
                r.close,
                len,
            )),
            _ => None,
        }
    }

    #[test]
    fn a_plain_get_is_direct_and_the_rest_go_to_hyper() {
        let get = "GET /a?b=1 HTTP/1.1\r\nHost: foo.com\r\nConnection: close\r\n\r\nNEXT";
        let got = direct(get).unwrap();
        assert_eq!(
            got,
            (
                "GET".into(),
                "/a".into(),
                "foo.com".into(),
                true,
                get.len() - 4
            )
        );
        let empty = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
        assert!(direct(empty).is_some());
        for handed in [
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            "GET / HTTP/1.0\r\nHost: a\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: \r\n\r\n",
            "GET / HTTP/1.1\r\nHo st: a\r\n\r\n",
            "GET /app#x HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /a<b HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let parsed = parse(handed.as_bytes(), &mut slots);
            assert!(matches!(parsed, Parsed::HandOff), "{handed:?}: {parsed:?}");
        }
        let long = format!(
            "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
            "a".repeat(MAX_TARGET)
        );
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        assert!(matches!(
            parse(long.as_bytes(), &mut slots),
            Parsed::HandOff
        ));
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let partial = parse(b"GET / HTTP/1.1\r\nHost: a\r\n", &mut slots);
        assert!(matches!(partial, Parsed::Partial));
    }

    #[test]
    fn the_backend_head_drops_hop_by_hop_and_forged_headers() {
        let head = "GET /p?q HTTP/1.1\r\nHost: foo.com\r\nConnection: keep-alive, X-Secret\r\n\
                    X-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n\
                    X-Forwarded-For: 6.6.6.6\r\nAccept: */*\r\n\r\n";
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let Parsed::Direct(request, _) = parse(head.as_bytes(), &mut slots) else {
            panic!("not direct");
        };
        let origin = Origin {
            client: &HeaderValue::from_static("198.18.0.1"),
            scheme: "http",
            port: &HeaderValue::from(80u16),
            host: request.host,
        };
        let mut out = Vec::new();
        request.encode_upstream(&origin, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /p?q HTTP/1.1\r\nAccept: */*\r\nx-forwarded-for: 198.18.0.1\r\n\
             x-real-ip: 198.18.0.1\r\nx-forwarded-proto: http\r\nx-forwarded-port: 80\r\n\
             x-forwarded-host: foo.com\r\nhost: foo.com\r\n\r\n"
        );
    }
}
