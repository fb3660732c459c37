//! Attachment as the core conformance tests expect it (`conformance/tests/*.go`, gathered
//! in `docs/upstream/gateway-api-semantics.md` §4–§5): multiple listeners, cross-namespace
//! `allowedRoutes`, parentRefs naming no listener, ReferenceGrants, listener conflicts,
//! certificate references, and the status they make.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::attach::{attach, Attachment, Inputs, Protocol};
use super::dispatch::{listener_for, weighted};
use super::objects::{Gateway, GatewayClass, ReferenceGrant};
use super::route::{BackendRef, HttpRoute};
use super::status::{gateway_status, route_status};
use super::table::{Action, Request};

const INFRA: &str = "gateway-conformance-infra";
const WEB: &str = "gateway-conformance-web-backend";

fn class() -> GatewayClass {
    serde_json::from_value(json!({"metadata": {"name": "cairn"},
        "spec": {"controllerName": "cairn.io/gateway-controller"}}))
    .unwrap()
}

fn gateway(name: &str, created: &str, listeners: Value) -> Gateway {
    serde_json::from_value(json!({
        "metadata": {"namespace": INFRA, "name": name, "creationTimestamp": created, "generation": 1},
        "spec": {"gatewayClassName": "cairn", "listeners": listeners}
    }))
    .unwrap()
}

fn http(name: &str, port: u16, hostname: Option<&str>, from: Value) -> Value {
    json!({"name": name, "port": port, "protocol": "HTTP", "hostname": hostname,
           "allowedRoutes": {"namespaces": from}})
}

fn route(namespace: &str, name: &str, spec: Value) -> HttpRoute {
    serde_json::from_value(json!({
        "metadata": {"namespace": namespace, "name": name, "generation": 3,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec
    }))
    .unwrap()
}

fn grant(namespace: &str, from: Value, to: Value) -> ReferenceGrant {
    serde_json::from_value(json!({"metadata": {"namespace": namespace, "name": "g"},
        "spec": {"from": from, "to": to}}))
    .unwrap()
}

struct World {
    class: GatewayClass,
    gateways: Vec<Gateway>,
    routes: Vec<HttpRoute>,
    grants: Vec<ReferenceGrant>,
}

impl World {
    fn new(gateways: Vec<Gateway>, routes: Vec<HttpRoute>) -> World {
        World {
            class: class(),
            gateways,
            routes,
            grants: vec![],
        }
    }

    fn attach(&self) -> Attachment {
        let services = [
            (INFRA, "infra-backend-v1"),
            (INFRA, "infra-backend-v2"),
            (INFRA, "infra-backend-v3"),
            (WEB, "web-backend"),
        ];
        let labels = |ns: &str, extra: &[(&str, &str)]| {
            let mut l =
                BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.to_string())]);
            l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            (ns.to_string(), l)
        };
        let inputs = Inputs {
            classes: vec![&self.class],
            gateways: self.gateways.iter().collect(),
            routes: self.routes.iter().collect(),
            grants: self.grants.iter().collect(),
            namespaces: BTreeMap::from([
                labels(INFRA, &[]),
                labels(WEB, &[("gateway-conformance", "web-backend")]),
                labels(
                    "gateway-conformance-app-backend",
                    &[("gateway-conformance", "backend")],
                ),
            ]),
            services: services
                .iter()
                .map(|(n, s)| (n.to_string(), s.to_string()))
                .collect(),
            tls_secrets: [(
                INFRA.to_string(),
                "tls-validity-checks-certificate".to_string(),
            )]
            .into(),
        };
        attach(&inputs)
    }
}

/// A route's condition on its `i`th parent: (status, reason).
fn parent_cond(a: &Attachment, route: (&str, &str), i: usize, kind: &str) -> (bool, &'static str) {
    let state = &a.routes[&(route.0.to_string(), route.1.to_string())];
    let (_, c) = state.parents[i]
        .conditions
        .iter()
        .find(|(k, _)| *k == kind)
        .unwrap();
    (c.status, c.reason)
}

