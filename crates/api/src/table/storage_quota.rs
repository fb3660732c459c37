//! Tables of ResourceQuotas, PersistentVolumes and StorageClasses (upstream
//! `printResourceQuota`, `printPersistentVolume`, `printStorageClass`).

use serde_json::{json, Value};

use super::*;
use crate::registry::ResourceInfo;

const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// The columns of these kinds; `None` for other kinds.
pub(super) fn columns(resource: &ResourceInfo) -> Option<Vec<Col>> {
    Some(match (resource.group, resource.kind) {
        ("", "ResourceQuota") => vec![
            NAME,
            AGE,
            col("Request", "string", "Request is a label for resource quota requests"),
            col("Limit", "string", "Limit is a label for resource quota limits"),
        ],
        ("", "PersistentVolume") => vec![
            NAME,
            col("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"),
            col("Access Modes", "string", "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"),
            col("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"),
            col("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"),
            col("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"),
            col("StorageClass", "string", "storageClassName is the name of StorageClass to which this persistent volume belongs. Empty value means that this volume does not belong to any StorageClass."),
            col("VolumeAttributesClass", "string", "Name of VolumeAttributesClass to which this persistent volume belongs. Empty value is not allowed. When this field is not set, it indicates that this volume does not belong to any VolumeAttributesClass."),
            col("Reason", "string", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
            AGE,
            wide("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec."),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            NAME,
            col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
            col("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
            col("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
            col("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand."),
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
        ("", "ResourceQuota") => {
            let (request, limit) = quota_cells(obj);
            vec![name, json!(created), json!(request), json!(limit)]
        }
        ("", "PersistentVolume") => volume_row(obj, name, created),
        ("storage.k8s.io", "StorageClass") => {
            let default = get_str(obj, &["metadata", "annotations", IS_DEFAULT_CLASS]) == "true";
            let name = match (&name, default) {
                (Value::String(n), true) => json!(format!("{n} (default)")),
                _ => name,
            };
            let expansion = get(obj, &["allowVolumeExpansion"]).and_then(Value::as_bool);
            vec![
                name,
                json!(get_str(obj, &["provisioner"])),
                json!(or_default(get_str(obj, &["reclaimPolicy"]), "Delete")),
                json!(or_default(
                    get_str(obj, &["volumeBindingMode"]),
                    "Immediate"
                )),
                json!(expansion.unwrap_or(false).to_string()),
                json!(created),
            ]
        }
        _ => return None,
    })
}

fn or_default<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() {
        default
    } else {
        s
    }
}

/// `pods: 1/2, requests.cpu: 0/1` and the same for `limits.*`, sorted by name.
fn quota_cells(obj: &Value) -> (String, String) {
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

fn volume_row(pv: &Value, name: Value, created: &str) -> Vec<Value> {
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
