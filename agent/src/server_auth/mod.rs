//! Who may use the agent's port, as the kubelet's webhook authentication and
//! authorization decide (`pkg/kubelet/server/auth.go`): each request maps to attributes
//! on the node object (`nodes/<subresource>` of this node), which the API server
//! decides through a SubjectAccessReview.

pub mod attributes;

pub use attributes::{request_attributes, subject_access_review, NodeRequest};
