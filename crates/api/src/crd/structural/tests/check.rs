use serde_json::json;

use super::super::check_structural;
use super::check_lines;

fn object(props: serde_json::Value) -> serde_json::Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn a_plain_structural_schema_is_fine() {
    let schema = object(json!({
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 0, "default": 1},
            "list": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "any": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true,
                     "anyOf": [{"type": "integer"}, {"type": "string"}]},
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }));
    assert_eq!(check_lines(&schema), Vec::<String>::new());
}

#[test]
fn every_node_needs_a_type() {
    let schema = json!({"properties": {
        "spec": {"properties": {"list": {"type": "array", "items": {}}}},
    }});
    assert_eq!(
        check_lines(&schema),
        vec![
            "s.properties[spec].properties[list].items.type: Required value: must not be empty for specified array items",
            "s.properties[spec].type: Required value: must not be empty for specified object fields",
            "s.type: Required value: must not be empty at the root",
        ]
    );
}

#[test]
fn arrays_need_items() {
    let schema = object(json!({"list": {"type": "array"}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[list].items: Required value: must be specified"]
    );
}

#[test]
fn the_root_must_be_an_object_without_additional_properties() {
    let schema = json!({"type": "string"});
    assert_eq!(
        check_lines(&schema),
        vec![r#"s.type: Invalid value: "string": must be object at the root"#]
    );
    let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
    assert_eq!(
        check_lines(&schema),
        vec!["s.additionalProperties: Forbidden: must not be used at the root"]
    );
}

#[test]
fn properties_and_additional_properties_are_exclusive() {
    let schema = object(json!({"m": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": {"type": "string"},
    }}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"]
    );
    // `additionalProperties: true` next to properties is allowed
    let schema = object(json!({"m": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": true,
    }}));
    assert!(check_lines(&schema).is_empty());
}

#[test]
fn root_metadata_may_only_restrict_name_and_generate_name() {
    let ok = object(json!({"metadata": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10},
        "generateName": {"type": "string"},
    }}}));
    assert!(check_lines(&ok).is_empty());
    let bad = object(json!({"metadata": {"type": "object", "properties": {
        "labels": {"type": "object"},
    }}}));
    assert_eq!(
        check_lines(&bad),
        vec!["s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"]
    );
    let wrong_type = object(json!({"metadata": {"type": "string"}, "kind": {"type": "integer"}}));
    assert_eq!(
        check_lines(&wrong_type),
        vec![
            r#"s.properties[kind].type: Invalid value: "integer": must be string"#,
            r#"s.properties[metadata].type: Invalid value: "string": must be object"#,
        ]
    );
}

#[test]
fn defaults_are_forbidden_in_top_level_meta() {
    let schema = object(json!({"metadata": {"type": "object", "default": {}}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[metadata].default: Forbidden: must not be set in top-level metadata"]
    );
}

#[test]
fn nested_value_validations_must_not_specify_structure() {
    let schema = object(json!({"x": {
        "type": "string",
        "anyOf": [{"type": "string", "description": "d", "nullable": true}, {"default": "a"}],
        "not": {"x-kubernetes-preserve-unknown-fields": true},
    }}));
    assert_eq!(
        check_lines(&schema),
        vec![
            "s.properties[x].anyOf[0].description: Forbidden: must be empty to be structural",
            "s.properties[x].anyOf[0].nullable: Forbidden: must be false to be structural",
            "s.properties[x].anyOf[0].type: Forbidden: must be empty to be structural",
            "s.properties[x].anyOf[1].default: Forbidden: must be undefined to be structural",
            "s.properties[x].not.x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
        ]
    );
}

#[test]
fn root_junctors_need_their_fields_specified_outside() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "allOf": [{"properties": {"spec": {"properties": {"a": {"minLength": 1}, "b": {"minLength": 1}}}}}],
        "oneOf": [{"required": ["spec"]}, {"properties": {"metadata": {}}}],
    });
    assert_eq!(
        check_lines(&schema),
        vec![
            "s.oneOf[1].properties[metadata]: Forbidden: must not be specified in a nested context",
            "s.properties[metadata]: Required value: because it is defined in s.oneOf[1].properties[metadata]",
            "s.properties[spec].properties[b]: Required value: because it is defined in s.allOf[0].properties[spec].properties[b]",
        ]
    );
}

