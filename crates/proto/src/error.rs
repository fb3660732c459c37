//! Errors of protobuf body decoding.

/// Why a protobuf request body could not be turned into Kubernetes JSON.
///
/// Every variant describes a client error (the body came from the network): the server should
/// answer 400 for [`ProtoError::MissingMagic`], [`ProtoError::InvalidEnvelope`],
/// [`ProtoError::Decode`] and [`ProtoError::InvalidField`], and 415 (asking for JSON) for
/// [`ProtoError::UnsupportedEncoding`], [`ProtoError::UnsupportedKind`] and
/// [`ProtoError::UnsupportedField`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The body does not start with the 4 magic bytes `k8s\0` of the Kubernetes protobuf
    /// envelope.
    #[error("body is not a Kubernetes protobuf object: it does not start with the magic bytes \"k8s\\0\"")]
    MissingMagic,

    /// The protobuf bytes of `message` are malformed (truncated, bad wire type, invalid UTF-8
    /// in a string, ...).
    #[error("cannot decode protobuf message {message}: {source}")]
    Decode {
        /// Which message failed: `runtime.Unknown` (the envelope) or the object's kind.
        message: &'static str,
        /// What prost reported.
        #[source]
        source: prost::DecodeError,
    },

    /// The `runtime.Unknown` envelope decoded but lacks something required.
    #[error("invalid Kubernetes protobuf envelope: {0}")]
    InvalidEnvelope(String),

    /// The envelope announces an encoding of `raw` other than plain protobuf.
    #[error(
        "unsupported {field} {value:?} in the protobuf envelope: only uncompressed \
         application/vnd.kubernetes.protobuf is supported, send the object as JSON instead"
    )]
    UnsupportedEncoding {
        /// `contentEncoding` or `contentType`.
        field: &'static str,
        /// The value found.
        value: String,
    },

    /// No protobuf converter exists for this apiVersion/kind.
    #[error(
        "protobuf bodies of kind {kind:?} (apiVersion {api_version:?}) are not supported, \
         send the object as JSON instead"
    )]
    UnsupportedKind {
        /// typeMeta.apiVersion of the envelope.
        api_version: String,
        /// typeMeta.kind of the envelope.
        kind: String,
    },

    /// The object sets a field this crate cannot convert to JSON (for example a protobuf field
    /// unknown to the Kubernetes version the crate was built for). Converting without it would
    /// silently lose data, so the whole object is refused.
    #[error("field {path} of the protobuf object cannot be converted to JSON, send the object as JSON instead")]
    UnsupportedField {
        /// JSON path of the field, e.g. `spec.template.spec.containers[0].(protobuf field 99)`.
        path: String,
    },

    /// A field holds a value that has no JSON representation (an IntOrString of unknown
    /// type, a timestamp outside years 0-9999, managed fields that are not JSON, ...).
    #[error("invalid value in field {path}: {reason}")]
    InvalidField {
        /// JSON path of the field.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}
