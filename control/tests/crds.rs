//! Acceptance (issue 15, CustomResourceDefinitions), with stock kubectl 1.33 and 1.27: the
//! CRDs of two widely used projects (Gateway API standard channel, cert-manager; their
//! release manifests, see fixtures/crds/README.md) served at once, custom resources that
//! pass and fail their schemas and CEL rules, defaulting and pruning, printer columns,
//! status and scale subresources, several versions, watch, and deleting a CRD deleting
//! its objects; bad CRDs refused with upstream's causes.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{wait_for, Kubectl, Server, Streaming};
use serde_json::{json, Value};

const GATEWAY_API: &str = include_str!("fixtures/crds/gateway-api-standard.yaml");
const CERT_MANAGER: &str = include_str!("fixtures/crds/cert-manager.crds.yaml");

/// A CRD of our own for what the fixtures lack: two served versions (v1 stored), scale,
/// a default, shortNames and the `all` category, printer columns, a CEL rule with a
/// messageExpression and a transition rule.
const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: "self.replicas <= 10 || self.size == 'L'"
              messageExpression: "'only large widgets may have ' + string(self.replicas) + ' replicas'"
            properties:
              size: {type: string, enum: [S, M, L]}
              replicas: {type: integer, minimum: 0, default: 1}
              owner:
                type: string
                x-kubernetes-validations:
                - {rule: "self == oldSelf", message: owner is immutable}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn apply_fixture_crds(k: &Kubectl) {
    for (name, text) in [("gateway-api", GATEWAY_API), ("cert-manager", CERT_MANAGER)] {
        // Server-side, as both projects document: the largest CRDs do not fit the
        // last-applied annotation of a client-side apply.
        let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], text);
        assert!(out.contains("serverside-applied"), "{name}: {out}");
    }
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/httproutes.gateway.networking.k8s.io",
        "crd/certificates.cert-manager.io",
    ]);
    let crd = k.json(&["get", "crd", "gateways.gateway.networking.k8s.io"]);
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Gateway");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let resources = k.ok(&["api-resources", "--api-group=gateway.networking.k8s.io"]);
    assert!(
        resources.contains("gtw") && resources.contains("httproutes"),
        "{resources}"
    );
    let certs = k.ok(&["api-resources", "--api-group=cert-manager.io"]);
    assert!(
        certs.contains("certificates") && certs.contains("cert,certs"),
        "{certs}"
    );
}

const GATEWAY: &str = r#"{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
  "metadata": {"name": "web"},
  "spec": {"gatewayClassName": "cairn", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}"#;

fn gateway_api_objects(k: &Kubectl) {
    k.ok_stdin(&["apply", "-f", "-"], GATEWAY);
    let gw = k.json(&["get", "gateway", "web"]);
    // Defaults from the schema: allowedRoutes.namespaces.from defaults to Same.
    assert_eq!(
        gw["spec"]["listeners"][0]["allowedRoutes"]["namespaces"]["from"], "Same",
        "{gw}"
    );
    assert_eq!(gw["metadata"]["generation"], 1);
    // Printer columns of the CRD.
    let table = k.ok(&["get", "gateways"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"],
        "{table}"
    );
    assert!(table.contains("cairn"), "{table}");
    // v1beta1 serves the same object.
    let beta = k.json(&["get", "gateways.v1beta1.gateway.networking.k8s.io", "web"]);
    assert_eq!(beta["apiVersion"], "gateway.networking.k8s.io/v1beta1");
    assert_eq!(beta["spec"]["gatewayClassName"], "cairn");
    // An HTTPRoute that passes the CEL rules, then ones that do not.
    let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web"},
        "spec": {"parentRefs": [{"name": "web"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}});
    k.ok_stdin(&["apply", "-f", "-"], &route.to_string());
    let stored = k.json(&["get", "httproute", "web"]);
    assert_eq!(
        stored["spec"]["rules"][0]["matches"][0]["path"],
        json!({"type": "PathPrefix", "value": "/"}),
        "{stored}"
    );
    let mut bad = route.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["rules"][0]["filters"] = json!([{"type": "RequestHeaderModifier"}]);
    let err = k.fails_stdin(&["apply", "-f", "-"], &bad.to_string());
    assert!(err.contains("The HTTPRoute \"bad\" is invalid"), "{err}");
    assert!(
        err.contains(
            "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type"
        ),
        "{err}"
    );
    // A schema violation: ports stop at 65535.
    let mut gw_bad: Value = serde_json::from_str(GATEWAY).unwrap();
    gw_bad["metadata"]["name"] = json!("bad");
    gw_bad["spec"]["listeners"][0]["port"] = json!(70000);
    let err = k.fails_stdin(&["apply", "-f", "-"], &gw_bad.to_string());
    assert!(
        err.contains("spec.listeners[0].port: Invalid value: 70000"),
        "{err}"
    );
    let explained = k.ok(&["explain", "gateway.spec.listeners"]);
    assert!(
        explained.contains("Listeners associated with this Gateway"),
        "{explained}"
    );
    // A transition rule: a GatewayClass's controllerName never changes.
    let class = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "cairn"}, "spec": {"controllerName": "example.com/cairn"}});
    k.ok_stdin(&["apply", "-f", "-"], &class.to_string());
    let err = k.fails(&[
        "patch",
        "gatewayclass",
        "cairn",
        "--type=merge",
        "-p",
        r#"{"spec":{"controllerName":"example.com/other"}}"#,
    ]);
    assert!(err.contains("Value is immutable"), "{err}");
    // Strategic merge patches are refused for custom resources, as upstream refuses them.
    let err = k.fails(&[
        "patch",
        "gateway",
        "web",
        "--type=strategic",
        "-p",
        r#"{"spec":{}}"#,
    ]);
    assert!(
        err.contains("the body of the request was in an unknown format"),
        "{err}"
    );
}

