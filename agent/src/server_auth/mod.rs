//! Who may use the agent's port, as the kubelet's webhook authentication and
//! authorization decide (`pkg/kubelet/server/auth.go`): each request maps to attributes
//! on the node object (`nodes/<subresource>` of this node), which the API server
//! decides through a SubjectAccessReview.
//!
//! - [`attributes`]: a request's verb and subresource.
//! - `cairn-delegated`: the TokenReview and SubjectAccessReview seam and the gate with the
//!   kubelet's caches, shared with the standalone components' ports.

pub mod attributes;

pub use attributes::{request_attributes, NodeRequest};
pub use cairn_delegated::{ApiReviewer, Gate, Refusal, Reviewer};
