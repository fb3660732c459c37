use serde_json::{json, Value};

use super::super::validate;
use super::validate_lines;

/// A root schema whose `spec` has the given properties.
fn spec(props: Value) -> Value {
    json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": props},
    }})
}

fn lines_for(props: Value, spec_value: Value) -> Vec<String> {
    validate_lines(
        &spec(props),
        &json!({"apiVersion": "x/v1", "kind": "X", "spec": spec_value}),
    )
}

#[test]
fn types() {
    let props = json!({
        "replicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "on": {"type": "boolean"},
        "name": {"type": "string"},
        "list": {"type": "array", "items": {"type": "string"}},
        "obj": {"type": "object"},
    });
    assert!(lines_for(
        props.clone(),
        json!({
            "replicas": 3, "ratio": 1, "on": true, "name": "a", "list": ["x"], "obj": {}
        })
    )
    .is_empty());
    assert_eq!(
        lines_for(
            props,
            json!({
                "replicas": "string", "ratio": "1", "on": 1, "name": 5, "list": {}, "obj": [],
            })
        ),
        vec![
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            r#"spec.ratio: Invalid value: "string": spec.ratio in body must be of type number: "string""#,
            r#"spec.on: Invalid value: "integer": spec.on in body must be of type boolean: "integer""#,
            r#"spec.name: Invalid value: "integer": spec.name in body must be of type string: "integer""#,
            r#"spec.list: Invalid value: "object": spec.list in body must be of type array: "object""#,
            r#"spec.obj: Invalid value: "array": spec.obj in body must be of type object: "array""#,
        ]
    );
}

#[test]
fn type_errors_are_type_invalid() {
    let causes = validate(
        &spec(json!({"replicas": {"type": "integer"}})),
        &json!({"spec": {"replicas": "string"}}),
    );
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
    assert_eq!(causes[0].field, "spec.replicas");
}

#[test]
fn integers_given_as_floats() {
    let props = json!({"n": {"type": "integer"}});
    assert!(lines_for(props.clone(), json!({"n": 1.0})).is_empty());
    assert!(lines_for(props.clone(), json!({"n": -3.0})).is_empty());
    assert_eq!(
        lines_for(props, json!({"n": 1.5})),
        vec![
            r#"spec.n: Invalid value: "number": spec.n in body must be of type integer: "number""#
        ]
    );
}

#[test]
fn nullable() {
    let props = json!({"a": {"type": "string", "nullable": true}, "b": {"type": "string"}});
    assert_eq!(
        lines_for(props, json!({"a": null, "b": null})),
        vec![r#"spec.b: Invalid value: "null": spec.b in body must be of type string: "null""#]
    );
}

#[test]
fn required() {
    let schema = json!({"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["name", "size"], "properties": {
            "name": {"type": "string"}, "size": {"type": "string"},
        }},
    }});
    assert_eq!(
        validate_lines(&schema, &json!({})),
        vec!["spec: Required value"]
    );
    assert_eq!(
        validate_lines(&schema, &json!({"spec": {"size": "S"}})),
        vec!["spec.name: Required value"]
    );
}

#[test]
fn enums() {
    let props = json!({
        "size": {"type": "string", "enum": ["S", "M"]},
        "n": {"type": "integer", "enum": [1, 2]},
        "obj": {"type": "object", "enum": [{"a": 1}]},
    });
    assert!(lines_for(
        props.clone(),
        json!({"size": "M", "n": 2.0, "obj": {"a": 1}})
    )
    .is_empty());
    assert_eq!(
        lines_for(props, json!({"size": "XL", "n": 3, "obj": {"a": 2}})),
        vec![
            r#"spec.size: Unsupported value: "XL": supported values: "S", "M""#,
            r#"spec.n: Unsupported value: 3: supported values: "1", "2""#,
            r#"spec.obj: Unsupported value: map[string]interface {}{"a":2}: supported values: "{\"a\":1}""#,
        ]
    );
}

