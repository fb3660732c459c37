//! `--controllers` in kube-controller-manager's syntax: a comma-separated list where
//! `*` turns on every controller that is on by default, `name` turns one on and `-name`
//! turns one off.

use thiserror::Error;

/// Every controller this crate has, with whether `*` includes it.
pub const KNOWN: &[(&str, bool)] = &[
    ("replicaset", true),
    ("replicationcontroller", true),
    ("deployment", true),
    ("horizontalpodautoscaling", true),
    ("serviceaccount", true),
    ("daemonset", true),
    ("namespace", true),
    ("job", true),
    ("ttl-after-finished", true),
    ("cronjob", true),
    ("statefulset", true),
    ("garbagecollector", true),
    ("endpointslice", true),
    ("endpoints", true),
    ("endpointslicemirroring", true),
    ("nodelifecycle", true),
    ("taint-eviction-controller", true),
    ("podgc", true),
    ("disruption", true),
    ("resourcequota", true),
    ("persistentvolume-binder", true),
    ("pvc-protection", true),
    ("pv-protection", true),
    ("servicelb", true),
    ("ingress", true),
    ("gateway", true),
    ("clusterrole-aggregation", true),
    ("root-ca-cert-publisher", true),
];

#[derive(Debug, Error, PartialEq)]
pub enum SelectError {
    #[error("--controllers: {0:?} is not in the list of known controllers ({known})", known = known_names())]
    Unknown(String),
}

fn known_names() -> String {
    KNOWN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// Which controllers run.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    star: bool,
    on: Vec<String>,
    off: Vec<String>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            star: true,
            on: Vec::new(),
            off: Vec::new(),
        }
    }
}

impl Selection {
    pub fn parse(list: &str) -> Result<Selection, SelectError> {
        let mut sel = Selection {
            star: false,
            on: Vec::new(),
            off: Vec::new(),
        };
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                sel.star = true;
                continue;
            }
            let (name, target) = match item.strip_prefix('-') {
                Some(n) => (n, &mut sel.off),
                None => (item, &mut sel.on),
            };
            if !KNOWN.iter().any(|(k, _)| *k == name) {
                return Err(SelectError::Unknown(name.to_string()));
            }
            target.push(name.to_string());
        }
        Ok(sel)
    }

    /// Whether the controller `name` runs (an explicit `-name` wins).
    pub fn enabled(&self, name: &str) -> bool {
        if self.off.iter().any(|n| n == name) {
            return false;
        }
        if self.on.iter().any(|n| n == name) {
            return true;
        }
        self.star && KNOWN.iter().any(|(k, default)| *k == name && *default)
    }

    /// The names that run, in `KNOWN` order.
    pub fn names(&self) -> Vec<&'static str> {
        KNOWN
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| self.enabled(n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_controller_manager_syntax() {
        assert_eq!(Selection::default().names().len(), KNOWN.len());
        let s = Selection::parse("*,-deployment,-garbagecollector").unwrap();
        assert!(!s.enabled("deployment") && !s.enabled("garbagecollector"));
        assert!(s.enabled("replicaset") && s.enabled("job"));
        assert_eq!(s.names().len(), KNOWN.len() - 2);
        let s = Selection::parse("replicaset").unwrap();
        assert_eq!(s.names(), ["replicaset"]);
        assert!(Selection::parse("").unwrap().names().is_empty());
        let err = Selection::parse("*,bogus").unwrap_err();
        assert!(
            err.to_string()
                .contains("\"bogus\" is not in the list of known controllers"),
            "{err}"
        );
    }
}
