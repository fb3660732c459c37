//! ClusterRoleBinding (rbac.authorization.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    admission: &[Admission::RbacEscalation],
    default: Some(super::role_binding::default),
    validate: Some(validate),
    validate_update: Some(super::role_binding::validate_update),
    columns: Some(super::role_binding::columns),
    row: Some(super::role_binding::row),
    normalize: roundtrip::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_binding(o, false, errs)
}
