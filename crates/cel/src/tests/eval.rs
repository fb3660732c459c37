//! Real Gateway API and cert-manager rules, evaluated on realistic objects.

use super::support::{crd_schema, messages, rules};
use crate::SchemaRules;
use serde_json::{json, Value};

const GATEWAY_API: &str = "gateway-api-standard.yaml";

fn httproute_rules() -> SchemaRules {
    rules(&crd_schema(
        GATEWAY_API,
        "httproutes.gateway.networking.k8s.io",
        "v1",
    ))
}

fn gateway_rules() -> SchemaRules {
    rules(&crd_schema(
        GATEWAY_API,
        "gateways.gateway.networking.k8s.io",
        "v1",
    ))
}

fn parent(name: &str) -> Value {
    json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name})
}

/// An HTTPRoute as it reaches validation: defaults applied.
fn httproute() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "store", "namespace": "default"},
        "spec": {
            "parentRefs": [parent("gw")],
            "hostnames": ["store.example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                "filters": [{
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {"set": [{"name": "X-Env", "value": "prod"}]}
                }],
                "backendRefs": [{"group": "", "kind": "Service", "name": "store", "port": 8080, "weight": 1}],
                "timeouts": {"request": "10s", "backendRequest": "5s"}
            }]
        }
    })
}

#[test]
fn a_valid_httproute_passes() {
    assert_eq!(
        messages(&httproute_rules().validate(&httproute(), None)),
        vec![]
    );
}

#[test]
fn a_relative_path_breaks_the_absolute_path_rule() {
    let mut route = httproute();
    route["spec"]["rules"][0]["matches"][0]["path"]["value"] = json!("api");
    let violations = httproute_rules().validate(&route, None);
    assert_eq!(
        messages(&violations),
        vec![(
            "spec.rules[0].matches[0].path".to_owned(),
            "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']".to_owned()
        )]
    );
    assert_eq!(violations[0].type_name, "object");
    assert_eq!(violations[0].reason, None);
}

#[test]
fn a_filter_must_match_its_type() {
    let mut route = httproute();
    route["spec"]["rules"][0]["filters"][0] = json!({
        "type": "RequestHeaderModifier",
        "urlRewrite": {"hostname": "example.org"}
    });
    let field = "spec.rules[0].filters[0]".to_owned();
    assert_eq!(
        messages(&httproute_rules().validate(&route, None)),
        vec![
            (field.clone(), "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type".to_owned()),
            (field, "filter.urlRewrite must be nil if the filter.type is not URLRewrite".to_owned()),
        ]
    );
}

#[test]
fn durations_compare_in_the_timeouts_rule() {
    let mut route = httproute();
    route["spec"]["rules"][0]["timeouts"] = json!({"request": "10s", "backendRequest": "1m"});
    assert_eq!(
        messages(&httproute_rules().validate(&route, None)),
        vec![(
            "spec.rules[0].timeouts".to_owned(),
            "backendRequest timeout cannot be longer than request timeout".to_owned()
        )]
    );
    // `0s` disables the request timeout, so any backend timeout goes.
    route["spec"]["rules"][0]["timeouts"] = json!({"request": "0s", "backendRequest": "1h"});
    assert_eq!(messages(&httproute_rules().validate(&route, None)), vec![]);
}

#[test]
fn two_references_to_one_parent_need_distinct_section_names() {
    let rules = httproute_rules();
    let mut route = httproute();
    route["spec"]["parentRefs"] = json!([parent("gw"), parent("gw")]);
    assert_eq!(
        messages(&rules.validate(&route, None)),
        vec![(
            "spec.parentRefs".to_owned(),
            "sectionName must be unique when parentRefs includes 2 or more references to the same parent".to_owned()
        )]
    );
    let mut with_section = parent("gw");
    with_section["sectionName"] = json!("https");
    route["spec"]["parentRefs"] = json!([parent("gw"), with_section]);
    assert_eq!(
        messages(&rules.validate(&route, None)),
        vec![(
            "spec.parentRefs".to_owned(),
            "sectionName must be specified when parentRefs includes 2 or more references to the same parent".to_owned()
        )]
    );
}

/// `namespace` is reserved in CEL: the rules read it as `__namespace__`.
#[test]
fn parents_in_other_namespaces_are_other_parents() {
    let rules = httproute_rules();
    let mut route = httproute();
    let (mut a, mut b) = (parent("gw"), parent("gw"));
    a["namespace"] = json!("team-a");
    b["namespace"] = json!("team-b");
    route["spec"]["parentRefs"] = json!([a.clone(), b]);
    assert_eq!(messages(&rules.validate(&route, None)), vec![]);
    route["spec"]["parentRefs"] = json!([a.clone(), a]);
    assert_eq!(rules.validate(&route, None).len(), 1);
}

