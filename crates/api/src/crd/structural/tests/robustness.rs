//! Garbage in: nothing panics, and the answers stay sensible.

use serde_json::{json, Value};

use super::super::{apply_defaults, check_structural, prune, validate};
use super::check_lines;

fn all_functions(schema: &Value, obj: &Value) {
    let _ = check_structural(schema, "s");
    let mut pruned = obj.clone();
    let _ = prune(schema, &mut pruned);
    let mut defaulted = obj.clone();
    apply_defaults(schema, &mut defaulted);
    let _ = validate(schema, obj);
}

#[test]
fn schemas_that_are_not_objects() {
    for schema in [json!(null), json!(1), json!("x"), json!([]), json!(true)] {
        let lines = check_lines(&schema);
        assert_eq!(lines.len(), 1, "{schema}");
        assert!(lines[0].starts_with("s: Invalid value: "), "{lines:?}");
        assert!(lines[0].ends_with(": must be an object"), "{lines:?}");
        all_functions(&schema, &json!({"a": [1, {"b": null}]}));
    }
}

#[test]
fn keywords_of_the_wrong_type_are_reported() {
    let schema = json!({
        "type": 5,
        "properties": {"a": {"type": "string", "maxLength": "3", "enum": "x"}, "b": []},
        "required": "a",
        "items": 3,
        "additionalProperties": "no",
        "x-kubernetes-preserve-unknown-fields": "yes",
        "minimum": "0",
        "required_unknown_keyword": {"is": "ignored"},
    });
    assert_eq!(
        check_lines(&schema),
        vec![
            "s.type: Invalid value: 5: must be a string",
            r#"s.properties[a].maxLength: Invalid value: "3": must be an integer"#,
            r#"s.properties[a].enum: Invalid value: "x": must be an array"#,
            "s.properties[b]: Invalid value: []interface {}{}: must be an object",
            r#"s.required: Invalid value: "a": must be an array"#,
            "s.items: Invalid value: 3: must be an object or an array",
            r#"s.additionalProperties: Invalid value: "no": must be an object or a boolean"#,
            r#"s.x-kubernetes-preserve-unknown-fields: Invalid value: "yes": must be a boolean"#,
            r#"s.minimum: Invalid value: "0": must be a number"#,
        ]
    );
    all_functions(&schema, &json!({"a": "abcdef", "b": 1}));
}

#[test]
fn wrong_typed_keywords_read_as_absent_elsewhere() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": "3", "pattern": 7, "default": "d"},
    }});
    assert!(validate(&schema, &json!({"a": "abcdef"})).is_empty());
    let mut obj = json!({});
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj, json!({"a": "d"}));
}

/// `{key: inner, ...extra}`, built without `json!` (which would re-serialize `inner`).
fn wrap(inner: Value, key: &str, extra: &[(&str, Value)]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(key.to_string(), inner);
    for (k, v) in extra {
        m.insert(k.to_string(), v.clone());
    }
    Value::Object(m)
}

/// Objects nested `depth` deep through properties `n`, a string at the bottom.
fn nested_schema(depth: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 0..depth {
        s = wrap(
            wrap(s, "n", &[]),
            "properties",
            &[("type", json!("object"))],
        );
    }
    s
}

/// `{"n": {"n": ... "leaf"}, "junk": 1}`, `depth` deep.
fn nested_value(depth: usize) -> Value {
    let mut v = json!("leaf");
    for _ in 0..depth {
        v = wrap(v, "n", &[("junk", json!(1))]);
    }
    v
}

#[test]
fn deeply_nested_schemas_are_cut_off() {
    let schema = nested_schema(150);
    let lines = check_lines(&schema);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].ends_with("Forbidden: must not be nested more than 100 levels deep"),
        "{lines:?}"
    );
    all_functions(&schema, &nested_value(150));
}

#[test]
fn deep_but_reasonable_nesting_works() {
    let schema = nested_schema(50);
    assert!(check_lines(&schema).is_empty());
    let mut obj = nested_value(50);
    let removed = prune(&schema, &mut obj);
    assert_eq!(removed.len(), 50);
    assert!(validate(&schema, &obj).is_empty());
}

#[test]
fn deeply_nested_values_under_a_shallow_schema() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"n": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    all_functions(&schema, &nested_value(300));
    let mut deep_array = json!(1);
    for _ in 0..300 {
        deep_array = Value::Array(vec![deep_array]);
    }
    all_functions(&nested_schema(3), &wrap(deep_array, "n", &[]));
}

#[test]
fn garbage_in_every_position() {
    let garbage = [
        json!(null),
        json!(-1.5e300),
        json!(u64::MAX),
        json!(""),
        json!("\u{0}\u{ffff}"),
        json!([null, [], {}]),
        json!({"": {"": {"": null}}}),
    ];
    let keywords = [
        "type",
        "format",
        "pattern",
        "enum",
        "items",
        "properties",
        "additionalProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "default",
        "required",
        "maximum",
        "minLength",
        "multipleOf",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-int-or-string",
        "x-kubernetes-embedded-resource",
    ];
    for k in keywords {
        for g in &garbage {
            let schema = json!({"type": "object", "properties": {"f": {k: g}}});
            for obj in &garbage {
                all_functions(&schema, &json!({"f": obj}));
                all_functions(&schema, obj);
            }
        }
    }
}

#[test]
fn bad_patterns_in_objects_do_not_panic() {
    let schema =
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(["}}});
    assert_eq!(
        super::validate_lines(&schema, &json!({"s": "x"})),
        vec![
            r#"s: Invalid value: "x": s in body should match '([, but pattern is invalid: error parsing regexp: missing closing ]: `[`'"#
        ]
    );
}
