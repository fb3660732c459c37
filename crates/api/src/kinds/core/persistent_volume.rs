//! PersistentVolume (core): what cairn does that is specific to it. One deliberate
//! difference from upstream's `ValidatePersistentVolume`: the `Recycle` reclaim policy,
//! deprecated upstream since 1.15, is refused (a scrubbing pod is not something cairn
//! runs); `Delete` with a provisioner or `Retain` cover its uses.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_volume),
    validate: Some(validate_persistent_volume),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::PersistentVolume>,
    prepare_for_create: Some(pending),
    admission: &[Admission::VolumeProtection],
    ..Strategy::NONE
};

/// `SetDefaults_PersistentVolume`: Retain, Filesystem, phase Pending.
fn default_volume(pv: &mut Map<String, Value>) {
    if let Some(spec) = child_obj(pv, "spec") {
        set_default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        set_default_str(spec, "volumeMode", "Filesystem");
    }
    if let Some(status) = child_obj(pv, "status") {
        set_default_str(status, "phase", "Pending");
    }
}

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];

/// Volume sources a PersistentVolume may name (one of them).
const PV_SOURCES: [&str; 17] = [
    "hostPath",
    "local",
    "nfs",
    "csi",
    "iscsi",
    "fc",
    "rbd",
    "cephfs",
    "cinder",
    "flexVolume",
    "azureFile",
    "azureDisk",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "vsphereVolume",
    "portworxVolume",
    "glusterfs",
];

fn access_modes(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.accessModes"),
            "must specify at least 1 access mode",
        ));
    }
    for m in modes.iter().filter_map(Value::as_str) {
        if !ACCESS_MODES.contains(&m) {
            errs.push(Cause::not_supported(
                format!("{p}.accessModes"),
                m,
                &ACCESS_MODES,
            ));
        }
    }
    let mode = s(spec, "volumeMode");
    if !mode.is_empty() && !VOLUME_MODES.contains(&mode) {
        errs.push(Cause::not_supported(
            format!("{p}.volumeMode"),
            mode,
            &VOLUME_MODES,
        ));
    }
}

fn validate_persistent_volume(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    access_modes(spec, "spec", errs);
    match obj(spec, "capacity") {
        None => errs.push(Cause::required("spec.capacity")),
        Some(cap) if !cap.contains_key("storage") || cap.len() > 1 => {
            let keys: Vec<&str> = cap.keys().map(String::as_str).collect();
            errs.push(Cause::not_supported(
                "spec.capacity",
                &keys.join(","),
                &["storage"],
            ));
        }
        Some(cap) => positive_storage(cap.get("storage"), "spec.capacity[storage]", errs),
    }
    let policy = s(spec, "persistentVolumeReclaimPolicy");
    match policy {
        "Delete" | "Retain" => {}
        "Recycle" => errs.push(Cause::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "Recycle is deprecated and not supported: use Delete with a provisioner, or Retain",
        )),
        other => errs.push(Cause::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            other,
            &["Delete", "Retain"],
        )),
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|k| obj(spec, k).is_some())
        .collect();
    match sources.as_slice() {
        [] => errs.push(Cause::required_detail("spec", "must specify a volume type")),
        [_] => {}
        [_, rest @ ..] => {
            for extra in rest {
                errs.push(Cause::forbidden(
                    format!("spec.{extra}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    if let Some(local) = obj(spec, "local") {
        if s(local, "path").is_empty() {
            errs.push(Cause::required("spec.local.path"));
        }
        if obj(spec, "nodeAffinity").is_none() {
            errs.push(Cause::required_detail(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if let Some(hp) = obj(spec, "hostPath") {
        if s(hp, "path").is_empty() {
            errs.push(Cause::required("spec.hostPath.path"));
        }
    }
    let class = s(spec, "storageClassName");
    if !class.is_empty() {
        for msg in is_dns1123_subdomain(class) {
            errs.push(Cause::invalid("spec.storageClassName", class, &msg));
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
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
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    volume_row(obj, name, created)
}

fn pending(obj: &mut Value) {
    obj["status"] = json!({"phase": "Pending"});
}
