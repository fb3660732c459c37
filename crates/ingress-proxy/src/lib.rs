//! The Ingress data plane (issue 33): an HTTP/1.1 and HTTP/2 reverse proxy on hyper and
//! rustls that serves the route table of `cairn-ingress`.
//!
//! - [`snapshot`]: the table, each routed Service's ready endpoints and the TLS
//!   certificates, built whole from API objects and swapped as one pointer;
//! - [`forward`]: one request to an endpoint over pooled keep-alive connections ([`idle`]:
//!   raw ones for bodiless requests, [`upstream`]; hyper's for the rest, [`pool`]),
//!   retried only when safe, `X-Forwarded-*` set ([`headers`]), WebSocket upgrades
//!   ([`upgrade`]);
//! - [`gateway`]: a request on a Gateway listener's port: its listener, HTTPRoute rule
//!   and filters, before the Ingress routes;
//! - [`certs`]: `kubernetes.io/tls` Secrets and a default certificate when no valid one
//!   is named; [`tls`] picks among them by SNI per handshake;
//! - [`direct`]: plain HTTP/1.1 Ingress requests served without hyper's server, which
//!   takes over a connection at its first other request;
//! - [`serve`]: the listeners, header and handshake timeouts, graceful drain; [`sniff`]:
//!   HTTP/2's preface or HTTP/1 from a connection's first read;
//! - [`workers`]: a single-threaded runtime per core, each serving every listener;
//! - [`metrics`]: requests by backend Service and status code, and their durations.

pub mod body;
pub mod certs;
pub mod connection;
pub mod direct;
pub mod forward;
pub mod gateway;
pub mod headers;
pub mod idle;
pub mod metrics;
pub mod pool;
pub mod serve;
pub mod snapshot;
pub mod sniff;
pub mod tls;
pub mod upgrade;
pub mod upstream;
pub mod wire;
pub mod workers;

pub use certs::{default_certificate, CertificateError};
pub use forward::{ForwardConfig, Forwarder};
pub use metrics::RequestMetrics;
pub use serve::{serve, Listener, ServeConfig};
pub use snapshot::{Inputs, Problem, Routes, Snapshot};
pub use tls::{server_config, SniResolver};
pub use workers::{bind_listener, Served, Workers, WorkersError};
