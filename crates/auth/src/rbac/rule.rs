//! Does one `PolicyRule` allow a request (upstream's `RuleAllows` and the
//! `evaluation_helpers` matchers): verbs and API groups with `*`, resources with `*`,
//! `resource/subresource` and `*/subresource`, resource names (none listed = all),
//! non-resource URLs exact, `*`, or a prefix ending in `*`.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::attributes::Attributes;

/// Whether `rule` allows the request described by `attrs`.
pub fn rule_allows(attrs: &Attributes<'_>, rule: &PolicyRule) -> bool {
    if !verb_matches(rule, attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return non_resource_url_matches(rule, attrs.path);
    }
    api_group_matches(rule, attrs.api_group)
        && resource_matches(rule, attrs.resource, attrs.subresource)
        && resource_name_matches(rule, attrs.name)
}

/// Whether any of `rules` allows the request.
pub fn rules_allow(attrs: &Attributes<'_>, rules: &[PolicyRule]) -> bool {
    rules.iter().any(|r| rule_allows(attrs, r))
}

pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups)
        .iter()
        .any(|g| g == "*" || g == group)
}

/// Matches `resource` or, with a subresource, `resource/subresource` and
/// `*/subresource`; upstream compares against the combined string, so a rule for
/// `pods` does not cover `pods/log`.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        if r == "*" {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        match r.split_once('/') {
            Some((res, sub)) => sub == subresource && (res == resource || res == "*"),
            None => false,
        }
    })
}

pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| {
        if u == "*" || u == path {
            return true;
        }
        // Upstream trims every trailing `*`, so `/a**` is the prefix `/a` too.
        u.ends_with('*') && path.starts_with(u.trim_end_matches('*'))
    })
}

/// An optional list as a slice (absent = empty).
pub(crate) fn list<T>(v: &Option<Vec<T>>) -> &[T] {
    v.as_deref().unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::UserInfo;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| Some(s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        PolicyRule {
            verbs: s(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: if names.is_empty() { None } else { v(names) },
            non_resource_urls: None,
        }
    }

    fn s(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: s(verbs),
            non_resource_urls: Some(s(urls)),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn verbs_groups_and_resources() {
        let u = UserInfo::new("u", vec![]);
        let r = rule(&["get", "list"], &[""], &["pods"], &[]);
        assert!(rule_allows(
            &Attributes::resource(&u, "get", "", "pods"),
            &r
        ));
        assert!(!rule_allows(
            &Attributes::resource(&u, "delete", "", "pods"),
            &r
        ));
        assert!(!rule_allows(
            &Attributes::resource(&u, "get", "apps", "pods"),
            &r
        ));
        assert!(!rule_allows(
            &Attributes::resource(&u, "get", "", "pods").subresource("log"),
            &r
        ));
        let star = rule(&["*"], &["*"], &["*"], &[]);
        assert!(rule_allows(
            &Attributes::resource(&u, "escalate", "x.io", "y").subresource("z"),
            &star
        ));
    }

    #[test]
    fn subresource_forms() {
        let u = UserInfo::new("u", vec![]);
        let log = Attributes::resource(&u, "get", "", "pods").subresource("log");
        assert!(rule_allows(
            &log,
            &rule(&["get"], &[""], &["pods/log"], &[])
        ));
        assert!(rule_allows(&log, &rule(&["get"], &[""], &["*/log"], &[])));
        assert!(!rule_allows(&log, &rule(&["get"], &[""], &["*/exec"], &[])));
        assert!(!rule_allows(
            &log,
            &rule(&["get"], &[""], &["nodes/log"], &[])
        ));
        // `pods/*` is not a pattern upstream: only an exact `pods/*` subresource.
        assert!(!rule_allows(&log, &rule(&["get"], &[""], &["pods/*"], &[])));
        let scale = Attributes::resource(&u, "get", "apps", "deployments").subresource("scale");
        assert!(rule_allows(
            &scale,
            &rule(&["get"], &["*"], &["*/scale"], &[])
        ));
    }

    #[test]
    fn resource_names() {
        let u = UserInfo::new("u", vec![]);
        let r = rule(&["get"], &[""], &["configmaps"], &["a"]);
        let get = |n| Attributes::resource(&u, "get", "", "configmaps").name(n);
        assert!(rule_allows(&get("a"), &r));
        assert!(!rule_allows(&get("b"), &r));
        assert!(!rule_allows(&get(""), &r));
    }

    #[test]
    fn non_resource_urls() {
        let u = UserInfo::anonymous();
        let r = urls(&["get"], &["/healthz", "/api/*", "/apis*"]);
        let get = |p| Attributes::non_resource(&u, "get", p);
        assert!(rule_allows(&get("/healthz"), &r));
        assert!(!rule_allows(&get("/healthz/etcd"), &r));
        assert!(rule_allows(&get("/api/v1"), &r));
        assert!(!rule_allows(&get("/api"), &r));
        assert!(rule_allows(&get("/apis"), &r));
        assert!(rule_allows(&get("/apisx"), &r));
        assert!(!rule_allows(
            &Attributes::non_resource(&u, "post", "/healthz"),
            &r
        ));
        assert!(rule_allows(&get("/anything"), &urls(&["*"], &["*"])));
        // A resource rule never matches a path and vice versa.
        assert!(!rule_allows(
            &get("/healthz"),
            &rule(&["*"], &["*"], &["*"], &[])
        ));
        assert!(!rule_allows(
            &Attributes::resource(&u, "get", "", "pods"),
            &r
        ));
    }
}
