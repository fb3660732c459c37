//! What decoding a body gives: the normalized object, or the error a client gets (a leaf:
//! kinds name their decoders without depending on the decoder).

use std::fmt;

use serde_json::Value;

/// An object after the typed round trip.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The object as Kubernetes would store it: unknown fields pruned, quantities canonical.
    pub value: Value,
    /// JSON paths (`.spec.foo`, `.spec.containers[0].imagee`) of non-null fields the type does
    /// not have, in document order. See [`strict_error_message`].
    pub unknown_fields: Vec<String>,
}

/// A body that cannot be decoded into its type: answered with 400 BadRequest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Kind and version the body was decoded as (`Deployment`, `v1`).
    pub kind: String,
    pub version: String,
    /// The decoder's message, worded like Go's `encoding/json`
    /// (`json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`).
    pub message: String,
    /// Dotted path of the offending field when known (`spec.replicas`).
    pub field: Option<String>,
}

impl fmt::Display for SchemaError {
    /// The Status message Kubernetes answers with (`transformDecodeError`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in version {:?} cannot be handled as a {}: {}",
            self.kind, self.version, self.kind, self.message
        )
    }
}

impl std::error::Error for SchemaError {}