fn listener_cond(
    a: &Attachment,
    gateway: &str,
    listener: &str,
    kind: &str,
) -> (bool, &'static str) {
    let state = &a.gateways[&(INFRA.to_string(), gateway.to_string())];
    let l = state.listeners.iter().find(|l| l.name == listener).unwrap();
    let (_, c) = l.conditions.iter().find(|(k, _)| *k == kind).unwrap();
    (c.status, c.reason)
}

fn attached(a: &Attachment, gateway: &str) -> Vec<i32> {
    let state = &a.gateways[&(INFRA.to_string(), gateway.to_string())];
    state.listeners.iter().map(|l| l.attached_routes).collect()
}

/// What a GET for `host` `path` on port 80 gets: a backend, "404", "500" or "redirect".
fn get(a: &Attachment, host: &str, path: &str) -> String {
    let Some(listener) = listener_for(&a.listeners, 80, Protocol::Http, host) else {
        return "404".into();
    };
    let request = Request {
        host,
        method: "GET",
        path,
        query: None,
        header: &|_| None,
    };
    match listener.table.route(&request) {
        None => "404".into(),
        Some(Action::Error500) => "500".into(),
        Some(Action::Redirect(_)) => "redirect".into(),
        Some(Action::Forward { backends, .. }) => {
            let b: &BackendRef = &backends[0].0;
            match b.unresolved {
                Some(_) => "500".into(),
                None => b.name.clone(),
            }
        }
    }
}

fn simple(namespace: &str, name: &str, parent: Value, backend: Value) -> HttpRoute {
    route(
        namespace,
        name,
        json!({"parentRefs": [parent], "rules": [{"backendRefs": [backend]}]}),
    )
}

#[test]
fn httproute_listener_hostname_matching_picks_the_most_specific_listener() {
    let listeners = json!([
        http("listener-1", 80, Some("bar.com"), json!({"from": "Same"})),
        http(
            "listener-2",
            80,
            Some("foo.bar.com"),
            json!({"from": "Same"})
        ),
        http("listener-3", 80, Some("*.bar.com"), json!({"from": "Same"})),
        http("listener-4", 80, Some("*.foo.com"), json!({"from": "Same"})),
    ]);
    let gw = gateway(
        "httproute-listener-hostname-matching",
        "2026-01-01T00:00:00Z",
        listeners,
    );
    let parent =
        |s: &str| json!({"name": "httproute-listener-hostname-matching", "sectionName": s});
    let backend = |v: &str| json!({"name": format!("infra-backend-{v}"), "port": 8080});
    let routes = vec![
        route(
            INFRA,
            "backend-v1",
            json!({"parentRefs": [parent("listener-1")], "rules": [{"backendRefs": [backend("v1")]}]}),
        ),
        route(
            INFRA,
            "backend-v2",
            json!({"parentRefs": [parent("listener-2")], "rules": [{"backendRefs": [backend("v2")]}]}),
        ),
        route(
            INFRA,
            "backend-v3",
            json!({"parentRefs": [parent("listener-3"), parent("listener-4")], "rules": [{"backendRefs": [backend("v3")]}]}),
        ),
    ];
    let a = World::new(vec![gw], routes).attach();
    assert_eq!(
        attached(&a, "httproute-listener-hostname-matching"),
        [1, 1, 1, 1]
    );
    for (host, want) in [
        ("bar.com", "infra-backend-v1"),
        ("foo.bar.com", "infra-backend-v2"),
        ("baz.bar.com", "infra-backend-v3"),
        ("boo.bar.com", "infra-backend-v3"),
        ("multiple.prefixes.bar.com", "infra-backend-v3"),
        ("multiple.prefixes.foo.com", "infra-backend-v3"),
        ("foo.com", "404"),
        ("no.matching.host", "404"),
    ] {
        assert_eq!(get(&a, host, "/"), want, "{host}");
    }
}

