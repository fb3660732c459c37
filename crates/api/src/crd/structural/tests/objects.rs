use serde_json::{json, Value};

use super::super::validate;
use super::validate_lines;

fn schema(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn set_lists_must_not_repeat_items() {
    let s = schema(json!({
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "nums": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "number"}},
    }));
    assert!(validate_lines(&s, &json!({"tags": ["a", "b"], "nums": [1, 1.5]})).is_empty());
    assert_eq!(
        validate_lines(
            &s,
            &json!({"tags": ["a", "b", "a", "a", "b"], "nums": [1, 1.0, 2, 2]})
        ),
        vec![
            r#"tags[2]: Duplicate value: "a""#,
            r#"tags[4]: Duplicate value: "b""#,
            "nums[3]: Duplicate value: 2",
        ]
    );
}

#[test]
fn map_lists_must_not_repeat_keys() {
    let item = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "protocol": {"type": "string"}, "port": {"type": "integer"},
    }});
    let s = schema(json!({
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"], "items": item.clone()},
        "pairs": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["port", "protocol"], "items": item},
    }));
    let obj = json!({
        "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}, {"port": 2}],
        "pairs": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"},
                  {"port": 80, "protocol": "TCP", "name": "again"}],
    });
    let causes = validate(&s, &obj);
    assert_eq!(
        super::lines(&causes),
        vec![
            r#"ports[1]: Duplicate value: map[string]interface {}{"name":"http"}"#,
            "ports[3]: Duplicate value: map[string]interface {}{}",
            r#"pairs[2]: Duplicate value: map[string]interface {}{"port":80, "protocol":"TCP"}"#,
        ]
    );
    assert!(causes.iter().all(|c| c.reason == "FieldValueDuplicate"));
}

#[test]
fn map_list_items_must_be_objects() {
    let s = schema(
        json!({"l": {"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["k"],
        "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}),
    );
    let lines = validate_lines(&s, &json!({"l": [{"k": "a"}, "x"]}));
    assert_eq!(
        lines.last().map(String::as_str),
        Some(r#"l[1]: Invalid value: "x": must be an object for an array of list-type map"#)
    );
}

#[test]
fn nested_lists_are_checked_through_maps_and_items() {
    let s = schema(json!({"m": {"type": "object", "additionalProperties": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}}}));
    assert_eq!(
        validate_lines(&s, &json!({"m": {"a": [1, 1]}})),
        vec!["m[a][1]: Duplicate value: 1"]
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    let s = schema(json!({"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true},
        "list": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true}},
    }}}));
    let ok = json!({"spec": {"template": {"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}}}});
    assert!(validate_lines(&s, &ok).is_empty());
    let bad = json!({"spec": {
        "template": {"metadata": {"name": "a/b", "namespace": "Not_OK", "generateName": "x%"}},
        "list": [{"apiVersion": "a/b/c", "kind": "my_kind"}, {"apiVersion": 1, "kind": ""}],
    }});
    assert_eq!(
        validate_lines(&s, &bad),
        vec![
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty",
            r#"spec.template.metadata.generateName: Invalid value: "x%": may not contain '%'"#,
            r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#,
            r#"spec.template.metadata.namespace: Invalid value: "Not_OK": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.list[0].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            r#"spec.list[0].kind: Invalid value: "my_kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            "spec.list[1].apiVersion: Invalid value: 1: must be a string",
            r#"spec.list[1].kind: Invalid value: "": must not be empty"#,
        ]
    );
}

#[test]
fn embedded_metadata_of_the_wrong_type() {
    let s = schema(
        json!({"t": {"type": "object", "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true}}),
    );
    let obj = json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}});
    assert_eq!(
        validate_lines(&s, &obj),
        vec![
            r#"t.metadata: Invalid value: map[string]interface {}{"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"#
        ]
    );
    let obj = json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": "x"}});
    assert_eq!(
        validate_lines(&s, &obj),
        vec![
            r#"t.metadata: Invalid value: "x": json: cannot unmarshal string into Go value of type v1.ObjectMeta"#
        ]
    );
}
