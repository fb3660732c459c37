use super::*;
use crate::defaults::apply_defaults;
use crate::registry::find_by_kind;
use serde_json::json;

fn res(api_version: &str, kind: &str) -> &'static ResourceInfo {
    find_by_kind(api_version, kind).unwrap()
}

/// Default then validate, as the server does.
fn create(api_version: &str, kind: &str, mut obj: Value) -> Vec<Cause> {
    apply_defaults(res(api_version, kind), &mut obj);
    validate_create(res(api_version, kind), &obj)
}

fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
    causes
        .iter()
        .map(|c| (c.reason, c.field.as_str()))
        .collect()
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec})
}

fn deployment(selector: Value, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
}

#[test]
fn name_checks() {
    assert!(is_dns1123_subdomain("example.com").is_empty());
    assert_eq!(
        is_dns1123_subdomain("Bad_Name"),
        vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    );
    assert_eq!(
        is_dns1123_label("my_name"),
        vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
    );
    assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
    assert_eq!(
        is_dns1123_label(&"a".repeat(64)),
        vec!["must be no more than 63 characters"]
    );
    assert!(is_dns1035_label("web").is_empty());
    assert_eq!(is_dns1035_label("1web").len(), 1);
    assert!(is_qualified_name("app.kubernetes.io/name").is_empty());
    assert!(is_qualified_name("Name_1").is_empty());
    assert_eq!(
        is_qualified_name("/x"),
        vec!["prefix part must be non-empty"]
    );
    assert_eq!(is_qualified_name("a/b/c").len(), 1);
    assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
    assert_eq!(is_qualified_name("-x"), vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]);
    assert!(is_valid_label_value("").is_empty());
    assert!(is_valid_label_value("v1.2_3").is_empty());
    assert_eq!(is_valid_label_value("bad value").len(), 1);
    assert!(is_config_map_key("key.name").is_empty());
    assert_eq!(is_config_map_key("..a"), vec!["must not start with '..'"]);
    assert_eq!(is_config_map_key("a b").len(), 1);
    assert!(is_valid_port_name("http").is_empty());
    assert_eq!(
        is_valid_port_name("8080"),
        vec!["must contain at least one letter (a-z)"]
    );
}