#[test]
fn too_many_matches_across_rules() {
    let rules = httproute_rules();
    let mut route = httproute();
    let matches: Vec<Value> = (0..64)
        .map(|i| json!({"path": {"type": "Exact", "value": format!("/{i}")}}))
        .collect();
    let rule = json!({"matches": matches, "backendRefs": [{"group": "", "kind": "Service", "name": "s", "port": 80}]});
    route["spec"]["rules"] = json!([rule.clone(), rule.clone(), rule]);
    assert_eq!(
        messages(&rules.validate(&route, None)),
        vec![(
            "spec.rules".to_owned(),
            "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128".to_owned()
        )]
    );
}

fn gateway() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {
            "gatewayClassName": "cairn",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}},
                {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com",
                 "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "cert"}]},
                 "allowedRoutes": {"namespaces": {"from": "Same"}}}
            ],
            "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
            "infrastructure": {"labels": {"example.com/team": "edge"}, "annotations": {"note": "x"}}
        }
    })
}

#[test]
fn a_valid_gateway_passes() {
    assert_eq!(
        messages(&gateway_rules().validate(&gateway(), None)),
        vec![]
    );
}

#[test]
fn listener_rules_run_over_the_whole_list() {
    let mut gw = gateway();
    gw["spec"]["listeners"][1]["name"] = json!("http");
    if let Some(listeners) = gw["spec"]["listeners"].as_array_mut() {
        listeners.push(
            json!({"name": "tcp", "port": 9000, "protocol": "TCP", "hostname": "tcp.example.com"}),
        );
    }
    let violations = gateway_rules().validate(&gw, None);
    assert_eq!(
        messages(&violations),
        vec![
            (
                "spec.listeners".to_owned(),
                "hostname must not be specified for protocols ['TCP', 'UDP']".to_owned()
            ),
            (
                "spec.listeners".to_owned(),
                "Listener name must be unique within the Gateway".to_owned()
            ),
        ]
    );
    assert!(violations.iter().all(|v| v.type_name == "array"));
}

#[test]
fn address_and_label_rules() {
    let mut gw = gateway();
    gw["spec"]["addresses"] = json!([{"type": "IPAddress", "value": "10.0.0.1"}, {"type": "IPAddress", "value": "10.0.0.1"}]);
    gw["spec"]["infrastructure"]["labels"] = json!({"-bad": "x"});
    assert_eq!(
        messages(&gateway_rules().validate(&gw, None)),
        vec![
            ("spec.addresses".to_owned(), "IPAddress values must be unique".to_owned()),
            (
                "spec.infrastructure.labels".to_owned(),
                "Label keys must be in the form of an optional DNS subdomain prefix followed by a required name segment of up to 63 characters.".to_owned()
            ),
        ]
    );
}

#[test]
fn tls_route_hostnames_cannot_be_ips() {
    let rules = rules(&crd_schema(
        GATEWAY_API,
        "tlsroutes.gateway.networking.k8s.io",
        "v1",
    ));
    let route = |hostnames: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute", "metadata": {"name": "t"},
               "spec": {"hostnames": hostnames, "rules": [{"backendRefs": [{"group": "", "kind": "Service", "name": "s", "port": 443}]}]}})
    };
    assert_eq!(
        messages(&rules.validate(&route(json!(["example.com"])), None)),
        vec![]
    );
    assert_eq!(
        messages(&rules.validate(&route(json!(["example.com", "192.168.0.1"])), None)),
        vec![(
            "spec.hostnames".to_owned(),
            "Hostnames cannot contain an IP".to_owned()
        )]
    );
}

/// `self == oldSelf`: skipped on create, checked on update.
#[test]
fn the_gateway_class_controller_is_immutable() {
    let rules = rules(&crd_schema(
        GATEWAY_API,
        "gatewayclasses.gateway.networking.k8s.io",
        "v1",
    ));
    let class = |controller: &str| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "c"},
               "spec": {"controllerName": controller}})
    };
    let (old, new) = (class("example.com/a"), class("example.com/b"));
    assert_eq!(rules.validate(&new, None), vec![]);
    assert_eq!(rules.validate(&old, Some(&old)), vec![]);
    let violations = rules.validate(&new, Some(&old));
    assert_eq!(
        messages(&violations),
        vec![(
            "spec.controllerName".to_owned(),
            "Value is immutable".to_owned()
        )]
    );
    assert_eq!(violations[0].type_name, "string");
}

#[test]
fn cert_manager_venafi_needs_exactly_one_backend() {
    let rules = rules(&crd_schema(
        "cert-manager.crds.yaml",
        "issuers.cert-manager.io",
        "v1",
    ));
    let issuer = |venafi: Value| {
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "i"},
               "spec": {"venafi": venafi}})
    };
    let tpp = json!({"url": "https://tpp.example.com", "credentialsRef": {"name": "c"}});
    let cloud = json!({"apiTokenSecretRef": {"name": "t"}});
    assert_eq!(
        rules.validate(&issuer(json!({"zone": "z", "tpp": tpp})), None),
        vec![]
    );
    assert_eq!(
        messages(&rules.validate(
            &issuer(json!({"zone": "z", "tpp": tpp, "cloud": cloud})),
            None
        )),
        vec![(
            "spec.venafi".to_owned(),
            "exactly one of tpp, cloud, or ngts must be configured".to_owned()
        )]
    );
}
