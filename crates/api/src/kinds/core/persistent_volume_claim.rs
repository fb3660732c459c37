//! PersistentVolumeClaim (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_claim),
    validate: Some(validate),
    validate_update: Some(crate::validation::storage::validate_claim_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    prepare_for_create: Some(pending),
    admission: &[Admission::ClaimStorage, Admission::ClaimQuota],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_claim(o, "spec", errs);
    validate_claim_storage(o, errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
        col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
        col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
        col("Access Modes", "string", "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
        col("StorageClass", "string", "storageClassName is the name of the StorageClass required by the claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#class-1"),
        col("VolumeAttributesClass", "string", "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
        AGE,
        wide("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    claim_row(obj, name, created)
}

fn pending(obj: &mut Value) {
    obj["status"] = json!({"phase": "Pending"});
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "spec");
    ensure_obj(o, "status");
}
