//! A request's headers on their way to a backend: hop-by-hop headers dropped (RFC 9110
//! §7.6.1), the client's own address and scheme in `X-Forwarded-*`.
//!
//! `X-Forwarded-For` is set to the client's address, not appended to: a client's own
//! value is not trusted, as ingress-nginx does by default (`use-forwarded-headers:
//! false`). The `Host` header is the client's, so backends see the name they were asked
//! by.

use http::header::{HeaderName, HeaderValue, CONNECTION, HOST, UPGRADE};
use http::HeaderMap;

/// Headers that describe one connection, never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub const X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
pub const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Whether a header named `name` describes one connection (or is `Upgrade`), so is
/// never passed on as it came.
pub fn hop_by_hop(name: &[u8]) -> bool {
    HOP_BY_HOP
        .iter()
        .chain(["upgrade"].iter())
        .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether a client's request header named `name` never reaches the backend as the
/// client sent it: a hop-by-hop one, `Upgrade`, or one [`set_forwarded`] sets itself.
pub fn replaced_on_the_way(name: &str) -> bool {
    HOP_BY_HOP
        .iter()
        .chain(&SET_BY_PROXY)
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// The headers [`set_forwarded`] sets, and `Upgrade` (an upgrade is never forwarded
/// without its `Connection: upgrade`).
const SET_BY_PROXY: [&str; 7] = [
    "x-forwarded-for",
    "x-real-ip",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-host",
    "host",
    "upgrade",
];

/// The protocol upgrade a request asks for (`Connection: upgrade` and `Upgrade: …`),
/// e.g. `websocket`.
pub fn upgrade_of(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| headers.get(UPGRADE).cloned()).flatten()
}

/// Removes hop-by-hop headers, the ones `Connection` names included; an upgrade's
/// `Upgrade` stays, with `Connection: upgrade`. One pass over the names present, then a
/// removal for each one found, rather than a lookup by string for every hop-by-hop name:
/// most messages carry none of them, or only `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: Option<&HeaderValue>) {
    let mut found: Vec<HeaderName> = headers
        .keys()
        .filter(|k| *k == UPGRADE || HOP_BY_HOP.contains(&k.as_str()))
        .cloned()
        .collect();
    if found.contains(&CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
            .collect();
        found.extend(named);
    }
    for name in found {
        headers.remove(name);
    }
    if let Some(protocol) = upgrade {
        headers.insert(UPGRADE, protocol.clone());
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Where the request came from, as the backend is told.
pub struct Origin<'a> {
    /// The client's address.
    pub client: &'a HeaderValue,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The port the client connected to.
    pub port: &'a HeaderValue,
    /// The client's `Host` (or HTTP/2 `:authority`).
    pub host: &'a str,
}

pub fn set_forwarded(headers: &mut HeaderMap, origin: &Origin<'_>) {
    headers.insert(X_FORWARDED_FOR, origin.client.clone());
    headers.insert(X_REAL_IP, origin.client.clone());
    headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(origin.scheme));
    headers.insert(X_FORWARDED_PORT, origin.port.clone());
    if let Ok(host) = HeaderValue::from_str(origin.host) {
        headers.insert(X_FORWARDED_HOST, host.clone());
        // An HTTP/2 request has no Host header; the backend speaks HTTP/1.1 and needs one.
        headers.insert(HOST, host);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn hop_by_hop_headers_go_and_the_client_address_replaces_a_forged_one() {
        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert(X_FORWARDED_FOR, HeaderValue::from_static("6.6.6.6"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        assert!(upgrade_of(&h).is_none());
        strip_hop_by_hop(&mut h, None);
        let origin = Origin {
            client: &HeaderValue::from_static("198.18.0.1"),
            scheme: "https",
            port: &HeaderValue::from(443u16),
            host: "foo.com",
        };
        set_forwarded(&mut h, &origin);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert!(!names.contains(&"x-secret") && !names.contains(&"connection"));
        assert!(!names.contains(&"keep-alive") && !names.contains(&"te"));
        assert_eq!(h[X_FORWARDED_FOR], "198.18.0.1");
        assert_eq!(h[X_FORWARDED_PROTO], "https");
        assert_eq!(h[X_FORWARDED_HOST], "foo.com");
        assert_eq!(h[HOST], "foo.com");
        assert_eq!(h["accept"], "*/*");
        for name in ["Connection", "TE", "X-Forwarded-For", "Host", "upgrade"] {
            assert!(replaced_on_the_way(name), "{name}");
        }
        assert!(!replaced_on_the_way("accept") && !replaced_on_the_way("x-forwarded"));
    }

    #[test]
    fn a_websocket_upgrade_keeps_its_upgrade_headers() {
        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        let upgrade = upgrade_of(&h).unwrap();
        assert_eq!(upgrade, "websocket");
        strip_hop_by_hop(&mut h, Some(&upgrade));
        assert_eq!(h[UPGRADE], "websocket");
        assert_eq!(h[CONNECTION], "upgrade");
    }
}
