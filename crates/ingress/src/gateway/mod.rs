//! The Gateway API's HTTPRoute routing (standard channel), with no IO: the routes
//! attached to a listener as one ranked table ([`table`]), hostnames and their
//! intersection with a listener's ([`hostname`]), and filters ([`filters`]). Rules and
//! sources: `docs/upstream/gateway-api-semantics.md`. Its tests are the core
//! conformance tests' request → backend tables.

pub mod attach;
pub mod cond;
pub mod dispatch;
pub mod filters;
pub mod hostname;
pub mod objects;
pub mod refs;
pub mod route;
pub mod status;
pub mod table;

pub use attach::{attach, Attachment, Inputs, Protocol, ServedListener, CONTROLLER_NAME};
pub use objects::{Gateway, GatewayClass, ReferenceGrant};
pub use route::HttpRoute;
pub use table::{Action, ListenerTable, NotAccepted, Request};

#[cfg(test)]
mod attach_tests;
#[cfg(test)]
mod tests;
