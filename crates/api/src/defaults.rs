//! Kubernetes defaulting: what `SetDefaults_*` (pkg/apis/core/v1, apps/v1, discovery/v1), the
//! v1 conversions and the pod admission plugins (ServiceAccount, DefaultTolerationSeconds,
//! Priority) add to an object before it is stored, so `kubectl get -o yaml` matches.
//!
//! Fields are only set when unset, where "unset" is what Go's defaulting tests: absent or
//! `null` for pointers, and also `""`/`0` for plain strings and integers. Values of the wrong
//! JSON type are left alone (validation reports them). Cluster IP allocation, the pod QoS class
//! and the service account token volume are the server's business.

use serde_json::{json, Map, Value};

use crate::registry::ResourceInfo;

/// Default `obj`, an object of `resource`, in place.
pub fn apply_defaults(resource: &ResourceInfo, obj: &mut Value) {
    default_status_counters(resource, obj);
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match (resource.group, resource.kind) {
        ("", "Pod") => default_pod(o),
        ("", "Service") => default_service(o),
        ("", "Namespace") => default_namespace(o),
        ("", "Node") => default_node(o),
        ("", "Secret") => default_secret(o),
        ("", "Endpoints") => default_endpoints(o),
        ("apps", "Deployment") => default_deployment(o),
        ("apps", "ReplicaSet") => default_replica_set(o),
        ("apps", "DaemonSet") => default_daemon_set(o),
        ("discovery.k8s.io", "EndpointSlice") => default_endpoint_slice(o),
        ("scheduling.k8s.io", "PriorityClass") => {
            set_default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        _ => {}
    }
}

/// `Always` for images tagged `latest` or with neither tag nor digest, else `IfNotPresent`
/// (`SetDefaults_Container`; an unparsable reference also gets `IfNotPresent`).
pub fn default_image_pull_policy(image: &str) -> &'static str {
    match image_tag(image) {
        Some(tag) if tag == "latest" => "Always",
        _ => "IfNotPresent",
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers over JSON maps

fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

fn is_unset_str(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

fn is_unset_int(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Set `key` when absent or null (Go: nil pointer).
fn set_default(o: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(o.get(key)) {
        o.insert(key.to_string(), value);
    }
}

/// Set `key` when absent, null or `""` (Go: empty string).
fn set_default_str(o: &mut Map<String, Value>, key: &str, value: &str) {
    if is_unset_str(o.get(key)) {
        o.insert(key.to_string(), Value::from(value));
    }
}

/// Set `key` when absent, null or `0` (Go: zero int).
fn set_default_int(o: &mut Map<String, Value>, key: &str, value: i64) {
    if is_unset_int(o.get(key)) {
        o.insert(key.to_string(), Value::from(value));
    }
}

/// The object at `key`, created when absent or null; `None` when it is something else.
fn child_obj<'a>(o: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    if is_unset(o.get(key)) {
        o.insert(key.to_string(), Value::Object(Map::new()));
    }
    o.get_mut(key).and_then(Value::as_object_mut)
}

/// The object at `key` if there is one.
fn existing_obj<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    o.get_mut(key).and_then(Value::as_object_mut)
}

/// The objects in the list at `key`.
fn list_objs<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().filter_map(Value::as_object_mut))
}

fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// Pods and pod templates

fn default_pod(o: &mut Map<String, Value>) {
    if let Some(spec) = child_obj(o, "spec") {
        default_pod_spec(spec);
        default_pod_only_spec(spec);
        admit_pod_spec(spec);
    }
    if let Some(status) = child_obj(o, "status") {
        // Set by the pod strategy on create; the agent moves it on from there.
        set_default_str(status, "phase", "Pending");
        sync_ip_list(status, "podIP", "podIPs");
        sync_ip_list(status, "hostIP", "hostIPs");
    }
}

/// The v1 conversion keeps `podIP` and `podIPs[0].ip` (and `hostIP`/`hostIPs`) in step.
fn sync_ip_list(status: &mut Map<String, Value>, single: &str, list: &str) {
    let first = status
        .get(list)
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|v| v.get("ip"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let ip = str_of(status, single).to_string();
    let list_empty = status
        .get(list)
        .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()));
    if !ip.is_empty() && list_empty {
        status.insert(list.to_string(), json!([{ "ip": ip }]));
    } else if let Some(first) = first.filter(|_| is_unset_str(status.get(single))) {
        status.insert(single.to_string(), Value::from(first));
    }
}

