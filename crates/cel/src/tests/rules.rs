//! Upstream's evaluation semantics, on small schemas.

use super::support::{messages, rules};
use crate::Violation;
use serde_json::{json, Value};

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
}

fn spec_schema(properties: Value, validations: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": properties, "x-kubernetes-validations": validations
    }}})
}

fn one(violations: &[Violation]) -> (String, String) {
    assert_eq!(violations.len(), 1, "{violations:#?}");
    (violations[0].field.clone(), violations[0].message.clone())
}

fn pair(field: &str, message: &str) -> (String, String) {
    (field.to_owned(), message.to_owned())
}

/// Reserved words and `-./` in property names, as the Gateway API's
/// `__namespace__`; names CEL cannot spell are hidden from rules above
/// them but keep their own.
#[test]
fn property_names_are_escaped() {
    let rule = "self.__namespace__ == 'ns' && self.__if__ && self.x__dash__y == 1 && self.a__dot__b == 2 \
                && self.a__slash__b == 3 && self.foo__underscores__bar == 4 && has(self.__namespace__)";
    let schema = spec_schema(
        json!({
            "namespace": {"type": "string"}, "if": {"type": "boolean"}, "x-y": {"type": "integer"},
            "a.b": {"type": "integer"}, "a/b": {"type": "integer"}, "foo__bar": {"type": "integer"},
            "1st": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0", "message": "must be positive"}]}
        }),
        json!([{"rule": rule}]),
    );
    let rules = rules(&schema);
    let good = json!({"namespace": "ns", "if": true, "x-y": 1, "a.b": 2, "a/b": 3, "foo__bar": 4, "1st": 1});
    assert_eq!(rules.validate(&object(good.clone()), None), vec![]);
    let mut bad = good;
    bad["namespace"] = json!("other");
    bad["1st"] = json!(-1);
    assert_eq!(
        messages(&rules.validate(&object(bad), None)),
        vec![
            pair("spec", &format!("failed rule: {rule}")),
            pair("spec.1st", "must be positive")
        ]
    );
}

#[test]
fn maps_and_objects_both_answer_has() {
    let schema = spec_schema(
        json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}, "replicas": {"type": "integer"}}),
        json!([{"rule": "has(self.replicas) || (has(self.labels.app) && 'app' in self.labels && self.labels['app'] == 'web')"}]),
    );
    let rules = rules(&schema);
    assert_eq!(
        rules.validate(&object(json!({"replicas": 1})), None),
        vec![]
    );
    assert_eq!(
        rules.validate(&object(json!({"labels": {"app": "web"}})), None),
        vec![]
    );
    assert_eq!(
        rules
            .validate(&object(json!({"labels": {"app": "db"}})), None)
            .len(),
        1
    );
}

/// Evaluation errors fail the rule with cel-go's message.
#[test]
fn evaluation_errors_are_violations() {
    let schema = spec_schema(
        json!({"name": {"type": "string"}, "port": {"x-kubernetes-int-or-string": true}}),
        json!([
            {"rule": "self.name == 'x'"},
            {"rule": "self.port > 5", "message": "port must be above 5"},
            {"rule": "type(self.port) == string ? self.port.matches('^[a-z]+$') : self.port > 0"}
        ]),
    );
    let rules = rules(&schema);
    assert_eq!(
        messages(&rules.validate(&object(json!({"port": "http"})), None)),
        vec![
            pair("spec", "no such key: name evaluating rule: self.name == 'x'"),
            pair(
                "spec",
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: port must be above 5"
            ),
        ]
    );
    assert_eq!(
        rules.validate(&object(json!({"name": "x", "port": 8080})), None),
        vec![]
    );
}

