use serde_json::{json, Value};

use super::super::apply_defaults;

fn defaulted(schema: &Value, mut obj: Value) -> Value {
    apply_defaults(schema, &mut obj);
    obj
}

#[test]
fn absent_fields_get_their_defaults_recursively() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "strategy": {"type": "object", "default": {"type": "Rolling"}, "properties": {
                "type": {"type": "string"},
                "maxSurge": {"type": "integer", "default": 25},
            }},
        }},
    }});
    assert_eq!(
        defaulted(&schema, json!({})),
        json!({"spec": {"replicas": 1, "strategy": {"type": "Rolling", "maxSurge": 25}}})
    );
    assert_eq!(
        defaulted(
            &schema,
            json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}})
        ),
        json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate", "maxSurge": 25}}})
    );
}

#[test]
fn nulls() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "default": "A"},
        "b": {"type": "string", "nullable": true, "default": "B"},
        "c": {"type": "string"},
        "d": {"type": "string", "nullable": true},
    }});
    assert_eq!(
        defaulted(
            &schema,
            json!({"a": null, "b": null, "c": null, "d": null, "e": null})
        ),
        json!({"a": "A", "b": null, "d": null, "e": null})
    );
}

#[test]
fn items_and_additional_properties() {
    let schema = json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "object", "default": {"x": 0},
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 7}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object",
            "properties": {"port": {"type": "integer", "default": 80}}}},
        "strings": {"type": "object", "additionalProperties": {"type": "string", "default": "s"}},
    }});
    assert_eq!(
        defaulted(
            &schema,
            json!({
                "list": [{}, null, {"y": 1}],
                "map": {"a": {}, "b": {"port": 8080}},
                "strings": {"k": null},
            })
        ),
        json!({
            "list": [{"y": 7}, {"x": 0, "y": 7}, {"y": 1}],
            "map": {"a": {"port": 80}, "b": {"port": 8080}},
            "strings": {"k": "s"},
        })
    );
}

#[test]
fn a_null_default_is_no_default() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "string", "default": null}}});
    assert_eq!(defaulted(&schema, json!({})), json!({}));
}

#[test]
fn values_of_the_wrong_shape_are_left_alone() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}},
    }});
    assert_eq!(defaulted(&schema, json!({"spec": 5})), json!({"spec": 5}));
    assert_eq!(defaulted(&schema, json!("x")), json!("x"));
    assert_eq!(defaulted(&json!(null), json!({"a": 1})), json!({"a": 1}));
}
