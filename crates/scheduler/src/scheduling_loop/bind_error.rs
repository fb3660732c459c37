//! Why a bind failed: the loop treats a pod that is gone differently from one whose bind
//! may be retried.

use super::extender::ExtenderError;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Waiting for the pod's claims to be bound (PreBind).
    #[error("{0}")]
    Volumes(String),
    /// A binder extender refused or failed.
    #[error(transparent)]
    Extender(#[from] ExtenderError),
    /// `POST pods/<name>/binding`.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl BindError {
    /// The API server says the pod no longer exists: nothing to retry and no event to
    /// record (upstream's failure handler skips a pod its informer no longer has).
    pub fn pod_gone(&self) -> bool {
        matches!(self, BindError::Api(kube::Error::Api(status)) if status.code == 404)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16, reason: &str) -> BindError {
        BindError::Api(kube::Error::Api(Box::new(
            Status::failure(&format!("{reason} message"), reason).with_code(code),
        )))
    }

    #[test]
    fn only_a_missing_pod_is_gone() {
        assert!(api_error(404, "NotFound").pod_gone());
        assert!(!api_error(409, "Conflict").pod_gone());
        assert!(!api_error(500, "InternalError").pod_gone());
        assert!(!BindError::Volumes("timed out".into()).pod_gone());
    }
}
