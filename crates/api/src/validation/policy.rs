//! PodDisruptionBudgets (upstream `ValidatePodDisruptionBudgetSpec`).

use super::apps::{int_or_percent, validate_label_selector};
use super::*;

pub(crate) fn validate_pod_disruption_budget(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if field(spec, "minAvailable").is_some() && field(spec, "maxUnavailable").is_some() {
        errs.push(Cause::invalid_value(
            "spec",
            &Value::Object(spec.clone()),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for key in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = field(spec, key) {
            int_or_percent(v, &format!("spec.{key}"), true, errs);
        }
    }
    if let Some(sel) = obj(spec, "selector") {
        validate_label_selector(sel, "spec.selector", errs);
    }
    if let Some(policy) = field(spec, "unhealthyPodEvictionPolicy") {
        let valid = ["AlwaysAllow", "IfHealthyBudget"];
        let value = policy.as_str().unwrap_or_default();
        if !valid.contains(&value) {
            errs.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                value,
                &valid,
            ));
        }
    }
}
