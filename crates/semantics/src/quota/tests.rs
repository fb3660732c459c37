use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, PodSpec, PodStatus,
    ResourceQuotaSpec, ResourceRequirements, ScopeSelector, ScopedResourceSelectorRequirement,
    Service, ServicePort, ServiceSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;

fn list(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

fn container(name: &str, req: &[(&str, &str)], lim: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: list(req),
            limits: list(lim),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(spec: PodSpec) -> Pod {
    Pod {
        spec: Some(spec),
        ..Default::default()
    }
}

#[test]
fn amounts_print_in_canonical_form() {
    assert_eq!(format_amount("pods", 2000), "2");
    assert_eq!(format_amount("pods", 1_000_000), "1k");
    assert_eq!(format_amount("requests.cpu", 1500), "1500m");
    assert_eq!(format_amount("requests.cpu", 0), "0");
    assert_eq!(format_amount("limits.memory", 2 * (1 << 30) * 1000), "2Gi");
    assert_eq!(format_amount("limits.memory", 256_000_000 * 1000), "256M");
    assert_eq!(format_amount("memory", 1000 * 1000), "1k");
    assert_eq!(format_amount("pods", 1024 * 1000), "1024");
}

#[test]
fn a_pod_charges_requests_limits_and_counts() {
    let spec = PodSpec {
        containers: vec![
            container("a", &[("cpu", "250m"), ("memory", "64Mi")], &[("cpu", "1")]),
            container("b", &[], &[("memory", "128Mi")]),
        ],
        init_containers: Some(vec![container("i", &[("cpu", "2")], &[])]),
        ..Default::default()
    };
    let q = PodQuota::of(&pod(spec));
    let u = q.usage(Timestamp::now());
    assert_eq!(
        u.pretty(),
        "count/pods=1,cpu=2,limits.cpu=1,limits.memory=128Mi,memory=192Mi,pods=1,\
         requests.cpu=2,requests.memory=192Mi"
    );
    assert!(!q.scopes.best_effort);
}

#[test]
fn finished_and_expired_pods_only_count_as_objects() {
    let mut p = pod(PodSpec {
        containers: vec![container("a", &[("cpu", "1")], &[])],
        ..Default::default()
    });
    p.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    assert_eq!(
        PodQuota::of(&p).usage(Timestamp::now()).pretty(),
        "count/pods=1"
    );
    p.status = None;
    let deleted = Timestamp::now() - SignedDuration::from_secs(60);
    p.metadata.deletion_timestamp = Some(Time(deleted));
    p.metadata.deletion_grace_period_seconds = Some(30);
    let q = PodQuota::of(&p);
    assert!(!q.counts(Timestamp::now()));
    assert!(q.counts(deleted));
}

#[test]
fn constrained_resources_must_be_stated_per_container() {
    let spec = PodSpec {
        containers: vec![
            container("a", &[("cpu", "1")], &[]),
            container("b", &[], &[("cpu", "1"), ("memory", "1Gi")]),
        ],
        ..Default::default()
    };
    let hard = ["pods", "limits.cpu", "requests.memory"];
    assert_eq!(
        missing_constraints(&spec, hard.into_iter()).as_deref(),
        Some("must specify limits.cpu for: a; must specify requests.memory for: a")
    );
    assert_eq!(missing_constraints(&spec, ["pods"].into_iter()), None);
}

#[test]
fn scopes_select_pods() {
    let best_effort = PodQuota::of(&pod(PodSpec {
        containers: vec![container("a", &[], &[])],
        active_deadline_seconds: Some(30),
        priority_class_name: Some("high".into()),
        ..Default::default()
    }));
    let spec = |scopes: &[&str], exprs: Vec<ScopedResourceSelectorRequirement>| ResourceQuotaSpec {
        scopes: Some(scopes.iter().map(|s| s.to_string()).collect()),
        scope_selector: Some(ScopeSelector {
            match_expressions: Some(exprs),
        }),
        ..Default::default()
    };
    let req = |op: &str, values: &[&str]| ScopedResourceSelectorRequirement {
        scope_name: "PriorityClass".into(),
        operator: op.into(),
        values: Some(values.iter().map(|s| s.to_string()).collect()),
    };
    let matches = |s: ResourceQuotaSpec| pod_matches(&quota_selectors(&s), &best_effort.scopes);
    assert!(matches(spec(&["BestEffort", "Terminating"], vec![])));
    assert!(!matches(spec(&["NotBestEffort"], vec![])));
    assert!(!matches(spec(&["NotTerminating"], vec![])));
    assert!(matches(spec(&[], vec![req("In", &["high", "low"])])));
    assert!(!matches(spec(&[], vec![req("NotIn", &["high"])])));
    assert!(matches(spec(&[], vec![req("Exists", &[])])));
    assert!(!matches(spec(&[], vec![req("DoesNotExist", &[])])));
}

#[test]
fn services_and_claims_charge_their_resources() {
    let svc = Service {
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort::default(), ServicePort::default()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        service_usage(&svc).pretty(),
        "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
    );
    let pvc = PersistentVolumeClaim {
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: Some("fast".into()),
            resources: Some(VolumeResourceRequirements {
                requests: list(&[("storage", "1Gi")]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        claim_usage(&pvc).pretty(),
        "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
         fast.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,\
         requests.storage=1Gi"
    );
    assert_eq!(
        object_usage("apps", "deployments").pretty(),
        "count/deployments.apps=1"
    );
    assert_eq!(
        object_usage("", "secrets").pretty(),
        "count/secrets=1,secrets=1"
    );
    assert!(is_standard_quota_resource("requests.hugepages-2Mi"));
    assert!(!is_standard_quota_resource("gpus"));
}