#[test]
fn completeness_is_checked_for_root_junctors_only() {
    // as upstream: junctors below the root are not checked for completeness
    let schema = object(json!({"spec": {
        "type": "object",
        "allOf": [{"properties": {"b": {"minLength": 1}}}],
    }}));
    assert!(check_lines(&schema).is_empty());
}

#[test]
fn int_or_string_patterns_are_structural() {
    let any_of = object(json!({"p": {"x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}));
    assert!(check_lines(&any_of).is_empty());
    let all_of = object(json!({"p": {"x-kubernetes-int-or-string": true,
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]}}));
    assert!(check_lines(&all_of).is_empty());
    // reversed order is not the pattern
    let reversed = object(json!({"p": {"x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "string"}, {"type": "integer"}]}}));
    assert_eq!(
        check_lines(&reversed),
        vec![
            "s.properties[p].anyOf[0].type: Forbidden: must be empty to be structural",
            "s.properties[p].anyOf[1].type: Forbidden: must be empty to be structural",
        ]
    );
    let with_preserve = object(json!({"p": {"x-kubernetes-int-or-string": true,
        "x-kubernetes-preserve-unknown-fields": true}}));
    assert_eq!(
        check_lines(&with_preserve),
        vec!["s.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"]
    );
}

#[test]
fn preserve_unknown_fields_must_be_true_or_undefined() {
    let schema =
        object(json!({"x": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"]
    );
}

#[test]
fn nullable_is_forbidden_at_the_root() {
    let schema = json!({"type": "object", "nullable": true});
    assert_eq!(
        check_lines(&schema),
        vec!["s.nullable: Forbidden: nullable cannot be true at the root"]
    );
}

#[test]
fn embedded_resources() {
    let schema = object(json!({
        "a": {"x-kubernetes-embedded-resource": true},
        "b": {"type": "object", "x-kubernetes-embedded-resource": true,
              "x-kubernetes-preserve-unknown-fields": true},
        "c": {"type": "object", "x-kubernetes-embedded-resource": true,
              "properties": {"metadata": {"type": "object", "x-kubernetes-embedded-resource": true,
                  "x-kubernetes-preserve-unknown-fields": true}}},
    }));
    assert_eq!(
        check_lines(&schema),
        vec![
            "s.properties[a].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            "s.properties[a].type: Required value: must be object if x-kubernetes-embedded-resource is true",
            "s.properties[c].properties[metadata].x-kubernetes-embedded-resource: Forbidden: must not be used inside of resource meta",
        ]
    );
}

#[test]
fn defaults_must_validate_and_be_pruned() {
    let schema = object(json!({"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": "x"},
        "size": {"type": "string", "enum": ["S", "M"], "default": "XL"},
        "obj": {"type": "object", "properties": {"a": {"type": "integer"}},
                "default": {"a": 1, "zzz": 2}},
        "name": {"type": "string", "maxLength": 2, "default": "abc"},
    }}}));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[spec].properties[replicas].default: Invalid value: "string":  in body must be of type integer: "string""#,
            r#"s.properties[spec].properties[size].default: Unsupported value: "XL": supported values: "S", "M""#,
            r#"s.properties[spec].properties[obj].default: Invalid value: map[string]interface {}{"a":1, "zzz":2}: must not have unknown fields"#,
            "s.properties[spec].properties[name].default: Too long: may not be more than 2 bytes",
        ]
    );
}

#[test]
fn default_errors_wait_for_structural_errors() {
    let schema = object(json!({"x": {"default": 1}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[x].type: Required value: must not be empty for specified object fields"]
    );
}

#[test]
fn nested_defaults_are_checked_where_they_are() {
    let schema = object(json!({"list": {"type": "array", "items": {
        "type": "object", "properties": {"n": {"type": "integer", "default": 1.5}},
    }}}));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[list].items.properties[n].default: Invalid value: "number":  in body must be of type integer: "number""#
        ]
    );
}

#[test]
fn invalid_patterns() {
    let schema = object(json!({"code": {"type": "string", "pattern": "(abc"}}));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[code].pattern: Invalid value: "(abc": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(abc`"#
        ]
    );
}

#[test]
fn unsupported_keywords() {
    let schema = object(json!({"x": {
        "type": "null",
        "uniqueItems": true,
        "$ref": "#/definitions/x",
        "patternProperties": {"^a": {"type": "string"}},
        "id": "x",
    }}));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[x].type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string""#,
            "s.properties[x].id: Forbidden: id is not supported",
            "s.properties[x].patternProperties: Forbidden: patternProperties is not supported",
            "s.properties[x].$ref: Forbidden: $ref is not supported",
            "s.properties[x].type: Forbidden: type cannot be set to null, use nullable as an alternative",
            "s.properties[x].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ]
    );
}

#[test]
fn schema_keyword_alone_fails_conversion() {
    let schema = json!({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"});
    assert_eq!(
        check_lines(&schema),
        vec![r#"s: Invalid value: "": OpenAPIV3Schema 'schema' is not supported"#]
    );
}

#[test]
fn items_as_an_array_is_refused() {
    let schema = object(json!({"x": {"type": "array", "items": [{"type": "string"}]}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[x].items: Forbidden: items must be a schema object and not an array"]
    );
}

#[test]
fn list_types() {
    let schema = object(json!({
        "a": {"type": "string", "x-kubernetes-list-type": "set"},
        "b": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
        "c": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["k"]},
        "d": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "map"},
        "e": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "j", "k"],
              "items": {"type": "object", "properties": {"k": {"type": "string", "nullable": true}, "o": {"type": "object"}}}},
        "f": {"type": "array", "x-kubernetes-list-type": "set",
              "items": {"type": "object", "nullable": true}},
    }));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[a].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#,
            r#"s.properties[b].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#,
            "s.properties[c].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
            "s.properties[d].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
            r#"s.properties[d].items.type: Invalid value: "string": must be object if parent array's x-kubernetes-list-type is map"#,
            r#"s.properties[e].x-kubernetes-list-map-keys: Invalid value: []string{"k", "j", "k"}: entries must all be names of item properties"#,
            r#"s.properties[e].x-kubernetes-list-map-keys: Invalid value: []string{"k", "j", "k"}: must not contain duplicate entries"#,
            "s.properties[e].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            "s.properties[e].items.properties[k].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            "s.properties[e].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            "s.properties[e].items.properties[k].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            r#"s.properties[f].items.x-kubernetes-map-type: Invalid value: "null": must be atomic as item of a list with x-kubernetes-list-type=set"#,
            "s.properties[f].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set",
        ]
    );
}

#[test]
fn map_types() {
    let schema = object(json!({
        "a": {"type": "string", "x-kubernetes-map-type": "atomic"},
        "b": {"type": "object", "x-kubernetes-map-type": "weird"},
    }));
    assert_eq!(
        check_lines(&schema),
        vec![
            r#"s.properties[a].type: Invalid value: "string": must be object if x-kubernetes-map-type is specified"#,
            r#"s.properties[b].x-kubernetes-map-type: Unsupported value: "weird": supported values: "atomic", "granular""#,
        ]
    );
}

#[test]
fn nested_x_kubernetes_validations_are_not_structural() {
    let schema = object(json!({"x": {"type": "string",
        "allOf": [{"x-kubernetes-validations": [{"rule": "self.size() > 1"}]}]}}));
    assert_eq!(
        check_lines(&schema),
        vec!["s.properties[x].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural"]
    );
}

#[test]
fn reasons_are_upstreams() {
    let schema =
        json!({"type": "object", "nullable": true, "properties": {"a": {"type": "array"}}});
    let causes = check_structural(&schema, "s");
    let reasons: Vec<&str> = causes.iter().map(|c| c.reason).collect();
    assert_eq!(reasons, vec!["FieldValueForbidden", "FieldValueRequired"]);
}
