//! OpenAPI v3 documents of custom resources (`/openapi/v3`, `/openapi/v3/apis/<g>/<v>`),
//! which `kubectl explain` reads: one component schema per served kind, named as upstream
//! names them (`com.example.v1.Widget`, the group reversed), carrying
//! `x-kubernetes-group-version-kind`, with `apiVersion`, `kind` and `metadata` added to the
//! CRD's own schema, and its `...List`.
//!
//! `kubectl explain` finds a resource's schema through the `get` operation of its object
//! path, so those paths are listed, with `get` only: kubectl's field-validation check
//! looks for `patch` operations and, finding none, falls back as it does without the
//! endpoint and keeps asking the server to validate (`fieldValidation=Strict`).
//! Built-in groups are not listed: their schemas are not generated yet, and a group absent
//! from the index makes kubectl fall back to what it did without the endpoint.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde_json::{json, Map, Value};

use crate::custom::CustomVersion;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `/openapi/v3`: the group/versions with a document, each with a content hash.
pub fn index(custom: &[std::sync::Arc<CustomVersion>]) -> Value {
    let mut paths = Map::new();
    for (gv, versions) in by_group_version(custom) {
        let doc = document(&versions);
        let path = format!("apis/{gv}");
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(&doc))}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/apis/<group>/<version>`, if custom resources are served there.
pub fn group_version(
    custom: &[std::sync::Arc<CustomVersion>],
    group: &str,
    version: &str,
) -> Option<Value> {
    by_group_version(custom)
        .remove(&format!("{group}/{version}"))
        .map(|versions| document(&versions))
}

fn by_group_version(
    custom: &[std::sync::Arc<CustomVersion>],
) -> BTreeMap<String, Vec<&CustomVersion>> {
    let mut out: BTreeMap<String, Vec<&CustomVersion>> = BTreeMap::new();
    for c in custom {
        out.entry(format!("{}/{}", c.info.group, c.info.version))
            .or_default()
            .push(c);
    }
    out
}

fn hash(doc: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    doc.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// Upstream's definition name: `com.example.v1.Widget` for `example.com/v1` `Widget`.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn document(versions: &[&CustomVersion]) -> Value {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for c in versions {
        let (group, version, kind) = (c.info.group, c.info.version, c.info.kind);
        let name = definition_name(group, version, kind);
        schemas.insert(name.clone(), kind_schema(c));
        let (object_path, get) = get_operation(c, &name);
        paths.insert(object_path, get);
        let list = format!("{kind}List");
        schemas.insert(
            definition_name(group, version, &list),
            json!({
                "description": format!("{list} is a list of {kind}"),
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string", "description": API_VERSION_DESCRIPTION},
                    "kind": {"type": "string", "description": KIND_DESCRIPTION},
                    "items": {"type": "array", "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", c.info.plural), "items": {"$ref": format!("#/components/schemas/{name}")}},
                    "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{LIST_META}")}], "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
                },
                "x-kubernetes-group-version-kind": [{"group": group, "kind": list, "version": version}],
            }),
        );
    }
    schemas.insert(OBJECT_META.into(), object_meta());
    schemas.insert(
        LIST_META.into(),
        json!({"description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.", "type": "object",
            "properties": {"continue": {"type": "string"}, "remainingItemCount": {"type": "integer", "format": "int64"},
                "resourceVersion": {"type": "string"}, "selfLink": {"type": "string"}}}),
    );
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The object path of `c` with its `get` operation, answering the kind's schema.
fn get_operation(c: &CustomVersion, definition: &str) -> (String, Value) {
    let (group, version, plural) = (c.info.group, c.info.version, c.info.plural);
    let path = if c.info.namespaced {
        format!("/apis/{group}/{version}/namespaces/{{namespace}}/{plural}/{{name}}")
    } else {
        format!("/apis/{group}/{version}/{plural}/{{name}}")
    };
    let op = json!({"get": {
        "description": format!("read the specified {}", c.info.kind),
        "operationId": format!("read{}", c.info.kind),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{definition}")}}}}},
        "x-kubernetes-action": "get",
        "x-kubernetes-group-version-kind": {"group": group, "kind": c.info.kind, "version": version},
    }});
    (path, op)
}

/// The CRD version's schema with the fields every object has, and its GVK.
fn kind_schema(c: &CustomVersion) -> Value {
    let mut schema =
        c.schema.clone().filter(Value::is_object).unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema["properties"] = json!({});
    }
    let props = &mut schema["properties"];
    props["apiVersion"] = json!({"type": "string", "description": API_VERSION_DESCRIPTION});
    props["kind"] = json!({"type": "string", "description": KIND_DESCRIPTION});
    props["metadata"] = json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": METADATA_DESCRIPTION});
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": c.info.group, "kind": c.info.kind, "version": c.info.version}]);
    schema
}

/// ObjectMeta's commonly read fields, for `kubectl explain <kind>.metadata`.
fn object_meta() -> Value {
    let string = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": d});
    json!({
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "type": "object",
        "properties": {
            "name": string("Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Cannot be updated."),
            "generateName": string("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": string("Namespace defines the space within which each name must be unique. Cannot be updated."),
            "uid": string("UID is the unique in time and space value for this object. Populated by the system. Read-only."),
            "resourceVersion": string("An opaque value that represents the internal version of this object. Populated by the system. Read-only."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only."},
            "creationTimestamp": string("CreationTimestamp is a timestamp representing the server time when this object was created. Populated by the system. Read-only."),
            "deletionTimestamp": string("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. Populated by the system when a graceful deletion is requested. Read-only."),
            "labels": map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object."},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_names_reverse_the_group() {
        assert_eq!(
            definition_name("example.com", "v1", "Widget"),
            "com.example.v1.Widget"
        );
        assert_eq!(
            definition_name("gateway.networking.k8s.io", "v1", "Gateway"),
            "io.k8s.networking.gateway.v1.Gateway"
        );
    }
}
