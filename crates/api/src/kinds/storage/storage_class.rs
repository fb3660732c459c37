//! StorageClass (storage.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate_storage_class),
    validate_update: Some(validate_storage_class_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::storage::v1::StorageClass>,
    ..Strategy::NONE
};

fn validate_storage_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let provisioner = s(o, "provisioner");
    if provisioner.is_empty() {
        errs.push(Cause::required("provisioner"));
    } else {
        for msg in is_qualified_name(provisioner) {
            errs.push(Cause::invalid("provisioner", provisioner, &msg));
        }
    }
    let policy = s(o, "reclaimPolicy");
    if !matches!(policy, "Delete" | "Retain") {
        errs.push(Cause::not_supported(
            "reclaimPolicy",
            policy,
            &["Delete", "Retain"],
        ));
    }
    let mode = s(o, "volumeBindingMode");
    let modes = ["Immediate", "WaitForFirstConsumer"];
    if !modes.contains(&mode) {
        errs.push(Cause::not_supported("volumeBindingMode", mode, &modes));
    }
}

/// A class's provisioner, parameters, reclaim policy and binding mode are fixed.
fn validate_storage_class_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    for (key, msg) in [
        ("parameters", "updates to parameters are forbidden."),
        ("provisioner", "updates to provisioner are forbidden."),
        ("reclaimPolicy", "updates to reclaimPolicy are forbidden."),
        ("volumeBindingMode", "field is immutable"),
    ] {
        if field(old, key) != field(new, key) {
            errs.push(Cause::forbidden(key, msg));
        }
    }
}

fn default(o: &mut Map<String, Value>) {
    set_default_str(o, "reclaimPolicy", "Delete");
    set_default_str(o, "volumeBindingMode", "Immediate");
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
        col("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
        col("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
        col("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
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