/// `SetDefaults_PodSpec` and everything nested in it: shared by pods and pod templates.
fn default_pod_spec(spec: &mut Map<String, Value>) {
    set_default_str(spec, "dnsPolicy", "ClusterFirst");
    set_default_str(spec, "restartPolicy", "Always");
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default_str(spec, "schedulerName", "default-scheduler");
    sync_service_account(spec);
    for volume in list_objs(spec, "volumes") {
        default_volume(volume);
    }
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for container in list_objs(spec, key) {
            default_container(container);
        }
    }
}

/// The v1 conversion: `serviceAccount` is the deprecated alias of `serviceAccountName`.
fn sync_service_account(spec: &mut Map<String, Value>) {
    if is_unset_str(spec.get("serviceAccountName")) {
        if let Some(Value::String(sa)) = spec.get("serviceAccount") {
            if !sa.is_empty() {
                let sa = sa.clone();
                spec.insert("serviceAccountName".into(), Value::from(sa));
            }
        }
    }
    if let Some(Value::String(name)) = spec.get("serviceAccountName") {
        if !name.is_empty() {
            let name = name.clone();
            spec.insert("serviceAccount".into(), Value::from(name));
        }
    }
}

/// `SetDefaults_Pod`: only pods, not templates.
fn default_pod_only_spec(spec: &mut Map<String, Value>) {
    for key in ["containers", "initContainers"] {
        for container in list_objs(spec, key) {
            requests_from_limits(container);
        }
    }
    set_default(spec, "enableServiceLinks", Value::Bool(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for key in ["containers", "initContainers"] {
            for container in list_objs(spec, key) {
                for port in list_objs(container, "ports") {
                    if is_unset_int(port.get("hostPort")) {
                        if let Some(cp) = port.get("containerPort").cloned() {
                            port.insert("hostPort".into(), cp);
                        }
                    }
                }
            }
        }
    }
}

/// Limits without requests: the request defaults to the limit.
fn requests_from_limits(container: &mut Map<String, Value>) {
    let Some(resources) = existing_obj(container, "resources") else {
        return;
    };
    let limits = match resources.get("limits") {
        Some(Value::Object(l)) if !l.is_empty() => l.clone(),
        _ => return,
    };
    let Some(requests) = child_obj(resources, "requests") else {
        return;
    };
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

/// `SetDefaults_ResourceList`: quantities finer than a milli-unit are rounded up to one.
fn round_resource_lists(resources: &mut Map<String, Value>) {
    for key in ["limits", "requests"] {
        let Some(list) = existing_obj(resources, key) else {
            continue;
        };
        for q in list.values_mut() {
            let Some(text) = q.as_str() else { continue };
            let Some(nanos) = crate::schema::quantity_nanos(text) else {
                continue;
            };
            if nanos % 1_000_000 != 0 {
                let millis = nanos / 1_000_000 + nanos.signum();
                if let Ok(rounded) = crate::schema::canonical_quantity(&format!("{millis}m")) {
                    *q = Value::from(rounded);
                }
            }
        }
    }
}

/// What the ServiceAccount, Priority and DefaultTolerationSeconds admission plugins add.
fn admit_pod_spec(spec: &mut Map<String, Value>) {
    set_default_str(spec, "serviceAccountName", "default");
    sync_service_account(spec);

    if is_unset(spec.get("priority")) {
        // The built-in classes; any other class is resolved (or refused) by the server.
        let priority = match str_of(spec, "priorityClassName") {
            "" => Some(0),
            "system-node-critical" => Some(2_000_001_000),
            "system-cluster-critical" => Some(2_000_000_000),
            _ => None,
        };
        if let Some(p) = priority {
            spec.insert("priority".into(), json!(p));
        }
    }
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));

    let mut tolerates_not_ready = false;
    let mut tolerates_unreachable = false;
    if let Some(list) = spec.get("tolerations").and_then(Value::as_array) {
        for t in list {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let no_execute = effect == "NoExecute" || effect.is_empty();
            tolerates_not_ready |= no_execute && (key.is_empty() || key == NOT_READY);
            tolerates_unreachable |= no_execute && (key.is_empty() || key == UNREACHABLE);
        }
    } else if !is_unset(spec.get("tolerations")) {
        return;
    }
    let mut added = Vec::new();
    if !tolerates_not_ready {
        added.push(default_toleration(NOT_READY));
    }
    if !tolerates_unreachable {
        added.push(default_toleration(UNREACHABLE));
    }
    if added.is_empty() {
        return;
    }
    if is_unset(spec.get("tolerations")) {
        spec.insert("tolerations".into(), Value::Array(Vec::new()));
    }
    if let Some(list) = spec.get_mut("tolerations").and_then(Value::as_array_mut) {
        list.extend(added);
    }
}

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

