//! Helpers shared by the tests.

use crate::{compile_schema_rules, SchemaRules, Violation};
use serde_json::Value;

/// Every document of a multi-document YAML file, as JSON.
pub(super) fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

pub(super) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../control/tests/fixtures/crds/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The schema of version `version` of the CRD named `name` in `file`.
pub(super) fn crd_schema(file: &str, name: &str, version: &str) -> Value {
    let docs = yaml_documents(&fixture(file));
    let crd = docs
        .iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no CRD {name}"));
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let v = versions
        .iter()
        .find(|v| v["name"] == version)
        .expect("version");
    v["schema"]["openAPIV3Schema"].clone()
}

pub(super) fn rules(schema: &Value) -> SchemaRules {
    match compile_schema_rules(schema, "spec.versions[0].schema.openAPIV3Schema") {
        Ok(rules) => rules,
        Err(errors) => panic!("{errors:#?}"),
    }
}

/// `(field, message)` of each violation.
pub(super) fn messages(violations: &[Violation]) -> Vec<(String, String)> {
    violations
        .iter()
        .map(|v| (v.field.clone(), v.message.clone()))
        .collect()
}
