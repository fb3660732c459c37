//! The Kubernetes API as cairn-control serves it, with no IO: which resources exist
//! ([`registry`]), how objects are defaulted ([`defaults`]) and validated ([`validation`]),
//! how they print as `meta.k8s.io/v1` Tables ([`table`]), how bodies decode into their types
//! ([`schema`]), how kinds served in two shapes convert ([`conversion`]), and `Status`
//! errors ([`status`]).

pub mod conversion;
pub mod crd;
pub mod defaults;
pub mod jsonpath;
pub mod kinds;
pub mod registry;
pub mod scheduling_validation;
pub mod schema;
pub mod status;
pub mod table;
pub mod validation;
