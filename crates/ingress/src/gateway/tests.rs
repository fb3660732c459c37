//! The Gateway API's core conformance expectations (`conformance/tests/httproute-*.go`,
//! gathered in `docs/upstream/gateway-api-semantics.md` §5) as request → backend tables.
#![allow(clippy::unwrap_used, clippy::panic)]

use http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::filters::{modify_headers, redirect_location};
use super::route::HttpRoute;
use super::table::{Action, ListenerTable, NotAccepted, Request};

fn route(name: &str, created: &str, spec: Value) -> HttpRoute {
    serde_json::from_value(json!({
        "metadata": {"namespace": "gateway-conformance-infra", "name": name, "creationTimestamp": created},
        "spec": spec
    }))
    .unwrap()
}

fn to(backend: &str) -> Value {
    json!([{"name": backend, "port": 8080}])
}

/// What a request gets: a backend's name, "404", "500" or "redirect".
fn ask(
    table: &ListenerTable,
    host: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_string())
    };
    let request = Request {
        host,
        method,
        path,
        query,
        header: &header,
    };
    match table.route(&request) {
        None => "404".into(),
        Some(Action::Error500) => "500".into(),
        Some(Action::Redirect(_)) => "redirect".into(),
        Some(Action::Forward { backends, .. }) => backends[0].0.name.clone(),
    }
}

fn get(table: &ListenerTable, target: &str, headers: &[(&str, &str)]) -> String {
    ask(table, "example.com", "GET", target, headers)
}

#[test]
fn httproute_matching_and_across_routes() {
    // T1: HTTPRouteMatching.
    let matching = route(
        "matching",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}, {"headers": [{"name": "version", "value": "one"}]}], "backendRefs": to("v1")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}, {"headers": [{"name": "version", "value": "two"}]}], "backendRefs": to("v2")},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&matching]);
    for (target, headers, want) in [
        ("/", &[][..], "v1"),
        ("/example", &[], "v1"),
        ("/", &[("Version", "one")], "v1"),
        ("/v2", &[], "v2"),
        ("/v2/example", &[], "v2"),
        ("/", &[("Version", "two")], "v2"),
        ("/v2/", &[], "v2"),
        ("/v2example", &[], "v1"),
        ("/foo/v2/example", &[], "v1"),
    ] {
        assert_eq!(get(&t, target, headers), want, "T1 {target} {headers:?}");
    }
    // T2: HTTPRouteMatchingAcrossRoutes.
    let part1 = route(
        "matching-part1",
        "2026-01-01T00:00:00Z",
        json!({"hostnames": ["example.com", "example.net"], "rules": [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}, {"headers": [{"name": "version", "value": "one"}]}], "backendRefs": to("v1")}]}),
    );
    let part2 = route(
        "matching-part2",
        "2026-01-01T00:00:01Z",
        json!({"hostnames": ["example.com"], "rules": [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}, {"headers": [{"name": "version", "value": "two"}]}], "backendRefs": to("v2")}]}),
    );
    let (t, _) = ListenerTable::build(None, [&part1, &part2]);
    for (host, target, headers, want) in [
        ("example.com", "/", &[][..], "v1"),
        ("example.com", "/example", &[], "v1"),
        ("example.net", "/example", &[], "v1"),
        ("example.com", "/example", &[("Version", "one")], "v1"),
        ("example.com", "/v2", &[], "v2"),
        ("example.net", "/v2", &[], "v1"),
        ("example.com", "/v2/example", &[], "v2"),
        ("example.com", "/", &[("Version", "two")], "v2"),
    ] {
        assert_eq!(
            ask(&t, host, "GET", target, headers),
            want,
            "T2 {host}{target} {headers:?}"
        );
    }
}

#[test]
fn httproute_exact_path_matching_and_path_match_order() {
    let exact = route(
        "exact",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "Exact", "value": "/one"}}], "backendRefs": to("v1")},
            {"matches": [{"path": {"type": "Exact", "value": "/two"}}], "backendRefs": to("v2")},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&exact]);
    for (target, want) in [
        ("/one", "v1"),
        ("/two", "v2"),
        ("/", "404"),
        ("/one/example", "404"),
        ("/two/", "404"),
        ("/Two", "404"),
    ] {
        assert_eq!(get(&t, target, &[]), want, "{target}");
    }
    let rule = |kind: &str, value: &str, backend: &str| json!({"matches": [{"path": {"type": kind, "value": value}}], "backendRefs": to(backend)});
    let order = route(
        "path-matching-order",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            rule("Exact", "/match", "v1"), rule("Exact", "/match/exact", "v2"), rule("Exact", "/match/exact/one", "v3"),
            rule("PathPrefix", "/match/", "v3"), rule("PathPrefix", "/match/prefix/", "v1"), rule("PathPrefix", "/match/prefix/one", "v2"),
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&order]);
    for (target, want) in [
        ("/match/exact/one", "v3"),
        ("/match/exact", "v2"),
        ("/match", "v1"),
        ("/match/prefix/one/any", "v2"),
        ("/match/prefix/any", "v1"),
        ("/match/any", "v3"),
    ] {
        assert_eq!(get(&t, target, &[]), want, "{target}");
    }
}

