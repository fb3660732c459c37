//! The EndpointSlice rules without a server: who belongs, conditions, ports, packing.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::desired::groups;
use super::pack::{plan, Owner, Plan};
use super::trigger::{stamp, TriggerTimes, TRIGGER_TIME};
use crate::cached_pod::{CachedPod, PodNetwork};

fn service(spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "labels": {"team": "a"}},
        "spec": spec,
    }))
    .unwrap()
}

fn web() -> Service {
    service(
        json!({"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}),
    )
}

fn pod(i: usize, ready: bool) -> CachedPod {
    let mut p = CachedPod::default();
    p.metadata.name = Some(format!("web-{i:04}"));
    p.metadata.namespace = Some("default".into());
    p.metadata.uid = Some(format!("uid-{i}"));
    p.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
    p.node_name = Some("n1".into());
    p.phase = Some("Running".into());
    p.ready = Some((ready, None));
    p.network = Some(Box::new(PodNetwork {
        ips: vec![format!("10.244.{}.{}", i / 250, i % 250 + 1)],
        named_ports: vec![("http".into(), "TCP".into(), 8080)],
        ..Default::default()
    }));
    p
}

fn pods(n: usize) -> Vec<CachedPod> {
    (0..n).map(|i| pod(i, true)).collect()
}

/// One pass against `existing`, then the slices as the server would hold them.
fn pass(
    svc: &Service,
    pods: &[CachedPod],
    existing: &[EndpointSlice],
) -> (Plan, Vec<EndpointSlice>) {
    let refs: Vec<&CachedPod> = pods.iter().collect();
    let desired = groups(svc, &refs, &|_| Some("zone-a".into()));
    let plan = plan(&Owner::of_service(svc), existing, &desired);
    let after = land(existing, &plan);
    (plan, after)
}

/// The slices as the server holds them once `plan` is written over `existing`.
fn land(existing: &[EndpointSlice], plan: &Plan) -> Vec<EndpointSlice> {
    let mut after: Vec<EndpointSlice> = existing.to_vec();
    after.retain(|s| {
        !plan
            .delete
            .iter()
            .any(|d| d.metadata.name == s.metadata.name)
    });
    for u in &plan.update {
        let slot = after
            .iter_mut()
            .find(|s| s.metadata.name == u.metadata.name)
            .unwrap();
        *slot = u.clone();
    }
    for (i, c) in plan.create.iter().enumerate() {
        let mut c = c.clone();
        c.metadata.name = Some(format!("web-{}-{i}", after.len()));
        after.push(c);
    }
    after
}

fn sizes(slices: &[EndpointSlice]) -> Vec<usize> {
    let mut s: Vec<usize> = slices.iter().map(|s| s.endpoints.len()).collect();
    s.sort();
    s
}

#[test]
fn two_hundred_fifty_pods_make_three_slices_and_churn_stays_low() {
    let svc = web();
    let mut all = pods(250);
    let (plan, slices) = pass(&svc, &all, &[]);
    assert_eq!(plan.create.len(), 3);
    assert_eq!(sizes(&slices), [50, 100, 100]);
    let s = &slices[0];
    let labels = s.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kubernetes.io/service-name"], "web");
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(labels["team"], "a");
    assert_eq!(
        s.metadata.owner_references.as_ref().unwrap()[0].uid,
        "svc-uid"
    );
    assert_eq!(
        s.ports.as_ref().unwrap()[0].port,
        Some(8080),
        "named targetPort resolved"
    );
    assert_eq!(s.endpoints[0].zone.as_deref(), Some("zone-a"));
    // Nothing changed: nothing written.
    assert!(pass(&svc, &all, &slices).0.is_empty());
    // One pod gone: one slice updated, nothing created or deleted.
    all.remove(10);
    let (plan, slices) = pass(&svc, &all, &slices);
    assert_eq!(
        (plan.create.len(), plan.update.len(), plan.delete.len()),
        (0, 1, 0)
    );
    // Ten new pods land in the slice that has room (the touched one first), no new slice.
    all.extend((300..310).map(|i| pod(i, true)));
    let (plan, slices) = pass(&svc, &all, &slices);
    assert!(plan.create.is_empty(), "{plan:?}");
    assert_eq!(plan.update.len(), 1);
    assert_eq!(sizes(&slices).iter().sum::<usize>(), 259);
}

#[test]
fn conditions_follow_readiness_and_termination() {
    let svc = web();
    let mut terminating = pod(2, true);
    terminating.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let mut finished = pod(3, false);
    finished.phase = Some("Succeeded".into());
    let mut no_ip = pod(4, true);
    no_ip.network = None;
    let all = [pod(0, true), pod(1, false), terminating, finished, no_ip];
    let (_, slices) = pass(&svc, &all, &[]);
    let eps = &slices[0].endpoints;
    assert_eq!(eps.len(), 3, "finished and address-less pods are left out");
    let cond = |i: usize| {
        let c = eps[i].conditions.clone().unwrap();
        (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
    };
    assert_eq!(cond(0), (true, true, false));
    assert_eq!(cond(1), (false, false, false));
    assert_eq!(
        cond(2),
        (false, true, true),
        "terminating: serving but not ready"
    );
    // publishNotReadyAddresses: everyone ready.
    let mut publish = web();
    publish.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
    let (_, slices) = pass(&publish, &all, &[]);
    assert!(slices[0]
        .endpoints
        .iter()
        .all(|e| e.conditions.as_ref().unwrap().ready == Some(true)));
}

#[test]
fn named_ports_resolve_per_pod_into_separate_slices() {
    let svc = web();
    let mut other = pod(1, true);
    other.network.as_mut().unwrap().named_ports = vec![("http".into(), "TCP".into(), 9090)];
    let mut missing = pod(2, true);
    missing.network.as_mut().unwrap().named_ports.clear();
    let (_, slices) = pass(&svc, &[pod(0, true), other, missing], &[]);
    let mut ports: Vec<Vec<Option<i32>>> = slices
        .iter()
        .map(|s| s.ports.iter().flatten().map(|p| p.port).collect())
        .collect();
    ports.sort();
    // A pod without the named port is an endpoint with no ports, as upstream.
    assert_eq!(ports, [vec![], vec![Some(8080)], vec![Some(9090)]]);
}

#[test]
fn headless_hostnames_and_the_placeholder() {
    let svc = service(json!({"clusterIP": "None", "selector": {"app": "web"}}));
    let mut named = pod(0, true);
    let net = named.network.as_mut().unwrap();
    net.hostname = Some("web-0".into());
    net.subdomain = Some("web".into());
    let (_, slices) = pass(&svc, &[named], &[]);
    assert_eq!(slices[0].endpoints[0].hostname.as_deref(), Some("web-0"));
    assert!(slices[0]
        .metadata
        .labels
        .as_ref()
        .unwrap()
        .contains_key("service.kubernetes.io/headless"));
    // No pods: one empty placeholder, kept as it is on the next pass.
    let (plan, slices) = pass(&web(), &[], &[]);
    assert_eq!(plan.create.len(), 1);
    assert!(slices[0].endpoints.is_empty() && slices[0].ports.as_ref().unwrap().is_empty());
    assert!(pass(&web(), &[], &slices).0.is_empty());
    // Pods arrive: the placeholder becomes their slice (an update, not delete + create).
    let (plan, slices) = pass(&web(), &pods(3), &slices);
    assert_eq!(
        (plan.create.len(), plan.update.len(), plan.delete.len()),
        (0, 1, 0)
    );
    assert_eq!(slices[0].endpoints.len(), 3);
}

#[test]
fn legacy_endpoints_split_ready_and_cap_at_a_thousand() {
    let svc = web();
    let all: Vec<Arc<CachedPod>> = vec![Arc::new(pod(1, true)), Arc::new(pod(0, false))];
    let ep = crate::endpoints::desired_endpoints(&svc, &all);
    let subsets = ep.subsets.unwrap();
    assert_eq!(subsets.len(), 1);
    assert_eq!(subsets[0].addresses.as_ref().unwrap()[0].ip, "10.244.0.2");
    assert_eq!(
        subsets[0].not_ready_addresses.as_ref().unwrap()[0].ip,
        "10.244.0.1"
    );
    assert_eq!(subsets[0].ports.as_ref().unwrap()[0].port, 8080);
    assert_eq!(
        ep.metadata.labels.as_ref().unwrap()["endpointslice.kubernetes.io/skip-mirror"],
        "true"
    );
    assert!(ep.metadata.annotations.is_none());
    let many: Vec<Arc<CachedPod>> = (0..1200).map(|i| Arc::new(pod(i, i % 2 == 0))).collect();
    let ep = crate::endpoints::desired_endpoints(&svc, &many);
    let subsets = ep.subsets.unwrap();
    let ready = subsets[0].addresses.as_ref().unwrap().len();
    let not_ready = subsets[0].not_ready_addresses.as_ref().map_or(0, Vec::len);
    assert_eq!(
        (ready, not_ready),
        (600, 400),
        "ready addresses are kept first"
    );
    assert_eq!(
        ep.metadata.annotations.unwrap()["endpoints.kubernetes.io/over-capacity"],
        "truncated"
    );
}

#[test]
fn hand_written_endpoints_are_mirrored_into_slices() {
    let ep: k8s_openapi::api::core::v1::Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "198.18.0.9"}], "notReadyAddresses": [{"ip": "198.18.0.10"}],
                     "ports": [{"name": "pg", "port": 5432}]}],
    }))
    .unwrap();
    let groups = crate::endpointslicemirroring::groups(&ep);
    let g = groups.values().next().unwrap();
    assert_eq!(g.endpoints.len(), 2);
    assert_eq!(g.ports[0].port, Some(5432));
    assert_eq!(
        g.endpoints[1].conditions.as_ref().unwrap().ready,
        Some(false)
    );
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A reconcile pass as the controller runs it: plan, stamp the trigger time, write, commit.
fn sync(
    triggers: &TriggerTimes,
    svc: &Service,
    pods: &[CachedPod],
    existing: &[EndpointSlice],
) -> (Plan, Vec<EndpointSlice>) {
    let refs: Vec<&CachedPod> = pods.iter().collect();
    let desired = groups(svc, &refs, &|_| Some("zone-a".into()));
    let mut plan = plan(&Owner::of_service(svc), existing, &desired);
    let observed = triggers.observe("default/web", svc, &refs);
    stamp(&mut plan, observed.time);
    triggers.commit(observed);
    let after = land(existing, &plan);
    (plan, after)
}

