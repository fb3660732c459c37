//! LimitRange (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

mod defaults;
mod validation;

pub const STRATEGY: Strategy = Strategy {
    default: Some(defaults::default_limit_range),
    validate: Some(validation::validate_limit_range),
    normalize: roundtrip::<k8s_openapi::api::core::v1::LimitRange>,
    ..Strategy::NONE
};