/// The base manifests' three Gateways: `from: Same`, `All`, `Selector`.
fn base_gateways() -> Vec<Gateway> {
    vec![
        gateway(
            "same-namespace",
            "2026-01-01T00:00:00Z",
            json!([http("http", 80, None, json!({"from": "Same"}))]),
        ),
        gateway(
            "all-namespaces",
            "2026-01-02T00:00:00Z",
            json!([http("http", 8080, None, json!({"from": "All"}))]),
        ),
        gateway(
            "backend-namespaces",
            "2026-01-03T00:00:00Z",
            json!([http(
                "http",
                8081,
                None,
                json!({"from": "Selector", "selector": {"matchLabels": {"gateway-conformance": "web-backend"}}})
            )]),
        ),
    ]
}

#[test]
fn cross_namespace_routes_attach_only_where_allowed_routes_let_them() {
    let to_web = json!({"name": "web-backend", "port": 8080});
    let parent = |g: &str| json!({"name": g, "namespace": INFRA});
    let routes = vec![
        // HTTPRouteInvalidCrossNamespaceParentRef: `from: Same` refuses another namespace.
        simple(
            WEB,
            "invalid-cross-ns",
            parent("same-namespace"),
            to_web.clone(),
        ),
        // HTTPRouteCrossNamespace: `from: Selector` on the route namespace's labels.
        simple(
            WEB,
            "cross-namespace",
            parent("backend-namespaces"),
            to_web.clone(),
        ),
        simple(WEB, "to-all", parent("all-namespaces"), to_web.clone()),
        simple(
            "gateway-conformance-app-backend",
            "app",
            parent("backend-namespaces"),
            json!({"name": "x", "port": 1}),
        ),
        // HTTPRouteInvalidParentRefNotMatchingSectionName.
        simple(
            INFRA,
            "section",
            json!({"name": "same-namespace", "sectionName": "http1"}),
            json!({"name": "infra-backend-v1", "port": 8080}),
        ),
        simple(
            INFRA,
            "same",
            json!({"name": "same-namespace"}),
            json!({"name": "infra-backend-v1", "port": 8080}),
        ),
    ];
    let a = World::new(base_gateways(), routes).attach();
    assert_eq!(
        parent_cond(&a, (WEB, "invalid-cross-ns"), 0, "Accepted"),
        (false, "NotAllowedByListeners")
    );
    assert_eq!(
        parent_cond(&a, (WEB, "invalid-cross-ns"), 0, "ResolvedRefs"),
        (true, "ResolvedRefs")
    );
    assert_eq!(
        parent_cond(&a, (WEB, "cross-namespace"), 0, "Accepted"),
        (true, "Accepted")
    );
    assert_eq!(
        parent_cond(&a, (WEB, "to-all"), 0, "Accepted"),
        (true, "Accepted")
    );
    let app = ("gateway-conformance-app-backend", "app");
    assert_eq!(
        parent_cond(&a, app, 0, "Accepted"),
        (false, "NotAllowedByListeners")
    );
    assert_eq!(
        parent_cond(&a, (INFRA, "section"), 0, "Accepted"),
        (false, "NoMatchingParent")
    );
    assert_eq!(
        attached(&a, "same-namespace"),
        [1],
        "only the route from its own namespace"
    );
    assert_eq!(attached(&a, "backend-namespaces"), [1]);
    assert_eq!(attached(&a, "all-namespaces"), [1]);
    // Traffic follows attachment: port 80 serves only the same-namespace route.
    assert_eq!(get(&a, "example.com", "/"), "infra-backend-v1");
    let on_8081 = listener_for(&a.listeners, 8081, Protocol::Http, "example.com").unwrap();
    let request = Request {
        host: "example.com",
        method: "GET",
        path: "/",
        query: None,
        header: &|_| None,
    };
    let action = on_8081.table.route(&request);
    let Some(Action::Forward { backends, .. }) = action else {
        panic!("{action:?}")
    };
    assert_eq!(
        backends[0].0.namespace.as_deref(),
        Some(WEB),
        "the namespace filled in"
    );
}

