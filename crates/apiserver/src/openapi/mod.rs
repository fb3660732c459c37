//! OpenAPI v3 documents (`/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>`),
//! which `kubectl explain` reads: the built-in kinds' from k8s-openapi ([`builtin`]), and
//! the custom resources': one component schema per served kind, named as upstream names
//! them (`com.example.v1.Widget`, the group reversed), carrying
//! `x-kubernetes-group-version-kind`, with `apiVersion`, `kind` and `metadata` added to the
//! CRD's own schema, and its `...List`.
//!
//! `kubectl explain` finds a resource's schema through the `get` operation of its object
//! path, so those paths are listed, with `get` only: kubectl's field-validation check
//! looks for `patch` operations and, finding none, falls back as it does without the
//! endpoint and keeps asking the server to validate (`fieldValidation=Strict`); and
//! `kubectl apply` keeps its compiled-in patch strategies (see [`builtin`]).

pub mod builtin;

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
    for (path, (_, hash)) in builtin::documents() {
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
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

/// `/openapi/v3/apis/<group>/<version>` (`/openapi/v3/api/v1` for the core group), if
/// built-in kinds or custom resources are served there.
pub fn group_version(
    custom: &[std::sync::Arc<CustomVersion>],
    group: &str,
    version: &str,
) -> Option<Value> {
    if let Some((doc, _)) = builtin::documents().get(&builtin::index_path(group, version)) {
        return Some(doc.clone());
    }
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

pub(crate) fn hash(doc: &Value) -> String {
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
        let (object_path, get) = builtin::get_operation(c.info, &name);
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
    schemas.extend(builtin::object_meta_definitions());
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
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
