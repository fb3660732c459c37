//! The Gateway API's HTTPRoute routing (standard channel), with no IO: the routes
//! attached to a listener as one ranked table ([`table`]), hostnames and their
//! intersection with a listener's ([`hostname`]), and filters ([`filters`]). Rules and
//! sources: `docs/upstream/gateway-api-semantics.md`. Its tests are the core
//! conformance tests' request → backend tables.

pub mod filters;
pub mod hostname;
pub mod route;
pub mod table;

pub use route::HttpRoute;
pub use table::{Action, ListenerTable, NotAccepted, Request};

#[cfg(test)]
mod tests;
