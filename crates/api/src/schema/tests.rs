//! Decoding as kube-apiserver decodes: types, unknown fields, zero values, quantities.

use super::*;
use crate::registry::find_by_kind;
use serde_json::json;

fn norm(api_version: &str, kind: &str, obj: Value) -> Normalized {
    normalize(find_by_kind(api_version, kind).unwrap(), &obj).unwrap()
}

fn full_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "uid": "7b6f1c3e-1111-2222-3333-444455556666",
            "resourceVersion": "42",
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"note": "x"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                "uid": "0000", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
        },
        "spec": {
            "containers": [{
                "name": "web",
                "image": "nginx:1.25",
                "imagePullPolicy": "IfNotPresent",
                "args": ["--port", "80"],
                "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
                "livenessProbe": {"httpGet": {"path": "/", "port": "http", "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": 5,
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "securityContext": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "cache", "mountPath": "/cache"},
                                 {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}]
            }],
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": "node-1",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": "2024-01-02T03:04:10Z"}],
            "hostIP": "192.168.1.10",
            "hostIPs": [{"ip": "192.168.1.10"}],
            "podIP": "10.244.0.5",
            "podIPs": [{"ip": "10.244.0.5"}],
            "startTime": "2024-01-02T03:04:05Z",
            "containerStatuses": [{
                "name": "web",
                "state": {"running": {"startedAt": "2024-01-02T03:04:07Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                    "startedAt": "2024-01-02T03:04:06Z", "finishedAt": "2024-01-02T03:04:06Z",
                    "containerID": "containerd://abc"}},
                "ready": true,
                "restartCount": 1,
                "image": "docker.io/library/nginx:1.25",
                "imageID": "docker.io/library/nginx@sha256:0123",
                "containerID": "containerd://def",
                "started": true
            }],
            "qosClass": "Burstable"
        }
    })
}

#[test]
fn full_pod_round_trips_losslessly() {
    let pod = full_pod();
    let out = norm("v1", "Pod", pod.clone());
    assert!(out.unknown_fields.is_empty(), "{:?}", out.unknown_fields);
    assert_eq!(out.value, pod);
}

#[test]
fn lease_micro_time_and_secret_bytes_survive() {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
                 "renewTime": "2024-01-02T03:04:05.123456Z", "acquireTime": "2024-01-02T03:00:00.000000Z"}
    });
    assert_eq!(
        norm("coordination.k8s.io/v1", "Lease", lease.clone()).value,
        lease
    );

    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default"},
        "type": "kubernetes.io/basic-auth",
        "data": {"username": "YWRtaW4=", "password": "czNjcjN0IQ==", "empty": ""}
    });
    assert_eq!(norm("v1", "Secret", secret.clone()).value, secret);
}

#[test]
fn times_are_normalized_like_go() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "creationTimestamp": "2024-01-02T05:04:05.999+02:00"}});
    let out = norm("v1", "ConfigMap", cm);
    assert_eq!(
        out.value["metadata"]["creationTimestamp"],
        "2024-01-02T03:04:05Z"
    );
}

#[test]
fn unknown_fields_are_listed_and_pruned() {
    let dep = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "bogus": 1},
        "spec": {"replicas": 1, "foo": {"x": 1}, "nothing": null,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "imagee": "typo"}]}}}
    });
    let out = norm("apps/v1", "Deployment", dep);
    assert_eq!(
        out.unknown_fields,
        vec![
            ".metadata.bogus",
            ".spec.foo",
            ".spec.template.spec.containers[0].imagee"
        ]
    );
    assert!(out.value["spec"].get("foo").is_none());
    assert!(out.value["metadata"].get("bogus").is_none());
    assert_eq!(
        strict_error_message(&out.unknown_fields),
        "strict decoding error: unknown field \"metadata.bogus\", unknown field \"spec.foo\", unknown field \"spec.template.spec.containers[0].imagee\""
    );
}

#[test]
fn type_mismatch_names_the_field() {
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": "two"}});
    let err = normalize(find_by_kind("apps/v1", "Deployment").unwrap(), &dep).unwrap_err();
    assert_eq!(
        err.message,
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    assert_eq!(err.field.as_deref(), Some("spec.replicas"));
    assert_eq!(
        err.to_string(),
        "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let err = normalize(find_by_kind("v1", "Pod").unwrap(), &pod).unwrap_err();
    assert_eq!(
        err.message,
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 1.5}]}]}});
    let err = normalize(find_by_kind("v1", "Pod").unwrap(), &pod).unwrap_err();
    assert_eq!(
        err.message,
        "json: cannot unmarshal number 1.5 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    assert_eq!(
        err.field.as_deref(),
        Some("spec.containers[0].ports[0].containerPort")
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": "x"});
    assert!(normalize(find_by_kind("v1", "Pod").unwrap(), &pod).is_err());
    // Whatever the shape, an answer and no panic.
    for weird in [
        json!([1, 2]),
        json!("pod"),
        json!(3),
        json!({"kind": 5}),
        json!({"apiVersion": "apps/v1"}),
    ] {
        assert!(
            normalize(find_by_kind("v1", "Pod").unwrap(), &weird).is_err(),
            "{weird}"
        );
    }
    assert!(normalize(find_by_kind("v1", "Pod").unwrap(), &json!(null)).is_ok());
}