#[test]
fn httproute_header_matching() {
    let h = |pairs: &[(&str, &str)]| -> Value {
        json!(pairs
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .collect::<Vec<_>>())
    };
    let headers = route(
        "header-matching",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"headers": h(&[("version", "one")])}], "backendRefs": to("v1")},
            {"matches": [{"headers": h(&[("version", "two")])}], "backendRefs": to("v2")},
            {"matches": [{"headers": h(&[("version", "two"), ("color", "orange")])}], "backendRefs": to("v1")},
            {"matches": [{"headers": h(&[("color", "blue")])}, {"headers": h(&[("color", "green")])}], "backendRefs": to("v1")},
            {"matches": [{"headers": h(&[("color", "red")])}, {"headers": h(&[("color", "yellow")])}], "backendRefs": to("v2")},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&headers]);
    for (headers, want) in [
        (&[("Version", "one")][..], "v1"),
        (&[("Version", "two")], "v2"),
        (&[("Version", "two"), ("Color", "orange")], "v1"),
        (&[("Version", "two"), ("Color", "blue")], "v2"),
        (&[("Color", "orange")], "404"),
        (&[("Some-Other-Header", "one")], "404"),
        (&[("Color", "blue")], "v1"),
        (&[("Color", "green")], "v1"),
        (&[("Color", "red")], "v2"),
        (&[("Color", "yellow")], "v2"),
        (&[("Color", "purple")], "404"),
    ] {
        assert_eq!(get(&t, "/", headers), want, "{headers:?}");
    }
}

#[test]
fn httproute_query_param_and_method_matching_with_their_precedence() {
    let q = |pairs: &[(&str, &str)]| -> Value {
        json!(pairs
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .collect::<Vec<_>>())
    };
    let query = route(
        "query-param-matching",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"queryParams": q(&[("animal", "whale")])}], "backendRefs": to("v1")},
            {"matches": [{"queryParams": q(&[("animal", "dolphin")])}], "backendRefs": to("v2")},
            {"matches": [{"queryParams": q(&[("animal", "dolphin"), ("color", "blue")])}, {"queryParams": q(&[("ANIMAL", "Whale")])}], "backendRefs": to("v3")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/path5"}}], "backendRefs": to("v1")},
            {"matches": [{"queryParams": q(&[("animal", "hydra")])}], "backendRefs": to("v2")},
            {"matches": [{"headers": [{"name": "version", "value": "four"}]}], "backendRefs": to("v3")},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&query]);
    for (target, headers, want) in [
        ("/?animal=whale", &[][..], "v1"),
        ("/?animal=dolphin", &[], "v2"),
        ("/?animal=dolphin&color=blue", &[], "v3"),
        ("/?ANIMAL=Whale", &[], "v3"),
        ("/?animal=whale&otherparam=irrelevant", &[], "v1"),
        ("/?animal=dolphin&color=yellow", &[], "v2"),
        ("/?color=blue", &[], "404"),
        ("/?animal=dog", &[], "404"),
        ("/?animal=whaledolphin", &[], "404"),
        ("/", &[], "404"),
        ("/path5?animal=hydra", &[], "v1"),
        ("/?animal=hydra", &[("version", "four")], "v3"),
    ] {
        assert_eq!(get(&t, target, headers), want, "{target} {headers:?}");
    }
    let method = route(
        "method-matching",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"method": "POST"}], "backendRefs": to("v1")},
            {"matches": [{"method": "GET"}], "backendRefs": to("v2")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/path5"}}], "backendRefs": to("v1")},
            {"matches": [{"method": "PATCH"}], "backendRefs": to("v2")},
            {"matches": [{"headers": [{"name": "version", "value": "four"}]}], "backendRefs": to("v3")},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&method]);
    for (m, target, headers, want) in [
        ("POST", "/", &[][..], "v1"),
        ("GET", "/", &[], "v2"),
        ("HEAD", "/", &[], "404"),
        ("PUT", "/", &[], "404"),
        ("PATCH", "/path5", &[], "v1"),
        ("PATCH", "/", &[("version", "four")], "v2"),
    ] {
        assert_eq!(
            ask(&t, "example.com", m, target, headers),
            want,
            "{m} {target}"
        );
    }
}