fn cert_manager_objects(k: &Kubectl) {
    let cert = json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web"},
        "spec": {"secretName": "web-tls", "dnsNames": ["web.example.com"], "issuerRef": {"name": "ca"}}});
    k.ok_stdin(&["apply", "-f", "-"], &cert.to_string());
    let table = k.ok(&["get", "certs"]);
    assert!(
        table.starts_with("NAME") && table.contains("web-tls"),
        "{table}"
    );
    // Unknown fields: refused by kubectl's strict default, pruned when not validated.
    let mut extra = cert.clone();
    extra["metadata"]["name"] = json!("extra");
    extra["spec"]["bogus"] = json!(1);
    let err = k.fails_stdin(&["apply", "-f", "-"], &extra.to_string());
    assert!(err.contains("unknown field \"spec.bogus\""), "{err}");
    k.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        &extra.to_string(),
    );
    let stored = k.json(&["get", "cert", "extra"]);
    assert!(stored["spec"].get("bogus").is_none(), "{stored}");
    // The Issuer's CEL rule: exactly one venafi backend.
    let issuer = json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "v"},
        "spec": {"venafi": {"zone": "z"}}});
    let err = k.fails_stdin(&["apply", "-f", "-"], &issuer.to_string());
    assert!(err.contains("spec.venafi"), "{err}");
}

fn widgets(k: &Kubectl) {
    k.ok_stdin(&["apply", "-f", "-"], WIDGETS);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/widgets.example.com",
    ]);
    let watch = Streaming::spawn(k.command(&["get", "widgets", "--watch", "-o", "name"]));
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": "M", "owner": "team-a"}});
    k.ok_stdin(&["create", "-f", "-"], &w.to_string());
    watch.wait_for("the watch to see the widget", |out| {
        out.contains("widget.example.com/w")
    });
    let stored = k.json(&["get", "wd", "w"]);
    assert_eq!(stored["spec"]["replicas"], 1, "default: {stored}");
    widget_scales_and_columns_follow(k);
    widget_cel_and_enum_rules(k);
    widget_status_only_through_subresource(k);
    widget_other_version_and_explain(k);
    deleting_the_crd_deletes_widgets(k);
}

fn widget_scales_and_columns_follow(k: &Kubectl) {
    // Scale through the subresource; the printer columns follow.
    k.ok(&["scale", "widget/w", "--replicas=3"]);
    let table = k.ok(&["get", "widgets"]);
    assert!(
        table.contains("SIZE")
            && table.contains("REPLICAS")
            && table.lines().nth(1).unwrap().contains(" 3 "),
        "{table}"
    );
    let all = k.ok(&["get", "all"]);
    assert!(all.contains("widget.example.com/w"), "{all}");
}

