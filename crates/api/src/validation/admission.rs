//! MutatingWebhookConfiguration and ValidatingWebhookConfiguration, as upstream's
//! admissionregistration validation words it (matchConditions' CEL is compiled by the
//! server, which has the CEL library).

use std::collections::HashSet;

use super::rbac::go_string_list;
use super::*;

/// Most matchConditions one webhook may have.
pub(crate) const MAX_MATCH_CONDITIONS: usize = 64;

pub(crate) fn validate_webhook_configuration(
    o: &Map<String, Value>,
    mutating: bool,
    errs: &mut Vec<Cause>,
) {
    let mut names = HashSet::new();
    for (i, w) in objs(o, "webhooks") {
        let p = format!("webhooks[{i}]");
        let name = s(w, "name");
        validate_webhook_name(&format!("{p}.name"), name, errs);
        if !name.is_empty() && !names.insert(name) {
            errs.push(Cause::duplicate(format!("{p}.name"), name));
        }
        validate_side_effects(w, &p, errs);
        validate_review_versions(w, &p, errs);
        if let Some(t) = int(w, "timeoutSeconds") {
            if !(1..=30).contains(&t) {
                errs.push(Cause::invalid_repr(
                    format!("{p}.timeoutSeconds"),
                    &t.to_string(),
                    "the timeout value must be between 1 and 30 seconds",
                ));
            }
        }
        validate_client_config(w, &p, errs);
        for (j, rule) in objs(w, "rules") {
            validate_rule(rule, &format!("{p}.rules[{j}]"), errs);
        }
        validate_policies(w, &p, mutating, errs);
        for key in ["namespaceSelector", "objectSelector"] {
            if let Some(sel) = obj(w, key) {
                validate_label_selector(sel, &format!("{p}.{key}"), errs);
            }
        }
        validate_match_conditions(w, &p, errs);
    }
}

