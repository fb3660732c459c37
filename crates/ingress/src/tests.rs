#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use crate::backends::BackendError;
use crate::table::is_ours;
use crate::*;

/// An Ingress as `kubectl create ingress NAME --rule=...` writes it: a rule path ending
/// in `*` is `Prefix` (the `*` dropped), any other `Exact`.
fn ingress(name: &str, created: &str, rules: &[(&str, &str, &str, Value)]) -> Value {
    let mut by_host: Vec<(String, Vec<Value>)> = Vec::new();
    for (host, path, service, port) in rules {
        let (path, kind) = match path.strip_suffix('*') {
            Some(p) => (p, "Prefix"),
            None => (*path, "Exact"),
        };
        let p = json!({"path": path, "pathType": kind,
            "backend": {"service": {"name": service, "port": port}}});
        match by_host.iter_mut().find(|(h, _)| h == host) {
            Some((_, paths)) => paths.push(p),
            None => by_host.push((host.to_string(), vec![p])),
        }
    }
    let rules: Vec<Value> = by_host
        .into_iter()
        .map(|(host, paths)| {
            let mut r = json!({"http": {"paths": paths}});
            if !host.is_empty() {
                r["host"] = json!(host);
            }
            r
        })
        .collect();
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"ingressClassName": "cairn", "rules": rules}})
}

fn typed(v: Value) -> Ingress {
    serde_json::from_value(v).unwrap()
}

fn number(n: i32) -> Value {
    json!({"number": n})
}

fn routed<'a>(t: &'a RouteTable, host: &str, path: &str) -> Option<&'a str> {
    t.route(host, path).map(|s| s.name.as_str())
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

/// `kubectl create ingress --help`'s examples.
#[test]
fn kubectl_create_ingress_examples_route_as_upstream_says() {
    // simple --rule="foo.com/bar=svc1:8080,tls=my-cert"
    let mut simple = ingress("simple", T0, &[("foo.com", "/bar", "svc1", number(8080))]);
    simple["spec"]["tls"] = json!([{"hosts": ["foo.com"], "secretName": "my-cert"}]);
    // catch-all --rule="/path=svc:port"
    let catch_all = ingress("catch-all", T0, &[("", "/path", "svc", number(80))]);
    // multipath --rule="foo.com/=svc:port" --rule="foo.com/admin/=svcadmin:portadmin"
    let multipath = ingress(
        "multipath",
        T0,
        &[
            ("foo.com", "/", "svc", number(80)),
            (
                "foo.com",
                "/admin/",
                "svcadmin",
                json!({"name": "portadmin"}),
            ),
        ],
    );
    let t = RouteTable::build(&[typed(simple)]);
    assert_eq!(routed(&t, "foo.com", "/bar"), Some("svc1"));
    assert_eq!(routed(&t, "FOO.com:443", "/bar?x=1"), Some("svc1"));
    assert_eq!(routed(&t, "foo.com", "/bar/"), None, "Exact");
    assert_eq!(routed(&t, "bar.com", "/bar"), None);
    assert_eq!(t.certificate("foo.com").unwrap().secret, "my-cert");
    assert!(t.certificate("bar.com").is_none());

    let t = RouteTable::build(&[typed(catch_all)]);
    assert_eq!(routed(&t, "anything.example", "/path"), Some("svc"));
    assert_eq!(routed(&t, "198.18.0.11", "/path"), Some("svc"));

    let t = RouteTable::build(&[typed(multipath)]);
    assert_eq!(routed(&t, "foo.com", "/"), Some("svc"));
    assert_eq!(routed(&t, "foo.com", "/admin/"), Some("svcadmin"));
    assert_eq!(
        routed(&t, "foo.com", "/admin"),
        None,
        "both paths are Exact"
    );

    // ingress1 --rule="foo.com/path*=svc:8080" --rule="bar.com/admin*=svc2:http"
    let prefixes = ingress(
        "ingress1",
        T0,
        &[
            ("foo.com", "/path*", "svc", number(8080)),
            ("bar.com", "/admin*", "svc2", json!({"name": "http"})),
        ],
    );
    let t = RouteTable::build(&[typed(prefixes)]);
    assert_eq!(routed(&t, "foo.com", "/path/to/x"), Some("svc"));
    assert_eq!(routed(&t, "foo.com", "/pathology"), None);
    let admin = t.route("bar.com", "/admin").unwrap();
    assert_eq!(admin.port, PortRef::Name("http".into()));

    // ingtls --default-backend=defaultsvc:http --rule="foo.com/*=svc:8080,tls=secret1"
    let mut with_default = ingress("ingtls", T0, &[("foo.com", "/*", "svc", number(8080))]);
    with_default["spec"]["defaultBackend"] =
        json!({"service": {"name": "defaultsvc", "port": {"name": "http"}}});
    let t = RouteTable::build(&[typed(with_default)]);
    assert_eq!(routed(&t, "foo.com", "/any/thing"), Some("svc"));
    assert_eq!(routed(&t, "other.com", "/"), Some("defaultsvc"));
}

#[test]
fn the_longest_path_wins_then_exact_over_prefix() {
    let i = ingress(
        "paths",
        T0,
        &[
            ("", "/*", "root", number(80)),
            ("", "/aaa*", "aaa", number(80)),
            ("", "/aaa/bbb*", "bbb", number(80)),
            ("", "/foo*", "foo-prefix", number(80)),
            ("", "/foo", "foo-exact", number(80)),
        ],
    );
    let t = RouteTable::build(&[typed(i)]);
    assert_eq!(routed(&t, "h", "/aaa/ccc"), Some("aaa"));
    assert_eq!(routed(&t, "h", "/aaa/bbb"), Some("bbb"));
    assert_eq!(routed(&t, "h", "/aaa/bbbxyz"), Some("aaa"));
    assert_eq!(routed(&t, "h", "/foo"), Some("foo-exact"));
    assert_eq!(routed(&t, "h", "/foo/"), Some("foo-prefix"));
    assert_eq!(routed(&t, "h", "/"), Some("root"));
}

