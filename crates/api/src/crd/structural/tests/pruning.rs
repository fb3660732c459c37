use serde_json::json;

use super::super::prune;

#[test]
fn unknown_fields_are_removed_and_reported_sorted() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
        }},
    }});
    let mut obj = json!({
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "whatever": 1},
        "spec": {"replicas": 1, "zeta": 1, "alpha": {"deep": true},
                 "list": [{"a": "x", "b": 1}, {"c": [1]}, "scalar"]},
        "status": {"x": 1},
    });
    let removed = prune(&schema, &mut obj);
    assert_eq!(
        removed,
        vec![
            ".spec.alpha",
            ".spec.list[0].b",
            ".spec.list[1].c",
            ".spec.zeta",
            ".status",
        ]
    );
    assert_eq!(
        obj,
        json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "whatever": 1},
            "spec": {"replicas": 1, "list": [{"a": "x"}, {}, "scalar"]},
        })
    );
}

#[test]
fn member_order_is_kept() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}},
    }});
    let mut obj = json!({"spec": {"b": "1", "x": 0, "a": "2"}});
    prune(&schema, &mut obj);
    let keys: Vec<&String> = obj["spec"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, vec!["b", "a"]);
}

#[test]
fn preserve_unknown_fields_keeps_unknowns_but_prunes_what_is_declared() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "known": {"type": "object", "properties": {"a": {"type": "string"}}},
        }},
    }});
    let mut obj = json!({"spec": {"free": {"x": 1}, "known": {"a": "1", "b": 2}}});
    assert_eq!(prune(&schema, &mut obj), vec![".spec.known.b"]);
    assert_eq!(
        obj,
        json!({"spec": {"free": {"x": 1}, "known": {"a": "1"}}})
    );
}

#[test]
fn preserve_unknown_fields_at_the_root() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut obj = json!({"anything": {"goes": [1, 2]}});
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj, json!({"anything": {"goes": [1, 2]}}));
}

#[test]
fn additional_properties_prune_values_by_their_schema() {
    let schema = json!({"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
        "t": {"type": "object", "additionalProperties": true},
    }});
    let mut obj = json!({
        "m": {"one": {"v": "x", "w": 1}, "two": {}},
        "t": {"scalar": 1, "nested": {"x": 1}},
    });
    let removed = prune(&schema, &mut obj);
    // as upstream, `additionalProperties: true` keeps the keys but prunes what is below them
    assert_eq!(removed, vec![".m.one.w", ".t.nested.x"]);
    assert_eq!(
        obj,
        json!({"m": {"one": {"v": "x"}, "two": {}}, "t": {"scalar": 1, "nested": {}}})
    );
}

#[test]
fn embedded_resources_keep_their_type_and_object_meta() {
    let schema = json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
            "spec": {"type": "object", "properties": {"image": {"type": "string"}}},
        }},
        "plain": {"type": "object", "properties": {"a": {"type": "string"}}},
    }});
    let mut obj = json!({
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}},
                     "spec": {"image": "x", "bad": 1}, "extra": true},
        "plain": {"a": "1", "kind": "K", "metadata": {}},
    });
    let removed = prune(&schema, &mut obj);
    assert_eq!(
        removed,
        vec![
            ".plain.kind",
            ".plain.metadata",
            ".template.extra",
            ".template.spec.bad"
        ]
    );
    assert_eq!(
        obj,
        json!({
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}},
                         "spec": {"image": "x"}},
            "plain": {"a": "1"},
        })
    );
}

#[test]
fn arrays_without_item_schemas_lose_object_members() {
    let schema = json!({"type": "object", "properties": {"l": {"type": "array"}}});
    let mut obj = json!({"l": [{"a": 1}, 2]});
    assert_eq!(prune(&schema, &mut obj), vec![".l[0].a"]);
    assert_eq!(obj, json!({"l": [{}, 2]}));
}

#[test]
fn scalars_and_mismatched_shapes_are_left_alone() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    let mut obj = json!({"spec": "not an object"});
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj, json!({"spec": "not an object"}));
    let mut scalar = json!(42);
    assert!(prune(&schema, &mut scalar).is_empty());
    assert_eq!(scalar, json!(42));
}
