//! Taints and tolerations (upstream `Toleration.ToleratesTaint`).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether one toleration tolerates the taint: same effect (or any), same key (or an
/// empty key with `Exists`), and an equal value for `Equal` (the default operator).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether any toleration tolerates the taint.
pub fn tolerated_by(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The first taint with one of `effects` that no toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tolerated_by(tolerations, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some(op.into()),
            value: Some(value.into()),
            effect: Some(effect.into()),
            toleration_seconds: None,
        }
    }

    #[test]
    fn matching_rules() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        assert!(tolerates(
            &tol("dedicated", "Equal", "gpu", "NoSchedule"),
            &t
        ));
        assert!(tolerates(&tol("dedicated", "Equal", "gpu", ""), &t));
        assert!(!tolerates(
            &tol("dedicated", "Equal", "cpu", "NoSchedule"),
            &t
        ));
        assert!(tolerates(&tol("dedicated", "Exists", "", "NoSchedule"), &t));
        assert!(tolerates(&tol("", "Exists", "", ""), &t));
        assert!(!tolerates(&tol("", "Equal", "", ""), &t));
        assert!(!tolerates(&tol("dedicated", "Exists", "", "NoExecute"), &t));
        let taints = [t, taint("b", "", "PreferNoSchedule")];
        let found = first_untolerated(&taints, &[], &["NoSchedule", "NoExecute"]);
        assert_eq!(found.map(|t| t.key.as_str()), Some("dedicated"));
    }
}
