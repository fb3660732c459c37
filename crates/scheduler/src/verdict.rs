//! What a plugin answers about a node: unfit (and why), or a score up to the maximum.

pub const MAX_NODE_SCORE: i64 = 100;

/// Why a node cannot take the pod. `unresolvable`: preempting pods there would not help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfit {
    pub reasons: Vec<String>,
    pub unresolvable: bool,
}

impl Unfit {
    pub fn new(reason: impl Into<String>) -> Unfit {
        Unfit {
            reasons: vec![reason.into()],
            unresolvable: false,
        }
    }

    pub fn unresolvable(reason: impl Into<String>) -> Unfit {
        Unfit {
            reasons: vec![reason.into()],
            unresolvable: true,
        }
    }
}