fn default_toleration(key: &str) -> Value {
    json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
}

fn default_container(c: &mut Map<String, Value>) {
    if is_unset_str(c.get("imagePullPolicy")) {
        let policy = default_image_pull_policy(str_of(c, "image"));
        c.insert("imagePullPolicy".into(), Value::from(policy));
    }
    set_default_str(c, "terminationMessagePath", "/dev/termination-log");
    set_default_str(c, "terminationMessagePolicy", "File");
    // A non-pointer struct in Go: always printed, `{}` when empty.
    set_default(c, "resources", json!({}));
    if let Some(resources) = existing_obj(c, "resources") {
        round_resource_lists(resources);
    }
    for port in list_objs(c, "ports") {
        set_default_str(port, "protocol", "TCP");
    }
    for env in list_objs(c, "env") {
        if let Some(field_ref) =
            existing_obj(env, "valueFrom").and_then(|v| existing_obj(v, "fieldRef"))
        {
            set_default_str(field_ref, "apiVersion", "v1");
        }
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = existing_obj(c, key) {
            set_default_int(probe, "timeoutSeconds", 1);
            set_default_int(probe, "periodSeconds", 10);
            set_default_int(probe, "successThreshold", 1);
            set_default_int(probe, "failureThreshold", 3);
            default_handler(probe);
            if let Some(grpc) = existing_obj(probe, "grpc") {
                set_default(grpc, "service", json!(""));
            }
        }
    }
    if let Some(lifecycle) = existing_obj(c, "lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(handler) = existing_obj(lifecycle, key) {
                default_handler(handler);
            }
        }
    }
}

fn default_handler(handler: &mut Map<String, Value>) {
    if let Some(http) = existing_obj(handler, "httpGet") {
        set_default_str(http, "path", "/");
        set_default_str(http, "scheme", "HTTP");
    }
}

fn default_field_ref_items(o: &mut Map<String, Value>) {
    for item in list_objs(o, "items") {
        if let Some(field_ref) = existing_obj(item, "fieldRef") {
            set_default_str(field_ref, "apiVersion", "v1");
        }
    }
}