#[test]
fn reference_grants_allow_cross_namespace_backends_exactly() {
    let parent = json!({"name": "same-namespace"});
    let spec = json!({"parentRefs": [parent], "rules": [
        {"matches": [{"path": {"value": "/"}}], "backendRefs": [{"name": "infra-backend-v1", "port": 8080}]},
        {"matches": [{"path": {"value": "/v2"}}], "backendRefs": [{"name": "web-backend", "namespace": WEB, "port": 8080}]}]});
    let mut world = World::new(base_gateways(), vec![route(INFRA, "reference-grant", spec)]);
    let key = (INFRA, "reference-grant");
    // No grant: RefNotPermitted, still Accepted; the rule answers 500, the other routes.
    let a = world.attach();
    assert_eq!(parent_cond(&a, key, 0, "Accepted"), (true, "Accepted"));
    assert_eq!(
        parent_cond(&a, key, 0, "ResolvedRefs"),
        (false, "RefNotPermitted")
    );
    assert_eq!(get(&a, "example.com", "/v2"), "500");
    assert_eq!(get(&a, "example.com", "/"), "infra-backend-v1");
    let from = |g: &str, k: &str, ns: &str| json!([{"group": g, "kind": k, "namespace": ns}]);
    let to = |g: &str, k: &str, name: Option<&str>| json!([{"group": g, "kind": k, "name": name}]);
    let gw = "gateway.networking.k8s.io";
    // HTTPRouteInvalidReferenceGrant's mistakes: none of them allows it.
    for (namespace, f, t) in [
        (INFRA, from(gw, "HTTPRoute", INFRA), to("", "Service", None)),
        (WEB, from("", "HTTPRoute", INFRA), to("", "Service", None)),
        (WEB, from(gw, "Gateway", INFRA), to("", "Service", None)),
        (WEB, from(gw, "HTTPRoute", WEB), to("", "Service", None)),
        (WEB, from(gw, "HTTPRoute", INFRA), to("v1", "Service", None)),
        (WEB, from(gw, "HTTPRoute", INFRA), to("", "Secret", None)),
        (
            WEB,
            from(gw, "HTTPRoute", INFRA),
            to("", "Service", Some("not-web-backend")),
        ),
    ] {
        world.grants = vec![grant(namespace, f.clone(), t.clone())];
        let a = world.attach();
        assert_eq!(
            parent_cond(&a, key, 0, "ResolvedRefs"),
            (false, "RefNotPermitted"),
            "{namespace} {f} {t}"
        );
        assert_eq!(get(&a, "example.com", "/v2"), "500");
    }
    for t in [
        to("", "Service", None),
        to("", "Service", Some("web-backend")),
    ] {
        world.grants = vec![grant(WEB, from(gw, "HTTPRoute", INFRA), t)];
        let a = world.attach();
        assert_eq!(
            parent_cond(&a, key, 0, "ResolvedRefs"),
            (true, "ResolvedRefs")
        );
        assert_eq!(get(&a, "example.com", "/v2"), "web-backend");
    }
}

#[test]
fn unresolvable_backends_and_kinds_are_reported_and_answer_500() {
    let parent = json!({"name": "same-namespace"});
    let routes = vec![
        simple(
            INFRA,
            "missing",
            parent.clone(),
            json!({"name": "nonexistent", "port": 8080}),
        ),
        simple(
            INFRA,
            "kind",
            parent.clone(),
            json!({"group": "unknown.example", "kind": "Thing", "name": "x"}),
        ),
    ];
    let a = World::new(base_gateways(), routes).attach();
    assert_eq!(
        parent_cond(&a, (INFRA, "missing"), 0, "Accepted"),
        (true, "Accepted")
    );
    assert_eq!(
        parent_cond(&a, (INFRA, "missing"), 0, "ResolvedRefs"),
        (false, "BackendNotFound")
    );
    assert_eq!(
        parent_cond(&a, (INFRA, "kind"), 0, "ResolvedRefs"),
        (false, "InvalidKind")
    );
    assert_eq!(get(&a, "example.com", "/"), "500");
}