#[test]
fn enum_comparison_converts_like_go() {
    // reflect's conversion of 1.5 to int64 is 1, so upstream accepts it
    let props = json!({"n": {"type": "number", "enum": [1]}});
    assert!(lines_for(props, json!({"n": 1.5})).is_empty());
}

#[test]
fn numeric_bounds() {
    let props = json!({
        "count": {"type": "integer", "maximum": 10},
        "below": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
        "min": {"type": "integer", "minimum": 1, "exclusiveMinimum": true},
        "ratio": {"type": "number", "minimum": 1},
        "big": {"type": "integer", "maximum": 1000000},
        "frac": {"type": "number", "maximum": 2.5},
        "bigf": {"type": "number", "maximum": 1000000},
    });
    assert!(lines_for(
        props.clone(),
        json!({
            "count": 10, "below": 9, "min": 2, "ratio": 1, "big": 1000000, "frac": 2.5
        })
    )
    .is_empty());
    assert_eq!(
        lines_for(props, json!({
            "count": 11, "below": 10, "min": 1, "ratio": 0.5, "big": 2000000, "frac": 3.25,
            "bigf": 2000000.5,
        })),
        vec![
            "spec.count: Invalid value: 11: spec.count in body should be less than or equal to 10",
            "spec.below: Invalid value: 10: spec.below in body should be less than 10",
            "spec.min: Invalid value: 1: spec.min in body should be greater than 1",
            "spec.ratio: Invalid value: 0.5: spec.ratio in body should be greater than or equal to 1",
            "spec.big: Invalid value: 2000000: spec.big in body should be less than or equal to 1000000",
            "spec.frac: Invalid value: 3.25: spec.frac in body should be less than or equal to 2.5",
            "spec.bigf: Invalid value: 2.0000005e+06: spec.bigf in body should be less than or equal to 1e+06",
        ]
    );
}

#[test]
fn integer_bounds_are_truncated_as_upstream() {
    let props = json!({"n": {"type": "integer", "maximum": 10.5}});
    assert_eq!(
        lines_for(props, json!({"n": 11})),
        vec!["spec.n: Invalid value: 11: spec.n in body should be less than or equal to 10"]
    );
}

#[test]
fn multiple_of() {
    let props = json!({
        "n": {"type": "integer", "multipleOf": 5},
        "f": {"type": "number", "multipleOf": 0.1},
        "z": {"type": "integer", "multipleOf": 0.5},
    });
    assert!(lines_for(props.clone(), json!({"n": 10, "f": 0.3})).is_empty());
    assert_eq!(
        lines_for(props, json!({"n": 7, "f": 0.35, "z": 3})),
        vec![
            "spec.n: Invalid value: 7: spec.n in body should be a multiple of 5",
            "spec.f: Invalid value: 0.35: spec.f in body should be a multiple of 0.1",
            "spec.z: Invalid value: 0: factor MultipleOf declared for spec.z must be positive: 0",
        ]
    );
}

#[test]
fn strings() {
    let props = json!({
        "name": {"type": "string", "minLength": 3, "maxLength": 5},
        "code": {"type": "string", "pattern": "^[0-9]+$"},
        "word": {"type": "string", "pattern": "\\w+\\s\\d"},
    });
    assert!(lines_for(
        props.clone(),
        json!({"name": "héllo", "code": "123", "word": "ab 1"})
    )
    .is_empty());
    assert_eq!(
        lines_for(
            props.clone(),
            json!({"name": "x", "code": "abc", "word": "é\u{a0}١"})
        ),
        vec![
            r#"spec.name: Invalid value: "x": spec.name in body should be at least 3 chars long"#,
            r#"spec.code: Invalid value: "abc": spec.code in body should match '^[0-9]+$'"#,
            r#"spec.word: Invalid value: "é\u00a0١": spec.word in body should match '\w+\s\d'"#,
        ]
    );
    let causes = validate(&spec(props), &json!({"spec": {"name": "toolong"}}));
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0].describe(),
        "spec.name: Too long: may not be more than 5 bytes"
    );
    assert_eq!(causes[0].reason, "FieldValueTooLong");
}

