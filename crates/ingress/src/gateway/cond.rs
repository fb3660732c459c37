//! One status condition as attachment decides it: status, reason, message.

/// One condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn yes(reason: &'static str, message: impl Into<String>) -> Cond {
        Cond {
            status: true,
            reason,
            message: message.into(),
        }
    }

    pub fn no(reason: &'static str, message: impl Into<String>) -> Cond {
        Cond {
            status: false,
            reason,
            message: message.into(),
        }
    }
}
