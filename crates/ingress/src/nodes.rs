//! Which nodes serve Ingress and Gateway traffic, picked by a node label as k3s's
//! ServiceLB picks its nodes (`svccontroller.k3s.cattle.io/enablelb`): while no node
//! carries `ingress.cairn.io/enabled=true`, every node serves; once one does, only the
//! nodes that carry it do. `ingress.cairn.io/enabled=false` keeps a node out either way.
//! The control plane reads this to choose the addresses it publishes, each node's proxy
//! to decide whether it listens: one rule, so the two never disagree.

use std::collections::BTreeMap;

/// The label that picks the serving nodes.
pub const SERVE_LABEL: &str = "ingress.cairn.io/enabled";

/// A node's labels (`None`: it has none).
pub type Labels<'a> = Option<&'a BTreeMap<String, String>>;

fn value<'a>(labels: Labels<'a>) -> Option<&'a str> {
    labels.and_then(|l| l.get(SERVE_LABEL)).map(String::as_str)
}

/// Whether some node opted in (`ingress.cairn.io/enabled=true`), which makes the
/// serving nodes the opted-in ones only.
pub fn any_opted_in<'a>(nodes: impl IntoIterator<Item = Labels<'a>>) -> bool {
    nodes.into_iter().any(|l| value(l) == Some("true"))
}

/// Whether a node with `labels` serves, given [`any_opted_in`] over every node.
pub fn serves(labels: Labels<'_>, any_opted_in: bool) -> bool {
    match value(labels) {
        Some("true") => true,
        Some("false") => false,
        _ => !any_opted_in,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(value: Option<&str>) -> Option<BTreeMap<String, String>> {
        value.map(|v| BTreeMap::from([(SERVE_LABEL.to_string(), v.to_string())]))
    }

    /// Which of three nodes labelled `values` serve.
    fn serving(values: [Option<&str>; 3]) -> [bool; 3] {
        let all = values.map(labels);
        let opted = any_opted_in(all.iter().map(Option::as_ref));
        [0, 1, 2].map(|i| serves(all[i].as_ref(), opted))
    }

    #[test]
    fn every_node_serves_until_one_opts_in() {
        assert_eq!(serving([None, None, None]), [true, true, true]);
        assert_eq!(serving([Some("true"), None, None]), [true, false, false]);
        assert_eq!(
            serving([Some("true"), Some("true"), None]),
            [true, true, false]
        );
    }

    #[test]
    fn false_keeps_a_node_out_and_other_values_are_no_label() {
        assert_eq!(serving([Some("false"), None, None]), [false, true, true]);
        assert_eq!(
            serving([Some("false"), Some("true"), None]),
            [false, true, false]
        );
        // Only `true` opts in: a typo is not a pick that silences every other node.
        assert_eq!(serving([Some("yes"), None, None]), [true, true, true]);
    }
}