#[test]
fn message_expressions_reason_and_field_path() {
    let schema = spec_schema(
        json!({"replicas": {"type": "integer"}, "max": {"type": "integer"},
               "labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
        json!([
            {"rule": "self.replicas <= self.max", "messageExpression": "'replicas ' + string(self.replicas) + ' exceeds ' + string(self.max)",
             "fieldPath": ".replicas", "reason": "FieldValueForbidden"},
            {"rule": "self.labels['app'] != ''", "fieldPath": ".labels['app']", "message": "app label must not be empty",
             "messageExpression": "self.labels['missing'] + ''"},
            {"rule": "self.max < 100", "messageExpression": "''"}
        ]),
    );
    let rules = rules(&schema);
    let violations = rules.validate(
        &object(json!({"replicas": 500, "max": 300, "labels": {"app": ""}})),
        None,
    );
    assert_eq!(
        messages(&violations),
        vec![
            pair("spec.replicas", "replicas 500 exceeds 300"),
            // A message expression that fails falls back to the message.
            pair("spec.labels[app]", "app label must not be empty"),
            // An empty one to the default.
            pair("spec", "failed rule: self.max < 100"),
        ]
    );
    assert_eq!(violations[0].reason.as_deref(), Some("FieldValueForbidden"));
    assert_eq!(violations[1].reason, None);
}

/// A rule on the resource root sees `apiVersion`, `kind` and
/// `metadata.name`/`generateName` only; upstream reports it at `<nil>`.
#[test]
fn root_rules_see_type_and_object_meta() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}, "metadata": {"type": "object"}},
        "x-kubernetes-validations": [{"rule": "self.kind == 'Thing' && self.metadata.name.startsWith('a')", "message": "bad name"}]});
    let rules = rules(&schema);
    assert_eq!(rules.validate(&object(json!({})), None), vec![]);
    let mut obj = object(json!({}));
    obj["metadata"]["name"] = json!("b");
    let violations = rules.validate(&obj, None);
    assert_eq!(one(&violations), pair("<nil>", "bad name"));
    assert_eq!(violations[0].type_name, "object");
    let labels = json!({"type": "object", "properties": {"metadata": {"type": "object"}},
        "x-kubernetes-validations": [{"rule": "has(self.metadata.labels)"}]});
    let errors = crate::compile_schema_rules(&labels, "")
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].message.contains("undefined field 'labels'"),
        "{errors:?}"
    );
}

fn ports_schema() -> Value {
    spec_schema(
        json!({
            "ports": {"type": "array", "maxItems": 16, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string", "maxLength": 15}, "port": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}},
            "limits": {"type": "object", "maxProperties": 8, "additionalProperties": {"type": "integer",
                "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "limits cannot shrink"}]}}
        }),
        json!([]),
    )
}

/// `oldSelf` follows list-map keys and map keys; values without an old one
/// skip transition rules.
#[test]
fn transition_rules_correlate_old_values() {
    let rules = rules(&ports_schema());
    let old = object(
        json!({"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}], "limits": {"cpu": 4}}),
    );
    let new = object(json!({
        "ports": [{"name": "https", "port": 8443}, {"name": "http", "port": 80}, {"name": "admin", "port": 9000}],
        "limits": {"cpu": 2, "memory": 1}
    }));
    assert_eq!(rules.validate(&new, None), vec![]);
    assert_eq!(
        messages(&rules.validate(&new, Some(&old))),
        vec![
            pair("spec.ports[0]", "port is immutable"),
            pair("spec.limits[cpu]", "limits cannot shrink")
        ]
    );
}

#[test]
fn optional_old_self_runs_on_create_too() {
    let schema = spec_schema(
        json!({"replicas": {"type": "integer", "x-kubernetes-validations": [{
            "rule": "oldSelf.hasValue() ? self >= oldSelf.value() : self <= 10",
            "message": "at most 10 at first, never fewer", "optionalOldSelf": true}]}}),
        json!([]),
    );
    let rules = rules(&schema);
    assert_eq!(
        one(&rules.validate(&object(json!({"replicas": 11})), None)),
        pair("spec.replicas", "at most 10 at first, never fewer")
    );
    assert_eq!(
        rules.validate(&object(json!({"replicas": 9})), None),
        vec![]
    );
    let old = object(json!({"replicas": 20}));
    assert_eq!(
        rules.validate(&object(json!({"replicas": 30})), Some(&old)),
        vec![]
    );
    assert_eq!(
        rules
            .validate(&object(json!({"replicas": 19})), Some(&old))
            .len(),
        1
    );
}

/// An update that leaves a failing value unchanged is not refused for it.
#[test]
fn unchanged_values_ratchet() {
    let schema = spec_schema(
        json!({"replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10"}]}, "name": {"type": "string"}}),
        json!([]),
    );
    let rules = rules(&schema);
    let old = object(json!({"replicas": 20, "name": "a"}));
    assert_eq!(rules.validate(&old, None).len(), 1);
    assert_eq!(
        rules.validate(&object(json!({"replicas": 20, "name": "b"})), Some(&old)),
        vec![]
    );
    assert_eq!(
        one(&rules.validate(&object(json!({"replicas": 21, "name": "a"})), Some(&old))),
        pair("spec.replicas", "failed rule: self < 10")
    );
}

#[test]
fn formatted_strings_are_timestamps_durations_and_bytes() {
    let schema = spec_schema(
        json!({"start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
               "timeout": {"type": "string", "format": "duration"}, "data": {"type": "string", "format": "byte"},
               "day": {"type": "string", "format": "date"}}),
        json!([
            {"rule": "self.start < self.end", "message": "start before end"},
            {"rule": "self.timeout > duration('1m')", "message": "timeout above a minute"},
            {"rule": "size(self.data) == 3", "message": "three bytes"},
            {"rule": "self.day.getFullYear() == 2024", "message": "in 2024"}
        ]),
    );
    let rules = rules(&schema);
    let spec = json!({"start": "2024-01-01T00:00:00Z", "end": "2024-01-02T00:00:00Z", "timeout": "1h30m", "data": "YWJj", "day": "2024-05-01"});
    assert_eq!(rules.validate(&object(spec), None), vec![]);
    let spec = json!({"start": "2024-01-03T00:00:00Z", "end": "2024-01-02T00:00:00Z", "timeout": "30s", "data": "YWJjZA==", "day": "2023-05-01"});
    let found: Vec<String> = rules
        .validate(&object(spec), None)
        .into_iter()
        .map(|v| v.message)
        .collect();
    assert_eq!(
        found,
        vec![
            "start before end",
            "timeout above a minute",
            "three bytes",
            "in 2024"
        ]
    );
}

#[test]
fn null_values_are_not_validated() {
    let schema = spec_schema(
        json!({"name": {"type": "string", "nullable": true, "x-kubernetes-validations": [{"rule": "self.size() > 2"}]}}),
        json!([]),
    );
    assert_eq!(
        rules(&schema).validate(&object(json!({"name": null})), None),
        vec![]
    );
}

#[test]
fn embedded_resources_expose_type_and_object_meta() {
    let schema = spec_schema(
        json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [{"rule": "self.kind == 'Pod' && self.metadata.name != ''", "message": "a named Pod"}]}}),
        json!([]),
    );
    let rules = rules(&schema);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    assert_eq!(
        rules.validate(&object(json!({"template": pod})), None),
        vec![]
    );
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
    assert_eq!(
        one(&rules.validate(&object(json!({"template": job})), None)),
        pair("spec.template", "a named Pod")
    );
}

