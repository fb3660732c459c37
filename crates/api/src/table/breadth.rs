//! Tables of the RBAC bindings, networking, node, certificates, apiregistration and
//! autoscaling kinds (upstream `printRoleBinding`, `printIngress`, `printIngressClass`,
//! `printNetworkPolicy`, `printIPAddress`, `printServiceCIDR`, `printRuntimeClass`,
//! `printCertificateSigningRequest`, `printAPIService`, `printHorizontalPodAutoscaler`).
//! Roles and ClusterRoles print as the default `Name`/`Created At`, as upstream's do.

use serde_json::{json, Value};

use super::*;
use crate::registry::ResourceInfo;

/// The columns of these kinds; `None` for other kinds.
pub(super) fn columns(resource: &ResourceInfo) -> Option<Vec<Col>> {
    Some(match (resource.group, resource.kind) {
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => vec![
            NAME,
            col("Role", "string", "RoleRef references the Role or ClusterRole being granted."),
            AGE,
            wide("Users", "string", "Users in the binding"),
            wide("Groups", "string", "Groups in the binding"),
            wide("ServiceAccounts", "string", "ServiceAccounts in the binding"),
        ],
        ("networking.k8s.io", "Ingress") => vec![
            NAME,
            col("Class", "string", "ingressClassName is the name of an IngressClass cluster resource."),
            col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
            col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
            col("Ports", "string", "Ports of TLS configurations that open"),
            AGE,
        ],
        ("networking.k8s.io", "IngressClass") => vec![
            NAME,
            col("Controller", "string", "Controller that is responsible for handling this class"),
            col("Parameters", "string", "A reference to a resource with additional parameters"),
            AGE,
        ],
        ("networking.k8s.io", "NetworkPolicy") => vec![
            NAME,
            col("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
            AGE,
        ],
        ("networking.k8s.io", "IPAddress") => vec![
            NAME,
            col("ParentRef", "string", "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object."),
        ],
        ("networking.k8s.io", "ServiceCIDR") => vec![
            NAME,
            col("CIDRs", "string", "list of IP CIDRs"),
            AGE,
        ],
        ("node.k8s.io", "RuntimeClass") => vec![
            NAME,
            col("Handler", "string", "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class."),
            AGE,
        ],
        ("certificates.k8s.io", "CertificateSigningRequest") => vec![
            NAME,
            AGE,
            col("SignerName", "string", "signerName indicates the requested signer, and is a qualified name."),
            col("Requestor", "string", "Name of the user who requested the certificate"),
            col("RequestedDuration", "string", "expirationSeconds is the requested duration of validity of the issued certificate."),
            col("Condition", "string", "Current condition of the certificate signing request"),
        ],
        ("apiregistration.k8s.io", "APIService") => vec![
            NAME,
            col("Service", "string", "The reference to the service that hosts this API endpoint."),
            col("Available", "string", "Whether this service is available."),
            AGE,
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            NAME,
            col("Reference", "string", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
            col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization."),
            col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
            col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
            col("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
            AGE,
        ],
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => vec![
            NAME,
            col("Webhooks", "integer", "Webhooks is a list of webhooks and the affected resources and operations."),
            AGE,
        ],
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => vec![
            NAME,
            col("Validations", "integer", "Validations contain CEL expressions which is used to apply the validation."),
            col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
            AGE,
        ],
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => vec![
            NAME,
            col("PolicyName", "string", "PolicyName references a ValidatingAdmissionPolicy name which the ValidatingAdmissionPolicyBinding binds to."),
            col("ParamRef", "string", "paramRef specifies the parameter resource used to configure the admission control policy."),
            AGE,
        ],
        _ => return None,
    })
}

/// The cells of one row; `None` for other kinds.
pub(super) fn row(
    resource: &ResourceInfo,
    obj: &Value,
    name: Value,
    created: &str,
) -> Option<Vec<Value>> {
    Some(match (resource.group, resource.kind) {
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            binding_row(obj, name, created)
        }
        ("networking.k8s.io", "Ingress") => ingress_row(obj, name, created),
        ("networking.k8s.io", "IngressClass") => {
            let params = get(obj, &["spec", "parameters"]).map_or("<none>".to_string(), |p| {
                let (kind, pname) = (get_str(p, &["kind"]), get_str(p, &["name"]));
                match get_str(p, &["apiGroup"]) {
                    "" => format!("{kind}/{pname}"),
                    group => format!("{kind}.{group}/{pname}"),
                }
            });
            vec![
                name,
                json!(get_str(obj, &["spec", "controller"])),
                json!(params),
                json!(created),
            ]
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            vec![
                name,
                json!(format_label_selector(get(obj, &["spec", "podSelector"]))),
                json!(created),
            ]
        }
        ("networking.k8s.io", "IPAddress") => vec![name, json!(ip_parent(obj))],
        ("networking.k8s.io", "ServiceCIDR") => {
            let cidrs: Vec<&str> = get_arr(obj, &["spec", "cidrs"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            vec![name, json!(cidrs.join(",")), json!(created)]
        }
        ("node.k8s.io", "RuntimeClass") => {
            vec![name, json!(get_str(obj, &["handler"])), json!(created)]
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => csr_row(obj, name, created),
        ("apiregistration.k8s.io", "APIService") => api_service_row(obj, name, created),
        ("autoscaling", "HorizontalPodAutoscaler") => hpa_row(obj, name, created),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => {
            let count = obj["webhooks"].as_array().map_or(0, Vec::len);
            vec![name, json!(count), json!(created)]
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            let count = obj
                .pointer("/spec/validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let param = match obj.pointer("/spec/paramKind") {
                Some(k) => format!(
                    "{}/{}",
                    k["apiVersion"].as_str().unwrap_or(""),
                    k["kind"].as_str().unwrap_or("")
                ),
                None => "<unset>".to_string(),
            };
            vec![name, json!(count), json!(param), json!(created)]
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            let policy = obj
                .pointer("/spec/policyName")
                .and_then(Value::as_str)
                .unwrap_or("");
            let param = match obj.pointer("/spec/paramRef") {
                Some(r) => {
                    let ns = r["namespace"].as_str().unwrap_or("");
                    let n = r["name"].as_str().unwrap_or("");
                    if ns.is_empty() {
                        format!("*/{n}")
                    } else {
                        format!("{ns}/{n}")
                    }
                }
                None => "<unset>".to_string(),
            };
            vec![name, json!(policy), json!(param), json!(created)]
        }
        _ => return None,
    })
}

fn binding_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
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

fn ingress_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
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

fn ip_parent(obj: &Value) -> String {
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

fn csr_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
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

fn api_service_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
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

fn hpa_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
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
fn hpa_targets(obj: &Value) -> String {
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
