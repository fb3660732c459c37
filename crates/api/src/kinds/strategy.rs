//! What a kind may customise (a leaf: the registry holds strategies without depending on
//! the kinds or on the shared rules they call).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::schema::decoded::{Normalized, SchemaError};
use crate::status::Cause;
use crate::table::column::Col;
use crate::validation::name_rule::NameRule;

/// `SetDefaults_*`: fields set only where the object leaves them unset.
pub type DefaultFn = fn(&mut Map<String, Value>);
/// Adds the Go zero values of an object of the kind.
pub type ZeroValuesFn = fn(&mut Map<String, Value>);
/// Create validation: causes for what is wrong with the object alone.
pub type ValidateFn = fn(&Map<String, Value>, &mut Vec<Cause>);
/// Update validation (old, new): what may not change.
pub type ValidateUpdateFn = fn(&Map<String, Value>, &Map<String, Value>, &mut Vec<Cause>);
/// Typed decoding of a body (kind, version, body): unknown fields and wrong types.
pub type NormalizeFn = fn(&str, &str, &Value) -> Result<Normalized, SchemaError>;
/// One Table row's cells (object, name cell, age cell, now).
pub type RowFn = fn(&Value, Value, &str, DateTime<Utc>) -> Vec<Value>;
/// A Table row's conditions (`Completed` for a finished pod).
pub type RowConditionsFn = fn(&Value) -> Vec<Value>;
/// What the server does to a new object beyond defaulting (upstream's PrepareForCreate).
pub type PrepareFn = fn(&mut Value);
/// What the server does to an updated object (new, old) beyond defaulting.
pub type PrepareUpdateFn = fn(&mut Value, &Value);

/// The admission steps of cairn-apiserver that belong to some kinds only: each kind lists
/// the ones it gets, and the server implements each step once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// DefaultTolerationSeconds, before defaulting adds the 300 s ones.
    PodTolerations,
    /// Priority, LimitRanger and the QoS class the admitted resources give.
    PodResources,
    /// The default StorageClass and LimitRanger's storage bounds for a claim.
    ClaimStorage,
    /// The pv-protection finalizer.
    VolumeProtection,
    /// The default IngressClass for an Ingress that names none.
    DefaultIngressClass,
    /// One global default PriorityClass; system classes reserved.
    PriorityClass,
    /// Cluster IPs and node ports allocated, released on delete.
    ServiceAllocation,
    /// The webhooks' matchConditions compile.
    WebhookMatchConditions,
    /// The policy's CEL compiles.
    PolicyCompile,
    /// A CRD's names and served versions; its objects go with it.
    CustomResourceDefinition,
    /// A DELETE waits out the grace period (and, once bound, the node agent).
    GracefulDeletion,
    /// Deleting terminates first; spec changes only through `finalize`; webhooks' namespace
    /// selectors read the object's own labels.
    NamespaceLifecycle,
    /// A DELETE that names no propagation policy orphans the dependents (with a warning).
    OrphanByDefault,
    /// Quota charges the pod's compute resources.
    PodQuota,
    /// Quota charges the service's node ports and load balancers.
    ServiceQuota,
    /// Quota charges the claim's storage.
    ClaimQuota,
    /// RBAC escalation prevention: a writer holds what a role grants or a binding binds
    /// (or has `escalate`/`bind`).
    RbacEscalation,
}

/// What a kind customises; `Strategy::NONE` is a kind with no rule of its own.
#[derive(Clone, Copy)]
pub struct Strategy {
    pub default: Option<DefaultFn>,
    pub validate: Option<ValidateFn>,
    pub validate_update: Option<ValidateUpdateFn>,
    /// What `metadata.name` must look like.
    pub name_rule: NameRule,
    pub normalize: NormalizeFn,
    /// Table columns beyond the default `Name`/`Created At`.
    pub columns: Option<fn() -> Vec<Col>>,
    pub row: Option<RowFn>,
    pub row_conditions: Option<RowConditionsFn>,
    /// `metadata.generation` counts spec changes.
    pub tracks_generation: bool,
    /// Status counters Go prints even when zero (not `omitempty`).
    pub status_counters: &'static [&'static str],
    /// A new object's status is the server's: what the client sent is dropped and the
    /// status counters start at zero (workloads).
    pub resets_status: bool,
    pub prepare_for_create: Option<PrepareFn>,
    pub prepare_for_update: Option<PrepareUpdateFn>,
    pub admission: &'static [Admission],
    /// PUT of a missing object creates it (upstream's `AllowCreateOnUpdate`).
    pub allow_create_on_update: bool,
    /// Go's zero values the kind always prints (empty structs, non-`omitempty` fields),
    /// added to what is served when absent.
    pub zero_values: Option<ZeroValuesFn>,
}

/// Custom resources: their schema, CEL rules and printer columns come from their CRD, which
/// the API server's custom registry holds; what is fixed is that generation counts spec
/// changes.
pub const CUSTOM: Strategy = Strategy {
    tracks_generation: true,
    ..Strategy::NONE
};

impl Strategy {
    pub const NONE: Strategy = Strategy {
        default: None,
        validate: None,
        validate_update: None,
        name_rule: NameRule::Subdomain,
        normalize: as_sent,
        columns: None,
        row: None,
        row_conditions: None,
        tracks_generation: false,
        status_counters: &[],
        resets_status: false,
        prepare_for_create: None,
        prepare_for_update: None,
        admission: &[],
        allow_create_on_update: false,
        zero_values: None,
    };

    /// Whether the API server runs `step` for this kind.
    pub fn admits(&self, step: Admission) -> bool {
        self.admission.contains(&step)
    }
}

impl std::fmt::Debug for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Strategy")
            .field("tracks_generation", &self.tracks_generation)
            .field("admission", &self.admission)
            .finish_non_exhaustive()
    }
}

/// The body as sent, with no unknown fields: kinds with no typed decoding (custom resources).
fn as_sent(_kind: &str, _version: &str, obj: &Value) -> Result<Normalized, SchemaError> {
    Ok(Normalized {
        value: obj.clone(),
        unknown_fields: Vec::new(),
    })
}