fn trigger_of(slice: &EndpointSlice) -> Option<&str> {
    let annotations = slice.metadata.annotations.as_ref()?;
    annotations.get(TRIGGER_TIME).map(String::as_str)
}

fn readied(i: usize, ready: bool, since: &str) -> CachedPod {
    let mut p = pod(i, ready);
    p.ready = Some((ready, Some(at(since))));
    p
}

#[test]
fn a_pod_turning_ready_stamps_the_slice_it_changes() {
    let mut svc = web();
    svc.metadata.creation_timestamp = Some(Time(at("2025-01-01T00:00:00Z")));
    let triggers = TriggerTimes::default();
    let mut all = vec![
        readied(0, true, "2025-01-01T00:01:00Z"),
        readied(1, false, "2025-01-01T00:01:00Z"),
    ];
    // First sync of the Service: its creation.
    let (plan, slices) = sync(&triggers, &svc, &all, &[]);
    assert_eq!(plan.create.len(), 1);
    assert_eq!(trigger_of(&slices[0]), Some("2025-01-01T00:00:00Z"));
    // Pod 1 turns ready: the one slice is updated, stamped with that transition.
    let ready_at = "2025-01-01T00:05:00.25Z";
    all[1] = readied(1, true, ready_at);
    let (plan, slices) = sync(&triggers, &svc, &all, &slices);
    assert_eq!(
        (plan.create.len(), plan.update.len(), plan.delete.len()),
        (0, 1, 0)
    );
    let stamped = trigger_of(&plan.update[0]).unwrap();
    assert_eq!(stamped, ready_at, "UTC, RFC 3339 with the fraction trimmed");
    assert!(at(stamped) >= at(ready_at));
    // Nothing changed: nothing is written, the annotation included.
    let (plan, again) = sync(&triggers, &svc, &all, &slices);
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(again, slices);
    // A pod leaving moves no trigger time: the updated slice drops the annotation.
    all.remove(0);
    let (plan, _) = sync(&triggers, &svc, &all, &slices);
    assert_eq!(plan.update.len(), 1);
    assert_eq!(trigger_of(&plan.update[0]), None);
}

