//! PersistentVolumeClaim (core): what cairn does that is specific to it.

use cairn_apimachinery::quantity;

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_claim),
    validate: Some(validate),
    validate_update: Some(validate_claim_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    prepare_for_create: Some(pending),
    admission: &[Admission::ClaimStorage, Admission::ClaimQuota],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

/// A claim's storage request must be positive (the rest is `validate_claim`'s).
fn validate_claim_storage(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let storage = path(o, &["spec", "resources", "requests", "storage"]);
    if storage.is_some() {
        positive_storage(storage, "spec.resources[storage]", errs);
    }
}

/// After creation a claim's spec only grows its request (once bound), and gets its
/// volume name once.
fn validate_claim_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let empty = Map::new();
    let mut o = obj(old, "spec").unwrap_or(&empty).clone();
    let mut n = obj(new, "spec").unwrap_or(&empty).clone();
    for spec in [&mut o, &mut n] {
        if let Some(r) = spec.get_mut("resources").and_then(Value::as_object_mut) {
            r.remove("requests");
        }
        spec.remove("volumeAttributesClassName");
    }
    if s(&o, "volumeName").is_empty() {
        n.remove("volumeName");
        o.remove("volumeName");
    }
    if o != n {
        errs.push(Cause::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let storage = |m: &Map<String, Value>| {
        path(m, &["spec", "resources", "requests", "storage"])
            .and_then(|v| quantity::nanos(v.as_str().unwrap_or_default()))
    };
    let bound = path(old, &["status", "phase"]).and_then(Value::as_str) == Some("Bound");
    if let (true, Some(n), Some(o)) = (bound, storage(new), storage(old)) {
        if n < o {
            errs.push(Cause::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        }
    }
}

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
