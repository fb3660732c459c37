//! Typed label selectors (`metav1.LabelSelector`) and node selector terms
//! (`v1.NodeSelector`), compiled once and matched many times.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("{0:?} is not a valid label selector operator")]
    Operator(String),
    #[error("{op} operator for key {key:?} needs {need}")]
    Values {
        key: String,
        op: String,
        need: &'static str,
    },
    #[error("{0:?} is not a supported node field selector key (only metadata.name)")]
    Field(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(&self.key);
        match &self.op {
            Op::In(vals) => v.is_some_and(|v| vals.contains(v)),
            Op::NotIn(vals) => v.is_none_or(|v| !vals.contains(v)),
            Op::Exists => v.is_some(),
            Op::DoesNotExist => v.is_none(),
            Op::Gt(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Op::Lt(n) => v
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }

    fn parse(key: &str, op: &str, values: &[String], numeric: bool) -> Result<Self, SelectorError> {
        let need = |need| SelectorError::Values {
            key: key.to_string(),
            op: op.to_string(),
            need,
        };
        let op = match op {
            "In" | "NotIn" if values.is_empty() => return Err(need("at least one value")),
            "In" => Op::In(values.to_vec()),
            "NotIn" => Op::NotIn(values.to_vec()),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(need("no values")),
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            "Gt" | "Lt" if numeric => {
                let n = match values {
                    [v] => v.parse::<i64>().map_err(|_| need("one integer value"))?,
                    _ => return Err(need("one integer value")),
                };
                if op == "Gt" {
                    Op::Gt(n)
                } else {
                    Op::Lt(n)
                }
            }
            other => return Err(SelectorError::Operator(other.to_string())),
        };
        Ok(Requirement {
            key: key.to_string(),
            op,
        })
    }
}

/// A compiled label selector. `LabelSelector {}` selects everything; a missing selector
/// is the caller's to decide (in affinity terms it selects nothing).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    pub fn everything() -> Selector {
        Selector::default()
    }

    pub fn nothing() -> Selector {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    pub fn from_label_selector(s: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: k.clone(),
                op: Op::In(vec![v.clone()]),
            });
        }
        for e in s.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            requirements.push(Requirement::parse(&e.key, &e.operator, &values, false)?);
        }
        Ok(Selector {
            requirements,
            nothing: false,
        })
    }

    /// An equality selector from a plain map (Services, ReplicationControllers).
    pub fn from_map(m: &BTreeMap<String, String>) -> Selector {
        Selector {
            requirements: m
                .iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    op: Op::In(vec![v.clone()]),
                })
                .collect(),
            nothing: false,
        }
    }

    /// Adds `key in (value)` (matchLabelKeys of spread and affinity terms).
    pub fn and_equals(&mut self, key: &str, value: &str) {
        self.requirements.push(Requirement {
            key: key.to_string(),
            op: Op::In(vec![value.to_string()]),
        });
    }

    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
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
        let conv = |reqs: &Option<Vec<NodeSelectorRequirement>>, field: bool| {
            reqs.iter()
                .flatten()
                .map(|r| {
                    if field && r.key != "metadata.name" {
                        return Err(SelectorError::Field(r.key.clone()));
                    }
                    let values = r.values.clone().unwrap_or_default();
                    Requirement::parse(&r.key, &r.operator, &values, !field)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(NodeTerm {
            labels: conv(&t.match_expressions, false)?,
            names: conv(&t.match_fields, true)?,
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
