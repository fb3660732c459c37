//! Who may use the agent's port, as the kubelet's webhook authentication and
//! authorization decide (`pkg/kubelet/server/auth.go`): each request maps to attributes
//! on the node object (`nodes/<subresource>` of this node), which the API server
//! decides through a SubjectAccessReview.
//!
//! - [`attributes`]: a request's verb and subresource.
//! - [`review`]: the TokenReview and SubjectAccessReview seam ([`Reviewer`]).
//! - [`gate`]: authenticate, then authorize, with the kubelet's caches.

pub mod attributes;
pub mod gate;
pub mod review;

pub use attributes::{request_attributes, NodeRequest};
pub use gate::{Gate, Refusal};
pub use review::{ApiReviewer, Reviewer};