fn widget_cel_and_enum_rules(k: &Kubectl) {
    // CEL with a messageExpression; a transition rule.
    let err = k.fails(&["scale", "widget/w", "--replicas=11"]);
    assert!(
        err.contains("only large widgets may have 11 replicas"),
        "{err}"
    );
    let err = k.fails(&[
        "patch",
        "widget",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"owner":"team-b"}}"#,
    ]);
    assert!(
        err.contains("spec.owner: Invalid value: \"string\": owner is immutable"),
        "{err}"
    );
    let err = k.fails(&[
        "patch",
        "widget",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":"XL"}}"#,
    ]);
    assert!(
        err.contains("spec.size: Unsupported value: \"XL\""),
        "{err}"
    );
}

fn widget_status_only_through_subresource(k: &Kubectl) {
    // Status only through /status.
    k.ok(&[
        "patch",
        "widget",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":3,"selector":"app=w"}}"#,
    ]);
    k.ok(&[
        "patch",
        "widget",
        "w",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    let raw = k.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w/scale",
    ]);
    let scale: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        scale["status"],
        json!({"replicas": 3, "selector": "app=w"}),
        "{scale}"
    );
}

fn widget_other_version_and_explain(k: &Kubectl) {
    // The other version, and generation.
    let beta = k.json(&["get", "widgets.v1beta1.example.com", "w"]);
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["metadata"]["generation"], 2);
    // kubectl explain reads the CRD's schema from /openapi/v3.
    let explained = k.ok(&["explain", "widget.spec"]);
    assert!(
        explained.contains("KIND:       Widget")
            && explained.contains("size")
            && explained.contains("-required-"),
        "{explained}"
    );
    let recursive = k.ok(&["explain", "widgets", "--recursive"]);
    assert!(
        recursive.contains("replicas") && recursive.contains("selector"),
        "{recursive}"
    );
}

fn deleting_the_crd_deletes_widgets(k: &Kubectl) {
    // Deleting the CRD deletes its objects.
    k.ok(&["delete", "crd", "widgets.example.com"]);
    wait_for("widgets to stop being served", 20, || {
        (!k.output(&["get", "widgets"]).status.success()).then_some(())
    });
    k.ok_stdin(&["apply", "-f", "-"], WIDGETS);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/widgets.example.com",
    ]);
    let listed = k.json(&["get", "widgets"]);
    assert_eq!(listed["items"], json!([]), "{listed}");
}

/// Bad CRDs get upstream's causes.
fn bad_crds(k: &Kubectl) {
    // The YAML above as JSON, through kubectl's own converter.
    let base: Value = serde_json::from_str(&k.ok_stdin(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        WIDGETS,
    ))
    .unwrap();
    let cases: Vec<(Value, &str)> = vec![
        (with(&base, "/metadata/name", json!("gadgets.example.com")), "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"),
        (with(&base, "/spec/versions/1/storage", json!(true)), "must have exactly one version marked as storage version"),
        (with(&base, "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size", json!({"enum": ["S"]})), "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields"),
        (with(&base, "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations", json!([{"rule": "self.replicas >"}])), "compilation failed"),
    ];
    for (crd, want) in cases {
        let err = k.fails_stdin(&["create", "-f", "-"], &crd.to_string());
        assert!(err.contains(want), "want {want:?} in:\n{err}");
    }
}

fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut v = base.clone();
    *v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
    v
}

fn scenario(minor: u32) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(minor, &server);
    apply_fixture_crds(&k);
    gateway_api_objects(&k);
    cert_manager_objects(&k);
    widgets(&k);
    bad_crds(&k);
    // The CRDs survive a restart of the server, and so do their objects.
    drop(server);
    let server = Server::start(dir.path());
    let k = Kubectl::new(minor, &server);
    let gw = k.json(&["get", "gateway", "web"]);
    assert_eq!(gw["spec"]["gatewayClassName"], "cairn");
    assert!(!server.log().contains("panicked"));
}

#[test]
fn kubectl_1_33() {
    scenario(33);
}

#[test]
fn kubectl_1_27() {
    scenario(27);
}
