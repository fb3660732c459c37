//! The client connection a request came on.

use std::net::SocketAddr;

use crate::headers::Origin;

/// The connection a request came on, with the header values every request on it
/// carries (formatted once per connection, not per request).
#[derive(Debug, Clone)]
pub struct Connection {
    pub client: SocketAddr,
    pub scheme: &'static str,
    /// The port the connection came to (a Gateway listener's).
    pub local_port: u16,
    /// Whether this port also serves the Ingress routes.
    pub ingress: bool,
    client_header: http::HeaderValue,
    port_header: http::HeaderValue,
}

impl Connection {
    pub fn new(
        client: SocketAddr,
        local_port: u16,
        scheme: &'static str,
        ingress: bool,
    ) -> Connection {
        let ip = client.ip().to_string();
        Connection {
            client,
            scheme,
            local_port,
            ingress,
            client_header: http::HeaderValue::try_from(ip)
                .unwrap_or(http::HeaderValue::from_static("unknown")),
            port_header: http::HeaderValue::from(local_port),
        }
    }

    /// Where a request on this connection for `host` came from, for `X-Forwarded-*`.
    pub fn origin<'a>(&'a self, host: &'a str) -> Origin<'a> {
        Origin {
            client: &self.client_header,
            scheme: self.scheme,
            port: &self.port_header,
            host,
        }
    }
}
