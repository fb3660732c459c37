//! Who a request is ([`user`]) and what it may do: the attributes an authorizer decides
//! on, and RBAC over Roles, ClusterRoles and their bindings (upstream's
//! `k8s.io/apiserver/pkg/authentication/user`, `pkg/authorization/authorizer` and
//! `plugin/pkg/auth/authorizer/rbac`). No IO: the API server feeds it objects.
//!
//! - [`Attributes`], [`Decision`], [`forbidden_message`]: a request, an answer, the 403 text.
//! - [`RbacAuthorizer`]: decisions and SelfSubjectRulesReview ([`RulesReview`]).
//! - [`rbac::escalation`]: may a user write this Role/ClusterRole/binding.
//! - [`node`]: the Node authorizer ([`node::NodeGraph`], [`node::authorize`]) and
//!   NodeRestriction admission ([`node::restriction`]).
//! - [`x509`]: the user a client certificate names, once its chain is checked.
//! - [`rbac::bootstrap`]: upstream's default policy; [`rbac::aggregation`]: `admin`/`edit`/`view`.

pub mod attributes;
mod gofmt;
pub mod node;
pub mod rbac;
pub mod user;
pub mod x509;

pub use attributes::{forbidden_message, Attributes, Decision};
pub use rbac::escalation::{EscalationError, Operation};
pub use rbac::{RbacAuthorizer, RulesReview};
pub use user::UserInfo;
