//! Lease (coordination.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_lease),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::coordination::v1::Lease>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

fn validate_lease(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if let Some(d) = int(spec, "leaseDurationSeconds") {
        if d <= 0 {
            errs.push(Cause::invalid_value(
                "spec.leaseDurationSeconds",
                &Value::from(d),
                "must be greater than 0",
            ));
        }
    }
    nonnegative(spec, "leaseTransitions", "spec", errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(get_str(obj, &["spec", "holderIdentity"])),
        json!(created),
    ]
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "spec");
}