#[test]
fn hosts_go_to_their_most_specific_group_only() {
    let i = ingress(
        "hosts",
        T0,
        &[
            ("a.foo.com", "/exact-only", "exact", number(80)),
            ("*.foo.com", "/*", "wild", number(80)),
            ("*.b.foo.com", "/*", "wild-b", number(80)),
            ("", "/*", "any", number(80)),
        ],
    );
    let t = RouteTable::build(&[typed(i)]);
    assert_eq!(routed(&t, "a.foo.com", "/exact-only"), Some("exact"));
    // The exact host's group has no such path: no fall-through to the wildcard.
    assert_eq!(routed(&t, "a.foo.com", "/other"), None);
    assert_eq!(routed(&t, "z.foo.com", "/x"), Some("wild"));
    assert_eq!(routed(&t, "c.b.foo.com", "/x"), Some("wild-b"));
    assert_eq!(routed(&t, "foo.com", "/x"), Some("any"));
    assert_eq!(routed(&t, "x.y.foo.com", "/x"), Some("any"));
}

#[test]
fn on_a_conflict_the_oldest_ingress_wins_and_the_other_is_told() {
    let newer = ingress("newer", T1, &[("foo.com", "/x", "new-svc", number(80))]);
    let mut older = ingress("older", T0, &[("foo.com", "/x", "old-svc", number(80))]);
    older["spec"]["defaultBackend"] = json!({"service": {"name": "d1", "port": {"number": 80}}});
    let mut newer = newer;
    newer["spec"]["defaultBackend"] = json!({"service": {"name": "d2", "port": {"number": 80}}});
    newer["spec"]["tls"] = json!([{"hosts": ["foo.com"], "secretName": "new"}]);
    older["spec"]["tls"] = json!([{"hosts": ["foo.com"], "secretName": "old"}]);
    // Given in either order, the same table.
    for list in [
        vec![newer.clone(), older.clone()],
        vec![older.clone(), newer.clone()],
    ] {
        let typed: Vec<Ingress> = list.into_iter().map(typed).collect();
        let t = RouteTable::build(&typed);
        assert_eq!(routed(&t, "foo.com", "/x"), Some("old-svc"));
        assert_eq!(routed(&t, "bar.com", "/"), Some("d1"));
        assert_eq!(t.certificate("foo.com").unwrap().secret, "old");
        assert_eq!(t.conflicts.len(), 3, "{:?}", t.conflicts);
        for c in &t.conflicts {
            assert_eq!(c.ingress.name, "newer");
            assert!(c.message.contains("default/older"), "{}", c.message);
        }
    }
}

#[test]
fn only_cairns_class_or_the_default_is_ours() {
    let mut i = typed(ingress("i", T0, &[]));
    assert!(is_ours(&i, false));
    i.spec.as_mut().unwrap().ingress_class_name = Some("nginx".into());
    assert!(!is_ours(&i, true));
    i.spec.as_mut().unwrap().ingress_class_name = None;
    assert!(is_ours(&i, true) && !is_ours(&i, false));
    i.metadata.annotations = Some(
        [(
            "kubernetes.io/ingress.class".to_string(),
            "cairn".to_string(),
        )]
        .into(),
    );
    assert!(is_ours(&i, false));
}

fn service(name: &str, ports: Value) -> Service {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": ports}}))
    .unwrap()
}

fn slice(service: &str, port_name: &str, endpoints: Value) -> EndpointSlice {
    serde_json::from_value(
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-x"), "namespace": "default",
            "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints}),
    )
    .unwrap()
}

#[test]
fn backends_resolve_to_ready_endpoints_or_say_why_not() {
    let backend = |port: PortRef| ServiceRef {
        namespace: "default".into(),
        name: "web".into(),
        port,
    };
    let svc = service(
        "web",
        json!([{"name": "http", "port": 80, "targetPort": 8080}]),
    );
    let eps = slice(
        "web",
        "http",
        json!([
            {"addresses": ["10.244.1.2"]},
            {"addresses": ["10.244.1.3"], "conditions": {"ready": true}},
            {"addresses": ["10.244.1.4"], "conditions": {"ready": false}},
            {"addresses": ["10.244.1.5"], "conditions": {"ready": true, "terminating": true}}
        ]),
    );
    let other = slice("api", "http", json!([{"addresses": ["10.244.9.9"]}]));
    let slices = [&eps, &other];
    let want: Vec<Endpoint> = vec![
        "10.244.1.2:8080".parse().unwrap(),
        "10.244.1.3:8080".parse().unwrap(),
    ];
    for port in [PortRef::Number(80), PortRef::Name("http".into())] {
        assert_eq!(
            endpoints(&backend(port), Some(&svc), &slices),
            Ok(want.clone())
        );
    }
    let missing = endpoints(&backend(PortRef::Number(80)), None, &slices).unwrap_err();
    assert_eq!(missing.to_string(), "service \"default/web\" not found");
    let no_port = endpoints(&backend(PortRef::Number(81)), Some(&svc), &slices).unwrap_err();
    assert!(matches!(no_port, BackendError::NoPort { .. }), "{no_port}");
    let none_ready = endpoints(&backend(PortRef::Number(80)), Some(&svc), &[&other]).unwrap_err();
    assert_eq!(
        none_ready.to_string(),
        "service \"default/web\" has no ready endpoints"
    );
}
