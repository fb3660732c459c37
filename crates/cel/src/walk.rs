//! The walk over a structural schema that compiles its rules: where it is and what it has
//! found (its steps are in `schema.rs`, the rules' own checks in `rule.rs`).

use std::sync::Arc;

use serde_json::Value;

use crate::decl::Decl;
use crate::path::FieldPath;
use crate::RuleError;

/// Where the walk is.
pub(crate) struct Site<'a> {
    pub(crate) schema: &'a Value,
    pub(crate) decl: Arc<Decl>,
    /// The schema's own field path (`...openAPIV3Schema.properties[spec]`).
    pub(crate) path: FieldPath,
    /// How many times a value here can occur in one object, when every list
    /// and map above declares a bound.
    pub(crate) cardinality: Option<u64>,
    /// The highest list above whose items cannot be correlated.
    pub(crate) uncorrelatable: Option<FieldPath>,
}

#[derive(Default)]
pub(crate) struct Walker {
    pub(crate) errors: Vec<RuleError>,
    pub(crate) total_cost: u64,
    /// Rules costing at least 1% of the CRD limit, most expensive first.
    pub(crate) expensive: Vec<(FieldPath, u64)>,
}
