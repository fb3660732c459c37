//! Kubernetes apimachinery logic with no IO: resource quantities, label and field
//! selectors, and the patch formats the API accepts (JSON merge patch, JSON patch,
//! strategic merge patch).

pub mod patch;
pub mod quantity;
pub mod selector;
pub mod validation;
