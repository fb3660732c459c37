//! Every rule of the Gateway API and cert-manager CRDs compiles, within
//! upstream's cost limits, as the real API server accepts them.

use super::support::{fixture, yaml_documents};
use crate::compile_schema_rules;
use serde_json::Value;

/// Rules anywhere in a schema.
fn count_rules(schema: &Value) -> usize {
    match schema {
        Value::Object(map) => {
            let here = map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            here + map
                .iter()
                .filter(|(k, _)| k.as_str() != "x-kubernetes-validations")
                .map(|(_, v)| count_rules(v))
                .sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_rules).sum(),
        _ => 0,
    }
}

/// Compiles every version of every CRD in `file`; returns (rules in the
/// file, rules compiled).
fn compile_file(file: &str) -> (usize, usize) {
    let (mut found, mut compiled) = (0, 0);
    for crd in yaml_documents(&fixture(file)) {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for (i, version) in crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let schema = &version["schema"]["openAPIV3Schema"];
            found += count_rules(schema);
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            match compile_schema_rules(schema, &path) {
                Ok(rules) => compiled += rules.rule_count(),
                Err(errors) => panic!("{name}: {errors:#?}"),
            }
        }
    }
    (found, compiled)
}

#[test]
fn every_gateway_api_rule_compiles() {
    let (found, compiled) = compile_file("gateway-api-standard.yaml");
    assert_eq!(found, 295);
    assert_eq!(compiled, found);
}

#[test]
fn every_cert_manager_rule_compiles() {
    let (found, compiled) = compile_file("cert-manager.crds.yaml");
    assert_eq!(found, 2);
    assert_eq!(compiled, found);
}
