use std::str::FromStr;

use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use std::sync::Arc;

use super::*;
use crate::input::{ServiceInfo, SliceInfo};

fn svc(v: serde_json::Value) -> Service {
    serde_json::from_value(v).unwrap()
}

fn cluster_ip(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
    svc(json!({"metadata": {"name": name, "namespace": ns},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "ports": ports}}))
}

fn headless(ns: &str, name: &str) -> Service {
    svc(json!({"metadata": {"name": name, "namespace": ns},
        "spec": {"clusterIP": "None", "clusterIPs": ["None"], "ports": [{"name": "web", "port": 80}]}}))
}

fn slice(
    ns: &str,
    name: &str,
    service: &str,
    ports: serde_json::Value,
    eps: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
        "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": ports, "endpoints": eps}))
    .unwrap()
}

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn zone(services: &[Service], slices: &[EndpointSlice]) -> ClusterZone {
    zone_with(&ZoneConfig::default(), services, slices)
}

fn zone_with(config: &ZoneConfig, services: &[Service], slices: &[EndpointSlice]) -> ClusterZone {
    let namespaces = [
        namespace("default"),
        namespace("kube-system"),
        namespace("apps"),
    ];
    ClusterZone::from_objects(config, services, slices, &namespaces, 1_700_000_000).unwrap()
}

fn ask(zone: &ClusterZone, name: &str, qtype: RecordType) -> Answer {
    zone.answer(&Name::from_str(name).unwrap(), qtype)
}

/// `owner type data` of each answer record.
fn answers(answer: &Answer) -> Vec<String> {
    match answer {
        Answer::Records(r) => r.answers.iter().map(show).collect(),
        other => panic!("expected records, got {other:?}"),
    }
}

fn additionals(answer: &Answer) -> Vec<String> {
    match answer {
        Answer::Records(r) => r.additionals.iter().map(show).collect(),
        other => panic!("expected records, got {other:?}"),
    }
}

fn show(r: &hickory_proto::rr::Record) -> String {
    format!("{} {} {}", r.name, r.record_type(), r.data)
}

/// The cluster of most tests: a ClusterIP service with two ports and two endpoints (one
/// not ready), a headless StatefulSet service, an ExternalName service.
fn cluster() -> ClusterZone {
    let web = cluster_ip(
        "default",
        "web",
        "10.96.0.10",
        json!([{"name": "http", "port": 80, "protocol": "TCP"},
               {"name": "dns", "port": 53, "protocol": "UDP"}]),
    );
    let web_eps = slice(
        "default",
        "web-abc",
        "web",
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
        json!([{"addresses": ["10.244.1.5"], "conditions": {"ready": true}},
               {"addresses": ["10.244.2.6"], "conditions": {"ready": false}}]),
    );
    let db = headless("apps", "db");
    let db_eps = slice(
        "apps",
        "db-1",
        "db",
        json!([{"name": "pg", "port": 5432, "protocol": "TCP"}]),
        json!([{"addresses": ["10.244.1.10"], "hostname": "db-0"},
               {"addresses": ["10.244.2.11"], "hostname": "db-1", "conditions": {"ready": true}},
               {"addresses": ["10.244.3.12"], "conditions": {}},
               {"addresses": ["10.244.3.13"], "hostname": "db-3", "conditions": {"ready": false}}]),
    );
    let ext = svc(
        json!({"metadata": {"name": "search", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "www.example.com"}}),
    );
    let alias = svc(
        json!({"metadata": {"name": "alias", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "web.default.svc.cluster.local."}}),
    );
    zone(&[web, db, ext, alias], &[web_eps, db_eps])
}

