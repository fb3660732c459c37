//! Why a pod fits nowhere, in kube-scheduler's words
//! (`0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match ...`).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitError {
    NoNodes,
    /// Filters rejected every node.
    Unfit {
        num_all_nodes: usize,
        /// reason → number of nodes.
        reasons: BTreeMap<String, usize>,
        /// Text appended after the filter reasons (the preemption outcome).
        post_filter: Option<String>,
    },
}

impl FitError {
    pub fn unfit(num_all_nodes: usize, reasons: BTreeMap<String, usize>) -> FitError {
        FitError::Unfit {
            num_all_nodes,
            reasons,
            post_filter: None,
        }
    }
}

/// `"1 Insufficient cpu, 2 node(s) ..."`: counts before reasons, sorted as strings as
/// upstream sorts them.
pub fn format_histogram(reasons: &BTreeMap<String, usize>) -> String {
    let mut items: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    items.sort();
    items.join(", ")
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::NoNodes => f.write_str("no nodes available to schedule pods"),
            FitError::Unfit {
                num_all_nodes,
                reasons,
                post_filter,
            } => {
                write!(f, "0/{num_all_nodes} nodes are available:")?;
                if !reasons.is_empty() {
                    write!(f, " {}.", format_histogram(reasons))?;
                }
                if let Some(p) = post_filter {
                    write!(f, " {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_wording() {
        let reasons = BTreeMap::from([
            (
                "node(s) didn't match Pod's node affinity/selector".to_string(),
                2,
            ),
            ("Insufficient cpu".to_string(), 1),
        ]);
        let mut e = FitError::unfit(3, reasons);
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
        );
        if let FitError::Unfit { post_filter, .. } = &mut e {
            *post_filter = Some(
                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                    .into(),
            );
        }
        assert!(e.to_string().ends_with(
            ". preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        ));
        assert_eq!(
            FitError::NoNodes.to_string(),
            "no nodes available to schedule pods"
        );
    }
}
