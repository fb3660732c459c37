//! Tables of ResourceQuotas, PersistentVolumes and StorageClasses (upstream
//! `printResourceQuota`, `printPersistentVolume`, `printStorageClass`).

use serde_json::{json, Value};

use super::*;

pub(crate) const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

pub(crate) fn or_default<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() {
        default
    } else {
        s
    }
}

/// `pods: 1/2, requests.cpu: 0/1` and the same for `limits.*`, sorted by name.
pub(crate) fn quota_cells(obj: &Value) -> (String, String) {
    let mut names: Vec<&String> = get(obj, &["spec", "hard"])
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    names.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for n in names {
        let amount = |part: &str| match get(obj, &["status", part, n.as_str()]) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Number(_)) => v.to_string(),
            _ => "0".to_string(),
        };
        let cell = format!("{n}: {}/{}", amount("used"), amount("hard"));
        if n.split('.').next() == Some("limits") && n.contains('.') {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    (request.join(", "), limit.join(", "))
}

pub(crate) fn volume_row(pv: &Value, name: Value, created: &str) -> Vec<Value> {
    let claim = match get_str(pv, &["spec", "claimRef", "name"]) {
        "" => String::new(),
        n => format!("{}/{n}", get_str(pv, &["spec", "claimRef", "namespace"])),
    };
    let modes = access_modes(get_arr(pv, &["spec", "accessModes"]));
    let phase = if get(pv, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        get_str(pv, &["status", "phase"])
    };
    vec![
        name,
        json!(get_str(pv, &["spec", "capacity", "storage"])),
        json!(modes),
        json!(get_str(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase),
        json!(claim),
        json!(get_str(pv, &["spec", "storageClassName"])),
        json!(or_unset(get_str(
            pv,
            &["spec", "volumeAttributesClassName"]
        ))),
        json!(get_str(pv, &["status", "reason"])),
        json!(created),
        json!(or_unset(get_str(pv, &["spec", "volumeMode"]))),
    ]
}
