//! The clusterrole-aggregation controller's pure step: every ClusterRole with an
//! `aggregationRule` gets the rules of the ClusterRoles its selectors match (in
//! selector order, each selector's matches by name, itself skipped, exact duplicates
//! dropped), as upstream's `clusterroleaggregation` controller computes them.
//!
//! Upstream converges over several events when aggregated roles select each other
//! (`admin` ← `edit` ← `view`); [`aggregate`] repeats its pass until nothing changes,
//! so one call settles the whole chain.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// The aggregated ClusterRoles whose rules differ from `roles`' own, with their new
/// rules in place; the others are left out.
pub fn aggregate(roles: &[ClusterRole]) -> Vec<ClusterRole> {
    let mut current: Vec<ClusterRole> = roles.to_vec();
    let mut order: Vec<usize> = (0..current.len()).collect();
    order.sort_by(|&a, &b| current[a].metadata.name.cmp(&current[b].metadata.name));
    // Each pass can push rules one link further along a chain of aggregated roles.
    for _ in 0..=roles.len() {
        let mut changed = false;
        for i in 0..current.len() {
            let Some(rules) = aggregated_rules(&current, &order, i) else {
                continue;
            };
            if !same_rules(current[i].rules.as_deref(), &rules) {
                current[i].rules = Some(rules);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    current
        .into_iter()
        .zip(roles)
        .filter(|(new, old)| !same_rules(old.rules.as_deref(), list_rules(new)))
        .map(|(new, _)| new)
        .collect()
}

fn list_rules(r: &ClusterRole) -> &[PolicyRule] {
    r.rules.as_deref().unwrap_or(&[])
}

fn same_rules(a: Option<&[PolicyRule]>, b: &[PolicyRule]) -> bool {
    a.unwrap_or(&[]) == b
}

/// The rules `roles[i]` aggregates, or `None` when it has no aggregation rule.
fn aggregated_rules(roles: &[ClusterRole], by_name: &[usize], i: usize) -> Option<Vec<PolicyRule>> {
    let selectors = roles[i]
        .aggregation_rule
        .as_ref()?
        .cluster_role_selectors
        .as_deref()?;
    let me = &roles[i].metadata.name;
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors {
        for &j in by_name {
            let other = &roles[j];
            if &other.metadata.name == me
                || !selector_matches(selector, other.metadata.labels.as_ref())
            {
                continue;
            }
            for rule in list_rules(other) {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// A `LabelSelector` against an object's labels: every `matchLabels` pair and every
/// `matchExpressions` requirement must hold (an empty selector matches everything,
/// as `LabelSelectorAsSelector` makes it). An invalid requirement matches nothing.
pub fn selector_matches(
    selector: &LabelSelector,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let pairs_hold = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    pairs_hold
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_holds(r, labels))
}

fn requirement_holds(r: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => !values.is_empty() && value.is_some_and(|v| values.contains(v)),
        // Values are required here too; without them the selector is invalid.
        "NotIn" => !values.is_empty() && value.is_none_or(|v| !values.contains(v)),
        "Exists" => values.is_empty() && value.is_some(),
        "DoesNotExist" => values.is_empty() && value.is_none(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: if values.is_empty() {
                None
            } else {
                Some(values.iter().map(|v| v.to_string()).collect())
            },
        }
    }

    fn exprs(r: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(r),
            match_labels: None,
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let l = labels(&[("a", "1"), ("b", "2")]);
        let by_labels = LabelSelector {
            match_labels: Some(labels(&[("a", "1")])),
            match_expressions: None,
        };
        assert!(selector_matches(&by_labels, Some(&l)));
        assert!(!selector_matches(&by_labels, None));
        assert!(selector_matches(&LabelSelector::default(), None));
        assert!(selector_matches(
            &exprs(vec![req("a", "In", &["1", "3"])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("a", "In", &["3"])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("z", "In", &["1"])]),
            Some(&l)
        ));
        assert!(selector_matches(
            &exprs(vec![req("a", "NotIn", &["3"])]),
            Some(&l)
        ));
        assert!(selector_matches(
            &exprs(vec![req("z", "NotIn", &["3"])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("a", "NotIn", &["1"])]),
            Some(&l)
        ));
        assert!(selector_matches(
            &exprs(vec![req("b", "Exists", &[])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("z", "Exists", &[])]),
            Some(&l)
        ));
        assert!(selector_matches(
            &exprs(vec![req("z", "DoesNotExist", &[])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("a", "DoesNotExist", &[])]),
            Some(&l)
        ));
        // Invalid requirements match nothing.
        assert!(!selector_matches(
            &exprs(vec![req("a", "In", &[])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("a", "Exists", &["1"])]),
            Some(&l)
        ));
        assert!(!selector_matches(
            &exprs(vec![req("a", "Gt", &["0"])]),
            Some(&l)
        ));
    }
}
