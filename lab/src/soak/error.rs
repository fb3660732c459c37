//! The soak's error: a kubectl call that failed, a broken invariant, a node that could
//! not be audited, or the lab itself. Its own module so the soak's parts depend on it, not
//! on the loop that uses them.

use crate::LabError;

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("kubectl {args}: {message}")]
    Kubectl { args: String, message: String },
    #[error("invariant broken: {0}")]
    Violation(String),
    #[error("node check: {0}")]
    Node(String),
    #[error(transparent)]
    Lab(#[from] LabError),
}