#[test]
fn metadata_causes() {
    let causes = create(
        "v1",
        "Pod",
        json!({"metadata": {"name": "Bad_Name", "namespace": "default",
        "labels": {"ok": "yes", "bad key": "x", "k": "bad value"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    assert_eq!(
        fields(&causes),
        vec![
            ("FieldValueInvalid", "metadata.name"),
            ("FieldValueInvalid", "metadata.labels"),
            ("FieldValueInvalid", "metadata.labels")
        ]
    );
    assert!(causes[0]
        .message
        .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));

    let causes = create("v1", "ConfigMap", json!({"metadata": {}}));
    assert_eq!(
        causes[0].describe(),
        "metadata.name: Required value: name or generateName is required"
    );
    assert_eq!(causes[1].describe(), "metadata.namespace: Required value");

    let causes = create(
        "v1",
        "Namespace",
        json!({"metadata": {"name": "a.b", "namespace": "x"}}),
    );
    assert_eq!(
        causes[0].describe(),
        "metadata.name: Invalid value: \"a.b\": must not contain dots"
    );
    assert_eq!(
        causes[1].describe(),
        "metadata.namespace: Forbidden: not allowed on this type"
    );

    let causes = create(
        "v1",
        "Service",
        json!({"metadata": {"name": "1svc", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]}}),
    );
    assert_eq!(
        fields(&causes),
        vec![("FieldValueInvalid", "metadata.name")]
    );
    assert!(causes[0].message.contains("a DNS-1035 label"));

    // generateName prefixes may end in '-'.
    assert!(create(
        "v1",
        "ConfigMap",
        json!({"metadata": {"name": "cfg-x1", "generateName": "cfg-", "namespace": "d"}})
    )
    .is_empty());

    let big = "x".repeat(TOTAL_ANNOTATION_SIZE);
    let causes = create(
        "v1",
        "ConfigMap",
        json!({"metadata": {"name": "c", "namespace": "d", "annotations": {"a": big}}}),
    );
    assert_eq!(
        causes[0].describe(),
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    );
}

#[test]
fn pod_causes() {
    assert!(create(
        "v1",
        "Pod",
        pod(json!({"containers": [{"name": "web", "image": "nginx"}]}))
    )
    .is_empty());

    let causes = create("v1", "Pod", pod(json!({"containers": []})));
    assert_eq!(causes[0].describe(), "spec.containers: Required value");

    let causes = create(
        "v1",
        "Pod",
        pod(json!({
        "restartPolicy": "Sometimes",
        "dnsPolicy": "Bogus",
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
        "containers": [
            {"name": "web"},
            {"name": "web", "image": "nginx", "imagePullPolicy": "Maybe",
             "ports": [{"containerPort": 70000, "protocol": "HTTP"}],
             "volumeMounts": [{"name": "missing", "mountPath": "/x"}],
             "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}
        ]})),
    );
    let got: Vec<String> = causes.iter().map(Cause::describe).collect();
    assert_eq!(
        got,
        vec![
            "spec.volumes[1].name: Duplicate value: \"data\"",
            "spec.containers[0].image: Required value",
            "spec.containers[1].name: Duplicate value: \"web\"",
            "spec.containers[1].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[1].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[1].volumeMounts[0].name: Not found: \"missing\"",
            "spec.containers[1].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            "spec.dnsPolicy: Unsupported value: \"Bogus\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"",
        ]
    );
    assert_eq!(causes[6].reason, "FieldValueNotFound");
}

#[test]
fn workload_causes() {
    assert!(create(
        "apps/v1",
        "Deployment",
        deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"})
        )
    )
    .is_empty());

    let causes = create(
        "apps/v1",
        "Deployment",
        deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "api"}),
        ),
    );
    assert_eq!(
        causes.iter().map(Cause::describe).collect::<Vec<_>>(),
        vec!["spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"]
    );

    let mut d = deployment(json!(null), json!({"app": "web"}));
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    let got: Vec<String> = create("apps/v1", "Deployment", d)
        .iter()
        .map(Cause::describe)
        .collect();
    assert_eq!(
        got,
        vec![
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.selector: Required value",
            "spec.template.spec.containers[0].image: Required value",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ]
    );

    let causes = create(
        "apps/v1",
        "Deployment",
        deployment(json!({}), json!({"app": "web"})),
    );
    assert_eq!(
        causes[0].describe(),
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
    );

    let exprs = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                             {"key": "legacy", "operator": "DoesNotExist"}]});
    assert!(create(
        "apps/v1",
        "Deployment",
        deployment(exprs.clone(), json!({"tier": "b"}))
    )
    .is_empty());
    assert_eq!(
        create(
            "apps/v1",
            "Deployment",
            deployment(exprs, json!({"tier": "b", "legacy": "1"}))
        )
        .len(),
        1
    );

    let mut ds = deployment(
        json!({"matchLabels": {"app": "agent"}}),
        json!({"app": "agent"}),
    );
    ds["kind"] = json!("DaemonSet");
    assert!(create("apps/v1", "DaemonSet", ds).is_empty());
    let mut rs = deployment(
        json!({"matchLabels": {"app": "agent"}}),
        json!({"app": "other"}),
    );
    rs["kind"] = json!("ReplicaSet");
    assert_eq!(create("apps/v1", "ReplicaSet", rs).len(), 1);
}

