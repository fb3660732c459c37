//! Kubernetes protobuf request bodies decoded to Kubernetes JSON.
//!
//! kubectl ≥ 1.32 sends `Content-Type: application/vnd.kubernetes.protobuf` bodies for
//! `kubectl create <kind>`. [`decode_object`] turns such a body into the `serde_json::Value`
//! that client-go would have sent with `Content-Type: application/json` for the same object:
//! same field names, `apiVersion`/`kind` from the envelope, Go's `omitempty` rules, RFC 3339
//! timestamps, Quantity strings, IntOrString as number or string, base64 for bytes.
//!
//! The body is the Kubernetes envelope: the 4 magic bytes `k8s\0` followed by a
//! `runtime.Unknown` message whose `raw` field holds the object's own message.
//!
//! Supported kinds ([`SUPPORTED_KINDS`]): core/v1 Namespace, Service, ConfigMap, Secret,
//! ServiceAccount, Pod, Node, Endpoints, Event, ResourceQuota, PersistentVolumeClaim; apps/v1
//! Deployment, ReplicaSet, DaemonSet, StatefulSet; batch/v1 Job, CronJob;
//! rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding, ClusterRoleBinding;
//! networking.k8s.io/v1 Ingress; policy/v1 PodDisruptionBudget; scheduling.k8s.io/v1
//! PriorityClass; coordination.k8s.io/v1 Lease; discovery.k8s.io/v1 EndpointSlice;
//! autoscaling/v1 Scale; authentication.k8s.io/v1 TokenRequest; autoscaling/v1 and v2
//! HorizontalPodAutoscaler; certificates.k8s.io/v1 CertificateSigningRequest; DeleteOptions
//! (any apiVersion). That is every kind `kubectl create`, `kubectl autoscale` and
//! `kubectl certificate` can send.
//!
//! Every field of those messages and of everything they contain (Kubernetes 1.35, k8s-pb
//! 0.9) is converted, statuses included. A protobuf field the crate does not know (a client
//! newer than 1.35) is refused with [`ProtoError::UnsupportedField`] if it carries data, so
//! nothing is ever dropped silently.
//!
//! The converters in `generated.rs` are produced by `codegen/gen.py`; see there for how each
//! field's JSON name and omission rule were determined.

mod convert;
mod error;
mod generated;
mod generated_schema;
mod path;
mod schema;
mod unknown;

use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message as _;
use serde_json::{Map, Value};

pub use error::ProtoError;
pub use generated::SUPPORTED_KINDS;

/// The 4 bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a Kubernetes protobuf request body (`k8s\0` + `runtime.Unknown`) into the
/// Kubernetes JSON form of the object it carries.
///
/// The result is an object whose first keys are `kind` and `apiVersion` (taken from the
/// envelope's typeMeta), followed by the object's fields in Kubernetes order.
///
/// # Errors
///
/// See [`ProtoError`]: not an envelope, malformed protobuf, compressed or non-protobuf
/// payload, unsupported kind, a field that cannot be converted, or a value without JSON
/// form. Never panics, whatever the input.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body.strip_prefix(&MAGIC).ok_or(ProtoError::MissingMagic)?;
    let envelope = Unknown::decode(rest).map_err(|source| ProtoError::Decode {
        message: "runtime.Unknown",
        source,
    })?;
    let Unknown {
        type_meta,
        raw,
        content_encoding,
        content_type,
    } = envelope;
    if let Some(enc) = content_encoding.filter(|e| !e.is_empty()) {
        return Err(ProtoError::UnsupportedEncoding {
            field: "contentEncoding",
            value: enc,
        });
    }
    if let Some(ct) = content_type.filter(|c| !c.is_empty() && !is_protobuf(c)) {
        return Err(ProtoError::UnsupportedEncoding {
            field: "contentType",
            value: ct,
        });
    }
    let TypeMeta { api_version, kind } = type_meta.unwrap_or_default();
    let api_version = api_version.unwrap_or_default();
    let kind = kind.unwrap_or_default();
    if api_version.is_empty() {
        return Err(ProtoError::InvalidEnvelope(
            "typeMeta.apiVersion is missing".to_owned(),
        ));
    }
    if kind.is_empty() {
        return Err(ProtoError::InvalidEnvelope(
            "typeMeta.kind is missing".to_owned(),
        ));
    }
    let raw = raw.unwrap_or_default();
    let fields = generated::decode_kind(&api_version, &kind, &raw).ok_or_else(|| {
        ProtoError::UnsupportedKind {
            api_version: api_version.clone(),
            kind: kind.clone(),
        }
    })??;
    let mut out = Map::with_capacity(fields.len() + 2);
    out.insert("kind".to_owned(), Value::String(kind));
    out.insert("apiVersion".to_owned(), Value::String(api_version));
    out.extend(fields);
    Ok(Value::Object(out))
}

/// Whether a `Content-Type` value names the Kubernetes protobuf media type (parameters and
/// case ignored).
#[must_use]
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(CONTENT_TYPE))
}

#[cfg(test)]
mod tests;