fn default_volume(v: &mut Map<String, Value>) {
    let has_source = v.iter().any(|(k, val)| k != "name" && !val.is_null());
    if !has_source {
        v.insert("emptyDir".into(), json!({}));
    }
    for key in ["secret", "configMap"] {
        if let Some(src) = existing_obj(v, key) {
            set_default(src, "defaultMode", json!(420));
        }
    }
    if let Some(src) = existing_obj(v, "downwardAPI") {
        set_default(src, "defaultMode", json!(420));
        default_field_ref_items(src);
    }
    if let Some(src) = existing_obj(v, "projected") {
        set_default(src, "defaultMode", json!(420));
        for source in list_objs(src, "sources") {
            if let Some(token) = existing_obj(source, "serviceAccountToken") {
                set_default(token, "expirationSeconds", json!(3600));
            }
            if let Some(dapi) = existing_obj(source, "downwardAPI") {
                default_field_ref_items(dapi);
            }
        }
    }
    if let Some(src) = existing_obj(v, "hostPath") {
        set_default(src, "type", json!(""));
    }
    if let Some(src) = existing_obj(v, "iscsi") {
        set_default_str(src, "iscsiInterface", "default");
    }
    if let Some(src) = existing_obj(v, "rbd") {
        set_default_str(src, "pool", "rbd");
        set_default_str(src, "user", "admin");
        set_default_str(src, "keyring", "/etc/ceph/keyring");
    }
    if let Some(src) = existing_obj(v, "azureDisk") {
        set_default(src, "cachingMode", json!("ReadWrite"));
        set_default(src, "kind", json!("Shared"));
        set_default(src, "fsType", json!("ext4"));
        set_default(src, "readOnly", json!(false));
    }
    if let Some(src) = existing_obj(v, "scaleIO") {
        set_default_str(src, "storageMode", "ThinProvisioned");
        set_default_str(src, "fsType", "xfs");
    }
    if let Some(spec) = existing_obj(v, "ephemeral")
        .and_then(|e| existing_obj(e, "volumeClaimTemplate"))
        .and_then(|t| existing_obj(t, "spec"))
    {
        set_default(spec, "volumeMode", json!("Filesystem"));
        if let Some(resources) = existing_obj(spec, "resources") {
            round_resource_lists(resources);
        }
    }
}

