//! MutatingWebhookConfiguration (admissionregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>,
    admission: &[Admission::WebhookMatchConditions],
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_webhook_configuration(o, true, errs)
}

fn default(o: &mut Map<String, Value>) {
    crate::defaults::admission::default_webhooks(o, true)
}

/// Both webhook configuration kinds print the same table.
pub(super) fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Webhooks",
            "integer",
            "Webhooks is a list of webhooks and the affected resources and operations.",
        ),
        AGE,
    ]
}

pub(super) fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let count = obj["webhooks"].as_array().map_or(0, Vec::len);
    vec![name, json!(count), json!(created)]
}
