//! Cluster DNS, answered as CoreDNS's `kubernetes` plugin answers it.
//!
//! - [`records`] (no IO): Services, EndpointSlices and Namespaces become a
//!   [`ClusterZone`], every name rendered once to wire format; rebuilt on change, reusing
//!   what did not change.
//! - [`server`]: a [`DnsServer`] on UDP and TCP answering cluster names from the zone
//!   (authoritative, pre-rendered bytes copied into the response) and forwarding every
//!   other name to upstream resolvers, with a cache.
//! - [`source`]: watches on the API server keeping the served zone current ([`run`]).
//!
//! The compact object forms the zone is built from are in [`input`].

mod forward;
mod handler;
pub mod input;
pub mod metrics;
pub mod records;
pub mod server;
pub mod source;
mod wire;

pub use forward::{read_resolv_conf, upstreams_from_resolv_conf};
pub use input::{EndpointInfo, PortInfo, ServiceInfo, ServiceKind, SliceInfo};
pub use metrics::DnsMetrics;
pub use records::{
    Answer, ClusterZone, PodMode, RecordError, Reply, ZoneConfig, ZoneError, DEFAULT_DOMAIN,
    DEFAULT_TTL,
};
pub use server::{DnsServer, ServerConfig, ServerError, ServerStats};
pub use source::{run, run_with, SourceError};