#[test]
fn service_causes() {
    let svc =
        |spec: Value| json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec});
    assert!(create(
        "v1",
        "Service",
        svc(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}))
    )
    .is_empty());
    assert!(create("v1", "Service", svc(json!({"clusterIP": "None"}))).is_empty());
    let got: Vec<String> = create("v1", "Service", svc(json!({})))
        .iter()
        .map(Cause::describe)
        .collect();
    assert_eq!(got, vec!["spec.ports: Required value"]);
    let got: Vec<String> = create("v1", "Service", svc(json!({"type": "Magic", "clusterIP": "10.0.0.300",
        "ports": [{"port": 0, "name": "a"}, {"port": 81}, {"port": 82, "name": "a", "nodePort": 30001}]})))
        .iter()
        .map(Cause::describe)
        .collect();
    assert_eq!(
        got,
        vec![
            "spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            // Defaulted from the port, as Kubernetes does, and so invalid too.
            "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[1].name: Required value",
            "spec.ports[2].name: Duplicate value: \"a\"",
            "spec.clusterIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ]
    );
    let got: Vec<String> = create(
        "v1",
        "Service",
        svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]})),
    )
    .iter()
    .map(Cause::describe)
    .collect();
    assert_eq!(got, vec!["spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"]);
    let got: Vec<String> = create(
        "v1",
        "Service",
        svc(json!({"ports": [{"port": 80, "nodePort": 30080}]})),
    )
    .iter()
    .map(Cause::describe)
    .collect();
    assert_eq!(
        got,
        vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    );
    assert!(create(
        "v1",
        "Service",
        svc(json!({"type": "ExternalName", "externalName": "db.example.com"}))
    )
    .is_empty());
}

#[test]
fn config_and_secret_causes() {
    let causes = create(
        "v1",
        "ConfigMap",
        json!({"metadata": {"name": "c", "namespace": "d"},
        "data": {"good": "1", "bad key": "2"}}),
    );
    assert_eq!(
        fields(&causes),
        vec![("FieldValueInvalid", "data[bad key]")]
    );
    let causes = create(
        "v1",
        "Secret",
        json!({"metadata": {"name": "s", "namespace": "d"},
        "data": {"k": "not base64"}}),
    );
    assert_eq!(
        causes[0].describe(),
        "data[k]: Invalid value: \"<secret contents redacted>\": must be valid base64"
    );
    let causes = create(
        "v1",
        "Secret",
        json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": "YQ=="}}),
    );
    assert_eq!(causes[0].describe(), "data[tls.key]: Required value");
}

#[test]
fn event_causes() {
    let ev = |ns: &str, extra: Value| {
        let mut e = json!({"metadata": {"name": "e.1", "namespace": ns},
            "involvedObject": {"kind": "Node", "name": "node-1"}, "reason": "Ready"});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    };
    assert!(create("v1", "Event", ev("default", json!({}))).is_empty());
    assert_eq!(
        create("v1", "Event", ev("dev", json!({})))[0].describe(),
        "involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
    );
    let got: Vec<String> = create(
        "v1",
        "Event",
        ev(
            "default",
            json!({"eventTime": "2024-01-02T03:04:05.000000Z"}),
        ),
    )
    .iter()
    .map(Cause::describe)
    .collect();
    // Kubernetes also reports the empty component as an invalid qualified name.
    assert_eq!(got.len(), 5);
    assert_eq!(got[0], "reportingComponent: Required value");
    assert_eq!(
        got[3..],
        [
            "reportingInstance: Required value",
            "action: Required value"
        ]
    );
    assert!(create(
        "v1",
        "Event",
        ev(
            "default",
            json!({"eventTime": "2024-01-02T03:04:05.000000Z",
        "reportingComponent": "cairn/agent", "reportingInstance": "node-1", "action": "Start"})
        )
    )
    .is_empty());
}

#[test]
fn immutable_updates() {
    pod_updates_only_change_what_kubernetes_allows();
    deployment_selector_is_immutable();
    service_cluster_ip_may_not_change_once_set();
    immutable_config_map_data_is_frozen();
}