#[test]
fn bad_base64_and_bad_quantity_are_errors() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"k": "not base64!"}});
    let err = normalize(find_by_kind("v1", "Secret").unwrap(), &secret).unwrap_err();
    assert_eq!(err.to_string(), "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3");
    let pod = json!({"status": {"startTime": "yesterday"}});
    let err = normalize(find_by_kind("v1", "Pod").unwrap(), &pod).unwrap_err();
    assert!(
        err.message
            .starts_with("parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": "),
        "{}",
        err.message
    );
    assert_eq!(err.field.as_deref(), Some("status.startTime"));
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "lots"}}}]}});
    let err = normalize(find_by_kind("v1", "Pod").unwrap(), &pod).unwrap_err();
    assert!(
        err.message
            .starts_with("quantities must match the regular expression"),
        "{}",
        err.message
    );
    assert_eq!(
        err.field.as_deref(),
        Some("spec.containers[0].resources.limits.cpu")
    );
}

#[test]
fn empty_values_follow_kubernetes_storage() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {}, "annotations": {}},
        "spec": {"containers": [{"name": "c", "image": "i", "args": [], "env": [], "resources": {},
                    "securityContext": {}}],
                 "volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [], "securityContext": {},
                 "nodeSelector": {}}});
    let out = norm("v1", "Pod", pod);
    assert_eq!(
        out.value,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}, "securityContext": {}}],
                     "volumes": [{"name": "v", "emptyDir": {}}], "securityContext": {}},
            "status": {}})
    );

    // Go clients send `null` for empty required lists.
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": null, "ports": null});
    let out = norm("discovery.k8s.io/v1", "EndpointSlice", slice);
    assert_eq!(out.value["endpoints"], json!([]));
    assert!(out.value.get("ports").is_none());
}

#[test]
fn an_empty_fields_v1_is_kept_as_go_keeps_it() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "c", "managedFields": [
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": {}},
        {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}
    ]}});
    let out = norm("v1", "ConfigMap", cm);
    let entries = out.value["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries[0]["fieldsV1"], json!({}));
    assert_eq!(entries[1]["fieldsV1"], json!({"f:data": {}}));
}

#[test]
fn go_zero_values_are_printed() {
    let svc = norm(
        "v1",
        "Service",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]}}),
    );
    assert_eq!(svc.value["status"], json!({"loadBalancer": {}}));
    let dep = norm(
        "apps/v1",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
    );
    assert_eq!(
        dep.value["spec"]["template"]["metadata"],
        json!({"creationTimestamp": null, "labels": {"a": "b"}})
    );
    assert_eq!(dep.value["status"], json!({}));
    let ev = norm(
        "v1",
        "Event",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started"}),
    );
    assert_eq!(ev.value["eventTime"], Value::Null);
    assert_eq!(ev.value["reportingInstance"], "");
    assert_eq!(ev.value["source"], json!({}));
}

#[test]
fn int_or_string_and_quantities() {
    let dep = norm(
        "apps/v1",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
        "template": {"spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": 0.5, "memory": "1.5Gi"}, "requests": {"cpu": "1000m", "memory": 1000}}}]}}}}),
    );
    assert_eq!(
        dep.value["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": 1, "maxUnavailable": "25%"})
    );
    let res = &dep.value["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(
        res,
        &json!({"limits": {"cpu": "500m", "memory": "1536Mi"}, "requests": {"cpu": "1", "memory": "1k"}})
    );
}

#[test]
fn quantity_canonical_forms() {
    for (input, want) in [
        ("100m", "100m"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("1000m", "1"),
        ("1000", "1k"),
        ("1024", "1024"),
        ("128Mi", "128Mi"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("2048Ki", "2Mi"),
        ("1e3", "1e3"),
        ("1e4", "10e3"),
        ("0", "0"),
        ("0Mi", "0"),
        ("-1.5", "-1500m"),
        ("0.0000000001", "1n"),
        ("100M", "100M"),
        ("12345678901234567890", "12345678901234567890"),
        ("1G", "1G"),
        ("500000000n", "500m"),
    ] {
        assert_eq!(quantity::canonical(input).unwrap(), want, "{input}");
    }
    for bad in ["", "abc", "1.2.3", "1Qi", "--1", "1e", "1 Gi", "१"] {
        assert!(quantity::canonical(bad).is_err(), "{bad}");
    }
}

#[test]
fn subresource_bodies() {
    let deploy = find_by_kind("apps/v1", "Deployment").unwrap();
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "d", "namespace": "default"}, "spec": {"replicas": 3}});
    let out = normalize_subresource(deploy, "scale", &scale).unwrap();
    assert_eq!(out.value["spec"]["replicas"], 3);
    assert_eq!(out.value["status"]["replicas"], 0);
    let pods = find_by_kind("v1", "Pod").unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}, "extra": true});
    let out = normalize_subresource(pods, "binding", &binding).unwrap();
    assert_eq!(out.unknown_fields, vec![".extra"]);
    assert_eq!(out.value["target"]["name"], "node-1");
    let status = normalize_subresource(pods, "status", &full_pod()).unwrap();
    assert_eq!(status.value["status"]["phase"], "Running");
}

