//! Label and field selectors, parsed and matched like Kubernetes
//! (`k8s.io/apimachinery/pkg/labels` and `k8s.io/apimachinery/pkg/fields`).
//!
//! * [`LabelSelector`] parses the query-string syntax of `labels.Parse`
//!   (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma = AND)
//!   and converts a `metav1.LabelSelector` JSON object ([`LabelSelector::from_label_selector_json`]).
//! * [`FieldSelector`] parses the `fields.ParseSelector` syntax (`k=v`, `k==v`, `k!=v`,
//!   comma = AND, `\,` `\=` `\\` escapes in values).
//!
//! Nothing here panics, whatever the input.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

mod field;
mod label;
mod parse;
mod validation;

pub use field::*;
pub use label::*;
use parse::*;
use validation::*;

/// Errors from parsing or building label and field selectors.
///
/// The messages follow the Kubernetes wording so clients see familiar errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement of a label selector could not be parsed or is invalid
    /// (bad key, bad value, wrong operator or value count).
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The label selector string is malformed between requirements.
    #[error("{0}")]
    Syntax(String),
    /// A requirement built directly (not parsed) is invalid.
    #[error("{0}")]
    InvalidRequirement(String),
    /// A `metav1.LabelSelector` JSON object is malformed.
    #[error("invalid label selector at {path}: {message}")]
    LabelSelectorJson {
        /// Where in the JSON object the problem is (e.g. `matchExpressions[0].operator`).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole selector.
        selector: String,
        /// The term that failed.
        term: String,
    },
    /// A field selector value has an unknown backslash escape (or ends in a lone backslash).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value contains an unescaped `,` or `=`.
    #[error("invalid field selector: unescaped character in value: {0:?}")]
    UnescapedChar(char),
}

// ---------------------------------------------------------------------------
// Validation (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests;
