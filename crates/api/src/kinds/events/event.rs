//! Event (events.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    normalize: roundtrip::<k8s_openapi::api::events::v1::Event>,
    allow_create_on_update: true,
    ..Strategy::NONE
};