/// Real field names the random shapes of `random_shapes_never_panic` are keyed by.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "port",
    "targetPort",
    "nodePort",
    "protocol",
    "selector",
    "matchLabels",
    "matchExpressions",
    "template",
    "replicas",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "volumes",
    "emptyDir",
    "configMap",
    "data",
    "stringData",
    "type",
    "conditions",
    "containerStatuses",
    "state",
    "waiting",
    "terminated",
    "reason",
    "restartCount",
    "clusterIP",
    "clusterIPs",
    "subsets",
    "addresses",
    "ip",
    "endpoints",
    "tolerations",
    "key",
    "operator",
    "values",
    "strategy",
    "rollingUpdate",
    "maxSurge",
    "creationTimestamp",
    "renewTime",
    "involvedObject",
    "series",
    "count",
    "env",
    "valueFrom",
    "fieldRef",
    "livenessProbe",
    "httpGet",
    "hostNetwork",
];

/// A random JSON value drawn from `next`: objects keyed by KEYS, no containers past depth 4.
fn gen(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
    match next() % if depth > 4 { 6 } else { 9 } {
        0 => Value::Null,
        1 => json!(matches!(next() % 3, 0)),
        2 => json!((next() % 70000) as i64 - 10),
        3 => json!(
            [
                "",
                "a",
                "0.5",
                "1Gi",
                "Always",
                "2024-01-02T03:04:05Z",
                "TCP",
                "x y",
                "YQ=="
            ][(next() % 9) as usize]
        ),
        4 => json!(1.5),
        5 => json!(-3),
        6 | 7 => {
            let n = next() % 5;
            let mut m = Map::new();
            for _ in 0..n {
                let k = KEYS[(next() as usize) % KEYS.len()];
                m.insert(k.to_string(), gen(next, depth + 1));
            }
            Value::Object(m)
        }
        _ => Value::Array((0..next() % 4).map(|_| gen(next, depth + 1)).collect()),
    }
}

/// Random JSON built from real field names, through every stage: never a panic.
#[test]
fn random_shapes_never_panic() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..800 {
        let v = gen(&mut next, 0);
        for r in crate::registry::RESOURCES {
            let mut obj = match normalize(r, &v) {
                Ok(n) => n.value,
                Err(_) => v.clone(),
            };
            crate::defaults::apply_defaults(r, &mut obj);
            let _ = crate::validation::validate_create(r, &obj);
            let _ = crate::validation::validate_update(r, &v, &obj);
            let _ = crate::table::table(r, &[obj.clone(), v.clone()], chrono::Utc::now());
        }
    }
}

/// Every field of a realistic pod replaced by every JSON type: errors or values, no panic,
/// and errors that name the field.
#[test]
fn every_field_of_a_pod_mistyped() {
    fn paths(v: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    prefix.push(Seg::Key(k.clone()));
                    out.push(prefix.clone());
                    paths(child, prefix, out);
                    prefix.pop();
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    prefix.push(Seg::Index(i));
                    out.push(prefix.clone());
                    paths(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }
    let pod = full_pod();
    let mut all = Vec::new();
    paths(&pod, &mut Vec::new(), &mut all);
    let pods = find_by_kind("v1", "Pod").unwrap();
    let mut errors = 0;
    for path in &all {
        for replacement in [
            json!(null),
            json!("x"),
            json!(7),
            json!(-1.5),
            json!(true),
            json!([]),
            json!({}),
        ] {
            let mut v = pod.clone();
            let mut cur = &mut v;
            for seg in path {
                cur = match seg {
                    Seg::Key(k) => &mut cur[k.as_str()],
                    Seg::Index(i) => &mut cur[*i],
                };
            }
            *cur = replacement;
            match normalize(pods, &v) {
                Ok(n) => {
                    let mut obj = n.value;
                    crate::defaults::apply_defaults(pods, &mut obj);
                    let _ = crate::validation::validate_update(pods, &pod, &obj);
                    let _ = crate::table::table(pods, &[obj], chrono::Utc::now());
                }
                Err(e) => {
                    errors += 1;
                    assert!(!e.message.is_empty());
                }
            }
        }
    }
    assert!(errors > 100, "{errors}");
}
