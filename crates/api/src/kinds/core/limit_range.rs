//! LimitRange (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::limits::default_limit_range),
    validate: Some(crate::validation::limits::validate_limit_range),
    normalize: roundtrip::<k8s_openapi::api::core::v1::LimitRange>,
    ..Strategy::NONE
};