#[test]
fn cluster_ip_service_answers_its_address_and_nodata_for_aaaa() {
    let z = cluster();
    let a = ask(&z, "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(answers(&a), ["web.default.svc.cluster.local. A 10.96.0.10"]);
    let Answer::Records(reply) = &a else {
        unreachable!()
    };
    assert_eq!(reply.answers[0].ttl, DEFAULT_TTL);
    assert_eq!(
        ask(&z, "web.default.svc.cluster.local.", RecordType::AAAA),
        Answer::NoData
    );
    assert_eq!(
        ask(&z, "web.default.svc.cluster.local.", RecordType::MX),
        Answer::NoData
    );
    assert_eq!(
        ask(&z, "WEB.Default.SVC.Cluster.Local.", RecordType::A),
        a,
        "any case"
    );
}

#[test]
fn names_that_do_not_exist_are_nxdomain_and_empty_ones_nodata() {
    let z = cluster();
    for name in [
        "nope.default.svc.cluster.local.",
        "web.nope.svc.cluster.local.",
        "nope.svc.cluster.local.",
        "foo.cluster.local.",
        "x.y.web.default.svc.cluster.local.",
        // CoreDNS reads one label left of a service as an endpoint name.
        "_tcp.web.default.svc.cluster.local.",
        "_ftp._tcp.web.default.svc.cluster.local.",
        "10-244-2-6.web.default.svc.cluster.local.",
    ] {
        assert_eq!(ask(&z, name, RecordType::A), Answer::NxDomain, "{name}");
    }
    for name in [
        "cluster.local.",
        "svc.cluster.local.",
        "pod.cluster.local.",
        "default.svc.cluster.local.",
        "apps.pod.cluster.local.",
    ] {
        assert_eq!(ask(&z, name, RecordType::A), Answer::NoData, "{name}");
    }
    assert_eq!(ask(&z, "example.com.", RecordType::A), Answer::NotOurs);
    assert_eq!(ask(&z, "cluster.local.", RecordType::AXFR), Answer::Refused);
    assert_eq!(
        ask(&z, "web.default.svc.cluster.local.", RecordType::IXFR),
        Answer::Refused
    );
}

#[test]
fn headless_service_answers_ready_endpoints_and_statefulset_hostnames() {
    let z = cluster();
    let a = ask(&z, "db.apps.svc.cluster.local.", RecordType::A);
    assert_eq!(
        answers(&a),
        [
            "db.apps.svc.cluster.local. A 10.244.1.10",
            "db.apps.svc.cluster.local. A 10.244.2.11",
            "db.apps.svc.cluster.local. A 10.244.3.12",
        ],
        "unset ready counts as ready, ready false is left out"
    );
    assert_eq!(
        answers(&ask(&z, "db-0.db.apps.svc.cluster.local.", RecordType::A)),
        ["db-0.db.apps.svc.cluster.local. A 10.244.1.10"]
    );
    assert_eq!(
        answers(&ask(
            &z,
            "10-244-3-12.db.apps.svc.cluster.local.",
            RecordType::A
        )),
        ["10-244-3-12.db.apps.svc.cluster.local. A 10.244.3.12"]
    );
    assert_eq!(
        ask(&z, "db-3.db.apps.svc.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    // Endpoint names exist for services with a ClusterIP too (CoreDNS).
    assert_eq!(
        answers(&ask(
            &z,
            "10-244-1-5.web.default.svc.cluster.local.",
            RecordType::A
        )),
        ["10-244-1-5.web.default.svc.cluster.local. A 10.244.1.5"]
    );
}

#[test]
fn headless_service_without_ready_endpoints_is_nxdomain() {
    let eps = slice(
        "apps",
        "db-1",
        "db",
        json!([]),
        json!([{"addresses": ["10.244.1.10"],
        "conditions": {"ready": false}}]),
    );
    let z = zone(&[headless("apps", "db")], &[eps]);
    assert_eq!(
        ask(&z, "db.apps.svc.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
}

#[test]
fn srv_for_named_ports_with_addresses_in_additional() {
    let z = cluster();
    let srv = ask(
        &z,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(
        answers(&srv),
        ["_http._tcp.web.default.svc.cluster.local. SRV 0 100 80 web.default.svc.cluster.local."]
    );
    assert_eq!(
        additionals(&srv),
        ["web.default.svc.cluster.local. A 10.96.0.10"]
    );
    let dns = ask(
        &z,
        "_DNS._UDP.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(
        answers(&dns),
        ["_dns._udp.web.default.svc.cluster.local. SRV 0 100 53 web.default.svc.cluster.local."]
    );
    assert_eq!(
        ask(
            &z,
            "_dns._tcp.web.default.svc.cluster.local.",
            RecordType::SRV
        ),
        Answer::NxDomain,
        "protocol must match"
    );
    // The service name itself: one SRV per port, weight 100/2.
    let all = ask(&z, "web.default.svc.cluster.local.", RecordType::SRV);
    assert_eq!(
        answers(&all),
        [
            "web.default.svc.cluster.local. SRV 0 50 80 web.default.svc.cluster.local.",
            "web.default.svc.cluster.local. SRV 0 50 53 web.default.svc.cluster.local.",
        ]
    );
    assert_eq!(
        additionals(&all),
        ["web.default.svc.cluster.local. A 10.96.0.10"]
    );
    // An SRV name asked for A gives the ClusterIP, as in CoreDNS.
    assert_eq!(
        answers(&ask(
            &z,
            "_http._tcp.web.default.svc.cluster.local.",
            RecordType::A
        )),
        ["_http._tcp.web.default.svc.cluster.local. A 10.96.0.10"]
    );
}

#[test]
fn headless_srv_targets_each_endpoint_by_hostname_or_dashed_address() {
    let z = cluster();
    let srv = ask(&z, "_pg._tcp.db.apps.svc.cluster.local.", RecordType::SRV);
    assert_eq!(
        answers(&srv),
        [
            "_pg._tcp.db.apps.svc.cluster.local. SRV 0 33 5432 db-0.db.apps.svc.cluster.local.",
            "_pg._tcp.db.apps.svc.cluster.local. SRV 0 33 5432 db-1.db.apps.svc.cluster.local.",
            "_pg._tcp.db.apps.svc.cluster.local. SRV 0 33 5432 10-244-3-12.db.apps.svc.cluster.local.",
        ]
    );
    assert_eq!(
        additionals(&srv),
        [
            "db-0.db.apps.svc.cluster.local. A 10.244.1.10",
            "db-1.db.apps.svc.cluster.local. A 10.244.2.11",
            "10-244-3-12.db.apps.svc.cluster.local. A 10.244.3.12",
        ]
    );
    // The service's own port name (`web`) is not the endpoints' (`pg`): headless SRV
    // names come from the slices' ports.
    assert_eq!(
        ask(&z, "_web._tcp.db.apps.svc.cluster.local.", RecordType::SRV),
        Answer::NxDomain
    );
}

#[test]
fn srv_weight_is_floored_and_at_least_one() {
    let eps: Vec<serde_json::Value> = (0..150)
        .map(|i| json!({"addresses": [format!("10.1.{}.{}", i / 200, i % 200 + 1)]}))
        .collect();
    let s3 = slice(
        "apps",
        "db-1",
        "db",
        json!([{"name": "pg", "port": 5432}]),
        json!(eps),
    );
    let z = zone(&[headless("apps", "db")], &[s3]);
    let Answer::Records(r) = ask(&z, "_pg._tcp.db.apps.svc.cluster.local.", RecordType::SRV) else {
        panic!("records")
    };
    assert_eq!(r.answers.len(), 150);
    let RData::SRV(srv) = &r.answers[0].data else {
        panic!("srv")
    };
    assert_eq!(srv.weight, 1);
}

#[test]
fn external_name_is_a_cname_resolved_upstream_or_inside_the_zone() {
    let z = cluster();
    let cname = ask(&z, "search.default.svc.cluster.local.", RecordType::CNAME);
    assert_eq!(
        answers(&cname),
        ["search.default.svc.cluster.local. CNAME www.example.com."]
    );
    let a = ask(&z, "search.default.svc.cluster.local.", RecordType::A);
    let Answer::Records(reply) = &a else {
        panic!("records")
    };
    assert_eq!(reply.answers.len(), 1);
    assert_eq!(
        reply.resolve_upstream,
        Some(Name::from_str("www.example.com.").unwrap())
    );
    let inside = ask(&z, "alias.default.svc.cluster.local.", RecordType::A);
    assert_eq!(
        answers(&inside),
        [
            "alias.default.svc.cluster.local. CNAME web.default.svc.cluster.local.",
            "web.default.svc.cluster.local. A 10.96.0.10",
        ]
    );
    let Answer::Records(reply) = &inside else {
        panic!("records")
    };
    assert_eq!(reply.resolve_upstream, None);
    assert_eq!(
        ask(
            &z,
            "_http._tcp.search.default.svc.cluster.local.",
            RecordType::SRV
        ),
        Answer::NxDomain,
        "no port names under an ExternalName service"
    );
}

#[test]
fn cname_loops_end() {
    let a = svc(json!({"metadata": {"name": "a", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "b.default.svc.cluster.local"}}));
    let b = svc(json!({"metadata": {"name": "b", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "a.default.svc.cluster.local"}}));
    let z = zone(&[a, b], &[]);
    let Answer::Records(r) = ask(&z, "a.default.svc.cluster.local.", RecordType::A) else {
        panic!("records")
    };
    assert!(r.answers.len() <= 3, "{:?}", r.answers);
    assert_eq!(r.resolve_upstream, None);
}

#[test]
fn ptr_for_cluster_ips_and_endpoints_other_reverse_names_forwarded() {
    let z = cluster();
    assert_eq!(
        answers(&ask(&z, "10.0.96.10.in-addr.arpa.", RecordType::PTR)),
        ["10.0.96.10.in-addr.arpa. PTR web.default.svc.cluster.local."]
    );
    assert_eq!(
        answers(&ask(&z, "10.1.244.10.in-addr.arpa.", RecordType::PTR)),
        ["10.1.244.10.in-addr.arpa. PTR db-0.db.apps.svc.cluster.local."]
    );
    assert_eq!(
        answers(&ask(&z, "5.1.244.10.in-addr.arpa.", RecordType::PTR)),
        ["5.1.244.10.in-addr.arpa. PTR 10-244-1-5.web.default.svc.cluster.local."]
    );
    assert_eq!(
        ask(&z, "6.2.244.10.in-addr.arpa.", RecordType::PTR),
        Answer::NotOurs,
        "not ready"
    );
    assert_eq!(
        ask(&z, "1.1.168.192.in-addr.arpa.", RecordType::PTR),
        Answer::NotOurs
    );
    assert_eq!(
        ask(&z, "10.0.96.10.in-addr.arpa.", RecordType::A),
        Answer::NotOurs
    );
}

#[test]
fn dual_stack_service_answers_both_families() {
    let s = svc(json!({"metadata": {"name": "dual", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20", "fd00::20"],
                 "ports": [{"port": 80}]}}));
    let z = zone(&[s], &[]);
    assert_eq!(
        answers(&ask(
            &z,
            "dual.default.svc.cluster.local.",
            RecordType::AAAA
        )),
        ["dual.default.svc.cluster.local. AAAA fd00::20"]
    );
    assert_eq!(
        answers(&ask(&z, "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", RecordType::PTR)),
        ["0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR dual.default.svc.cluster.local."]
    );
}

#[test]
fn pod_names_under_pods_insecure() {
    let z = cluster();
    assert_eq!(
        answers(&ask(
            &z,
            "10-244-9-9.default.pod.cluster.local.",
            RecordType::A
        )),
        ["10-244-9-9.default.pod.cluster.local. A 10.244.9.9"]
    );
    assert_eq!(
        answers(&ask(
            &z,
            "fd00--9.apps.pod.cluster.local.",
            RecordType::AAAA
        )),
        ["fd00--9.apps.pod.cluster.local. AAAA fd00::9"]
    );
    assert_eq!(
        ask(
            &z,
            "10-244-9-9.default.pod.cluster.local.",
            RecordType::AAAA
        ),
        Answer::NoData
    );
    assert_eq!(
        ask(&z, "10-244-9-9.nope.pod.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    assert_eq!(
        ask(&z, "not-an-ip.default.pod.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    let config = ZoneConfig {
        pods: PodMode::Disabled,
        ..ZoneConfig::default()
    };
    let off = zone_with(&config, &[], &[]);
    assert_eq!(
        ask(&off, "10-244-9-9.default.pod.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
}

#[test]
fn apex_soa_ns_and_schema_version() {
    let dns = cluster_ip(
        "kube-system",
        "kube-dns",
        "10.96.0.10",
        json!([{"name": "dns", "port": 53}]),
    );
    let z = zone(&[dns], &[]);
    let soa = ask(&z, "cluster.local.", RecordType::SOA);
    assert_eq!(
        answers(&soa),
        ["cluster.local. SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5"]
    );
    let ns = ask(&z, "cluster.local.", RecordType::NS);
    assert_eq!(answers(&ns), ["cluster.local. NS ns.dns.cluster.local."]);
    assert_eq!(additionals(&ns), ["ns.dns.cluster.local. A 10.96.0.10"]);
    assert_eq!(
        answers(&ask(&z, "ns.dns.cluster.local.", RecordType::A)),
        ["ns.dns.cluster.local. A 10.96.0.10"]
    );
    let txt = ask(&z, "dns-version.cluster.local.", RecordType::TXT);
    assert_eq!(answers(&txt), ["dns-version.cluster.local. TXT 1.1.0"]);
    assert_eq!(
        ask(&z, "web.default.svc.cluster.local.", RecordType::SOA),
        Answer::NxDomain
    );
    assert_eq!(z.soa().ttl, 5);
}

#[test]
fn services_of_unknown_namespaces_and_without_addresses_are_left_out() {
    let orphan = cluster_ip("gone", "web", "10.96.0.30", json!([{"port": 80}]));
    let pending = svc(
        json!({"metadata": {"name": "pending", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]}}),
    );
    let z = zone(&[orphan, pending], &[]);
    assert_eq!(
        ask(&z, "web.gone.svc.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    assert_eq!(
        ask(&z, "pending.default.svc.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    // The ClusterIP still has its PTR (CoreDNS does not filter reverse lookups).
    assert_eq!(
        answers(&ask(&z, "30.0.96.10.in-addr.arpa.", RecordType::PTR)),
        ["30.0.96.10.in-addr.arpa. PTR web.gone.svc.cluster.local."]
    );
}

#[test]
fn custom_domain_and_ttl() {
    let config = ZoneConfig {
        domain: "Corp.Example.".to_string(),
        ttl: 30,
        ..ZoneConfig::default()
    };
    let web = cluster_ip("default", "web", "10.96.0.10", json!([{"port": 80}]));
    let z = zone_with(&config, &[web], &[]);
    let Answer::Records(r) = ask(&z, "web.default.svc.corp.example.", RecordType::A) else {
        panic!("records")
    };
    assert_eq!(r.answers[0].ttl, 30);
    assert_eq!(
        ask(&z, "web.default.svc.cluster.local.", RecordType::A),
        Answer::NotOurs
    );
    assert_eq!(z.soa().ttl, 30);
    assert!(ClusterZone::pending(&ZoneConfig {
        domain: ".".into(),
        ..ZoneConfig::default()
    })
    .is_err());
}

#[test]
fn invalid_hostnames_are_warned_about_not_fatal() {
    let eps = slice(
        "apps",
        "db-1",
        "db",
        json!([]),
        json!([
        {"addresses": ["10.244.1.10"], "hostname": "x".repeat(70)},
        {"addresses": ["10.244.1.11"], "hostname": "db-1"}]),
    );
    let z = zone(&[headless("apps", "db")], &[eps]);
    assert_eq!(z.warnings().len(), 1, "{:?}", z.warnings());
    let warning = z.warnings()[0].to_string();
    assert!(
        warning.contains("service apps/db: endpoint hostname"),
        "{warning}"
    );
    assert_eq!(
        answers(&ask(&z, "db-1.db.apps.svc.cluster.local.", RecordType::A)),
        ["db-1.db.apps.svc.cluster.local. A 10.244.1.11"]
    );
}

#[test]
fn pending_zone_is_not_synced() {
    let z = ClusterZone::pending(&ZoneConfig::default()).unwrap();
    assert!(!z.is_synced());
    assert!(cluster().is_synced());
}

#[test]
fn rebuild_reuses_unchanged_services_and_sees_changes() {
    let config = ZoneConfig::default();
    let web = ServiceInfo::from_service(&cluster_ip(
        "default",
        "web",
        "10.96.0.10",
        json!([{"port": 80}]),
    ))
    .unwrap();
    let db = ServiceInfo::from_service(&headless("apps", "db")).unwrap();
    let eps = |ip: &str| {
        SliceInfo::from_slice(&slice(
            "apps",
            "db-1",
            "db",
            json!([]),
            json!([{"addresses": [ip]}]),
        ))
        .unwrap()
    };
    let ns = ["default", "apps"];
    let first = ClusterZone::build(&config, [&web, &db], [&eps("10.244.1.10")], ns, 1).unwrap();
    let second = first
        .rebuild([&web, &db], [&eps("10.244.1.11")], ns, 2)
        .unwrap();
    let key = |n: &str| wire_key(&Name::from_str(n).unwrap());
    let web_key = key("web.default.svc.cluster.local.");
    assert!(
        Arc::ptr_eq(&first.nodes[&web_key[..]], &second.nodes[&web_key[..]]),
        "unchanged: reused"
    );
    assert_eq!(
        answers(&ask(&second, "db.apps.svc.cluster.local.", RecordType::A)),
        ["db.apps.svc.cluster.local. A 10.244.1.11"]
    );
    assert_eq!(
        ask(
            &second,
            "10-244-1-10.db.apps.svc.cluster.local.",
            RecordType::A
        ),
        Answer::NxDomain
    );
    assert_eq!(
        ask(&second, "10.1.244.10.in-addr.arpa.", RecordType::PTR),
        Answer::NotOurs
    );
    let ptr = key("10.0.96.10.in-addr.arpa.");
    assert!(Arc::ptr_eq(&first.nodes[&ptr[..]], &second.nodes[&ptr[..]]));
    assert_eq!(second.serial(), 2);
    // Deleted: gone from the rebuilt zone.
    let third = second.rebuild([&db], [&eps("10.244.1.11")], ns, 3).unwrap();
    assert_eq!(
        ask(&third, "web.default.svc.cluster.local.", RecordType::A),
        Answer::NxDomain
    );
    // The same names whether rebuilt or built from scratch.
    let fresh = ClusterZone::build(&config, [&db], [&eps("10.244.1.11")], ns, 3).unwrap();
    let mut a: Vec<_> = third
        .nodes
        .iter()
        .map(|(k, n)| (k.to_vec(), (**n).clone()))
        .collect();
    let mut b: Vec<_> = fresh
        .nodes
        .iter()
        .map(|(k, n)| (k.to_vec(), (**n).clone()))
        .collect();
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(a, b);
}
