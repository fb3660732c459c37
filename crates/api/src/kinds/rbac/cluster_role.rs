//! ClusterRole (rbac.authorization.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    admission: &[Admission::RbacEscalation],
    validate: Some(validate),
    normalize: roundtrip::<k8s_openapi::api::rbac::v1::ClusterRole>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_role(o, false, errs)
}
