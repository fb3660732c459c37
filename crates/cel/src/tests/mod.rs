//! Tests: every rule of real CRDs compiles; rules evaluate as upstream's do.

mod eval;
mod fixtures;
mod library;
mod rules;
mod schema_errors;
mod support;
