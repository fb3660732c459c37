//! Delegated authentication and authorization for a component's own HTTPS port, as
//! upstream's kubelet and its `DelegatingAuthenticationOptions` do: client certificates
//! against the API server's client CA, bearer tokens through a TokenReview, every request
//! authorized through a SubjectAccessReview, answers cached.
//!
//! - [`access`]: what a request asks (a resource or a path) and upstream's refusals.
//! - [`review`]: the TokenReview and SubjectAccessReview seam ([`Reviewer`], a fake in tests).
//! - [`gate`]: authenticate, then authorize, with the kubelet's caches. The agent's port uses it.
//! - [`secure_port`]: the standalone scheduler's and controllers' port (`/healthz`, `/metrics`).
//! - [`tls_listener`]: the accept loop, handshake and header deadlines both ports share.

pub mod access;
pub mod gate;
pub mod review;
pub mod secure_port;
pub mod tls_listener;

pub use access::Access;
pub use gate::{Gate, Refusal};
pub use review::{ApiReviewer, ReviewError, Reviewer};
pub use secure_port::{published_client_ca, PortError, SecurePort};
