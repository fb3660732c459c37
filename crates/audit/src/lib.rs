//! Audit logging as kube-apiserver's `--audit-policy-file` and `--audit-log-*` do it:
//!
//! - [`policy`]: upstream's `audit.k8s.io/v1` Policy, whose first matching rule gives a
//!   request's level (`None`, `Metadata`, `Request`, `RequestResponse`) and the stages
//!   to leave out;
//! - [`event`]: the `audit.k8s.io/v1` Event each stage of a request writes;
//! - [`sink`]: where events go: JSON lines in a file rotated by size (upstream's
//!   lumberjack settings), or a memory fake for tests.
//!
//! No request handling lives here: the API server builds events from what it knows.

pub mod event;
pub mod policy;
pub mod sink;

pub use event::{Event, Level, ObjectRef, ResponseStatus, Stage};
pub use policy::{Policy, PolicyError, RequestAttributes, RuleOutcome};
pub use sink::{FileSink, LogSettings, MemorySink, Sink};