#[test]
fn the_trigger_time_is_the_oldest_change_not_yet_committed() {
    let mut svc = web();
    svc.metadata.creation_timestamp = Some(Time(at("2025-01-01T00:00:00Z")));
    let triggers = TriggerTimes::default();
    let before = [
        readied(0, false, "2025-01-01T00:01:00Z"),
        readied(1, false, "2025-01-01T00:01:00Z"),
        readied(2, true, "2025-01-01T00:01:00Z"),
    ];
    let refs: Vec<&CachedPod> = before.iter().collect();
    triggers.commit(triggers.observe("default/web", &svc, &refs));
    let after = [
        readied(0, true, "2025-01-01T00:03:00Z"),
        readied(1, true, "2025-01-01T00:02:00Z"),
        readied(2, true, "2025-01-01T00:01:00Z"),
    ];
    let refs: Vec<&CachedPod> = after.iter().collect();
    let first = triggers.observe("default/web", &svc, &refs);
    assert_eq!(first.time, Some(at("2025-01-01T00:02:00Z")));
    // Not committed (the writes failed): the retry still reflects both changes.
    let retry = triggers.observe("default/web", &svc, &refs);
    assert_eq!(retry.time, first.time);
    triggers.commit(retry);
    assert_eq!(triggers.observe("default/web", &svc, &refs).time, None);
    // A Service seen anew (recreated, or the controller restarted): its creation.
    triggers.forget("default/web");
    let anew = triggers.observe("default/web", &svc, &refs);
    assert_eq!(anew.time, Some(at("2025-01-01T00:00:00Z")));
}