fn pod_updates_only_change_what_kubernetes_allows() {
    let p = res("v1", "Pod");
    let mut old = pod(json!({"containers": [{"name": "web", "image": "nginx:1"}]}));
    old["metadata"]["uid"] = json!("u1");
    apply_defaults(p, &mut old);

    // Image changes and added tolerations are fine.
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:2");
    new["spec"]["tolerations"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"}));
    new["metadata"]["labels"] = json!({"x": "y"});
    assert!(
        validate_update(p, &old, &new).is_empty(),
        "{:?}",
        validate_update(p, &old, &new)
    );

    let mut new = old.clone();
    new["spec"]["restartPolicy"] = json!("Never");
    let causes = validate_update(p, &old, &new);
    assert_eq!(fields(&causes), vec![("FieldValueForbidden", "spec")]);
    assert!(causes[0].message.starts_with(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    ));

    let mut new = old.clone();
    new["spec"]["tolerations"] = json!([]);
    assert_eq!(validate_update(p, &old, &new)[0].describe(),
        "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds");

    let mut new = old.clone();
    new["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "b", "image": "b"}));
    apply_defaults(p, &mut new);
    assert_eq!(
        validate_update(p, &old, &new)[0].describe(),
        "spec.containers: Forbidden: pod updates may not add or remove containers"
    );

    let mut new = old.clone();
    new["metadata"]["name"] = json!("other");
    new["metadata"]["uid"] = json!("u2");
    let got: Vec<String> = validate_update(p, &old, &new)
        .iter()
        .map(Cause::describe)
        .collect();
    assert_eq!(
        got,
        vec![
            "metadata.name: Invalid value: \"other\": field is immutable",
            "metadata.uid: Invalid value: \"u2\": field is immutable",
        ]
    );
}

fn deployment_selector_is_immutable() {
    let d = res("apps/v1", "Deployment");
    let mut old = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web", "v": "2"}),
    );
    apply_defaults(d, &mut old);
    let mut new = old.clone();
    new["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
    new["spec"]["replicas"] = json!(5);
    assert_eq!(
        validate_update(d, &old, &new).iter().map(Cause::describe).collect::<Vec<_>>(),
        vec!["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    );
}

fn service_cluster_ip_may_not_change_once_set() {
    let s = res("v1", "Service");
    let old = json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
        "ports": [{"port": 80, "protocol": "TCP"}], "type": "ClusterIP", "sessionAffinity": "None"}});
    let mut new = old.clone();
    new["spec"]["clusterIP"] = json!("10.96.0.6");
    new["spec"]["clusterIPs"] = json!(["10.96.0.6"]);
    assert_eq!(
        validate_update(s, &old, &new)[0].describe(),
        "spec.clusterIPs[0]: Invalid value: \"10.96.0.6\": may not change once set"
    );
    let mut new = old.clone();
    new["spec"]["type"] = json!("ExternalName");
    new["spec"]["externalName"] = json!("a.example.com");
    new["spec"].as_object_mut().unwrap().remove("clusterIP");
    new["spec"].as_object_mut().unwrap().remove("clusterIPs");
    assert!(
        validate_update(s, &old, &new).is_empty(),
        "{:?}",
        validate_update(s, &old, &new)
    );
}

fn immutable_config_map_data_is_frozen() {
    let cm = res("v1", "ConfigMap");
    let old =
        json!({"metadata": {"name": "c", "namespace": "d"}, "immutable": true, "data": {"a": "1"}});
    let mut new = old.clone();
    new["data"]["a"] = json!("2");
    assert_eq!(
        validate_update(cm, &old, &new)[0].describe(),
        "data: Forbidden: field is immutable when `immutable` is set"
    );
    let mut new = old.clone();
    new["immutable"] = json!(false);
    assert_eq!(
        validate_update(cm, &old, &new)[0].describe(),
        "immutable: Forbidden: field is immutable when `immutable` is set"
    );
}

#[test]
fn any_shape_is_handled() {
    let shapes = [
        json!(null),
        json!(1),
        json!("x"),
        json!([]),
        json!({"metadata": 5, "spec": "x", "data": [1], "subsets": {"a": 1}}),
        json!({"metadata": {"name": 3, "labels": [1], "annotations": {"a": 1}, "ownerReferences": "x"},
            "spec": {"containers": [1, {"name": 5, "ports": "x", "env": [null]}], "volumes": {"a": 1},
                "selector": "x", "template": [], "ports": [{"port": "x", "targetPort": [1]}], "tolerations": [{"key": 1}]},
            "endpoints": [{"addresses": "x"}], "addressType": 7}),
    ];
    for r in crate::registry::RESOURCES {
        for a in &shapes {
            let _ = validate_create(r, a);
            for b in &shapes {
                let _ = validate_update(r, a, b);
            }
        }
    }
}