fn default_template(spec: &mut Map<String, Value>) {
    if let Some(template) = existing_obj(spec, "template") {
        if let Some(pod_spec) = child_obj(template, "spec") {
            default_pod_spec(pod_spec);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// apps/v1

fn default_deployment(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    if let Some(strategy) = child_obj(spec, "strategy") {
        set_default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child_obj(strategy, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    default_template(spec);
}

fn default_replica_set(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    default_template(spec);
}

/// Status fields Go serializes even when zero (not `omitempty`): kube-apiserver's answers
/// always carry them, and clients (the Python client) refuse objects without them.
pub fn default_status_counters(resource: &ResourceInfo, obj: &mut Value) {
    let fields: &[&str] = match (resource.group, resource.kind) {
        ("apps", "ReplicaSet") => &["replicas"],
        ("apps", "DaemonSet") => &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ],
        _ => return,
    };
    let Some(status) = obj.as_object_mut().and_then(|o| child_obj(o, "status")) else {
        return;
    };
    for f in fields {
        set_default(status, f, json!(0));
    }
}

fn default_daemon_set(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    if let Some(strategy) = child_obj(spec, "updateStrategy") {
        set_default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child_obj(strategy, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    default_template(spec);
}

// ---------------------------------------------------------------------------------------------
// Other core kinds

fn default_service(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default_str(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    set_default_str(spec, "type", "ClusterIP");
    for port in list_objs(spec, "ports") {
        set_default_str(port, "protocol", "TCP");
        let unset_target = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if unset_target {
            if let Some(p) = port.get("port").filter(|p| p.is_number()).cloned() {
                port.insert("targetPort".into(), p);
            }
        }
    }
    let svc_type = str_of(spec, "type").to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible = svc_type == "LoadBalancer"
        || svc_type == "NodePort"
        || (svc_type == "ClusterIP" && has_external_ips);
    if externally_accessible {
        set_default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(svc_type.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        default_ip_families(spec);
    }
    if svc_type == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
        if let Some(ingress) = o
            .get_mut("status")
            .and_then(Value::as_object_mut)
            .and_then(|s| existing_obj(s, "loadBalancer"))
        {
            for ing in list_objs(ingress, "ingress") {
                if !str_of(ing, "ip").is_empty() {
                    set_default(ing, "ipMode", json!("VIP"));
                }
            }
        }
    }
}

/// What the service REST storage settles for IP families on a single-stack cluster, and the
/// `clusterIP`/`clusterIPs` sync of the strategy. The allocation itself is the server's.
fn default_ip_families(spec: &mut Map<String, Value>) {
    let cluster_ip = str_of(spec, "clusterIP").to_string();
    if !cluster_ip.is_empty()
        && spec
            .get("clusterIPs")
            .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()))
    {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    let has_selector = spec
        .get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    let headless_selectorless = cluster_ip == "None" && !has_selector;
    if headless_selectorless {
        set_default(spec, "ipFamilyPolicy", json!("RequireDualStack"));
    } else {
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    let families_unset = spec
        .get("ipFamilies")
        .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()));
    if families_unset {
        let families = if headless_selectorless {
            json!(["IPv4", "IPv6"])
        } else if cluster_ip.contains(':') {
            json!(["IPv6"])
        } else {
            json!(["IPv4"])
        };
        spec.insert("ipFamilies".into(), families);
    }
}

fn default_namespace(o: &mut Map<String, Value>) {
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !name.is_empty() {
        if let Some(labels) = child_obj(o, "metadata").and_then(|m| child_obj(m, "labels")) {
            labels.insert("kubernetes.io/metadata.name".into(), Value::from(name));
        }
    }
    if let Some(spec) = child_obj(o, "spec") {
        set_default(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(status) = child_obj(o, "status") {
        set_default_str(status, "phase", "Active");
    }
}

fn default_node(o: &mut Map<String, Value>) {
    if let Some(status) = existing_obj(o, "status") {
        if is_unset(status.get("allocatable")) {
            if let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned() {
                status.insert("allocatable".into(), capacity);
            }
        }
    }
}

fn default_secret(o: &mut Map<String, Value>) {
    set_default_str(o, "type", "Opaque");
    // The v1 conversion folds `stringData` into `data`, the string winning; it is never stored.
    if let Some(string_data) = o.remove("stringData") {
        let Value::Object(entries) = string_data else {
            return;
        };
        if entries.is_empty() {
            return;
        }
        let Some(data) = child_obj(o, "data") else {
            return;
        };
        for (k, v) in entries {
            if let Value::String(s) = v {
                let encoded = serde_json::to_value(k8s_openapi::ByteString(s.into_bytes()))
                    .unwrap_or(Value::Null);
                data.insert(k, encoded);
            }
        }
    }
}

fn default_endpoints(o: &mut Map<String, Value>) {
    for subset in list_objs(o, "subsets") {
        for port in list_objs(subset, "ports") {
            set_default_str(port, "protocol", "TCP");
        }
    }
}

fn default_endpoint_slice(o: &mut Map<String, Value>) {
    for port in list_objs(o, "ports") {
        set_default(port, "name", json!(""));
        set_default(port, "protocol", json!("TCP"));
    }
}

// ---------------------------------------------------------------------------------------------
// Image references

/// The tag of a docker image reference as `parsers.ParseImageName` reports it: `latest` when
/// there is neither tag nor digest, `""` when there is only a digest, `None` when the
/// reference does not parse.
fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() || image.trim() != image {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (algo, hex) = d.split_once(':')?;
        if algo.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
    }
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(t) = tag {
        let valid = !t.is_empty()
            && t.len() <= 128
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
            && !t.starts_with(['.', '-']);
        if !valid {
            return None;
        }
    }
    if !valid_repository(repo) {
        return None;
    }
    Some(match (tag, digest) {
        (Some(t), _) => t.to_string(),
        (None, Some(_)) => String::new(),
        (None, None) => "latest".to_string(),
    })
}

/// `[domain/]path` where path components are lowercase alphanumerics joined by `.`, `_`, `__`
/// or dashes, and a domain is recognised by a `.`, a `:` or being `localhost`.
fn valid_repository(repo: &str) -> bool {
    if repo.is_empty() {
        return false;
    }
    let mut parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 1 {
        let first = parts[0];
        let is_domain = first.contains(['.', ':'])
            || first == "localhost"
            || first.chars().any(|c| c.is_ascii_uppercase());
        if is_domain {
            let (host, port) = match first.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (first, None),
            };
            let host_ok = !host.is_empty()
                && host.split('.').all(|l| {
                    !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                });
            let port_ok =
                port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
            if !host_ok || !port_ok {
                return false;
            }
            parts.remove(0);
        }
    }
    parts.iter().all(|p| {
        !p.is_empty()
            && p.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            })
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find_by_kind;

    fn defaulted(api_version: &str, kind: &str, mut obj: Value) -> Value {
        apply_defaults(find_by_kind(api_version, kind).unwrap(), &mut obj);
        obj
    }

    #[test]
    fn minimal_pod_matches_kubernetes() {
        let pod = defaulted(
            "v1",
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nginx", "namespace": "default"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}),
        );
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "nginx", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "nginx", "image": "nginx", "imagePullPolicy": "Always",
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File", "resources": {}}],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30,
                    "schedulerName": "default-scheduler",
                    "enableServiceLinks": true,
                    "serviceAccountName": "default",
                    "serviceAccount": "default",
                    "priority": 0,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "tolerations": [
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                    ]
                },
                "status": {"phase": "Pending"}})
        );
    }

    #[test]
    fn pod_nested_defaults() {
        let pod = defaulted(
            "v1",
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {
                "hostNetwork": true,
                "serviceAccount": "builder",
                "tolerations": [{"operator": "Exists"}],
                "initContainers": [{"name": "init", "image": "busybox:1.36",
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}],
                "containers": [{"name": "c", "image": "registry.local:5000/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "livenessProbe": {"httpGet": {"port": 8080}},
                    "readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 5},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
                    "resources": {"limits": {"memory": "128Mi"}}}],
                "volumes": [{"name": "a"}, {"name": "b", "secret": {"secretName": "s"}},
                    {"name": "c", "configMap": {"name": "cm", "defaultMode": 256}},
                    {"name": "d", "hostPath": {"path": "/var"}},
                    {"name": "e", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}},
                        {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]
            },
            "status": {"podIP": "10.0.0.5"}}),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["serviceAccountName"], "builder");
        assert_eq!(spec["serviceAccount"], "builder");
        // A toleration of everything already tolerates both taints.
        assert_eq!(spec["tolerations"], json!([{"operator": "Exists"}]));
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(
            c["ports"][0],
            json!({"containerPort": 8080, "protocol": "TCP", "hostPort": 8080})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
        assert_eq!(c["readinessProbe"]["grpc"]["service"], "");
        assert_eq!(
            c["lifecycle"]["preStop"]["httpGet"],
            json!({"port": 80, "path": "/quit", "scheme": "HTTP"})
        );
        assert_eq!(
            c["resources"],
            json!({"limits": {"memory": "128Mi"}, "requests": {"memory": "128Mi"}})
        );
        let init = &spec["initContainers"][0];
        assert_eq!(init["imagePullPolicy"], "IfNotPresent");
        assert_eq!(
            init["resources"]["requests"],
            json!({"memory": "1Gi", "cpu": "1"})
        );
        let v = &spec["volumes"];
        assert_eq!(v[0], json!({"name": "a", "emptyDir": {}}));
        assert_eq!(v[1]["secret"]["defaultMode"], 420);
        assert_eq!(v[2]["configMap"]["defaultMode"], 256);
        assert_eq!(v[3]["hostPath"], json!({"path": "/var", "type": ""}));
        assert_eq!(v[4]["projected"]["defaultMode"], 420);
        assert_eq!(
            v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
        assert_eq!(
            v[4]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
        assert_eq!(
            pod["status"],
            json!({"podIP": "10.0.0.5", "phase": "Pending", "podIPs": [{"ip": "10.0.0.5"}]})
        );
    }

    #[test]
    fn image_pull_policy_rules() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("docker.io/library/nginx", "Always"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            ("nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "IfNotPresent"),
            ("nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Always"),
            ("NGINX", "IfNotPresent"),
            ("", "IfNotPresent"),
            ("nginx:", "IfNotPresent"),
            ("registry.k8s.io/pause:3.10", "IfNotPresent"),
        ] {
            assert_eq!(default_image_pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn deployment_matches_kubernetes() {
        let d = defaulted(
            "apps/v1",
            "Deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}}),
        );
        assert_eq!(
            d["spec"],
            json!({"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {}}],
                        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
                        "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler"}},
                "replicas": 1,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600})
        );
        let recreate = defaulted(
            "apps/v1",
            "Deployment",
            json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}}),
        );
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(recreate["spec"]["replicas"], 0);

        let ds = defaulted(
            "apps/v1",
            "DaemonSet",
            json!({"spec": {"template": {"spec": {"containers": []}}}}),
        );
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        let rs = defaulted("apps/v1", "ReplicaSet", json!({"spec": {}}));
        assert_eq!(rs["spec"]["replicas"], 1);
    }

    #[test]
    fn service_matches_kubernetes() {
        let svc = defaulted(
            "v1",
            "Service",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"name": "x", "port": 81, "targetPort": "http"}]}}),
        );
        assert_eq!(
            svc["spec"],
            json!({"selector": {"app": "web"},
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                          {"name": "x", "port": 81, "targetPort": "http", "protocol": "TCP"}],
                "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster",
                "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]})
        );
        let np = defaulted(
            "v1",
            "Service",
            json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 443, "nodePort": 30443}],
            "sessionAffinity": "ClientIP", "clusterIP": "10.96.0.10"}}),
        );
        assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(np["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(
            np["spec"]["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
        assert_eq!(np["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        let headless = defaulted(
            "v1",
            "Service",
            json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
        );
        assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
        let ext = defaulted(
            "v1",
            "Service",
            json!({"spec": {"type": "ExternalName", "externalName": "example.com"}}),
        );
        assert!(ext["spec"].get("ipFamilies").is_none());
        assert!(ext["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn namespace_secret_and_others() {
        let ns = defaulted(
            "v1",
            "Namespace",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}}),
        );
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "dev"})
        );
        assert_eq!(ns["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(ns["status"], json!({"phase": "Active"}));

        let secret = defaulted(
            "v1",
            "Secret",
            json!({"metadata": {"name": "s"}, "data": {"a": "YQ=="},
            "stringData": {"b": "hello", "a": "x"}}),
        );
        assert_eq!(
            secret,
            json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "aGVsbG8="}, "type": "Opaque"})
        );

        let node = defaulted("v1", "Node", json!({"status": {"capacity": {"cpu": "4"}}}));
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "4"}));

        let slice = defaulted(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            json!({"ports": [{"port": 80}]}),
        );
        assert_eq!(
            slice["ports"],
            json!([{"port": 80, "name": "", "protocol": "TCP"}])
        );
        let ep = defaulted(
            "v1",
            "Endpoints",
            json!({"subsets": [{"ports": [{"port": 80}]}]}),
        );
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
    }

    /// What `kubectl create deployment web --image=nginx` sends, through the whole pipeline.
    #[test]
    fn kubectl_create_deployment_end_to_end() {
        let deployments = find_by_kind("apps/v1", "Deployment").unwrap();
        let body = json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}},
                "strategy": {}},
            "status": {}});
        let normalized = crate::schema::normalize(deployments, &body).unwrap();
        assert!(normalized.unknown_fields.is_empty());
        let mut obj = normalized.value;
        apply_defaults(deployments, &mut obj);
        assert!(crate::validation::validate_create(deployments, &obj).is_empty());
        assert_eq!(
            obj,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"labels": {"app": "web"}, "name": "web", "namespace": "default"},
                "spec": {
                    "progressDeadlineSeconds": 600,
                    "replicas": 1,
                    "revisionHistoryLimit": 10,
                    "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                    "template": {
                        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                        "spec": {
                            "containers": [{"image": "nginx", "imagePullPolicy": "Always", "name": "nginx", "resources": {},
                                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                            "dnsPolicy": "ClusterFirst",
                            "restartPolicy": "Always",
                            "schedulerName": "default-scheduler",
                            "securityContext": {},
                            "terminationGracePeriodSeconds": 30
                        }
                    }
                },
                "status": {}})
        );
    }

    #[test]
    fn odd_shapes_do_not_panic() {
        for kind in crate::registry::RESOURCES {
            for v in [
                json!(null),
                json!([]),
                json!("x"),
                json!({"spec": 1, "status": [], "metadata": "m"}),
                json!({"spec": {"containers": "x", "volumes": [1, null, {"name": 2}], "template": {"spec": {"containers": [null]}},
                    "ports": {"a": 1}, "strategy": 3, "updateStrategy": {"type": 7}}, "stringData": {"a": 1}, "subsets": [{"ports": 1}]}),
            ] {
                let mut v = v;
                apply_defaults(kind, &mut v);
            }
        }
    }
}
