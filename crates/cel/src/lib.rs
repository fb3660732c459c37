//! Kubernetes CEL: the `x-kubernetes-validations` rules of CRD structural
//! schemas, and standalone expressions for `ValidatingAdmissionPolicy`,
//! evaluated with cel-rust (`cel` 0.15) the way the Kubernetes API server
//! evaluates them with cel-go. Pure: JSON in, errors and violations out.
//!
//! What upstream gets from cel-go's type checker and cost estimator, which
//! cel-rust lacks, comes from `check` (a small checker over the parsed
//! expression and the schema) and `cost` (a static estimate following
//! cel-go's cost model, and a runtime meter on comprehensions).
//!
//! Supported: the standard library and macros, optionals (`oldSelf.hasValue()`,
//! `.?f`, `orValue`), the strings extension (`split`, `substring`,
//! `lowerAscii`, `format`, ...), the lists extension (`slice`, `flatten`,
//! `sort`, ...), Kubernetes' `isIP`/`ip`, `isCIDR`/`cidr`, `isURL`/`url`,
//! `isQuantity`/`quantity`, list functions (`isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`), `sets.*`, regex `find`/`findAll`; property-name
//! escaping; int-or-string, `format: date`/`date-time`/`duration`/`byte`;
//! transition rules with list-map and map correlation; `optionalOldSelf`;
//! `messageExpression`, `fieldPath`, `reason`; ratcheting of unchanged values;
//! order-insensitive equality of `set` and `map` lists.
//!
//! Not supported: the `format.*`, semver and authorizer libraries,
//! two-variable comprehensions (`all(k, v, ...)`), rules under `allOf`,
//! and full type checking (only what `check` describes is refused at compile
//! time; other type errors surface at evaluation, as upstream does for
//! int-or-string).

mod check;
mod cost;
mod decl;
mod env;
mod error;
mod escape;
mod expression;
mod fieldpath;
mod functions;
mod library;
mod path;
mod program;
mod rule;
mod schema;
mod ty;
mod unordered;
mod validate;
mod values;
mod walk;

#[cfg(test)]
mod tests;

pub use expression::Expression;

use path::FieldPath;
use schema::{Node, Site, Walker};

/// Every rule of a structural schema, compiled, with the schema locations
/// they apply to.
#[derive(Debug, Default)]
pub struct SchemaRules {
    root: Option<Node>,
}

/// A rule the CRD cannot have, for a `Status` cause: `field` is the rule's
/// path in the CRD (`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`),
/// `message` upstream's field-error body, starting with its type
/// (`Invalid value: `, `Required value: `, `Forbidden: `, `Unsupported value: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub field: String,
    pub message: String,
}

/// A rule an object breaks. The caller renders it as upstream does:
/// `<field>: Invalid value: "<type_name>": <message>`, or by `reason`
/// (`FieldValueForbidden` → `Forbidden: <message>`, `FieldValueRequired` →
/// `Required value: <message>`, `FieldValueDuplicate` →
/// `Duplicate value: "<type_name>"`). `field` is `<nil>` for a rule at the
/// root of the resource, as upstream prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    /// The schema's `type` at the rule (`object`, `string`, ...), or `""`
    /// where the schema has none (int-or-string).
    pub type_name: &'static str,
    pub message: String,
    pub reason: Option<String>,
}

/// Compiles every rule in `schema` (the `openAPIV3Schema` of a CRD version),
/// recursively through `properties`, `items` and `additionalProperties`,
/// naming them under `path` (`spec.versions[0].schema.openAPIV3Schema`).
pub fn compile_schema_rules(
    schema: &serde_json::Value,
    path: &str,
) -> Result<SchemaRules, Vec<RuleError>> {
    let prefix = FieldPath::from_prefix(path);
    let Some(decl) = decl::schema_decl(schema, true) else {
        return Ok(SchemaRules::default());
    };
    let mut walker = Walker::default();
    let site = Site {
        schema,
        decl,
        path: prefix.clone(),
        cardinality: Some(1),
        uncorrelatable: None,
    };
    let root = walker.node(&site);
    walker.check_total(&prefix);
    if walker.errors.is_empty() {
        Ok(SchemaRules { root })
    } else {
        Err(walker.errors)
    }
}

impl SchemaRules {
    /// Evaluates every rule on `obj`; `old` is the object before an update.
    pub fn validate(
        &self,
        obj: &serde_json::Value,
        old: Option<&serde_json::Value>,
    ) -> Vec<Violation> {
        let Some(root) = &self.root else {
            return Vec::new();
        };
        let mut validation = validate::Validation::new();
        validation.node(root, &FieldPath::root(), obj, old, old == Some(obj));
        validation.violations
    }

    /// Whether the schema has no rules at all.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }
}

/// Compiles one standalone expression (admission policies). The variables
/// `object`, `oldObject`, `request`, `params`, `namespaceObject` and
/// `variables` are declared.
pub fn compile_expression(expr: &str) -> Result<Expression, String> {
    expression::compile_expression(expr)
}

impl SchemaRules {
    /// How many rules were compiled (rules under schema parts CEL cannot see
    /// are skipped, as upstream skips them).
    pub fn rule_count(&self) -> usize {
        fn count(n: &Node) -> usize {
            n.rules.len()
                + n.properties.values().map(count).sum::<usize>()
                + n.items.as_deref().map_or(0, count)
                + n.additional.as_deref().map_or(0, count)
        }
        self.root.as_ref().map_or(0, count)
    }
}
