//! RoleBinding (rbac.authorization.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::rbac::v1::RoleBinding>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_binding(o, true, errs)
}

pub(super) fn validate_update(
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    validate_binding_update(o, n, errs)
}

pub(super) fn default(o: &mut Map<String, Value>) {
    crate::defaults::breadth::default_binding_subjects(o)
}

pub(super) fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Role",
            "string",
            "RoleRef references the Role or ClusterRole being granted.",
        ),
        AGE,
        wide("Users", "string", "Users in the binding"),
        wide("Groups", "string", "Groups in the binding"),
        wide(
            "ServiceAccounts",
            "string",
            "ServiceAccounts in the binding",
        ),
    ]
}

pub(super) fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    binding_row(obj, name, created)
}
