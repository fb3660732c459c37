//! What `kubectl create` sends as protobuf, decoded as its JSON twin.

use super::*;

#[test]
fn kubectl_create_deployment() {
    let got = decode("apps/v1", "Deployment", &create_deployment());
    let want = json!({
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "nginx",
                    "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "resources": {}
                }]}
            },
            "strategy": {}
        },
        "status": {}
    });
    assert_eq!(got, want);
    // kind and apiVersion come first, like Go's TypeMeta
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["kind", "apiVersion", "metadata", "spec", "status"]);
}

#[test]
fn kubectl_create_namespace() {
    let ns = core::Namespace {
        metadata: Some(meta("team-a", &[])),
        spec: Some(core::NamespaceSpec { finalizers: vec![] }),
        status: Some(core::NamespaceStatus {
            phase: s(""),
            conditions: vec![],
        }),
    };
    assert_eq!(
        decode("v1", "Namespace", &ns),
        json!({
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": "team-a"},
            "spec": {},
            "status": {}
        })
    );
}

#[test]
fn kubectl_create_service_clusterip() {
    // kubectl create service clusterip my-svc --tcp=80:8080
    let svc = core::Service {
        metadata: Some(meta("my-svc", &[("app", "my-svc")])),
        spec: Some(service_spec(
            "ClusterIP",
            vec![service_port("80-8080", 80, 8080, 0)],
            "my-svc",
        )),
        status: Some(service_status()),
    };
    assert_eq!(
        decode("v1", "Service", &svc),
        json!({
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": {"name": "my-svc", "labels": {"app": "my-svc"}},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "my-svc"},
                "type": "ClusterIP"
            },
            "status": {"loadBalancer": {}}
        })
    );
}

#[test]
fn kubectl_create_service_nodeport_headless_and_externalname() {
    // kubectl create service nodeport np --tcp=5678:8080 --node-port=30080
    let svc = core::Service {
        metadata: Some(meta("np", &[("app", "np")])),
        spec: Some(service_spec(
            "NodePort",
            vec![service_port("5678-8080", 5678, 8080, 30080)],
            "np",
        )),
        status: Some(service_status()),
    };
    let got = decode("v1", "Service", &svc);
    assert_eq!(
        got["spec"],
        json!({
            "ports": [{
                "name": "5678-8080", "protocol": "TCP", "port": 5678,
                "targetPort": 8080, "nodePort": 30080
            }],
            "selector": {"app": "np"},
            "type": "NodePort"
        })
    );

    // kubectl create service clusterip headless --clusterip=None
    let mut spec = service_spec("ClusterIP", vec![], "headless");
    spec.cluster_ip = s("None");
    let svc = core::Service {
        metadata: Some(meta("headless", &[("app", "headless")])),
        spec: Some(spec),
        status: Some(service_status()),
    };
    assert_eq!(
        decode("v1", "Service", &svc)["spec"],
        json!({"selector": {"app": "headless"}, "clusterIP": "None", "type": "ClusterIP"})
    );

    // kubectl create service externalname ext --external-name=example.com
    let mut spec = service_spec("ExternalName", vec![], "ext");
    spec.external_name = s("example.com");
    spec.cluster_ips = vec![];
    let svc = core::Service {
        metadata: Some(meta("ext", &[("app", "ext")])),
        spec: Some(spec),
        status: Some(service_status()),
    };
    assert_eq!(
        decode("v1", "Service", &svc)["spec"],
        json!({"selector": {"app": "ext"}, "type": "ExternalName", "externalName": "example.com"})
    );
}

#[test]
fn service_fields_with_pointers_and_named_target_port() {
    let mut spec = service_spec(
        "LoadBalancer",
        vec![core::ServicePort {
            target_port: Some(IntOrString {
                r#type: Some(1),
                int_val: Some(0),
                str_val: s("http"),
            }),
            app_protocol: s(""),
            ..service_port("web", 443, 0, 0)
        }],
        "lb",
    );
    spec.cluster_ips = vec!["10.0.0.10".to_owned(), "fd00::10".to_owned()];
    spec.ip_families = vec!["IPv4".to_owned(), "IPv6".to_owned()];
    spec.ip_family_policy = s("PreferDualStack");
    spec.external_ips = vec!["1.2.3.4".to_owned()];
    spec.session_affinity = s("ClientIP");
    spec.session_affinity_config = Some(core::SessionAffinityConfig {
        client_ip: Some(core::ClientIpConfig {
            timeout_seconds: Some(0),
        }),
    });
    spec.internal_traffic_policy = s("Local");
    spec.external_traffic_policy = s("Local");
    spec.allocate_load_balancer_node_ports = Some(false);
    let got = decode(
        "v1",
        "Service",
        &core::Service {
            metadata: Some(meta("lb", &[])),
            spec: Some(spec),
            status: Some(service_status()),
        },
    );
    assert_eq!(
        got["spec"],
        json!({
            // appProtocol is a Go pointer: an explicit "" is kept
            "ports": [{"name": "web", "protocol": "TCP", "appProtocol": "", "port": 443, "targetPort": "http"}],
            "selector": {"app": "lb"},
            "clusterIPs": ["10.0.0.10", "fd00::10"],
            "type": "LoadBalancer",
            "externalIPs": ["1.2.3.4"],
            "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Local",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}},
            "ipFamilies": ["IPv4", "IPv6"],
            "ipFamilyPolicy": "PreferDualStack",
            "allocateLoadBalancerNodePorts": false,
            "internalTrafficPolicy": "Local"
        })
    );
}

