//! Pod defaulting: the pod spec (containers, volumes, probes, tolerations, service
//! account), resource rounding and image pull policies.

use super::*;
use cairn_apimachinery::quantity;

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

/// `SetDefaults_PodSpec` and everything nested in it: shared by pods and pod templates.
pub(crate) fn default_pod_spec(spec: &mut Map<String, Value>) {
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
pub(crate) fn sync_service_account(spec: &mut Map<String, Value>) {
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

/// Limits without requests: the request defaults to the limit.
pub(crate) fn requests_from_limits(container: &mut Map<String, Value>) {
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
pub(crate) fn round_resource_lists(resources: &mut Map<String, Value>) {
    for key in ["limits", "requests"] {
        let Some(list) = existing_obj(resources, key) else {
            continue;
        };
        for q in list.values_mut() {
            let Some(text) = q.as_str() else { continue };
            let Some(nanos) = quantity::nanos(text) else {
                continue;
            };
            if nanos % 1_000_000 != 0 {
                let millis = nanos / 1_000_000 + nanos.signum();
                if let Ok(rounded) = quantity::canonical(&format!("{millis}m")) {
                    *q = Value::from(rounded);
                }
            }
        }
    }
}

/// What the ServiceAccount, Priority and DefaultTolerationSeconds admission plugins add.
/// A mirror pod gets no ServiceAccount, as upstream's plugin leaves them (NodeRestriction
/// refuses mirror pods that name one).
pub(crate) fn admit_pod_spec(spec: &mut Map<String, Value>, mirror: bool) {
    if !mirror {
        set_default_str(spec, "serviceAccountName", "default");
    }
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

    add_default_tolerations(spec, DEFAULT_TOLERATION_SECONDS, DEFAULT_TOLERATION_SECONDS);
}

/// Seconds the default `not-ready`/`unreachable` NoExecute tolerations allow
/// (kube-apiserver's `--default-*-toleration-seconds`).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Upstream's DefaultTolerationSeconds admission: a pod that tolerates neither
/// `node.kubernetes.io/not-ready` nor `unreachable` NoExecute taints gets a toleration of
/// each for the given seconds.
pub fn add_default_tolerations(spec: &mut Map<String, Value>, not_ready: i64, unreachable: i64) {
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
        added.push(default_toleration(NOT_READY, not_ready));
    }
    if !tolerates_unreachable {
        added.push(default_toleration(UNREACHABLE, unreachable));
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

pub(crate) const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub(crate) const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

pub(crate) fn default_toleration(key: &str, seconds: i64) -> Value {
    json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
}

pub(crate) fn default_container(c: &mut Map<String, Value>) {
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

pub(crate) fn default_handler(handler: &mut Map<String, Value>) {
    if let Some(http) = existing_obj(handler, "httpGet") {
        set_default_str(http, "path", "/");
        set_default_str(http, "scheme", "HTTP");
    }
}

pub(crate) fn default_field_ref_items(o: &mut Map<String, Value>) {
    for item in list_objs(o, "items") {
        if let Some(field_ref) = existing_obj(item, "fieldRef") {
            set_default_str(field_ref, "apiVersion", "v1");
        }
    }
}

pub(crate) fn default_volume(v: &mut Map<String, Value>) {
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

/// The tag of a docker image reference as `parsers.ParseImageName` reports it: `latest` when
/// there is neither tag nor digest, `""` when there is only a digest, `None` when the
/// reference does not parse.
pub(crate) fn image_tag(image: &str) -> Option<String> {
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
pub(crate) fn valid_repository(repo: &str) -> bool {
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