#[test]
fn colliding_listeners_are_conflicted_within_a_gateway_and_the_older_gateway_keeps_a_port() {
    let same = json!({"from": "Same"});
    let within = gateway(
        "within",
        "2026-01-01T00:00:00Z",
        json!([
            http("a", 80, Some("a.example"), same.clone()),
            http("b", 80, Some("a.example"), same.clone()),
            http("c", 80, Some("c.example"), same.clone()),
            {"name": "udp", "port": 53, "protocol": "UDP"},
        ]),
    );
    let newer = gateway(
        "newer",
        "2026-01-02T00:00:00Z",
        json!([
            http("c", 80, Some("c.example"), same.clone()),
            http("d", 80, Some("d.example"), same.clone()),
        ]),
    );
    let third = gateway(
        "third",
        "2026-01-03T00:00:00Z",
        json!([
            {"name": "tls", "port": 80, "protocol": "HTTPS", "hostname": "e.example",
             "tls": {"certificateRefs": [{"name": "tls-validity-checks-certificate"}]}},
        ]),
    );
    let a = World::new(vec![third, newer, within], vec![]).attach();
    assert_eq!(
        listener_cond(&a, "within", "a", "Conflicted"),
        (true, "HostnameConflict")
    );
    assert_eq!(
        listener_cond(&a, "within", "b", "Conflicted"),
        (true, "HostnameConflict")
    );
    assert_eq!(
        listener_cond(&a, "within", "c", "Conflicted"),
        (false, "NoConflicts")
    );
    assert_eq!(
        listener_cond(&a, "within", "udp", "Accepted"),
        (false, "UnsupportedProtocol")
    );
    assert_eq!(
        listener_cond(&a, "newer", "c", "Conflicted"),
        (true, "HostnameConflict")
    );
    assert_eq!(
        listener_cond(&a, "newer", "d", "Programmed"),
        (true, "Programmed")
    );
    assert_eq!(
        listener_cond(&a, "third", "tls", "Conflicted"),
        (true, "ProtocolConflict")
    );
    let within = &a.gateways[&(INFRA.to_string(), "within".to_string())];
    assert_eq!(within.conditions[0].1.reason, "ListenersNotValid");
    assert!(
        within.conditions[0].1.status,
        "some listeners are valid: still Accepted"
    );
    let served: Vec<(&str, &str)> = a
        .listeners
        .iter()
        .map(|l| (l.gateway.1.as_str(), l.name.as_str()))
        .collect();
    assert_eq!(served, [("within", "c"), ("newer", "d")]);
}

#[test]
fn https_listeners_need_a_tls_secret_they_may_refer_to() {
    let https = |name: &str, secret: Value| {
        json!({"name": name, "port": 443, "protocol": "HTTPS",
        "hostname": format!("{name}.example"), "tls": {"certificateRefs": [secret]}})
    };
    let gw = gateway(
        "tls",
        "2026-01-01T00:00:00Z",
        json!([
            https("good", json!({"name": "tls-validity-checks-certificate"})),
            https("missing", json!({"name": "nonexistent"})),
            https(
                "kind",
                json!({"kind": "ConfigMap", "name": "tls-validity-checks-certificate"})
            ),
            https("elsewhere", json!({"name": "cert", "namespace": WEB})),
        ]),
    );
    let a = World::new(vec![gw], vec![]).attach();
    assert_eq!(
        listener_cond(&a, "tls", "good", "ResolvedRefs"),
        (true, "ResolvedRefs")
    );
    assert_eq!(
        listener_cond(&a, "tls", "missing", "ResolvedRefs"),
        (false, "InvalidCertificateRef")
    );
    assert_eq!(
        listener_cond(&a, "tls", "kind", "ResolvedRefs"),
        (false, "InvalidCertificateRef")
    );
    assert_eq!(
        listener_cond(&a, "tls", "elsewhere", "ResolvedRefs"),
        (false, "RefNotPermitted")
    );
    assert_eq!(
        listener_cond(&a, "tls", "missing", "Programmed"),
        (false, "Invalid")
    );
    let good = listener_for(&a.listeners, 443, Protocol::Https, "good.example").unwrap();
    assert_eq!(
        good.certificate,
        Some((
            INFRA.to_string(),
            "tls-validity-checks-certificate".to_string()
        ))
    );
    assert!(listener_for(&a.listeners, 443, Protocol::Https, "missing.example").is_none());
}

