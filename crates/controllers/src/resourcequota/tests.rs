use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceQuotaSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use super::*;

fn pod(spec: serde_json::Value, phase: &str) -> CachedPod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": spec,
        "status": {"phase": phase},
    }))
    .unwrap();
    CachedPod::from(pod)
}

fn hard(pairs: &[(&str, &str)]) -> ResourceQuotaSpec {
    ResourceQuotaSpec {
        hard: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

#[test]
fn pods_charge_while_alive_and_as_their_scopes_select() {
    let sized = json!({"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}}]});
    let empty = json!({"containers": [{"name": "c", "image": "i"}]});
    let pods = [
        pod(sized.clone(), "Running"),
        pod(sized, "Succeeded"),
        pod(empty, "Pending"),
    ];
    let spec = hard(&[("pods", "10"), ("requests.cpu", "2"), ("count/pods", "10")]);
    let used = pods_usage(&spec, pods.iter(), Timestamp::now());
    let used = used.restricted_to(["pods", "requests.cpu", "count/pods"].into_iter());
    assert_eq!(used.pretty(), "count/pods=3,pods=2,requests.cpu=250m");

    let mut best_effort = hard(&[("pods", "10")]);
    best_effort.scopes = Some(vec!["BestEffort".into()]);
    let used = pods_usage(&best_effort, pods.iter(), Timestamp::now());
    assert_eq!(used.get("pods"), Some(1000));

    let services = hard(&[("services", "1")]);
    assert!(pods_usage(&services, pods.iter(), Timestamp::now()).is_empty());
}

fn ctx() -> Ctx {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    Ctx {
        client,
        quotas: kube::runtime::reflector::store::Writer::default().as_reader(),
        pods: kube::runtime::reflector::store::Writer::default().as_reader(),
        services: kube::runtime::reflector::store::Writer::default().as_reader(),
        decreases: Default::default(),
    }
}

fn usage(pairs: &[(&str, i128)]) -> Usage {
    let mut u = Usage::default();
    pairs.iter().for_each(|(k, v)| u.set(k, *v));
    u
}

#[tokio::test]
async fn increases_go_out_at_once_and_decreases_after_they_hold() {
    let ctx = ctx();
    let current = usage(&[("pods", 2000), ("secrets", 1000)]);
    let (out, wait) = settled(
        &ctx,
        "ns/q",
        &current,
        usage(&[("pods", 3000), ("secrets", 1000)]),
    );
    assert_eq!((out.get("pods"), wait), (Some(3000), None));

    // A lower pod count is held back (the secret increase is not).
    let lower = usage(&[("pods", 1000), ("secrets", 2000)]);
    let (out, wait) = settled(&ctx, "ns/q", &current, lower.clone());
    assert_eq!(out, usage(&[("pods", 2000), ("secrets", 2000)]));
    assert!(wait.is_some());
    tokio::time::sleep(SETTLE).await;
    let (out, wait) = settled(&ctx, "ns/q", &current, lower.clone());
    assert_eq!((out, wait), (lower, None));
}