#[test]
fn httproute_hostname_intersection_with_listeners() {
    let r = |name: &str, hosts: &[&str], path: &str, backend: &str| {
        route(
            name,
            "2026-01-01T00:00:00Z",
            json!({"hostnames": hosts, "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": path}}], "backendRefs": to(backend)}]}),
        )
    };
    let r1 = r(
        "r1",
        &[
            "non.matching.com",
            "*.nonmatchingwildcard.io",
            "very.specific.com",
        ],
        "/s1",
        "v1",
    );
    let r2 = r(
        "r2",
        &[
            "non.matching.com",
            "wildcard.io",
            "foo.wildcard.io",
            "bar.wildcard.io",
            "foo.bar.wildcard.io",
        ],
        "/s2",
        "v2",
    );
    let r3 = r("r3", &["non.matching.com", "*.specific.com"], "/s3", "v3");
    let r4 = r("r4", &["*.anotherwildcard.io"], "/s4", "v1");
    let r5 = r(
        "no-intersecting-hosts",
        &["specific.but.wrong.com", "wildcard.io"],
        "/s5",
        "v2",
    );
    let all = [&r1, &r2, &r3, &r4, &r5];
    // The three listeners of the test's Gateway, each with the routes that attach.
    let listeners = ["very.specific.com", "*.wildcard.io", "*.anotherwildcard.io"];
    let mut attached = Vec::new();
    let tables: Vec<ListenerTable> = listeners
        .iter()
        .map(|l| {
            let (t, refused) = ListenerTable::build(Some(l), all);
            attached.push(all.len() - refused.len());
            t
        })
        .collect();
    assert_eq!(attached, [2, 1, 1], "AttachedRoutes per listener");
    // r5 intersects no listener: NoMatchingListenerHostname on each.
    for l in listeners {
        let (_, refused) = ListenerTable::build(Some(l), [&r5]);
        assert_eq!(refused[0].1, NotAccepted::NoMatchingListenerHostname);
    }
    // A request uses the listener its host matches (the most specific).
    let listener_of = |host: &str| {
        let best = listeners
            .iter()
            .enumerate()
            .filter(|(_, l)| super::hostname::matches(Some(l), host))
            .max_by_key(|(_, l)| super::hostname::specificity(Some(l)));
        best.map(|(i, _)| &tables[i])
    };
    for (host, path, want) in [
        ("very.specific.com", "/s1", "v1"),
        ("non.matching.com", "/s1", "404"),
        ("foo.nonmatchingwildcard.io", "/s1", "404"),
        ("foo.wildcard.io", "/s1", "404"),
        ("very.specific.com", "/non-matching-prefix", "404"),
        ("foo.wildcard.io", "/s2", "v2"),
        ("bar.wildcard.io", "/s2", "v2"),
        ("foo.bar.wildcard.io", "/s2", "v2"),
        ("non.matching.com", "/s2", "404"),
        ("wildcard.io", "/s2", "404"),
        ("very.specific.com", "/s2", "404"),
        ("very.specific.com", "/s3", "v3"),
        ("foo.specific.com", "/s3", "404"),
        ("foo.anotherwildcard.io", "/s4", "v1"),
        ("foo.bar.anotherwildcard.io", "/s4", "v1"),
        ("anotherwildcard.io", "/s4", "404"),
        ("foo.wildcard.io", "/s4", "404"),
        ("specific.but.wrong.com", "/s5", "404"),
        ("wildcard.io", "/s5", "404"),
    ] {
        let got = listener_of(host).map_or("404".into(), |t| ask(t, host, "GET", path, &[]));
        assert_eq!(got, want, "{host}{path}");
    }
}

