//! RBAC kinds (upstream pkg/apis/rbac/validation): rules, aggregation rules, bindings and
//! their subjects, and the immutable `roleRef`.

use super::apps::validate_label_selector;
use super::*;

pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Role (`namespaced`) and ClusterRole rules.
pub(crate) fn validate_role(o: &Map<String, Value>, namespaced: bool, errs: &mut Vec<Cause>) {
    for (i, rule) in objs(o, "rules") {
        validate_policy_rule(rule, namespaced, &format!("rules[{i}]"), errs);
    }
    if namespaced {
        return;
    }
    if let Some(aggregation) = obj(o, "aggregationRule") {
        let selectors: Vec<_> = objs(aggregation, "clusterRoleSelectors").collect();
        if selectors.is_empty() {
            errs.push(Cause::required_detail(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, sel) in selectors {
            let p = format!("aggregationRule.clusterRoleSelectors[{i}]");
            validate_label_selector(sel, &p, errs);
        }
    }
}

pub(crate) fn validate_policy_rule(
    rule: &Map<String, Value>,
    namespaced: bool,
    p: &str,
    errs: &mut Vec<Cause>,
) {
    if arr(rule, "verbs").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = arr(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let repr = go_string_list(urls);
        if namespaced {
            errs.push(Cause::invalid_repr(
                format!("{p}.nonResourceURLs"),
                &repr,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        let resource_parts = ["apiGroups", "resources", "resourceNames"];
        if resource_parts.iter().any(|k| !arr(rule, k).is_empty()) {
            errs.push(Cause::invalid_repr(
                format!("{p}.nonResourceURLs"),
                &repr,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if arr(rule, "apiGroups").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if arr(rule, "resources").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

/// `[]string{"a", "b"}` as Go's `%#v` prints a string list in a field error.
pub(crate) fn go_string_list(items: &[Value]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|v| format!("{:?}", v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// RoleBinding (`namespaced`) and ClusterRoleBinding.
pub(crate) fn validate_binding(o: &Map<String, Value>, namespaced: bool, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let role_ref = obj(o, "roleRef").unwrap_or(&empty);
    let group = s(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        errs.push(Cause::not_supported(
            "roleRef.apiGroup",
            group,
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = s(role_ref, "kind");
    if !kinds.contains(&kind) {
        errs.push(Cause::not_supported("roleRef.kind", kind, kinds));
    }
    let name = s(role_ref, "name");
    if name.is_empty() {
        errs.push(Cause::required("roleRef.name"));
    }
    for msg in is_path_segment_name(name) {
        errs.push(Cause::invalid("roleRef.name", name, &msg));
    }
    for (i, subject) in objs(o, "subjects") {
        validate_subject(subject, namespaced, &format!("subjects[{i}]"), errs);
    }
}

pub(crate) fn validate_subject(
    subject: &Map<String, Value>,
    namespaced: bool,
    p: &str,
    errs: &mut Vec<Cause>,
) {
    let name = s(subject, "name");
    if name.is_empty() {
        errs.push(Cause::required(format!("{p}.name")));
    }
    let group = s(subject, "apiGroup");
    match s(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in is_dns1123_subdomain(name) {
                    errs.push(Cause::invalid(format!("{p}.name"), name, &msg));
                }
            }
            if !group.is_empty() {
                errs.push(Cause::not_supported(format!("{p}.apiGroup"), group, &[""]));
            }
            if !namespaced && s(subject, "namespace").is_empty() {
                errs.push(Cause::required(format!("{p}.namespace")));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                errs.push(Cause::not_supported(
                    format!("{p}.apiGroup"),
                    group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errs.push(Cause::not_supported(
            format!("{p}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

/// A binding's `roleRef` never changes: a binding to another role is a new binding.
pub(crate) fn validate_binding_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    if strip(old.get("roleRef")) != strip(new.get("roleRef")) {
        let empty = Map::new();
        let r = obj(new, "roleRef").unwrap_or(&empty);
        // Go's %#v of the internal rbac.RoleRef, as upstream's message prints it.
        let repr = format!(
            "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
            s(r, "apiGroup"),
            s(r, "kind"),
            s(r, "name")
        );
        errs.push(Cause::invalid_repr(
            "roleRef",
            &repr,
            "cannot change roleRef",
        ));
    }
}