#[test]
fn kubectl_create_configmap() {
    // kubectl create configmap cfg --from-literal=key1=config1 --from-file=bin
    let cm = core::ConfigMap {
        metadata: Some(meta("cfg", &[])),
        immutable: None,
        data: map(&[("key1", "config1"), ("key2", "")]),
        binary_data: [("bin".to_owned(), vec![0u8, 255, 1])]
            .into_iter()
            .collect(),
    };
    assert_eq!(
        decode("v1", "ConfigMap", &cm),
        json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "cfg"},
            "data": {"key1": "config1", "key2": ""},
            "binaryData": {"bin": "AP8B"}
        })
    );
    let immutable = core::ConfigMap {
        metadata: Some(meta("frozen", &[])),
        immutable: Some(false),
        ..Default::default()
    };
    assert_eq!(
        decode("v1", "ConfigMap", &immutable)["immutable"],
        json!(false)
    );
}

#[test]
fn kubectl_create_secrets() {
    // kubectl create secret generic creds --from-literal=user=admin --from-literal=pass=s3cr3t!
    let secret = core::Secret {
        metadata: Some(meta("creds", &[])),
        immutable: None,
        data: [
            ("user".to_owned(), b"admin".to_vec()),
            ("pass".to_owned(), b"s3cr3t!".to_vec()),
        ]
        .into_iter()
        .collect(),
        string_data: BTreeMap::new(),
        r#type: s(""),
    };
    assert_eq!(
        decode("v1", "Secret", &secret),
        json!({
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {"name": "creds"},
            "data": {"pass": "czNjcjN0IQ==", "user": "YWRtaW4="}
        })
    );

    // kubectl create secret tls / docker-registry set a type
    let tls = core::Secret {
        metadata: Some(meta("tls", &[])),
        data: [
            ("tls.crt".to_owned(), b"CERT".to_vec()),
            ("tls.key".to_owned(), b"KEY".to_vec()),
        ]
        .into_iter()
        .collect(),
        string_data: map(&[("note", "plain")]),
        r#type: s("kubernetes.io/tls"),
        immutable: Some(true),
    };
    assert_eq!(
        decode("v1", "Secret", &tls),
        json!({
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {"name": "tls"},
            "immutable": true,
            "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
            "stringData": {"note": "plain"},
            "type": "kubernetes.io/tls"
        })
    );
}

#[test]
fn kubectl_create_serviceaccount() {
    let sa = core::ServiceAccount {
        metadata: Some(meta("robot", &[])),
        ..Default::default()
    };
    assert_eq!(
        decode("v1", "ServiceAccount", &sa),
        json!({"kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "robot"}})
    );
    let sa = core::ServiceAccount {
        metadata: Some(meta("robot", &[])),
        secrets: vec![core::ObjectReference {
            kind: s(""),
            namespace: s(""),
            name: s("robot-token"),
            uid: s(""),
            api_version: s(""),
            resource_version: s(""),
            field_path: s(""),
        }],
        image_pull_secrets: vec![core::LocalObjectReference { name: s("regcred") }],
        automount_service_account_token: Some(false),
    };
    assert_eq!(
        decode("v1", "ServiceAccount", &sa),
        json!({
            "kind": "ServiceAccount",
            "apiVersion": "v1",
            "metadata": {"name": "robot"},
            "secrets": [{"name": "robot-token"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": false
        })
    );
}

#[test]
fn object_meta_fields() {
    let md = meta::ObjectMeta {
        name: s("web"),
        generate_name: s("web-"),
        namespace: s("prod"),
        self_link: s(""),
        uid: s("0b9a4f4e-1111-2222-3333-444455556666"),
        resource_version: s("42"),
        generation: Some(3),
        creation_timestamp: Some(meta::Time {
            seconds: Some(1_704_164_645),
            nanos: Some(0),
        }),
        deletion_timestamp: Some(meta::Time {
            seconds: Some(1_704_164_700),
            nanos: None,
        }),
        deletion_grace_period_seconds: Some(0),
        labels: map(&[("app", "web")]),
        annotations: map(&[("note", "x")]),
        owner_references: vec![meta::OwnerReference {
            api_version: s("apps/v1"),
            kind: s("ReplicaSet"),
            name: s("web-123"),
            uid: s("u-1"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        finalizers: vec!["example.com/cleanup".to_owned()],
        managed_fields: vec![meta::ManagedFieldsEntry {
            manager: s("kubectl-create"),
            operation: s("Update"),
            api_version: s("v1"),
            time: Some(meta::Time {
                seconds: Some(1_704_164_645),
                nanos: Some(0),
            }),
            fields_type: s("FieldsV1"),
            fields_v1: Some(meta::FieldsV1 {
                raw: Some(br#"{"f:data":{".":{},"f:a":{}}}"#.to_vec()),
            }),
            subresource: s(""),
        }],
    };
    let cm = core::ConfigMap {
        metadata: Some(md),
        ..Default::default()
    };
    assert_eq!(
        decode("v1", "ConfigMap", &cm)["metadata"],
        json!({
            "name": "web",
            "generateName": "web-",
            "namespace": "prod",
            "uid": "0b9a4f4e-1111-2222-3333-444455556666",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "deletionTimestamp": "2024-01-02T03:05:00Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"app": "web"},
            "annotations": {"note": "x"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-123",
                "uid": "u-1", "controller": true, "blockOwnerDeletion": true
            }],
            "finalizers": ["example.com/cleanup"],
            "managedFields": [{
                "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}}
            }]
        })
    );
}