#[test]
fn arrays() {
    let props = json!({
        "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
    });
    assert!(lines_for(props.clone(), json!({"items": [1, 2]})).is_empty());
    assert_eq!(
        lines_for(props.clone(), json!({"items": [1, 2, 3, 4]})),
        vec!["spec.items: Too many: 4: must have at most 3 items"]
    );
    assert_eq!(
        lines_for(props, json!({"items": ["a"]})),
        vec![
            r#"spec.items[0]: Invalid value: "string": spec.items[0] in body must be of type integer: "string""#,
            "spec.items: Invalid value: 1: spec.items in body should have at least 2 items",
        ]
    );
}

#[test]
fn unique_items() {
    let props = json!({"u": {"type": "array", "items": {"type": "integer"}, "uniqueItems": true}});
    assert!(lines_for(props.clone(), json!({"u": [1, 2]})).is_empty());
    assert_eq!(
        lines_for(props, json!({"u": [1, 2, 1]})),
        vec![r#"spec.u: Invalid value: "": spec.u in body shouldn't contain duplicates"#]
    );
}

#[test]
fn properties_counts() {
    let props = json!({"labels": {"type": "object", "additionalProperties": {"type": "string"},
        "minProperties": 1, "maxProperties": 2}});
    assert_eq!(
        lines_for(props.clone(), json!({"labels": {}})),
        vec![
            "spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties"
        ]
    );
    assert_eq!(
        lines_for(
            props.clone(),
            json!({"labels": {"a": "1", "b": "2", "c": "3"}})
        ),
        vec!["spec.labels: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        lines_for(props, json!({"labels": {"a": 1}})),
        vec![
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#
        ]
    );
}

#[test]
fn additional_properties_false() {
    let props = json!({"m": {"type": "object", "additionalProperties": false}});
    assert_eq!(
        lines_for(props, json!({"m": {"x": 1}})),
        vec![r#"spec.m: Invalid value: "x": spec.m.x in body is a forbidden property"#]
    );
}

#[test]
fn int_or_string() {
    let props = json!({"port": {"x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}});
    assert!(lines_for(props.clone(), json!({"port": 8080})).is_empty());
    assert!(lines_for(props.clone(), json!({"port": "http"})).is_empty());
    assert_eq!(
        lines_for(props, json!({"port": true})),
        vec![
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
            r#"<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)"#,
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean""#,
        ]
    );
}

#[test]
fn any_of_reports_the_best_branch() {
    let props = json!({"x": {"type": "integer", "anyOf": [
        {"minimum": 10},
        {"maximum": 1, "multipleOf": 2},
    ]}});
    assert!(lines_for(props.clone(), json!({"x": 12})).is_empty());
    assert_eq!(
        lines_for(props, json!({"x": 5})),
        vec![
            r#"<nil>: Invalid value: "": "spec.x" must validate at least one schema (anyOf)"#,
            "spec.x: Invalid value: 5: spec.x in body should be greater than or equal to 10",
        ]
    );
}

#[test]
fn one_of_all_of_not() {
    let props = json!({
        "one": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
        "all": {"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]},
        "not": {"type": "string", "not": {"enum": ["bad"]}},
    });
    assert!(lines_for(props.clone(), json!({"one": 20, "all": 5, "not": "good"})).is_empty());
    assert_eq!(
        lines_for(props.clone(), json!({"one": 5, "all": 11, "not": "bad"})),
        vec![
            r#"<nil>: Invalid value: "": "spec.one" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            "spec.all: Invalid value: 11: spec.all in body should be less than or equal to 10",
            r#"<nil>: Invalid value: "": "spec.all" must validate all the schemas (allOf)"#,
            r#"<nil>: Invalid value: "": "spec.not" must not validate the schema (not)"#,
        ]
    );
    let props = json!({"x": {"type": "integer", "allOf": [{"minimum": 10}, {"maximum": 1}],
        "oneOf": [{"minimum": 10}, {"maximum": 1}]}});
    assert_eq!(
        lines_for(props, json!({"x": 5})),
        vec![
            r#"<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.x: Invalid value: 5: spec.x in body should be greater than or equal to 10",
            "spec.x: Invalid value: 5: spec.x in body should be less than or equal to 1",
            r#"<nil>: Invalid value: "": "spec.x" must validate all the schemas (allOf). None validated"#,
        ]
    );
}

#[test]
fn formats() {
    let props = json!({
        "email": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "id": {"type": "string", "format": "uuid"},
        "ip": {"type": "string", "format": "ipv4"},
        "n": {"type": "integer", "format": "int32"},
        "other": {"type": "string", "format": "not-a-format"},
    });
    assert!(lines_for(
        props.clone(),
        json!({
            "email": "a@example.com", "when": "2024-02-29T10:00:00Z", "day": "2024-02-29",
            "id": "0f0e9e1c-4b8e-4a83-9a5b-2f5f0a6f9e3d", "ip": "10.0.0.1",
            "n": 99999999999i64, "other": "anything",
        })
    )
    .is_empty());
    assert_eq!(
        lines_for(
            props,
            json!({
                "email": "x", "when": "2024-02-30T10:00:00Z", "day": "2023-02-29",
                "id": "nope", "ip": "10.0.0.256",
            })
        ),
        vec![
            r#"spec.email: Invalid value: "x": spec.email in body must be of type email: "x""#,
            r#"spec.when: Invalid value: "2024-02-30T10:00:00Z": spec.when in body must be of type date-time: "2024-02-30T10:00:00Z""#,
            r#"spec.day: Invalid value: "2023-02-29": spec.day in body must be of type date: "2023-02-29""#,
            r#"spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope""#,
            r#"spec.ip: Invalid value: "10.0.0.256": spec.ip in body must be of type ipv4: "10.0.0.256""#,
        ]
    );
}

#[test]
fn a_format_on_a_non_string_value_names_the_format() {
    // kube-openapi's typeValidator checks the format before the type
    let props = json!({"t": {"type": "string", "format": "date-time"}});
    assert_eq!(
        lines_for(props, json!({"t": 5})),
        vec![
            r#"spec.t: Invalid value: "int64": spec.t in body must be of type date-time: "int64""#
        ]
    );
}

#[test]
fn root_metadata_is_only_checked_for_name_restrictions() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 5},
        }},
    }});
    let ok = json!({"metadata": {"name": "abc", "labels": {"a": "b"}, "creationTimestamp": null}});
    assert!(validate_lines(&schema, &ok).is_empty());
    assert_eq!(
        validate_lines(&schema, &json!({"metadata": {"name": "toolong"}})),
        vec!["metadata.name: Too long: may not be more than 5 bytes"]
    );
}

#[test]
fn preserved_fields_are_not_validated_beyond_what_is_declared() {
    let props = json!({"any": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"n": {"type": "integer"}}}});
    assert!(lines_for(props.clone(), json!({"any": {"x": [1, {"y": null}]}})).is_empty());
    assert_eq!(
        lines_for(props, json!({"any": {"n": "1"}})),
        vec![
            r#"spec.any.n: Invalid value: "string": spec.any.n in body must be of type integer: "string""#
        ]
    );
}

#[test]
fn a_root_of_the_wrong_type() {
    let schema = spec(json!({}));
    assert_eq!(
        validate_lines(&schema, &json!("text")),
        vec![r#"<nil>: Invalid value: "string":  in body must be of type object: "string""#]
    );
    assert_eq!(
        validate_lines(&schema, &json!({"spec": [1]})),
        vec![r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
    );
}
