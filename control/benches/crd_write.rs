//! What a validated custom resource costs to create, against a ConfigMap of the same size
//! in the same run (not a test: it prints figures and asserts nothing timed).
//!
//! The CRD's schema has ~50 fields (nested objects, lists, enums, patterns, bounds,
//! defaults) and 5 CEL rules. Each client creates objects one after another; the two
//! kinds alternate in rounds so both see the same server state.
//!
//! Run: `cargo bench -p cairn-control --bench crd_write` (env: OBJECTS, CLIENTS).

// A benchmark driver: failing loudly on a broken setup is what we want here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{env_usize, percentile, start_server, timed_create};
use serde_json::{json, Value};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Ten leaf fields of assorted kinds under one object.
fn leaf_fields(prefix: &str) -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..4 {
        props.insert(
            format!("{prefix}Name{i}"),
            json!({"type": "string", "maxLength": 63, "pattern": "^[a-z0-9-]+$"}),
        );
    }
    for i in 0..3 {
        props.insert(
            format!("{prefix}Count{i}"),
            json!({"type": "integer", "minimum": 0, "maximum": 1000, "default": 1}),
        );
    }
    props.insert(
        format!("{prefix}Mode"),
        json!({"type": "string", "enum": ["Fast", "Safe", "Off"], "default": "Safe"}),
    );
    props.insert(format!("{prefix}Enabled"), json!({"type": "boolean"}));
    props.insert(
        format!("{prefix}Tags"),
        json!({"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 32}}),
    );
    Value::Object(props)
}

fn crd() -> Value {
    let mut spec_props = serde_json::Map::new();
    for section in ["network", "storage", "compute", "backup", "monitor"] {
        spec_props.insert(
            section.into(),
            json!({"type": "object", "properties": leaf_fields(section)}),
        );
    }
    let rules = json!([
        {"rule": "self.network.networkCount0 <= self.compute.computeCount0 + 100", "message": "too many networks"},
        {"rule": "!has(self.backup.backupEnabled) || !self.backup.backupEnabled || self.storage.storageCount0 > 0", "message": "backups need storage"},
        {"rule": "self.compute.computeMode != 'Off' || self.monitor.monitorMode == 'Off'", "message": "monitoring needs compute"},
        {"rule": "self.network.networkTags.all(t, t.size() > 0)", "message": "empty tag"},
        {"rule": "self.storage.storageName0.startsWith(self.network.networkName0.substring(0, 1))", "message": "storage name prefix"},
    ]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "benchwidgets.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": "benchwidgets", "singular": "benchwidget", "kind": "BenchWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec_props, "x-kubernetes-validations": rules}}}}}]}
    })
}

fn section(prefix: &str) -> Value {
    json!({
        format!("{prefix}Name0"): "alpha-one", format!("{prefix}Name1"): "beta-two",
        format!("{prefix}Name2"): "gamma-three", format!("{prefix}Name3"): "delta-four",
        format!("{prefix}Count0"): 5, format!("{prefix}Count1"): 6, format!("{prefix}Count2"): 7,
        format!("{prefix}Mode"): "Fast", format!("{prefix}Enabled"): true,
        format!("{prefix}Tags"): ["red", "green", "blue"],
    })
}

fn widget(i: usize) -> Value {
    let mut spec = serde_json::Map::new();
    for s in ["network", "storage", "compute", "backup", "monitor"] {
        spec.insert(s.into(), section(s));
    }
    json!({"apiVersion": "bench.example.com/v1", "kind": "BenchWidget",
        "metadata": {"name": format!("w-{i}")}, "spec": spec})
}

/// A ConfigMap whose JSON is as large as the widget's.
fn config_map(i: usize, size: usize) -> Value {
    let base = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c-{i}")}, "data": {}});
    let pad = size.saturating_sub(base.to_string().len() + 16);
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c-{i}")},
        "data": {"payload": "x".repeat(pad)}})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let objects = env_usize("OBJECTS", 2000);
    let clients = env_usize("CLIENTS", 4);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, url, http) =
        start_server(env!("CARGO_BIN_EXE_cairn-control"), dir.path()).await;
    let http = http.build().expect("client");
    timed_create(
        &http,
        &format!("{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        &crd(),
    )
    .await;
    let size = widget(0).to_string().len();
    println!("crd_write: {objects} objects of each kind, {clients} clients, ~{size} bytes each");
    let crs = format!("{url}/apis/bench.example.com/v1/namespaces/default/benchwidgets");
    let cms = format!("{url}/api/v1/namespaces/default/configmaps");
    // Warm-up, not counted.
    for i in 0..50 {
        timed_create(&http, &crs, &widget(1_000_000 + i)).await;
        timed_create(&http, &cms, &config_map(1_000_000 + i, size)).await;
    }
    let (mut cr_lat, mut cm_lat) = (Vec::new(), Vec::new());
    let round = 200;
    for start in (0..objects).step_by(round) {
        let end = (start + round).min(objects);
        for kind in ["cr", "cm"] {
            let mut tasks = Vec::new();
            for c in 0..clients {
                let (http, crs, cms) = (http.clone(), crs.clone(), cms.clone());
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::new();
                    for i in (start + c..end).step_by(clients) {
                        lat.push(match kind {
                            "cr" => timed_create(&http, &crs, &widget(i)).await,
                            _ => timed_create(&http, &cms, &config_map(i, size)).await,
                        });
                    }
                    lat
                }));
            }
            for t in tasks {
                let lat = t.await.expect("task");
                if kind == "cr" {
                    cr_lat.extend(lat)
                } else {
                    cm_lat.extend(lat)
                }
            }
        }
    }
    cr_lat.sort();
    cm_lat.sort();
    for (name, lat) in [("custom resource", &cr_lat), ("configmap (peer)", &cm_lat)] {
        println!(
            "{name:<18} n={:<6} p50={:>7.2}ms p99={:>7.2}ms",
            lat.len(),
            ms(percentile(lat, 0.5)),
            ms(percentile(lat, 0.99))
        );
    }
    println!(
        "ratio custom/configmap: p50 {:.2}x, p99 {:.2}x (goal: <= 1.5x)",
        ms(percentile(&cr_lat, 0.5)) / ms(percentile(&cm_lat, 0.5)),
        ms(percentile(&cr_lat, 0.99)) / ms(percentile(&cm_lat, 0.99))
    );
    let _ = server.kill(); // Best effort: the tempdir goes with the process either way.
    let _ = server.wait(); // Reaped so no zombie outlives the benchmark.
}