#[test]
fn request_header_modifier_and_redirects_and_rules_without_backends() {
    let set = json!({"set": [{"name": "X-Header-Set-1", "value": "header-set-1"}, {"name": "X-Header-Set-2", "value": "header-set-2"}],
                     "add": [{"name": "X-Header-Add-1", "value": "header-add-1"}, {"name": "X-Header-Add-2", "value": "header-add-2"}, {"name": "X-Header-Add-3", "value": "header-add-3"}],
                     "remove": ["X-Header-Remove-1", "X-Header-Remove-2"]});
    let modifier: super::route::HeaderModifier = serde_json::from_value(set).unwrap();
    let mut h = HeaderMap::new();
    for (n, v) in [
        ("x-header-set-2", "set-val-2"),
        ("x-header-add-2", "add-val-2"),
        ("x-header-remove-2", "remove-val-2"),
        ("another-header", "another-header-val"),
    ] {
        h.insert(
            http::header::HeaderName::from_static(n),
            HeaderValue::from_static(v),
        );
    }
    modify_headers(&mut h, &modifier);
    assert_eq!(h["x-header-set-1"], "header-set-1");
    assert_eq!(h["x-header-set-2"], "header-set-2");
    assert_eq!(h["x-header-add-1"], "header-add-1");
    assert_eq!(h["x-header-add-2"], "add-val-2,header-add-2");
    assert_eq!(h["x-header-add-3"], "header-add-3");
    assert!(h.get("x-header-remove-2").is_none());
    assert_eq!(h["another-header"], "another-header-val");

    let redirect = |r: Value| serde_json::from_value::<super::route::Redirect>(r).unwrap();
    let loc = |r: Value, scheme: &str, path: &str, prefix: Option<&str>, port: u16| {
        redirect_location(&redirect(r), scheme, "example.com", path, prefix, port)
    };
    assert_eq!(
        loc(
            json!({"hostname": "example.org"}),
            "http",
            "/hostname-redirect",
            None,
            80
        ),
        (302, "http://example.org/hostname-redirect".into())
    );
    assert_eq!(
        loc(
            json!({"hostname": "example.org", "statusCode": 301}),
            "http",
            "/host-and-status",
            None,
            80
        )
        .0,
        301
    );
    let prefix = json!({"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/replacement-prefix"}});
    assert_eq!(
        loc(
            prefix,
            "http",
            "/original-prefix/lemon",
            Some("/original-prefix"),
            80
        )
        .1,
        "http://example.com/replacement-prefix/lemon"
    );
    let full =
        json!({"path": {"type": "ReplaceFullPath", "replaceFullPath": "/full-path-replacement"}});
    assert_eq!(
        loc(full, "http", "/full/path/original", Some("/full"), 80).1,
        "http://example.com/full-path-replacement"
    );
    // No scheme, no port: the listener's port; a scheme alone: its well-known port, omitted.
    assert_eq!(
        loc(json!({}), "http", "/x", None, 8080).1,
        "http://example.com:8080/x"
    );
    assert_eq!(
        loc(json!({"scheme": "https"}), "http", "/x", None, 8080).1,
        "https://example.com/x"
    );
    assert_eq!(
        loc(json!({}), "https", "/x", None, 443).1,
        "https://example.com/x"
    );
    assert_eq!(
        loc(
            json!({"port": 8443, "scheme": "https"}),
            "http",
            "/x?a=1",
            None,
            80
        )
        .1,
        "https://example.com:8443/x?a=1"
    );

    // A rule with no backendRefs and no filters answers 500 (HTTPRouteNoBackendRefs), and
    // weight 0 carries no traffic.
    let r = route(
        "no-backends",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"value": "/none"}}]},
            {"matches": [{"path": {"value": "/weights"}}], "backendRefs": [
                {"name": "v1", "port": 8080, "weight": 70}, {"name": "v2", "port": 8080, "weight": 30}, {"name": "v3", "port": 8080, "weight": 0}]},
        ]}),
    );
    let (t, _) = ListenerTable::build(None, [&r]);
    assert_eq!(get(&t, "/none", &[]), "500");
    let header = |_: &str| None;
    let request = Request {
        host: "example.com",
        method: "GET",
        path: "/weights",
        query: None,
        header: &header,
    };
    let Some(Action::Forward { backends, .. }) = t.route(&request) else {
        panic!("forward")
    };
    let weights: Vec<(&str, u32)> = backends
        .iter()
        .map(|(b, w)| (b.name.as_str(), *w))
        .collect();
    assert_eq!(weights, [("v1", 70), ("v2", 30)]);
}

#[test]
fn gateway_wildcards_cover_one_or_more_labels_and_intersect_as_upstream_tabulates() {
    use super::hostname::{intersect, matches};
    assert!(matches(Some("*.example.com"), "foo.test.example.com"));
    assert!(!matches(Some("*.example.com"), "example.com"));
    assert!(matches(Some("*.com"), "example.com"));
    for (listener, route, want) in [
        (
            Some("www.example.com"),
            Some("www.example.com"),
            Some(Some("www.example.com")),
        ),
        (
            Some("*.example.com"),
            Some("www.example.com"),
            Some(Some("www.example.com")),
        ),
        (
            Some("*.example.com"),
            Some("sub.domain.example.com"),
            Some(Some("sub.domain.example.com")),
        ),
        (
            Some("www.example.com"),
            Some("*.example.com"),
            Some(Some("www.example.com")),
        ),
        (
            Some("*.example.com"),
            Some("*.example.com"),
            Some(Some("*.example.com")),
        ),
        (
            Some("*.com"),
            Some("*.example.com"),
            Some(Some("*.example.com")),
        ),
        (
            Some("*.example.com"),
            Some("*.com"),
            Some(Some("*.example.com")),
        ),
        (None, Some("www.example.com"), Some(Some("www.example.com"))),
        (Some("*.example.com"), Some("example.com"), None),
        (Some("very.specific.com"), Some("non.matching.com"), None),
    ] {
        let got = intersect(listener, route);
        assert_eq!(
            got,
            want.map(|w| w.map(str::to_string)),
            "{listener:?} ∩ {route:?}"
        );
    }
}
