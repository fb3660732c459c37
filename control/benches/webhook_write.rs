//! What one admission webhook call adds to a write: ConfigMap creates in a namespace no
//! webhook applies to (the peer), in one where a validating webhook allows every write,
//! and in one where a mutating webhook patches every object (the patch is decoded and
//! defaulted again), measured in the same run against the test webhook server (HTTPS,
//! its own CA, on loopback). Not a test: it prints figures and asserts nothing timed.
//!
//! Run: `cargo bench -p cairn-control --bench webhook_write` (env: OBJECTS, CLIENTS).

// A benchmark driver: failing loudly on a broken setup is what we want here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;
#[path = "../tests/support/webhook_server.rs"]
mod webhook_server;

use std::time::Duration;

use common::{env_usize, percentile, start_server, timed_create};
use serde_json::{json, Value};
use webhook_server::WebhookServer;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn configuration(kind: &str, path: &str, namespace: &str, hooks: &WebhookServer) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": format!("bench-{namespace}")},
        "webhooks": [{"name": format!("{namespace}.bench.cairn.test"),
            "clientConfig": {"url": hooks.url(path), "caBundle": hooks.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"bench": namespace}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
}

fn config_map(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c-{i}")},
        "data": {"payload": "x".repeat(512)}})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let objects = env_usize("OBJECTS", 2000);
    let clients = env_usize("CLIENTS", 4);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, url, http) =
        start_server(env!("CARGO_BIN_EXE_cairn-control"), dir.path()).await;
    let hooks = tokio::task::spawn_blocking(WebhookServer::start)
        .await
        .expect("webhook server");
    let http = http.build().expect("client");
    let namespaces = ["plain", "validated", "mutated"];
    create_namespaces_and_webhooks(&http, &url, &hooks, &namespaces).await;
    println!("webhook_write: {objects} ConfigMaps per namespace, {clients} clients");
    let target = |ns: &str| format!("{url}/api/v1/namespaces/{ns}/configmaps");
    for ns in namespaces {
        for i in 0..50 {
            timed_create(&http, &target(ns), &config_map(1_000_000 + i)).await;
        }
    }
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); namespaces.len()];
    let round = 200;
    for start in (0..objects).step_by(round) {
        let end = (start + round).min(objects);
        for (k, ns) in namespaces.iter().enumerate() {
            let mut tasks = Vec::new();
            for c in 0..clients {
                let (http, target) = (http.clone(), target(ns));
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::new();
                    for i in (start + c..end).step_by(clients) {
                        lat.push(timed_create(&http, &target, &config_map(i)).await);
                    }
                    lat
                }));
            }
            for t in tasks {
                latencies[k].extend(t.await.expect("task"));
            }
        }
    }
    report(&mut latencies);
    println!(
        "webhook calls served: {} validating, {} mutating",
        hooks.requests("/allow").len(),
        hooks.requests("/mutate").len()
    );
    // The webhook server's runtime may not be dropped inside this one.
    tokio::task::spawn_blocking(move || drop(hooks))
        .await
        .expect("stop webhook server");
    let _ = server.kill(); // Best effort: the tempdir goes with the process either way.
    let _ = server.wait(); // Reaped so no zombie outlives the benchmark.
}

/// The namespaces, and the two webhook configurations each selecting its own.
async fn create_namespaces_and_webhooks(
    http: &reqwest::Client,
    url: &str,
    hooks: &WebhookServer,
    namespaces: &[&str],
) {
    for ns in namespaces {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"bench": ns}}});
        timed_create(http, &format!("{url}/api/v1/namespaces"), &body).await;
    }
    let admission = format!("{url}/apis/admissionregistration.k8s.io/v1");
    let validating = configuration(
        "ValidatingWebhookConfiguration",
        "/allow",
        "validated",
        hooks,
    );
    timed_create(
        http,
        &format!("{admission}/validatingwebhookconfigurations"),
        &validating,
    )
    .await;
    let mutating = configuration("MutatingWebhookConfiguration", "/mutate", "mutated", hooks);
    timed_create(
        http,
        &format!("{admission}/mutatingwebhookconfigurations"),
        &mutating,
    )
    .await;
}

/// p50/p99 per namespace, and what one webhook call adds over the peer.
fn report(latencies: &mut [Vec<Duration>]) {
    for l in latencies.iter_mut() {
        l.sort();
    }
    let p = |k: usize, q: f64| ms(percentile(&latencies[k], q));
    for (k, name) in [
        "no webhook (peer)",
        "validating webhook",
        "mutating webhook",
    ]
    .iter()
    .enumerate()
    {
        println!(
            "{name:<20} n={:<6} p50={:>7.2}ms p99={:>7.2}ms",
            latencies[k].len(),
            p(k, 0.5),
            p(k, 0.99)
        );
    }
    for (k, name) in [(1, "validating"), (2, "mutating")] {
        println!(
            "one {name} call: +{:.2}ms at p50 ({:.2}x), +{:.2}ms at p99 ({:.2}x)",
            p(k, 0.5) - p(0, 0.5),
            p(k, 0.5) / p(0, 0.5),
            p(k, 0.99) - p(0, 0.99),
            p(k, 0.99) / p(0, 0.99)
        );
    }
}
