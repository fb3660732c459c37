//! Typed label selectors (`metav1.LabelSelector`) and node selector terms
//! (`v1.NodeSelector`), compiled once and matched many times. The requirements and their
//! matching are `cairn-apimachinery`'s (upstream's `labels` package): this module only
//! reads the typed k8s-openapi forms into them.

use std::collections::BTreeMap;

use cairn_apimachinery::selector::{
    self as labels, LabelSelector as Compiled, Operator, Requirement,
};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("{0:?} is not a valid label selector operator")]
    Operator(String),
    #[error(transparent)]
    Requirement(#[from] labels::SelectorError),
    #[error("{0:?} is not a supported node field selector key (only metadata.name)")]
    Field(String),
}

/// The operator a typed requirement names; `Gt`/`Lt` only in node selectors (`numeric`).
fn operator(op: &str, numeric: bool) -> Result<Operator, SelectorError> {
    Operator::from_api(op, numeric).ok_or_else(|| SelectorError::Operator(op.to_string()))
}

/// A validated requirement (upstream's `labels.NewRequirement`).
fn requirement(
    key: &str,
    op: &str,
    values: &Option<Vec<String>>,
    numeric: bool,
) -> Result<Requirement, SelectorError> {
    let values = values.clone().unwrap_or_default();
    Ok(Requirement::new(key, operator(op, numeric)?, values)?)
}

/// A compiled label selector. `LabelSelector {}` selects everything; a missing selector
/// is the caller's to decide (in affinity terms it selects nothing).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Selector(Compiled);

impl Selector {
    pub fn everything() -> Selector {
        Selector(Compiled::everything())
    }

    pub fn nothing() -> Selector {
        Selector(Compiled::nothing())
    }

    /// Upstream's `LabelSelectorAsSelector`: matchLabels as `=`, matchExpressions as given.
    pub fn from_label_selector(s: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            requirements.push(Requirement::new(
                k.as_str(),
                Operator::Equals,
                vec![v.clone()],
            )?);
        }
        for e in s.match_expressions.iter().flatten() {
            requirements.push(requirement(&e.key, &e.operator, &e.values, false)?);
        }
        Ok(Selector(Compiled::from_requirements(requirements)))
    }

    /// An equality selector from a plain map (Services, ReplicationControllers): upstream's
    /// `SelectorFromValidatedSet`, the map having been validated with its object.
    pub fn from_map(m: &BTreeMap<String, String>) -> Selector {
        Selector(Compiled::from_validated_set(m))
    }

    /// Adds `key in (value)` (matchLabelKeys of spread and affinity terms, whose values
    /// are the pod's own validated labels).
    pub fn and_equals(&mut self, key: &str, value: &str) {
        self.0
            .and_validated(key, Operator::In, vec![value.to_string()]);
    }

    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.matches(labels)
    }
}

/// One compiled `NodeSelectorTerm`: label expressions and `metadata.name` fields, ANDed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTerm {
    labels: Vec<Requirement>,
    names: Vec<Requirement>,
}

impl NodeTerm {
    pub fn compile(t: &NodeSelectorTerm) -> Result<NodeTerm, SelectorError> {
        let labels = t.match_expressions.iter().flatten();
        let names = t.match_fields.iter().flatten();
        Ok(NodeTerm {
            labels: labels
                .map(|r| requirement(&r.key, &r.operator, &r.values, true))
                .collect::<Result<_, _>>()?,
            names: names.map(name_requirement).collect::<Result<_, _>>()?,
        })
    }

    /// An empty term matches no node (upstream's rule).
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        if self.labels.is_empty() && self.names.is_empty() {
            return false;
        }
        let fields = BTreeMap::from([("metadata.name".to_string(), node_name.to_string())]);
        self.labels.iter().all(|r| r.matches(labels))
            && self.names.iter().all(|r| r.matches(&fields))
    }
}

/// A `matchFields` requirement: only `metadata.name`, whose values are node names, not
/// label values (so they are not checked as label values).
fn name_requirement(r: &NodeSelectorRequirement) -> Result<Requirement, SelectorError> {
    if r.key != "metadata.name" {
        return Err(SelectorError::Field(r.key.clone()));
    }
    let values = r.values.clone().unwrap_or_default();
    Ok(Requirement::validated(
        r.key.as_str(),
        operator(&r.operator, false)?,
        values,
    ))
}

/// A compiled `NodeSelector`: its terms are ORed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTerms(Vec<NodeTerm>);

impl NodeSelectorTerms {
    pub fn compile(s: &NodeSelector) -> Result<NodeSelectorTerms, SelectorError> {
        s.node_selector_terms
            .iter()
            .map(NodeTerm::compile)
            .collect::<Result<Vec<_>, _>>()
            .map(NodeSelectorTerms)
    }

    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        self.0.iter().any(|t| t.matches(node_name, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn label_selectors() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        })
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[])));
        assert!(Selector::everything().matches(&labels(&[])));
        assert!(!Selector::nothing().matches(&labels(&[])));
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert_eq!(
            Selector::from_label_selector(&bad),
            Err(SelectorError::Operator("Near".into()))
        );
    }

    #[test]
    fn node_terms_all_operators() {
        let l = labels(&[("zone", "a"), ("cores", "8"), ("ssd", "")]);
        let term = |reqs: Vec<NodeSelectorRequirement>| {
            NodeTerm::compile(&NodeSelectorTerm {
                match_expressions: Some(reqs),
                match_fields: None,
            })
            .unwrap()
        };
        assert!(term(vec![expr("zone", "In", &["a", "b"])]).matches("n", &l));
        assert!(!term(vec![expr("zone", "NotIn", &["a"])]).matches("n", &l));
        assert!(term(vec![expr("ssd", "Exists", &[])]).matches("n", &l));
        assert!(term(vec![expr("gpu", "DoesNotExist", &[])]).matches("n", &l));
        assert!(term(vec![expr("cores", "Gt", &["4"])]).matches("n", &l));
        assert!(!term(vec![expr("cores", "Lt", &["4"])]).matches("n", &l));
        assert!(!term(vec![expr("zone", "Gt", &["4"])]).matches("n", &l));
        assert!(!term(vec![]).matches("n", &l), "empty term matches nothing");
        let by_name = NodeTerm::compile(&NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![expr("metadata.name", "In", &["n1"])]),
        })
        .unwrap();
        assert!(by_name.matches("n1", &l) && !by_name.matches("n2", &l));
        assert!(NodeTerm::compile(&NodeSelectorTerm {
            match_expressions: Some(vec![expr("cores", "Gt", &["x"])]),
            match_fields: None
        })
        .is_err());
    }
}
