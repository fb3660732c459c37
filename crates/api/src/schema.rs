//! Typed decoding of request bodies through the k8s-openapi types, as Kubernetes decodes them
//! into its Go structs: fields it does not know are pruned (and reported for
//! `fieldValidation=Strict`), values of the wrong JSON type are rejected, quantities come out
//! canonical, and what the Go serialisation would print for empty values is printed.
//!
//! The decode goes through a path-tracking [`serde::Deserializer`] over `serde_json::Value`
//! rather than `serde_json::from_value`, which gives three things the plain route cannot:
//! the field path of a type error, the list of unknown fields (k8s-openapi's visitors silently
//! skip them), and a hook on `Quantity` to canonicalise it as Go's `resource.Quantity` does.
//!
//! What the round trip does beyond k8s-openapi's own serialisation (all to match what
//! Kubernetes stores and prints):
//! - empty *optional* lists and maps (`args: []`, `labels: {}`) are dropped: Kubernetes stores
//!   objects as protobuf, where an empty list or map comes back as nil and is then omitted.
//!   Empty *required* lists (`EndpointSlice.endpoints`) stay `[]`, where Kubernetes prints
//!   `null`: other readers of the stored JSON decode it with k8s-openapi, which rejects `null`.
//! - quantities are canonicalised (`0.5` → `500m`, `1.5Gi` → `1536Mi`, `1000` → `1k`) and
//!   malformed ones rejected, as `resource.ParseQuantity` and `Quantity.String` do.
//! - Go prints zero values of non-pointer structs and of fields without `omitempty`; the ones
//!   visible with kubectl are added when absent (see [`go_zero_values`]).
//! - `null` given for a non-optional field decodes as its zero value, as Go's `encoding/json`
//!   does (Go clients send `"endpoints": null`).

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::registry::ResourceInfo;
use cairn_apimachinery::quantity;

pub(crate) mod decoded;
mod typed_decode;
pub(crate) mod zero_values;

pub(crate) use typed_decode::roundtrip;
#[cfg(test)]
use typed_decode::Seg;

pub use zero_values::go_zero_values;

use crate::kinds::strategy::ZeroValuesFn;
pub use decoded::{Normalized, SchemaError};

/// Decode `obj` as the type of `resource`'s objects and serialise it back.
pub fn normalize(resource: &ResourceInfo, obj: &Value) -> Result<Normalized, SchemaError> {
    let mut out = (resource.strategy.normalize)(resource.kind, resource.version, obj)?;
    go_zero_values(resource.strategy.zero_values, &mut out.value);
    Ok(out)
}

/// Decode the body of a subresource request: `scale` bodies are autoscaling/v1 Scales,
/// `binding` bodies v1 Bindings, and `status` (or any other) bodies the parent kind.
pub fn normalize_subresource(
    resource: &ResourceInfo,
    subresource: &str,
    obj: &Value,
) -> Result<Normalized, SchemaError> {
    match resource.subresource(subresource) {
        Some(sub) if !sub.group.is_empty() || !sub.version.is_empty() => {
            let api_version = if sub.group.is_empty() {
                sub.version.to_string()
            } else {
                format!("{}/{}", sub.group, sub.version)
            };
            normalize_kind(&api_version, sub.kind, obj)
        }
        Some(sub) if sub.kind != resource.kind => normalize_kind("v1", sub.kind, obj),
        _ => normalize(resource, obj),
    }
}

/// The bodies of subresources whose kind is no served resource's: their decoding and
/// Go zero values.
type Decode = fn(&str, &str, &Value) -> Result<Normalized, SchemaError>;
type SubresourceBody = (&'static str, &'static str, Decode, Option<ZeroValuesFn>);
static SUBRESOURCE_BODIES: &[SubresourceBody] = &[
    (
        "autoscaling/v1",
        "Scale",
        roundtrip::<k8s_openapi::api::autoscaling::v1::Scale>,
        Some(zero_values::scale_zero_values),
    ),
    (
        "v1",
        "Binding",
        roundtrip::<k8s_openapi::api::core::v1::Binding>,
        None,
    ),
    (
        "policy/v1",
        "Eviction",
        roundtrip::<k8s_openapi::api::policy::v1::Eviction>,
        None,
    ),
];

/// Decode `obj` as the k8s-openapi type of `api_version`/`kind`. Kinds this module does not
/// know are returned unchanged with no unknown fields.
pub fn normalize_kind(
    api_version: &str,
    kind: &str,
    obj: &Value,
) -> Result<Normalized, SchemaError> {
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let found = SUBRESOURCE_BODIES
        .iter()
        .find(|(v, k, ..)| *v == api_version && *k == kind)
        .map(|(_, _, decode, zero)| (*decode, *zero))
        .or_else(|| {
            crate::registry::find_by_kind(api_version, kind)
                .map(|r| (r.strategy.normalize, r.strategy.zero_values))
        });
    let (mut out, zero_values) = match found {
        Some((decode, zero_values)) => (decode(kind, version, obj)?, zero_values),
        None => {
            let as_sent = Normalized {
                value: obj.clone(),
                unknown_fields: Vec::new(),
            };
            (as_sent, None)
        }
    };
    go_zero_values(zero_values, &mut out.value);
    Ok(out)
}

/// The message of Kubernetes' 400 for `fieldValidation=Strict`:
/// `strict decoding error: unknown field "spec.foo", unknown field "spec.bar"`.
pub fn strict_error_message(unknown_fields: &[String]) -> String {
    let parts: Vec<String> = unknown_fields
        .iter()
        .map(|f| format!("unknown field {:?}", f.trim_start_matches('.')))
        .collect();
    format!("strict decoding error: {}", parts.join(", "))
}

/// The `Warning` header texts for `fieldValidation=Warn`: `unknown field "spec.foo"`.
pub fn unknown_field_warnings(unknown_fields: &[String]) -> Vec<String> {
    unknown_fields
        .iter()
        .map(|f| format!("unknown field {:?}", f.trim_start_matches('.')))
        .collect()
}

#[cfg(test)]
mod tests;
