//! Kubernetes apimachinery logic with no IO: label and field selectors, and the patch
//! formats the API accepts (JSON merge patch, JSON patch, strategic merge patch).

pub mod patch;
pub mod selector;
