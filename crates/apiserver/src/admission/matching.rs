//! Which writes a policy's or webhook's rules select: `rules` / `resourceRules`
//! (operations, groups, versions, resources with subresources, scope) and label
//! selectors over the object and its namespace, with upstream's semantics.

use cairn_api::registry::ResourceInfo;
use cairn_semantics::selector::{Labels, Selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// The write a rule is matched against.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub resource: &'a ResourceInfo,
    /// `status`, `scale`, ... for a write through a subresource.
    pub subresource: Option<&'a str>,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'a str,
}

/// Whether `pattern` (a rule's `resources` entry) selects `plural` with `subresource`:
/// `*` every resource but no subresource, `*/*` everything, `pods/*` pods and all their
/// subresources, `*/status` every status subresource, `pods/status` exactly that.
pub fn resource_matches(pattern: &str, plural: &str, subresource: Option<&str>) -> bool {
    let (res, sub) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let res_ok = res == "*" || res == plural;
    let sub_ok = match (sub, subresource) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some("*"), _) => true,
        (Some(s), Some(actual)) => s == actual,
        (Some(_), None) => false,
    };
    res_ok && sub_ok
}

/// One rule (`RuleWithOperations` / `NamedRuleWithOperations`, as JSON). `exact_version`
/// is `matchPolicy: Exact`; `Equivalent` (the default) accepts any version of the group
/// and resource, since every version cairn serves of a resource holds the same objects.
pub fn rule_matches(rule: &Value, t: Target<'_>, exact_version: bool) -> bool {
    let listed = |key: &str, value: &str| {
        rule[key]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "*" || x.as_str() == Some(value)))
    };
    let scope_ok = match rule["scope"].as_str() {
        Some("Namespaced") => t.resource.namespaced,
        Some("Cluster") => !t.resource.namespaced,
        _ => true,
    };
    let resources_ok = rule["resources"].as_array().is_some_and(|l| {
        l.iter()
            .filter_map(Value::as_str)
            .any(|p| resource_matches(p, t.resource.plural, t.subresource))
    });
    let version_ok = !exact_version || listed("apiVersions", t.resource.version);
    listed("apiGroups", t.resource.group)
        && version_ok
        && rule["apiVersions"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
        && resources_ok
        && listed("operations", t.operation)
        && scope_ok
}

/// Whether a `metav1.LabelSelector` (JSON; absent = everything) selects `labels`. A
/// selector that does not parse selects nothing (validation refuses such selectors).
pub fn selector_matches(selector: &Value, labels: &Labels) -> bool {
    if selector.is_null() {
        return true;
    }
    serde_json::from_value::<LabelSelector>(selector.clone())
        .ok()
        .and_then(|s| Selector::from_label_selector(&s).ok())
        .is_some_and(|s| s.matches(labels))
}

/// An object's labels (none when it has none or is absent).
pub fn labels_of(obj: Option<&Value>) -> Labels {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `objectSelector`: the new object's or the old object's labels, as upstream matches
/// either (a DELETE has only the old one).
pub fn object_selector_matches(
    selector: &Value,
    object: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    if selector.is_null() {
        return true;
    }
    [object, old]
        .into_iter()
        .flatten()
        .any(|o| selector_matches(selector, &labels_of(Some(o))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_api::registry;
    use serde_json::json;

    fn target(
        plural: &str,
        group: &str,
        sub: Option<&'static str>,
        op: &'static str,
    ) -> Target<'static> {
        let r = registry::RESOURCES
            .iter()
            .find(|r| r.plural == plural && r.group == group)
            .unwrap();
        Target {
            resource: r,
            subresource: sub,
            operation: op,
        }
    }

    #[test]
    fn resource_patterns_follow_upstream_subresource_forms() {
        assert!(resource_matches("*", "pods", None));
        assert!(!resource_matches("*", "pods", Some("status")));
        assert!(resource_matches("*/*", "pods", Some("status")));
        assert!(resource_matches("pods/*", "pods", None));
        assert!(resource_matches("pods/*", "pods", Some("exec")));
        assert!(resource_matches("*/status", "deployments", Some("status")));
        assert!(!resource_matches("*/status", "deployments", None));
        assert!(resource_matches("pods/status", "pods", Some("status")));
        assert!(!resource_matches("pods/status", "pods", Some("binding")));
        assert!(!resource_matches("pods", "services", None));
    }

    #[test]
    fn rules_match_by_group_version_resource_operation_and_scope() {
        let rule = json!({"apiGroups": ["apps"], "apiVersions": ["v1beta1"], "resources": ["deployments"],
            "operations": ["CREATE"], "scope": "Namespaced"});
        let create = target("deployments", "apps", None, "CREATE");
        assert!(
            rule_matches(&rule, create, false),
            "Equivalent ignores the version"
        );
        assert!(!rule_matches(&rule, create, true), "Exact does not");
        assert!(!rule_matches(
            &rule,
            target("deployments", "apps", None, "UPDATE"),
            false
        ));
        let any = json!({"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Namespaced"});
        assert!(!rule_matches(
            &any,
            target("nodes", "", None, "CREATE"),
            false
        ));
        assert!(rule_matches(&any, target("pods", "", None, "DELETE"), true));
        assert!(!rule_matches(
            &any,
            target("pods", "", Some("status"), "UPDATE"),
            true
        ));
        assert!(!rule_matches(&json!("garbage"), create, false));
    }

    #[test]
    fn object_selector_accepts_old_or_new_labels() {
        let sel = json!({"matchLabels": {"tier": "web"}});
        let web = json!({"metadata": {"labels": {"tier": "web"}}});
        let db = json!({"metadata": {"labels": {"tier": "db"}}});
        assert!(object_selector_matches(&sel, Some(&db), Some(&web)));
        assert!(object_selector_matches(&sel, None, Some(&web)));
        assert!(!object_selector_matches(&sel, Some(&db), None));
        assert!(object_selector_matches(&Value::Null, Some(&db), None));
        assert!(!selector_matches(
            &json!({"matchLabels": 3}),
            &Labels::new()
        ));
    }
}