/// A fully qualified name: a DNS subdomain of at least three segments.
pub(crate) fn validate_webhook_name(p: &str, name: &str, errs: &mut Vec<Cause>) {
    if name.is_empty() {
        errs.push(Cause::required(p));
        return;
    }
    let problems = is_dns1123_subdomain(name);
    if !problems.is_empty() {
        for m in problems {
            errs.push(Cause::invalid(p, name, &m));
        }
        return;
    }
    if name.split('.').count() < 3 {
        errs.push(Cause::invalid(
            p,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

pub(crate) fn validate_side_effects(w: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    match s(w, "sideEffects") {
        "" => errs.push(Cause::required_detail(
            format!("{p}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        "None" | "NoneOnDryRun" => {}
        other => errs.push(Cause::not_supported(
            format!("{p}.sideEffects"),
            other,
            &["None", "NoneOnDryRun"],
        )),
    }
}

pub(crate) fn validate_review_versions(w: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let fp = format!("{p}.admissionReviewVersions");
    let versions: Vec<&str> = arr(w, "admissionReviewVersions")
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect();
    if versions.is_empty() {
        errs.push(Cause::required_detail(
            fp,
            "must specify one of v1, v1beta1",
        ));
        return;
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        for m in is_dns1035_label(v) {
            errs.push(Cause::invalid(format!("{fp}[{i}]"), v, &m));
        }
        if !seen.insert(*v) {
            errs.push(Cause::invalid(format!("{fp}[{i}]"), v, "duplicate version"));
        }
    }
    if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
        let repr = go_string_list(arr(w, "admissionReviewVersions"));
        errs.push(Cause::invalid_repr(
            fp,
            &repr,
            "must include at least one of v1, v1beta1",
        ));
    }
}

pub(crate) fn validate_client_config(w: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let cc = obj(w, "clientConfig").unwrap_or(&empty);
    let p = format!("{p}.clientConfig");
    match (cc.get("url").and_then(Value::as_str), obj(cc, "service")) {
        (Some(url), None) => validate_url(url, &format!("{p}.url"), errs),
        (None, Some(service)) => validate_service(service, &format!("{p}.service"), errs),
        _ => errs.push(Cause::required_detail(
            p,
            "exactly one of url or service is required",
        )),
    }
}

/// `https://host[:port][/path]`, without user information, query or fragment.
pub(crate) fn validate_url(url: &str, p: &str, errs: &mut Vec<Cause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let Some((scheme, rest)) = url.split_once("://") else {
        errs.push(Cause::required_detail(
            p,
            &format!("url must be a valid URL: parse {url:?}: missing protocol scheme{FORM}"),
        ));
        return;
    };
    if scheme != "https" {
        errs.push(Cause::invalid(
            p,
            scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        errs.push(Cause::invalid(
            p,
            url,
            "user information is not permitted in the URL",
        ));
    }
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        errs.push(Cause::invalid(
            p,
            url,
            &format!("host must be specified{FORM}"),
        ));
    }
    if url.contains('#') {
        errs.push(Cause::invalid(
            p,
            url,
            "fragments are not permitted in the URL",
        ));
    }
    if url.contains('?') {
        errs.push(Cause::invalid(
            p,
            url,
            "query parameters are not permitted in the URL",
        ));
    }
}

pub(crate) fn validate_service(service: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    if s(service, "name").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.name"),
            "service name is required",
        ));
    }
    if s(service, "namespace").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.namespace"),
            "service namespace is required",
        ));
    }
    if let Some(port) = int(service, "port") {
        if !(1..=65535).contains(&port) {
            errs.push(Cause::invalid_repr(
                format!("{p}.port"),
                &port.to_string(),
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
    let path = s(service, "path");
    if path.is_empty() || path == "/" {
        return;
    }
    if !path.starts_with('/') {
        errs.push(Cause::invalid(
            format!("{p}.path"),
            path,
            "must start with a '/'",
        ));
        return;
    }
    let trimmed = path.strip_suffix('/').unwrap_or(path);
    for (i, segment) in trimmed[1..].split('/').enumerate() {
        if segment.is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.path"),
                path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in is_dns1123_subdomain(segment) {
            errs.push(Cause::invalid(
                format!("{p}.path"),
                path,
                &format!("segment[{i}]: {m}"),
            ));
        }
    }
}

/// A list that must not be empty, where `*` excludes other entries.
pub(crate) fn validate_wildcard_list(
    rule: &Map<String, Value>,
    key: &str,
    what: &str,
    p: &str,
    errs: &mut Vec<Cause>,
) {
    let items: Vec<&str> = arr(rule, key)
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect();
    if items.is_empty() {
        errs.push(Cause::required(format!("{p}.{key}")));
        return;
    }
    if items.len() > 1 && items.contains(&"*") {
        let repr = go_string_list(arr(rule, key));
        errs.push(Cause::invalid_repr(
            format!("{p}.{key}"),
            &repr,
            &format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

pub(crate) fn validate_rule(rule: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    validate_wildcard_list(rule, "operations", "operations", p, errs);
    for (i, op) in arr(rule, "operations").iter().enumerate() {
        let op = op.as_str().unwrap_or("");
        if !matches!(op, "*" | "CONNECT" | "CREATE" | "DELETE" | "UPDATE") {
            errs.push(Cause::not_supported(
                format!("{p}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    validate_wildcard_list(rule, "apiGroups", "API groups", p, errs);
    validate_wildcard_list(rule, "apiVersions", "API versions", p, errs);
    for (i, v) in arr(rule, "apiVersions").iter().enumerate() {
        if v.as_str().unwrap_or("").is_empty() {
            errs.push(Cause::required(format!("{p}.apiVersions[{i}]")));
        }
    }
    validate_resources(rule, p, errs);
    let scope = s(rule, "scope");
    if !matches!(scope, "" | "*" | "Cluster" | "Namespaced") {
        errs.push(Cause::not_supported(
            format!("{p}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}

/// `resources`: `*/*` alone; `*` excludes other plain resources; `r/*` excludes `r/sub`;
/// `*/sub` excludes `r/sub`.
pub(crate) fn validate_resources(rule: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let fp = format!("{p}.resources");
    let items: Vec<&str> = arr(rule, "resources")
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect();
    if items.is_empty() {
        errs.push(Cause::required(fp));
        return;
    }
    let repr = || go_string_list(arr(rule, "resources"));
    if items.contains(&"*/*") && items.len() > 1 {
        errs.push(Cause::invalid_repr(
            &fp,
            &repr(),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    let plain = items.iter().filter(|r| !r.contains('/')).count();
    if items.contains(&"*") && plain > 1 {
        errs.push(Cause::invalid_repr(
            &fp,
            &repr(),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    for (i, item) in items.iter().enumerate() {
        if item.is_empty() {
            errs.push(Cause::required(format!("{fp}[{i}]")));
            continue;
        }
        let Some((res, sub)) = item.split_once('/') else {
            continue;
        };
        if res != "*" && sub != "*" {
            if items.contains(&format!("{res}/*").as_str()) {
                errs.push(Cause::invalid(
                    format!("{fp}[{i}]"),
                    item,
                    &format!("if '{res}/*' is present, must not specify {item}"),
                ));
            }
            if items.contains(&format!("*/{sub}").as_str()) {
                errs.push(Cause::invalid(
                    format!("{fp}[{i}]"),
                    item,
                    &format!("if '*/{sub}' is present, must not specify {item}"),
                ));
            }
        }
    }
}

pub(crate) fn validate_policies(
    w: &Map<String, Value>,
    p: &str,
    mutating: bool,
    errs: &mut Vec<Cause>,
) {
    let mut check = |key: &str, supported: &[&str]| {
        let v = s(w, key);
        if !v.is_empty() && !supported.contains(&v) {
            errs.push(Cause::not_supported(format!("{p}.{key}"), v, supported));
        }
    };
    check("failurePolicy", &["Fail", "Ignore"]);
    check("matchPolicy", &["Equivalent", "Exact"]);
    if mutating {
        check("reinvocationPolicy", &["IfNeeded", "Never"]);
    }
}

pub(crate) fn validate_match_conditions(w: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let conditions = arr(w, "matchConditions");
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(Cause::too_many(
            format!("{p}.matchConditions"),
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = HashSet::new();
    for (k, c) in objs(w, "matchConditions") {
        let cp = format!("{p}.matchConditions[{k}]");
        let name = s(c, "name");
        if name.is_empty() {
            errs.push(Cause::required(format!("{cp}.name")));
        } else {
            for m in is_qualified_name(name) {
                errs.push(Cause::invalid(format!("{cp}.name"), name, &m));
            }
            if !names.insert(name) {
                errs.push(Cause::duplicate(format!("{cp}.name"), name));
            }
        }
        if s(c, "expression").is_empty() {
            errs.push(Cause::required(format!("{cp}.expression")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(config: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_webhook_configuration(config.as_object().unwrap(), true, &mut errs);
        errs.iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn good() -> Value {
        json!({"webhooks": [{"name": "check.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://hooks.example.com:8443/check"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/status"], "scope": "*"}]}]})
    }

    #[test]
    fn a_good_configuration_passes() {
        assert_eq!(causes(good()), Vec::<String>::new());
        let mut svc = good();
        svc["webhooks"][0]["clientConfig"] = json!({"service": {"namespace": "ns", "name": "hook", "path": "/mutate/pods", "port": 8443}});
        assert_eq!(causes(svc), Vec::<String>::new());
    }

    #[test]
    fn upstream_messages_for_bad_webhooks() {
        let mut bad = good();
        let w = &mut bad["webhooks"][0];
        w["name"] = json!("short.name");
        w["sideEffects"] = json!("Some");
        w["admissionReviewVersions"] = json!(["v2"]);
        w["timeoutSeconds"] = json!(31);
        w["clientConfig"] = json!({"url": "http://user@h/x?q=1"});
        w["rules"][0]["operations"] = json!(["*", "CREATE"]);
        w["rules"][0]["resources"] = json!(["*/*", "pods"]);
        w["failurePolicy"] = json!("Sometimes");
        w["matchConditions"] =
            json!([{"name": "a", "expression": "true"}, {"name": "a", "expression": ""}]);
        let got = causes(bad);
        for expected in [
            "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            "webhooks[0].clientConfig.url: Invalid value: \"http://user@h/x?q=1\": user information is not permitted in the URL",
            "webhooks[0].clientConfig.url: Invalid value: \"http://user@h/x?q=1\": query parameters are not permitted in the URL",
            "webhooks[0].rules[0].operations: Invalid value: []string{\"*\", \"CREATE\"}: if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].resources: Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources",
            "webhooks[0].failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
            "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
            "webhooks[0].matchConditions[1].expression: Required value",
        ] {
            assert!(got.iter().any(|g| g == expected), "missing {expected:?} in {got:#?}");
        }
    }

    #[test]
    fn required_fields_and_client_config_shape() {
        let got = causes(
            json!({"webhooks": [{"name": "a.b.c", "clientConfig": {}, "rules": [{}]},
            {"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "clientConfig": {"service": {"port": 0, "path": "x"}}}]}),
        );
        for expected in [
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            "webhooks[0].rules[0].operations: Required value",
            "webhooks[0].rules[0].resources: Required value",
            "webhooks[1].name: Duplicate value: \"a.b.c\"",
            "webhooks[1].clientConfig.service.name: Required value: service name is required",
            "webhooks[1].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
            "webhooks[1].clientConfig.service.path: Invalid value: \"x\": must start with a '/'",
        ] {
            assert!(got.iter().any(|g| g == expected), "missing {expected:?} in {got:#?}");
        }
    }
}
