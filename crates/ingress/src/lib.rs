//! Ingress routing with no IO (issue 33's routing core): from the Ingresses of cairn's
//! class, a [`RouteTable`] that answers which Service a request goes to, and from Services
//! and EndpointSlices, which ready endpoints serve it ([`backends`]).
//!
//! Semantics are upstream's (`networking.k8s.io/v1` Ingress docs and API comments):
//! - hosts ([`host`]): exact names, `*.example.com` wildcards matching exactly one more
//!   label, and rules with no host matching any;
//! - paths ([`path`]): `Exact` (the whole path, case-sensitive), `Prefix` (element by
//!   element on `/`, a trailing slash ignored); the longest matching path wins, `Exact`
//!   before `Prefix` on a tie;
//! - the same host, path and type in two Ingresses: the oldest Ingress wins (creation
//!   time, then namespace and name), and the other is reported ([`Conflict`]).
//!
//! Where upstream leaves a choice, cairn follows ingress-nginx, the most used
//! controller: `ImplementationSpecific` paths match as `Prefix`; a request goes to the most
//! specific host group it matches (exact, then the longest wildcard, then the rules with no
//! host) and never falls through to a less specific one; a request no rule matches gets
//! the oldest Ingress's `defaultBackend`, else a 404.

pub mod backends;
pub mod class;
pub mod gateway;
pub mod host;
pub mod nodes;
pub mod path;
pub mod table;

pub use backends::{endpoints, BackendError, Endpoint};
pub use host::HostMatch;
pub use path::PathMatch;
pub use table::{
    Conflict, IngressKey, PortRef, Route, RouteTable, ServiceRef, TlsCertificate, CLASS_NAME,
};

#[cfg(test)]
mod tests;