/// Each rule's cost is charged to one budget per object; once it runs out,
/// validation stops with upstream's message.
#[test]
fn the_runtime_budget_stops_validation() {
    let body = "t.size() < 10 && t != 'a' && t != 'b' && t != 'c' && t != 'd' && t != 'e'";
    let rule = |i: usize| json!({"rule": format!("self.tags.all(t, {body} && t != '{i}')")});
    let schema = spec_schema(
        json!({"items": {"type": "array", "maxItems": 300, "items": {"type": "object",
            "properties": {"tags": {"type": "array", "maxItems": 1000, "items": {"type": "string", "maxLength": 8}}},
            "x-kubernetes-validations": [rule(1), rule(2), rule(3)]}}}),
        json!([]),
    );
    let rules = rules(&schema);
    let tags: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
    let items: Vec<Value> = (0..300).map(|_| json!({"tags": tags})).collect();
    let violations = rules.validate(&object(json!({"items": items})), None);
    let (field, message) = one(&violations);
    assert!(field.starts_with("spec.items["), "{field}");
    assert_eq!(message, "validation failed due to running out of cost budget, no further validation rules will be run");
}

/// As upstream: reordering a `set` or `map` list keeps it equal to its old
/// value; reordering an atomic list does not.
#[test]
fn set_and_map_lists_compare_regardless_of_order() {
    let immutable = json!([{"rule": "self == oldSelf", "message": "immutable"}]);
    let schema = spec_schema(
        json!({
            "set": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 8,
                    "items": {"type": "string", "maxLength": 8}, "x-kubernetes-validations": immutable},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "maxItems": 8,
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 8}, "v": {"type": "integer"}}},
                    "x-kubernetes-validations": immutable},
            "atomic": {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 8}, "x-kubernetes-validations": immutable}
        }),
        json!([]),
    );
    let rules = rules(&schema);
    let old = object(
        json!({"set": ["a", "b"], "map": [{"name": "x", "v": 1}, {"name": "y", "v": 2}], "atomic": ["a", "b"]}),
    );
    let new = object(
        json!({"set": ["b", "a"], "map": [{"name": "y", "v": 2}, {"name": "x", "v": 1}], "atomic": ["b", "a"]}),
    );
    assert_eq!(
        messages(&rules.validate(&new, Some(&old))),
        vec![pair("spec.atomic", "immutable")]
    );
    let changed = object(
        json!({"set": ["a", "c"], "map": [{"name": "x", "v": 3}, {"name": "y", "v": 2}], "atomic": ["a", "b"]}),
    );
    assert_eq!(
        messages(&rules.validate(&changed, Some(&old))),
        vec![pair("spec.set", "immutable"), pair("spec.map", "immutable")]
    );
}

#[test]
fn compiled_rules_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<crate::SchemaRules>();
    shareable::<crate::Expression>();
}