#[test]
fn gateways_of_other_classes_and_their_routes_are_left_alone() {
    let mut other = gateway(
        "other",
        "2026-01-01T00:00:00Z",
        json!([http("http", 80, None, json!({"from": "Same"}))]),
    );
    other.spec.gateway_class_name = "nginx".into();
    let r = simple(
        INFRA,
        "r",
        json!({"name": "other"}),
        json!({"name": "infra-backend-v1", "port": 8080}),
    );
    let a = World::new(vec![other], vec![r]).attach();
    assert!(a.gateways.is_empty() && a.routes.is_empty() && a.listeners.is_empty());
}

#[test]
fn weights_share_traffic_exactly_and_weight_zero_gets_none() {
    let b = |name: &str, w: u32| {
        (
            BackendRef {
                name: name.into(),
                ..Default::default()
            },
            w,
        )
    };
    let backends = [b("v1", 70), b("v2", 30), b("v3", 0)];
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for n in 0..500 {
        *counts
            .entry(weighted(&backends, n).unwrap().name.clone())
            .or_default() += 1;
    }
    assert_eq!(
        counts,
        BTreeMap::from([("v1".into(), 350), ("v2".into(), 150)])
    );
    // Spread, not in runs: any 20 consecutive draws reach both.
    let window: std::collections::BTreeSet<String> = (1000..1020)
        .map(|n| weighted(&backends, n).unwrap().name.clone())
        .collect();
    assert_eq!(window.len(), 2);
    assert!(weighted(&[b("v3", 0)], 1).is_none());
}

#[test]
fn status_keeps_transition_times_while_conditions_hold() {
    let routes = vec![simple(
        INFRA,
        "r",
        json!({"name": "same-namespace"}),
        json!({"name": "infra-backend-v1", "port": 8080}),
    )];
    let a = World::new(base_gateways(), routes).attach();
    let state = &a.gateways[&(INFRA.to_string(), "same-namespace".to_string())];
    let first = gateway_status(state, &["198.18.0.2".into()], None, "2026-12-01T00:00:00Z");
    let again = gateway_status(
        state,
        &["198.18.0.2".into()],
        Some(&first),
        "2026-12-01T01:00:00Z",
    );
    assert_eq!(first, again, "nothing changed: nothing to write");
    assert_eq!(first["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(
        first["listeners"][0]["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
    );
    assert_eq!(
        first["addresses"],
        json!([{"type": "IPAddress", "value": "198.18.0.2"}])
    );
    let route_state = &a.routes[&(INFRA.to_string(), "r".to_string())];
    let other = json!({"parents": [{"controllerName": "example.com/other", "parentRef": {"name": "x"}, "conditions": []}]});
    let status = route_status(route_state, Some(&other), "2026-12-01T00:00:00Z");
    let parents = status["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 2, "another controller's entry is kept");
    assert_eq!(
        parents[1]["parentRef"],
        json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": INFRA, "name": "same-namespace"})
    );
    assert_eq!(parents[1]["conditions"][0]["observedGeneration"], 3);
}
