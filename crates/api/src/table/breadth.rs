//! Tables of the RBAC bindings, networking, node, certificates, apiregistration and
//! autoscaling kinds (upstream `printRoleBinding`, `printIngress`, `printIngressClass`,
//! `printNetworkPolicy`, `printIPAddress`, `printServiceCIDR`, `printRuntimeClass`,
//! `printCertificateSigningRequest`, `printAPIService`, `printHorizontalPodAutoscaler`).
//! Roles and ClusterRoles print as the default `Name`/`Created At`, as upstream's do.

use serde_json::{json, Value};

use super::*;

pub(crate) fn binding_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        get_str(obj, &["roleRef", "kind"]),
        get_str(obj, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for s in get_arr(obj, &["subjects"]) {
        let subject_name = get_str(s, &["name"]).to_string();
        match get_str(s, &["kind"]) {
            "User" => users.push(subject_name),
            "Group" => groups.push(subject_name),
            "ServiceAccount" => {
                accounts.push(format!("{}/{subject_name}", get_str(s, &["namespace"])))
            }
            _ => {}
        }
    }
    vec![
        name,
        json!(role),
        json!(created),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(accounts.join(", ")),
    ]
}

pub(crate) fn ingress_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let class = or_none(get_str(obj, &["spec", "ingressClassName"]));
    // Upstream `formatHosts`: the first three named hosts, `*` when none is named.
    let rules = get_arr(obj, &["spec", "rules"]);
    let named: Vec<String> = rules
        .iter()
        .map(|r| get_str(r, &["host"]))
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect();
    let more = rules.len() > 3 && named.len() >= 3;
    let hosts = if named.is_empty() {
        "*".to_string()
    } else {
        list_with_more(named.into_iter().take(3).collect(), more, rules.len(), 3)
    };
    let addresses: Vec<String> = get_arr(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            [get_str(i, &["ip"]), get_str(i, &["hostname"])]
                .into_iter()
                .find(|s| !s.is_empty())
        })
        .map(str::to_string)
        .collect();
    let ports = if get_arr(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name,
        json!(class),
        json!(hosts),
        json!(addresses.join(",")),
        json!(ports),
        json!(created),
    ]
}

pub(crate) fn ip_parent(obj: &Value) -> String {
    let Some(p) = get(obj, &["spec", "parentRef"]) else {
        return "<none>".to_string();
    };
    let resource = get_str(p, &["resource"]);
    let mut out = match get_str(p, &["group"]) {
        "" => resource.to_lowercase(),
        group => format!("{resource}.{group}").to_lowercase(),
    };
    let ns = get_str(p, &["namespace"]);
    if !ns.is_empty() {
        out.push('/');
        out.push_str(ns);
    }
    format!("{out}/{}", get_str(p, &["name"]))
}

pub(crate) fn csr_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let mut conditions: Vec<&str> = get_arr(obj, &["status", "conditions"])
        .iter()
        .map(|c| get_str(c, &["type"]))
        .filter(|t| !t.is_empty())
        .collect();
    if !get_str(obj, &["status", "certificate"]).is_empty() {
        conditions.push("Issued");
    }
    let condition = if conditions.is_empty() {
        "Pending".to_string()
    } else {
        conditions.join(",")
    };
    let duration = match get(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
        Some(s) => human_duration(chrono::Duration::seconds(s)),
        None => "<none>".to_string(),
    };
    vec![
        name,
        json!(created),
        json!(get_str(obj, &["spec", "signerName"])),
        json!(get_str(obj, &["spec", "username"])),
        json!(duration),
        json!(condition),
    ]
}

pub(crate) fn api_service_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let service = match get(obj, &["spec", "service"]) {
        Some(s) => format!("{}/{}", get_str(s, &["namespace"]), get_str(s, &["name"])),
        None => "Local".to_string(),
    };
    let available = get_arr(obj, &["status", "conditions"])
        .iter()
        .find(|c| get_str(c, &["type"]) == "Available")
        .map_or("Unknown".to_string(), |c| {
            match (get_str(c, &["status"]), get_str(c, &["reason"])) {
                ("True", _) | (_, "") => get_str(c, &["status"]).to_string(),
                (status, reason) => format!("{status} ({reason})"),
            }
        });
    vec![name, json!(service), json!(available), json!(created)]
}

pub(crate) fn hpa_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        get_str(obj, &["spec", "scaleTargetRef", "kind"]),
        get_str(obj, &["spec", "scaleTargetRef", "name"])
    );
    let min = get(obj, &["spec", "minReplicas"])
        .and_then(Value::as_i64)
        .map_or("<unset>".to_string(), |m| m.to_string());
    vec![
        name,
        json!(reference),
        json!(hpa_targets(obj)),
        json!(min),
        json!(get_int(obj, &["spec", "maxReplicas"])),
        json!(get_int(obj, &["status", "currentReplicas"])),
        json!(created),
    ]
}

/// `cpu: 20%/80%, memory: <unknown>/60%` (upstream `formatHPAMetrics`: at most two, then
/// `+ N more...`).
pub(crate) fn hpa_targets(obj: &Value) -> String {
    let specs = get_arr(obj, &["spec", "metrics"]);
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let current = get_arr(obj, &["status", "currentMetrics"]);
    let mut parts: Vec<String> = Vec::new();
    for (i, m) in specs.iter().enumerate() {
        let kind = get_str(m, &["type"]);
        let source = match kind {
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            "Pods" => "pods",
            "Object" => "object",
            "External" => "external",
            _ => "",
        };
        let target = get(m, &[source, "target"]);
        let cur = current.get(i).and_then(|c| get(c, &[source, "current"]));
        let pick = |v: Option<&Value>| -> Option<String> {
            let v = v?;
            if let Some(u) = get(v, &["averageUtilization"]) {
                return Some(format!("{u}%"));
            }
            [get_str(v, &["averageValue"]), get_str(v, &["value"])]
                .into_iter()
                .find(|s| !s.is_empty())
                .map(str::to_string)
        };
        let target_text = pick(target).unwrap_or_else(|| "<unknown>".to_string());
        let current_text = pick(cur).unwrap_or_else(|| "<unknown>".to_string());
        let label = match kind {
            "Resource" | "ContainerResource" => format!("{}: ", get_str(m, &[source, "name"])),
            "Pods" | "Object" | "External" => {
                format!("{}: ", get_str(m, &[source, "metric", "name"]))
            }
            _ => String::new(),
        };
        parts.push(format!("{label}{current_text}/{target_text}"));
    }
    let more = parts.len().saturating_sub(2);
    parts.truncate(2);
    let mut out = parts.join(", ");
    if more > 0 {
        out.push_str(&format!(" + {more} more..."));
    }
    out
}
