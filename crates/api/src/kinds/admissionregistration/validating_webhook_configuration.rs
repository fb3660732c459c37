//! ValidatingWebhookConfiguration (admissionregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    columns: Some(super::mutating_webhook_configuration::columns),
    row: Some(super::mutating_webhook_configuration::row),
    normalize: roundtrip::<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    >,
    admission: &[Admission::WebhookMatchConditions],
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_webhook_configuration(o, false, errs)
}

fn default(o: &mut Map<String, Value>) {
    crate::defaults::admission::default_webhooks(o, false)
}
