//! One module per served kind, by group (`core/pod.rs`, `apps/deployment.rs`, ...), as
//! upstream's `pkg/registry/<group>/<resource>/strategy.go`: each holds what is specific to
//! its kind and names it in a [`Strategy`], the table of what a kind may customise. The
//! registry ([`crate::registry`]) points each served resource at its kind's strategy once;
//! defaulting, validation, decoding, tables and the API server's write path call through it
//! instead of matching kind names. Rules several kinds share (object meta, pod templates,
//! selectors, quantities) stay in the shared modules ([`crate::validation`],
//! [`crate::defaults`], [`crate::table`], [`crate::schema`]) that kinds call.

pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod discovery;
pub mod events;
pub mod flowcontrol;
pub mod networking;
pub mod node;
pub mod policy;
mod prelude;
pub mod rbac;
pub mod scheduling;
pub mod storage;
pub(crate) mod strategy;

pub use strategy::*;
