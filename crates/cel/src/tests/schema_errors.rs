//! Rules a CRD cannot have, reported as upstream reports them.

use crate::{compile_schema_rules, RuleError};
use serde_json::{json, Value};

const PREFIX: &str = "spec.versions[0].schema.openAPIV3Schema";
const RULE_PATH: &str =
    "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]";

fn spec_with(rules: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "name": {"type": "string", "maxLength": 63},
            "items": {"type": "array", "items": {"type": "integer"}},
            "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}}
        },
        "x-kubernetes-validations": rules
    }}})
}

fn errors(rule: Value) -> Vec<RuleError> {
    match compile_schema_rules(&spec_with(json!([rule])), PREFIX) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    }
}

fn error(rule: Value) -> (String, String) {
    let errors = errors(rule);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    (errors[0].field.clone(), errors[0].message.clone())
}

fn at(suffix: &str) -> String {
    format!("{RULE_PATH}.{suffix}")
}

#[test]
fn a_syntax_error_is_reported_with_cel_go_issue_formatting() {
    assert_eq!(
        error(json!({"rule": "self.replicas =="})),
        (
            at("rule"),
            "Invalid value: {\"Rule\":\"self.replicas ==\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: \
             compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n \
             | self.replicas ==\n | ................^"
                .to_owned()
        )
    );
}

#[test]
fn type_errors_are_reported_at_their_position() {
    let issue = |rule: &str| {
        let (field, message) = error(json!({"rule": rule}));
        assert_eq!(field, at("rule"));
        message
            .split_once(": compilation failed: ")
            .map(|(_, issue)| issue.to_owned())
            .unwrap_or(message)
    };
    assert_eq!(
        issue("self.nope == 1"),
        "ERROR: <input>:1:5: undefined field 'nope'\n | self.nope == 1\n | ....^"
    );
    assert_eq!(
        issue("foo == 1"),
        "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
    );
    assert_eq!(
        issue("self.name.frob()"),
        "ERROR: <input>:1:15: undeclared reference to 'frob' (in container '')\n | self.name.frob()\n | ..............^"
    );
    assert_eq!(
        issue("self.replicas.foo == 1"),
        "ERROR: <input>:1:14: type 'int' does not support field selection\n | self.replicas.foo == 1\n | .............^"
    );
    assert_eq!(issue("self.name.matches('[')"), "ERROR: <input>:1:19: invalid matches argument\n | self.name.matches('[')\n | ..................^");
    assert_eq!(issue("[1, 'a'].size() == 2"), "ERROR: <input>:1:5: expected type 'int' but found 'string'\n | [1, 'a'].size() == 2\n | ....^");
    // The whole rule is checked, comprehension variables included.
    assert_eq!(
        issue("self.tags.all(t, t.nope)"),
        "ERROR: <input>:1:19: type 'string' does not support field selection\n | self.tags.all(t, t.nope)\n | ..................^"
    );
}

#[test]
fn a_rule_must_be_a_bool() {
    let (field, message) = error(json!({"rule": "self.replicas"}));
    assert_eq!(field, at("rule"));
    assert!(
        message.ends_with(": cel expression must evaluate to a bool"),
        "{message}"
    );
}

#[test]
fn an_unbounded_nested_loop_exceeds_the_cost_budget() {
    let errors = errors(json!({"rule": "self.items.all(a, self.items.all(b, a + b > 0))"}));
    let found: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.field.as_str(), e.message.as_str()))
        .collect();
    let budget = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        found,
        vec![
            (at("rule").as_str(), format!("Forbidden: estimated rule cost exceeds budget by factor of more than 100x {budget}").as_str()),
            (at("rule").as_str(), "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
            (PREFIX, format!("Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {budget}").as_str()),
        ]
    );
    // Bounded, the same loop is cheap.
    assert_eq!(
        errors_for("self.tags.all(a, self.tags.all(b, a != b || a == b))"),
        Vec::new()
    );
}

fn errors_for(rule: &str) -> Vec<RuleError> {
    errors(json!({"rule": rule}))
}

#[test]
fn rule_fields_are_checked_before_the_cel() {
    assert_eq!(
        error(json!({"rule": " "})),
        (
            at("rule"),
            "Required value: rule is not specified".to_owned()
        )
    );
    assert_eq!(
        error(json!({"rule": "self.replicas > 1 &&\nself.replicas < 5"})),
        (
            at("message"),
            "Required value: message must be specified if rule contains line breaks".to_owned()
        )
    );
    assert_eq!(
        error(json!({"rule": "self.replicas > 1", "message": "a\nb"})),
        (
            at("message"),
            "Invalid value: \"a\\nb\": must not contain line breaks".to_owned()
        )
    );
    assert_eq!(
        error(json!({"rule": "self.replicas > 1", "reason": "Bogus"})),
        (
            at("reason"),
            "Unsupported value: \"Bogus\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"".to_owned()
        )
    );
    assert_eq!(
        error(json!({"rule": "self.replicas > 1", "fieldPath": ".nope"})),
        (
            at("fieldPath"),
            "Invalid value: \".nope\": must be a valid path".to_owned()
        )
    );
}

#[test]
fn message_expressions_compile_to_strings() {
    let (field, message) =
        error(json!({"rule": "self.replicas > 1", "messageExpression": "self.replicas"}));
    assert_eq!(field, at("messageExpression"));
    assert_eq!(
        message,
        "Invalid value: {\"Rule\":\"self.replicas \\u003e 1\",\"Message\":\"\",\"MessageExpression\":\"self.replicas\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: messageExpression must evaluate to a string"
    );
    let (_, message) = error(json!({"rule": "self.replicas > 1", "messageExpression": "'a' +"}));
    assert!(
        message
            .contains(": messageExpression compilation failed: ERROR: <input>:1:6: Syntax error"),
        "{message}"
    );
}

#[test]
fn old_self_rules() {
    assert_eq!(
        error(json!({"rule": "self.replicas > 1", "optionalOldSelf": false})),
        (
            at("optionalOldSelf"),
            "Invalid value: false: may not be set if oldSelf is not used in rule".to_owned()
        )
    );
    assert_eq!(errors_for("self.replicas >= oldSelf.replicas"), Vec::new());
    // Items of a list that is not a list-type map have no old value.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "list": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}
    }}}});
    let errors = compile_schema_rules(&schema, PREFIX)
        .err()
        .unwrap_or_default();
    assert_eq!(
        errors,
        vec![RuleError {
            field: "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items.x-kubernetes-validations[0].rule".to_owned(),
            message: "Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within \
                      spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list]"
                .to_owned(),
        }]
    );
}

#[test]
fn a_schema_without_rules_is_empty() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    let rules = compile_schema_rules(&schema, PREFIX).unwrap_or_default();
    assert!(rules.is_empty());
    assert_eq!(rules.validate(&json!({"spec": {}}), None), vec![]);
}
