//! CustomResourceDefinition (apiextensions.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;
use crate::schema::{Normalized, SchemaError};

mod validation;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_crd),
    validate: Some(validation::validate_crd),
    validate_update: Some(validation::validate_crd_update),
    normalize,
    admission: &[Admission::CustomResourceDefinition],
    ..Strategy::NONE
};

/// Checked through the typed round trip (wrong types, unknown fields) but kept as sent:
/// schemas hold empty objects that mean something (`default: {}`, `additionalProperties: {}`,
/// `subresources.status: {}`), which the round trip would drop as empty maps.
fn normalize(kind: &str, version: &str, obj: &Value) -> Result<Normalized, SchemaError> {
    roundtrip::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >(kind, version, obj)
    .map(|n| Normalized {
        value: obj.clone(),
        unknown_fields: n.unknown_fields,
    })
}

/// `names.singular` (the kind, lowercased), `names.listKind` (`<kind>List`) and
/// `conversion.strategy: None` (apiextensions/v1 `SetDefaults_*`).
fn default_crd(o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            set_default_str(names, "singular", &kind.to_lowercase());
            set_default_str(names, "listKind", &format!("{kind}List"));
        }
    }
    set_default(spec, "conversion", json!({"strategy": "None"}));
}
