//! Defaults of the admissionregistration/v1 kinds (`SetDefaults_*Webhook`,
//! `SetDefaults_Rule`, `SetDefaults_ServiceReference`, and the policies' match resources).
//! `sideEffects` and `admissionReviewVersions` have no v1 default: validation requires them.

use serde_json::{json, Map, Value};

use super::{is_unset, set_default_str};

/// Every webhook's failure and match policies, selectors, timeout, rule scopes, service
/// port, and (mutating) reinvocation policy.
pub(crate) fn default_webhooks(o: &mut Map<String, Value>, mutating: bool) {
    let Some(webhooks) = o.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for w in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        set_default_str(w, "failurePolicy", "Fail");
        set_default_str(w, "matchPolicy", "Equivalent");
        for key in ["namespaceSelector", "objectSelector"] {
            if is_unset(w.get(key)) {
                w.insert(key.into(), json!({}));
            }
        }
        if is_unset(w.get("timeoutSeconds")) {
            w.insert("timeoutSeconds".into(), json!(10));
        }
        if mutating {
            set_default_str(w, "reinvocationPolicy", "Never");
        }
        let rules = w.get_mut("rules").and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            set_default_str(rule, "scope", "*");
        }
        let service = w
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut);
        if let Some(service) = service {
            if is_unset(service.get("port")) {
                service.insert("port".into(), json!(443));
            }
        }
    }
}

/// A policy's failurePolicy and its matchConstraints' match policy and selectors.
pub(crate) fn default_policy(o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default_str(spec, "failurePolicy", "Fail");
    if let Some(m) = spec
        .get_mut("matchConstraints")
        .and_then(Value::as_object_mut)
    {
        default_match_resources(m);
    }
}

/// A binding's matchResources, when it has them.
pub(crate) fn default_policy_binding(o: &mut Map<String, Value>) {
    let m = o
        .get_mut("spec")
        .and_then(|s| s.get_mut("matchResources"))
        .and_then(Value::as_object_mut);
    if let Some(m) = m {
        default_match_resources(m);
    }
}

pub(crate) fn default_match_resources(m: &mut Map<String, Value>) {
    set_default_str(m, "matchPolicy", "Equivalent");
    for key in ["namespaceSelector", "objectSelector"] {
        if is_unset(m.get(key)) {
            m.insert(key.into(), json!({}));
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        let rules = m.get_mut(list).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            set_default_str(rule, "scope", "*");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_get_upstreams_defaults() {
        let mut o = json!({"webhooks": [{"name": "a.b.c", "clientConfig": {"service": {"namespace": "n", "name": "s"}},
            "rules": [{"operations": ["CREATE"]}], "timeoutSeconds": 3}]});
        default_webhooks(o.as_object_mut().unwrap(), true);
        let w = &o["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["namespaceSelector"], json!({}));
        assert_eq!(w["objectSelector"], json!({}));
        assert_eq!(w["timeoutSeconds"], 3);
        assert_eq!(w["reinvocationPolicy"], "Never");
        assert_eq!(w["rules"][0]["scope"], "*");
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
        assert!(w.get("sideEffects").is_none());
        let mut v = json!({"webhooks": [{"name": "a.b.c"}]});
        default_webhooks(v.as_object_mut().unwrap(), false);
        assert_eq!(v["webhooks"][0]["timeoutSeconds"], 10);
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
    }

    #[test]
    fn policies_and_bindings_get_match_defaults() {
        let mut p =
            json!({"spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"]}]}}});
        default_policy(p.as_object_mut().unwrap());
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            p["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        let mut b = json!({"spec": {"policyName": "p"}});
        default_policy_binding(b.as_object_mut().unwrap());
        assert!(b["spec"].get("matchResources").is_none());
    }
}
