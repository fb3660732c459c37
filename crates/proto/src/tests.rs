//! Bodies built the way client-go builds them: Go marshals every non-pointer field, so the
//! messages below carry `Some("")`, `Some(0)`, `Some(false)` and empty sub-messages wherever
//! kubectl leaves a value field unset.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{json, Value};

use crate::{decode_object, is_protobuf, ProtoError, MAGIC, SUPPORTED_KINDS};

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The envelope exactly as client-go's protobuf serializer writes it.
fn envelope_raw(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut body = MAGIC.to_vec();
    unknown.encode(&mut body).unwrap();
    body
}

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    envelope_raw(api_version, kind, msg.encode_to_vec())
}

fn decode(api_version: &str, kind: &str, msg: &impl Message) -> Value {
    decode_object(&envelope(api_version, kind, msg)).unwrap()
}

/// ObjectMeta as Go marshals a value with only name and labels set.
fn meta(name: &str, labels: &[(&str, &str)]) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: map(labels),
        ..Default::default()
    }
}

/// Container as Go marshals one with only the given fields set.
fn container(name: &str, image: &str) -> core::Container {
    core::Container {
        name: s(name),
        image: s(image),
        working_dir: s(""),
        resources: Some(core::ResourceRequirements::default()),
        termination_message_path: s(""),
        termination_message_policy: s(""),
        image_pull_policy: s(""),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    }
}

fn container_port(port: i32) -> core::ContainerPort {
    core::ContainerPort {
        name: s(""),
        host_port: Some(0),
        container_port: Some(port),
        protocol: s(""),
        host_ip: s(""),
    }
}

fn pod_spec(containers: Vec<core::Container>) -> core::PodSpec {
    core::PodSpec {
        containers,
        restart_policy: s(""),
        dns_policy: s(""),
        service_account_name: s(""),
        service_account: s(""),
        node_name: s(""),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        hostname: s(""),
        subdomain: s(""),
        scheduler_name: s(""),
        priority_class_name: s(""),
        ..Default::default()
    }
}

fn int_port(port: i32) -> IntOrString {
    IntOrString {
        r#type: Some(0),
        int_val: Some(port),
        str_val: s(""),
    }
}

fn service_port(name: &str, port: i32, target: i32, node_port: i32) -> core::ServicePort {
    core::ServicePort {
        name: s(name),
        protocol: s("TCP"),
        port: Some(port),
        target_port: Some(int_port(target)),
        node_port: Some(node_port),
        app_protocol: None,
    }
}

fn service_spec(kind: &str, ports: Vec<core::ServicePort>, name: &str) -> core::ServiceSpec {
    core::ServiceSpec {
        ports,
        selector: map(&[("app", name)]),
        cluster_ip: s(""),
        r#type: s(kind),
        session_affinity: s(""),
        load_balancer_ip: s(""),
        external_name: s(""),
        external_traffic_policy: s(""),
        health_check_node_port: Some(0),
        publish_not_ready_addresses: Some(false),
        ..Default::default()
    }
}

fn service_status() -> core::ServiceStatus {
    core::ServiceStatus {
        load_balancer: Some(core::LoadBalancerStatus::default()),
        conditions: vec![],
    }
}

/// `kubectl create deployment web --image=nginx --replicas=2 --port=80`
fn create_deployment() -> apps::Deployment {
    let labels = [("app", "web")];
    let mut nginx = container("nginx", "nginx");
    nginx.ports = vec![container_port(80)];
    apps::Deployment {
        metadata: Some(meta("web", &labels)),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(meta::LabelSelector {
                match_labels: map(&labels),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta("", &labels)),
                spec: Some(pod_spec(vec![nginx])),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s(""),
                rolling_update: None,
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: None,
            paused: Some(false),
            progress_deadline_seconds: None,
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            updated_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(0),
            terminating_replicas: None,
            conditions: vec![],
            collision_count: None,
        }),
    }
}

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

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

#[test]
fn pod_with_common_fields() {
    let mut app = container("app", "registry.example/app:1.2");
    app.command = vec!["/bin/app".to_owned()];
    app.args = vec!["--port".to_owned(), "8080".to_owned()];
    app.working_dir = s("/srv");
    app.image_pull_policy = s("IfNotPresent");
    app.termination_message_path = s("/dev/termination-log");
    app.termination_message_policy = s("File");
    app.ports = vec![core::ContainerPort {
        name: s("http"),
        protocol: s("TCP"),
        ..container_port(8080)
    }];
    app.env = vec![
        core::EnvVar {
            name: s("MODE"),
            value: s("prod"),
            value_from: None,
        },
        core::EnvVar {
            name: s("POD_NAME"),
            value: s(""),
            value_from: Some(core::EnvVarSource {
                field_ref: Some(core::ObjectFieldSelector {
                    api_version: s("v1"),
                    field_path: s("metadata.name"),
                }),
                ..Default::default()
            }),
        },
        core::EnvVar {
            name: s("LEVEL"),
            value: s(""),
            value_from: Some(core::EnvVarSource {
                config_map_key_ref: Some(core::ConfigMapKeySelector {
                    local_object_reference: Some(core::LocalObjectReference { name: s("cfg") }),
                    key: s("level"),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
        },
        core::EnvVar {
            name: s("PASS"),
            value: s(""),
            value_from: Some(core::EnvVarSource {
                secret_key_ref: Some(core::SecretKeySelector {
                    local_object_reference: Some(core::LocalObjectReference { name: s("creds") }),
                    key: s("pass"),
                    optional: None,
                }),
                ..Default::default()
            }),
        },
    ];
    app.env_from = vec![core::EnvFromSource {
        prefix: s("CFG_"),
        config_map_ref: Some(core::ConfigMapEnvSource {
            local_object_reference: Some(core::LocalObjectReference { name: s("cfg") }),
            optional: None,
        }),
        secret_ref: None,
    }];
    app.resources = Some(core::ResourceRequirements {
        limits: [
            ("cpu".to_owned(), quantity("500m")),
            ("memory".to_owned(), quantity("128Mi")),
        ]
        .into_iter()
        .collect(),
        requests: [("cpu".to_owned(), quantity("250m"))].into_iter().collect(),
        claims: vec![],
    });
    app.volume_mounts = vec![core::VolumeMount {
        name: s("data"),
        read_only: Some(true),
        mount_path: s("/data"),
        sub_path: s(""),
        sub_path_expr: s(""),
        ..Default::default()
    }];
    app.liveness_probe = Some(core::Probe {
        handler: Some(core::ProbeHandler {
            http_get: Some(core::HttpGetAction {
                path: s("/healthz"),
                port: Some(int_port(8080)),
                host: s(""),
                scheme: s("HTTP"),
                http_headers: vec![],
            }),
            ..Default::default()
        }),
        initial_delay_seconds: Some(5),
        timeout_seconds: Some(1),
        period_seconds: Some(10),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        termination_grace_period_seconds: None,
    });
    app.readiness_probe = Some(core::Probe {
        handler: Some(core::ProbeHandler {
            tcp_socket: Some(core::TcpSocketAction {
                port: Some(IntOrString {
                    r#type: Some(1),
                    int_val: Some(0),
                    str_val: s("http"),
                }),
                host: s(""),
            }),
            ..Default::default()
        }),
        initial_delay_seconds: Some(0),
        timeout_seconds: Some(0),
        period_seconds: Some(0),
        success_threshold: Some(0),
        failure_threshold: Some(0),
        termination_grace_period_seconds: None,
    });
    app.lifecycle = Some(core::Lifecycle {
        pre_stop: Some(core::LifecycleHandler {
            exec: Some(core::ExecAction {
                command: vec!["sleep".to_owned(), "5".to_owned()],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    app.security_context = Some(core::SecurityContext {
        capabilities: Some(core::Capabilities {
            add: vec![],
            drop: vec!["ALL".to_owned()],
        }),
        run_as_non_root: Some(true),
        run_as_user: Some(1000),
        read_only_root_filesystem: Some(true),
        allow_privilege_escalation: Some(false),
        ..Default::default()
    });

    let mut init = container("init", "busybox");
    init.restart_policy = s("Always");

    let mut spec = pod_spec(vec![app]);
    spec.init_containers = vec![init];
    spec.restart_policy = s("Always");
    spec.termination_grace_period_seconds = Some(30);
    spec.dns_policy = s("ClusterFirst");
    spec.node_selector = map(&[("disktype", "ssd")]);
    spec.service_account_name = s("robot");
    spec.node_name = s("node-1");
    spec.host_network = Some(true);
    spec.scheduler_name = s("default-scheduler");
    spec.priority = Some(0);
    spec.enable_service_links = Some(false);
    spec.security_context = Some(core::PodSecurityContext {
        fs_group: Some(2000),
        supplemental_groups: vec![3000],
        ..Default::default()
    });
    spec.image_pull_secrets = vec![core::LocalObjectReference { name: s("regcred") }];
    spec.tolerations = vec![core::Toleration {
        key: s("node.kubernetes.io/not-ready"),
        operator: s("Exists"),
        value: s(""),
        effect: s("NoExecute"),
        toleration_seconds: Some(300),
    }];
    spec.volumes = vec![
        core::Volume {
            name: s("data"),
            volume_source: Some(core::VolumeSource {
                empty_dir: Some(core::EmptyDirVolumeSource {
                    medium: s(""),
                    size_limit: Some(quantity("1Gi")),
                }),
                ..Default::default()
            }),
        },
        core::Volume {
            name: s("host"),
            volume_source: Some(core::VolumeSource {
                host_path: Some(core::HostPathVolumeSource {
                    path: s("/var/log"),
                    r#type: s(""),
                }),
                ..Default::default()
            }),
        },
        core::Volume {
            name: s("cfg"),
            volume_source: Some(core::VolumeSource {
                config_map: Some(core::ConfigMapVolumeSource {
                    local_object_reference: Some(core::LocalObjectReference { name: s("cfg") }),
                    items: vec![core::KeyToPath {
                        key: s("a"),
                        path: s("a.txt"),
                        mode: None,
                    }],
                    default_mode: Some(420),
                    optional: None,
                }),
                ..Default::default()
            }),
        },
        core::Volume {
            name: s("sec"),
            volume_source: Some(core::VolumeSource {
                secret: Some(core::SecretVolumeSource {
                    secret_name: s("creds"),
                    items: vec![],
                    default_mode: Some(256),
                    optional: Some(true),
                }),
                ..Default::default()
            }),
        },
    ];

    let pod = core::Pod {
        metadata: Some(meta("app", &[("app", "web")])),
        spec: Some(spec),
        status: Some(core::PodStatus {
            phase: s(""),
            message: s(""),
            reason: s(""),
            nominated_node_name: s(""),
            host_ip: s(""),
            pod_ip: s(""),
            qos_class: s(""),
            resize: s(""),
            ..Default::default()
        }),
    };
    let got = decode("v1", "Pod", &pod);
    let want = json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "app", "labels": {"app": "web"}},
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": ""}},
                {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a.txt"}], "defaultMode": 420}},
                {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 256, "optional": true}}
            ],
            "initContainers": [{"name": "init", "image": "busybox", "resources": {}, "restartPolicy": "Always"}],
            "containers": [{
                "name": "app",
                "image": "registry.example/app:1.2",
                "command": ["/bin/app"],
                "args": ["--port", "8080"],
                "workingDir": "/srv",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "cfg"}}],
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level", "optional": false}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pass"}}}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3
                },
                "readinessProbe": {"tcpSocket": {"port": "http"}},
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {
                    "capabilities": {"drop": ["ALL"]},
                    "runAsUser": 1000,
                    "runAsNonRoot": true,
                    "readOnlyRootFilesystem": true,
                    "allowPrivilegeEscalation": false
                }
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"disktype": "ssd"},
            "serviceAccountName": "robot",
            "nodeName": "node-1",
            "hostNetwork": true,
            "securityContext": {"supplementalGroups": [3000], "fsGroup": 2000},
            "imagePullSecrets": [{"name": "regcred"}],
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": false
        },
        "status": {}
    });
    assert_eq!(got, want);
}

#[test]
fn deployment_selector_expressions_and_strategy() {
    let mut d = create_deployment();
    let spec = d.spec.as_mut().unwrap();
    spec.selector = Some(meta::LabelSelector {
        match_labels: map(&[("app", "web")]),
        match_expressions: vec![meta::LabelSelectorRequirement {
            key: s("tier"),
            operator: s("In"),
            values: vec!["frontend".to_owned(), "edge".to_owned()],
        }],
    });
    spec.strategy = Some(apps::DeploymentStrategy {
        r#type: s("RollingUpdate"),
        rolling_update: Some(apps::RollingUpdateDeployment {
            max_unavailable: Some(IntOrString {
                r#type: Some(1),
                int_val: Some(0),
                str_val: s("25%"),
            }),
            max_surge: Some(int_port(1)),
        }),
    });
    spec.min_ready_seconds = Some(10);
    spec.revision_history_limit = Some(0);
    spec.progress_deadline_seconds = Some(600);
    spec.paused = Some(true);
    let got = decode("apps/v1", "Deployment", &d);
    assert_eq!(
        got["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend", "edge"]}]})
    );
    assert_eq!(
        got["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}})
    );
    assert_eq!(got["spec"]["minReadySeconds"], json!(10));
    assert_eq!(got["spec"]["revisionHistoryLimit"], json!(0));
    assert_eq!(got["spec"]["progressDeadlineSeconds"], json!(600));
    assert_eq!(got["spec"]["paused"], json!(true));
}

#[test]
fn replicaset_and_daemonset() {
    let d = create_deployment();
    let spec = d.spec.unwrap();
    let rs = apps::ReplicaSet {
        metadata: Some(meta("web-1", &[])),
        spec: Some(apps::ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            selector: spec.selector.clone(),
            template: spec.template.clone(),
        }),
        status: Some(apps::ReplicaSetStatus {
            replicas: Some(0),
            fully_labeled_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            observed_generation: Some(0),
            ..Default::default()
        }),
    };
    let got = decode("apps/v1", "ReplicaSet", &rs);
    assert_eq!(got["spec"]["replicas"], json!(0));
    // ReplicaSetStatus.replicas has no omitempty in Go
    assert_eq!(got["status"], json!({"replicas": 0}));

    let ds = apps::DaemonSet {
        metadata: Some(meta("agent", &[])),
        spec: Some(apps::DaemonSetSpec {
            selector: spec.selector,
            template: spec.template,
            update_strategy: Some(apps::DaemonSetUpdateStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDaemonSet {
                    max_unavailable: Some(int_port(1)),
                    max_surge: Some(int_port(0)),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
        }),
        status: None,
    };
    let got = decode("apps/v1", "DaemonSet", &ds);
    assert_eq!(
        got["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(got["spec"]["revisionHistoryLimit"], json!(10));
    assert!(got.get("status").is_none());
}

#[test]
fn lease_event_endpoints_slices_scale_and_delete_options() {
    use k8s_pb::api::autoscaling::v1 as autoscaling;
    use k8s_pb::api::coordination::v1 as coordination;
    use k8s_pb::api::discovery::v1 as discovery;

    let lease = coordination::Lease {
        metadata: Some(meta("node-1", &[])),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("node-1"),
            lease_duration_seconds: Some(40),
            acquire_time: Some(meta::MicroTime {
                seconds: Some(1_704_164_645),
                nanos: Some(123_456_000),
            }),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_704_164_645),
                nanos: Some(0),
            }),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    assert_eq!(
        decode("coordination.k8s.io/v1", "Lease", &lease)["spec"],
        json!({
            "holderIdentity": "node-1",
            "leaseDurationSeconds": 40,
            "acquireTime": "2024-01-02T03:04:05.123456Z",
            "renewTime": "2024-01-02T03:04:05.000000Z",
            "leaseTransitions": 0
        })
    );

    let event = core::Event {
        metadata: Some(meta("web.1", &[])),
        involved_object: Some(core::ObjectReference {
            kind: s("Pod"),
            name: s("web"),
            namespace: s("default"),
            ..Default::default()
        }),
        reason: s("Started"),
        message: s("Started container"),
        source: Some(core::EventSource {
            component: s("kubelet"),
            host: s(""),
        }),
        first_timestamp: Some(meta::Time::default()),
        last_timestamp: Some(meta::Time::default()),
        count: Some(1),
        r#type: s("Normal"),
        event_time: Some(meta::MicroTime::default()),
        series: None,
        action: s(""),
        related: None,
        reporting_component: s(""),
        reporting_instance: s(""),
    };
    assert_eq!(
        decode("v1", "Event", &event),
        json!({
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
            "reason": "Started",
            "message": "Started container",
            "source": {"component": "kubelet"},
            "count": 1,
            "type": "Normal",
            "reportingComponent": "",
            "reportingInstance": ""
        })
    );

    let endpoints = core::Endpoints {
        metadata: Some(meta("web", &[])),
        subsets: vec![core::EndpointSubset {
            addresses: vec![core::EndpointAddress {
                ip: s("10.1.0.5"),
                hostname: s(""),
                node_name: s("node-1"),
                target_ref: None,
            }],
            not_ready_addresses: vec![],
            ports: vec![core::EndpointPort {
                name: s("http"),
                port: Some(8080),
                protocol: s("TCP"),
                app_protocol: None,
            }],
        }],
    };
    assert_eq!(
        decode("v1", "Endpoints", &endpoints)["subsets"],
        json!([{
            "addresses": [{"ip": "10.1.0.5", "nodeName": "node-1"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        }])
    );

    let slice = discovery::EndpointSlice {
        metadata: Some(meta("web-abc", &[])),
        address_type: s("IPv4"),
        endpoints: vec![discovery::Endpoint {
            addresses: vec!["10.1.0.5".to_owned()],
            conditions: Some(discovery::EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            zone: s("a"),
            ..Default::default()
        }],
        ports: vec![discovery::EndpointPort {
            name: s(""),
            protocol: s("TCP"),
            port: Some(8080),
            app_protocol: None,
        }],
    };
    assert_eq!(
        decode("discovery.k8s.io/v1", "EndpointSlice", &slice),
        json!({
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.1.0.5"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "zone": "a"
            }],
            "ports": [{"name": "", "protocol": "TCP", "port": 8080}]
        })
    );

    let scale = autoscaling::Scale {
        metadata: Some(meta("web", &[])),
        spec: Some(autoscaling::ScaleSpec { replicas: Some(0) }),
        status: Some(autoscaling::ScaleStatus {
            replicas: Some(0),
            selector: s(""),
        }),
    };
    assert_eq!(
        decode("autoscaling/v1", "Scale", &scale),
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web"},
            "spec": {"replicas": 0},
            "status": {"replicas": 0}
        })
    );

    let opts = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(meta::Preconditions {
            uid: s("u-1"),
            resource_version: None,
        }),
        orphan_dependents: None,
        propagation_policy: s("Foreground"),
        dry_run: vec!["All".to_owned()],
        ignore_store_read_error_with_cluster_breaking_potential: None,
    };
    for api_version in ["v1", "meta.k8s.io/v1", "apps/v1"] {
        assert_eq!(
            decode(api_version, "DeleteOptions", &opts),
            json!({
                "kind": "DeleteOptions", "apiVersion": api_version,
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u-1"},
                "propagationPolicy": "Foreground",
                "dryRun": ["All"]
            })
        );
    }
}

#[test]
fn node_with_status() {
    let node = core::Node {
        metadata: Some(meta("node-1", &[])),
        spec: Some(core::NodeSpec {
            pod_cidr: s("10.244.0.0/24"),
            pod_cid_rs: vec!["10.244.0.0/24".to_owned()],
            provider_id: s(""),
            unschedulable: Some(false),
            taints: vec![core::Taint {
                key: s("dedicated"),
                value: s(""),
                effect: s("NoSchedule"),
                time_added: None,
            }],
            config_source: None,
            external_id: s(""),
        }),
        status: Some(core::NodeStatus {
            capacity: [
                ("cpu".to_owned(), quantity("4")),
                ("pods".to_owned(), quantity("110")),
            ]
            .into_iter()
            .collect(),
            phase: s(""),
            conditions: vec![core::NodeCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_heartbeat_time: Some(meta::Time {
                    seconds: Some(1_704_164_645),
                    nanos: Some(0),
                }),
                last_transition_time: Some(meta::Time::default()),
                reason: s("KubeletReady"),
                message: s(""),
            }],
            addresses: vec![core::NodeAddress {
                r#type: s("InternalIP"),
                address: s("192.168.1.10"),
            }],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            ..Default::default()
        }),
    };
    let got = decode("v1", "Node", &node);
    assert_eq!(
        got["spec"],
        json!({"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"], "taints": [{"key": "dedicated", "effect": "NoSchedule"}]})
    );
    assert_eq!(
        got["status"],
        json!({
            "capacity": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-02T03:04:05Z", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}
        })
    );
}

#[test]
fn other_kubectl_create_kinds() {
    use k8s_pb::api::authentication::v1 as authn;
    use k8s_pb::api::batch::v1 as batch;
    use k8s_pb::api::networking::v1 as networking;
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::api::rbac::v1 as rbac;
    use k8s_pb::api::scheduling::v1 as scheduling;

    // kubectl create job pi --image=perl -- perl -e 'print 1'
    let mut pi = container("pi", "perl");
    pi.command = vec!["perl".to_owned(), "-e".to_owned(), "print 1".to_owned()];
    let mut spec = pod_spec(vec![pi]);
    spec.restart_policy = s("Never");
    let job_spec = batch::JobSpec {
        template: Some(core::PodTemplateSpec {
            metadata: Some(meta("", &[])),
            spec: Some(spec),
        }),
        ..Default::default()
    };
    let job = batch::Job {
        metadata: Some(meta("pi", &[])),
        spec: Some(job_spec.clone()),
        status: Some(batch::JobStatus {
            active: Some(0),
            succeeded: Some(0),
            failed: Some(0),
            completed_indexes: s(""),
            ..Default::default()
        }),
    };
    let job_template = json!({
        "metadata": {},
        "spec": {"containers": [{
            "name": "pi", "image": "perl", "command": ["perl", "-e", "print 1"], "resources": {}
        }], "restartPolicy": "Never"}
    });
    assert_eq!(
        decode("batch/v1", "Job", &job),
        json!({
            "kind": "Job", "apiVersion": "batch/v1",
            "metadata": {"name": "pi"},
            "spec": {"template": job_template},
            "status": {}
        })
    );

    // kubectl create cronjob hello --image=busybox --schedule="*/1 * * * *"
    let cron = batch::CronJob {
        metadata: Some(meta("hello", &[])),
        spec: Some(batch::CronJobSpec {
            schedule: s("*/1 * * * *"),
            concurrency_policy: s(""),
            job_template: Some(batch::JobTemplateSpec {
                metadata: Some(meta("hello", &[])),
                spec: Some(job_spec),
            }),
            ..Default::default()
        }),
        status: Some(batch::CronJobStatus::default()),
    };
    assert_eq!(
        decode("batch/v1", "CronJob", &cron)["spec"],
        json!({
            "schedule": "*/1 * * * *",
            "jobTemplate": {"metadata": {"name": "hello"}, "spec": {"template": job_template}}
        })
    );

    // kubectl create role / clusterrole / rolebinding
    let role = rbac::Role {
        metadata: Some(meta("pod-reader", &[])),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".to_owned(), "list".to_owned()],
            api_groups: vec![String::new()],
            resources: vec!["pods".to_owned()],
            resource_names: vec![],
            non_resource_ur_ls: vec![],
        }],
    };
    assert_eq!(
        decode("rbac.authorization.k8s.io/v1", "Role", &role)["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
    );
    let cluster_role = rbac::ClusterRole {
        metadata: Some(meta("metrics", &[])),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".to_owned()],
            non_resource_ur_ls: vec!["/metrics".to_owned()],
            ..Default::default()
        }],
        aggregation_rule: None,
    };
    assert_eq!(
        decode("rbac.authorization.k8s.io/v1", "ClusterRole", &cluster_role)["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}])
    );
    let binding = rbac::RoleBinding {
        metadata: Some(meta("bob-admin", &[])),
        subjects: vec![rbac::Subject {
            kind: s("User"),
            api_group: s("rbac.authorization.k8s.io"),
            name: s("bob"),
            namespace: s(""),
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: s("rbac.authorization.k8s.io"),
            kind: s("ClusterRole"),
            name: s("admin"),
        }),
    };
    assert_eq!(
        decode("rbac.authorization.k8s.io/v1", "RoleBinding", &binding),
        json!({
            "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "bob-admin"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}
        })
    );

    // kubectl create ingress simple --rule="foo.com/bar=svc1:8080,tls=my-cert"
    let ingress = networking::Ingress {
        metadata: Some(meta("simple", &[])),
        spec: Some(networking::IngressSpec {
            ingress_class_name: None,
            default_backend: None,
            tls: vec![networking::IngressTls {
                hosts: vec!["foo.com".to_owned()],
                secret_name: s("my-cert"),
            }],
            rules: vec![networking::IngressRule {
                host: s("foo.com"),
                ingress_rule_value: Some(networking::IngressRuleValue {
                    http: Some(networking::HttpIngressRuleValue {
                        paths: vec![networking::HttpIngressPath {
                            path: s("/bar"),
                            path_type: s("Exact"),
                            backend: Some(networking::IngressBackend {
                                service: Some(networking::IngressServiceBackend {
                                    name: s("svc1"),
                                    port: Some(networking::ServiceBackendPort {
                                        name: s(""),
                                        number: Some(8080),
                                    }),
                                }),
                                resource: None,
                            }),
                        }],
                    }),
                }),
            }],
        }),
        status: Some(networking::IngressStatus {
            load_balancer: Some(networking::IngressLoadBalancerStatus::default()),
        }),
    };
    assert_eq!(
        decode("networking.k8s.io/v1", "Ingress", &ingress),
        json!({
            "kind": "Ingress", "apiVersion": "networking.k8s.io/v1",
            "metadata": {"name": "simple"},
            "spec": {
                "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}],
                "rules": [{"host": "foo.com", "http": {"paths": [{
                    "path": "/bar", "pathType": "Exact",
                    "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}
                }]}}]
            },
            "status": {"loadBalancer": {}}
        })
    );

    // kubectl create pdb my-pdb --selector=app=web --min-available=1
    let pdb = policy::PodDisruptionBudget {
        metadata: Some(meta("my-pdb", &[])),
        spec: Some(policy::PodDisruptionBudgetSpec {
            min_available: Some(int_port(1)),
            selector: Some(meta::LabelSelector {
                match_labels: map(&[("app", "web")]),
                match_expressions: vec![],
            }),
            max_unavailable: None,
            unhealthy_pod_eviction_policy: None,
        }),
        status: Some(policy::PodDisruptionBudgetStatus {
            observed_generation: Some(0),
            disruptions_allowed: Some(0),
            current_healthy: Some(0),
            desired_healthy: Some(0),
            expected_pods: Some(0),
            ..Default::default()
        }),
    };
    assert_eq!(
        decode("policy/v1", "PodDisruptionBudget", &pdb),
        json!({
            "kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
            "metadata": {"name": "my-pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        })
    );

    // kubectl create priorityclass high --value=1000 --preemption-policy=Never
    let pc = scheduling::PriorityClass {
        metadata: Some(meta("high", &[])),
        value: Some(1000),
        global_default: Some(false),
        description: s(""),
        preemption_policy: s("Never"),
    };
    assert_eq!(
        decode("scheduling.k8s.io/v1", "PriorityClass", &pc),
        json!({
            "kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1",
            "metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"
        })
    );

    // kubectl create quota q --hard=pods=2,cpu=1
    let quota = core::ResourceQuota {
        metadata: Some(meta("q", &[])),
        spec: Some(core::ResourceQuotaSpec {
            hard: [
                ("pods".to_owned(), quantity("2")),
                ("cpu".to_owned(), quantity("1")),
            ]
            .into_iter()
            .collect(),
            scopes: vec![],
            scope_selector: None,
        }),
        status: Some(core::ResourceQuotaStatus::default()),
    };
    assert_eq!(
        decode("v1", "ResourceQuota", &quota),
        json!({
            "kind": "ResourceQuota", "apiVersion": "v1",
            "metadata": {"name": "q"},
            "spec": {"hard": {"cpu": "1", "pods": "2"}},
            "status": {}
        })
    );

    // kubectl create token robot --duration=1h --audience=api
    let token = authn::TokenRequest {
        metadata: Some(meta("", &[])),
        spec: Some(authn::TokenRequestSpec {
            audiences: vec!["api".to_owned()],
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        }),
        status: Some(authn::TokenRequestStatus {
            token: s(""),
            expiration_timestamp: Some(meta::Time::default()),
        }),
    };
    assert_eq!(
        decode("authentication.k8s.io/v1", "TokenRequest", &token),
        json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {},
            "spec": {"audiences": ["api"], "expirationSeconds": 3600},
            "status": {"token": ""}
        })
    );
}

// ---- errors -------------------------------------------------------------------------------

#[test]
fn body_without_magic() {
    assert!(matches!(
        decode_object(br#"{"kind":"Namespace"}"#),
        Err(ProtoError::MissingMagic)
    ));
    assert!(matches!(decode_object(b""), Err(ProtoError::MissingMagic)));
    assert!(matches!(
        decode_object(b"k8s"),
        Err(ProtoError::MissingMagic)
    ));
    // the raw object message without its envelope
    let raw = create_deployment().encode_to_vec();
    assert!(matches!(decode_object(&raw), Err(ProtoError::MissingMagic)));
}

#[test]
fn truncated_and_garbage_bodies_never_panic() {
    let body = envelope("apps/v1", "Deployment", &create_deployment());
    let mut errors = 0;
    for len in 0..body.len() {
        if decode_object(&body[..len]).is_err() {
            errors += 1;
        }
    }
    // Cutting at a field boundary of the envelope may leave a valid (smaller) message; all
    // other cuts must be refused.
    assert!(errors > body.len() - 10, "{errors} of {}", body.len());

    // every single-byte corruption
    for i in MAGIC.len()..body.len() {
        for b in [0x00, 0xff, 0x80, 0x0a, 0x12] {
            let mut bad = body.clone();
            bad[i] = b;
            let _ = decode_object(&bad);
        }
    }

    // pseudo-random garbage after the magic
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [1usize, 2, 3, 7, 16, 64, 300, 4096] {
        for _ in 0..200 {
            let mut bad = MAGIC.to_vec();
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bad.push(state.to_le_bytes()[0]);
            }
            let _ = decode_object(&bad);
        }
    }

    // garbage inside a well-formed envelope, for every supported kind
    for (api_version, kind) in SUPPORTED_KINDS {
        let api_version = if *api_version == "*" {
            "v1"
        } else {
            api_version
        };
        for len in [1usize, 5, 33, 200] {
            for _ in 0..50 {
                let mut raw = Vec::new();
                for _ in 0..len {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    raw.push(state.to_le_bytes()[1]);
                }
                let _ = decode_object(&envelope_raw(api_version, kind, raw));
            }
        }
    }

    let truncated = envelope_raw("v1", "Namespace", vec![0x0a, 0x05, 0x0a]);
    let err = decode_object(&truncated).unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::Decode {
                message: "Namespace",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn deeply_nested_input_is_refused() {
    // 10 000 nested length-delimited field-1 messages: prost's recursion limit stops it.
    let mut raw = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x0a];
        let mut len = raw.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                outer.push(byte);
                break;
            }
            outer.push(byte | 0x80);
        }
        outer.extend_from_slice(&raw);
        raw = outer;
    }
    assert!(decode_object(&envelope_raw("v1", "Pod", raw)).is_err());
}

#[test]
fn unsupported_kind() {
    let err = decode_object(&envelope(
        "apps/v1",
        "ControllerRevision",
        &create_deployment(),
    ))
    .unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedKind { api_version, kind } if api_version == "apps/v1" && kind == "ControllerRevision"),
        "{err}"
    );
    assert!(err.to_string().contains("send the object as JSON"));
    // right kind, wrong group
    let err = decode_object(&envelope("v1", "Deployment", &create_deployment())).unwrap_err();
    assert!(matches!(err, ProtoError::UnsupportedKind { .. }), "{err}");
}

#[test]
fn invalid_envelopes() {
    let mut unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("Namespace"),
        }),
        raw: Some(Vec::new()),
        content_encoding: s("gzip"),
        content_type: s(""),
    };
    let body = |u: &Unknown| [MAGIC.to_vec(), u.encode_to_vec()].concat();
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::UnsupportedEncoding {
            field: "contentEncoding",
            ..
        })
    ));
    unknown.content_encoding = None;
    unknown.content_type = s("application/json");
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::UnsupportedEncoding {
            field: "contentType",
            ..
        })
    ));
    unknown.content_type = s("application/vnd.kubernetes.protobuf");
    assert_eq!(
        decode_object(&body(&unknown)).unwrap(),
        json!({"kind": "Namespace", "apiVersion": "v1"})
    );
    unknown.type_meta = None;
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::InvalidEnvelope(_))
    ));
    unknown.type_meta = Some(TypeMeta {
        api_version: s("v1"),
        kind: s(""),
    });
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::InvalidEnvelope(_))
    ));
    assert!(matches!(
        decode_object(b"k8s\0\xff\xff"),
        Err(ProtoError::Decode {
            message: "runtime.Unknown",
            ..
        })
    ));
}

/// Appends a protobuf field (tag, length-delimited value) to an encoded message.
fn with_unknown_field(mut encoded: Vec<u8>, tag: u32, value: &[u8]) -> Vec<u8> {
    prost::encoding::encode_key(
        tag,
        prost::encoding::WireType::LengthDelimited,
        &mut encoded,
    );
    prost::encoding::encode_varint(value.len() as u64, &mut encoded);
    encoded.extend_from_slice(value);
    encoded
}

#[test]
fn unconverted_field_is_refused_with_its_path() {
    // A client newer than the crate sets field 999 of the second container.
    let labels = [("app", "web")];
    let mut nginx = container("nginx", "nginx");
    nginx.ports = vec![container_port(80)];
    let mut pod_spec_bytes = pod_spec(vec![nginx]).encode_to_vec();
    let sidecar = with_unknown_field(container("sidecar", "envoy").encode_to_vec(), 999, b"new");
    prost::encoding::bytes::encode(2, &sidecar, &mut pod_spec_bytes);
    let mut template = core::PodTemplateSpec {
        metadata: Some(meta("", &labels)),
        spec: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &pod_spec_bytes, &mut template);
    let mut spec = apps::DeploymentSpec {
        template: None,
        ..create_deployment().spec.unwrap()
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(3, &template, &mut spec);
    let mut raw = apps::Deployment {
        metadata: Some(meta("web", &labels)),
        spec: None,
        status: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &spec, &mut raw);

    // sanity: prost alone accepts the body and drops the field
    let decoded = apps::Deployment::decode(raw.as_slice()).unwrap();
    let containers = &decoded
        .spec
        .unwrap()
        .template
        .unwrap()
        .spec
        .unwrap()
        .containers;
    assert_eq!(containers.len(), 2);

    let err = decode_object(&envelope_raw("apps/v1", "Deployment", raw)).unwrap_err();
    match &err {
        ProtoError::UnsupportedField { path } => {
            assert_eq!(
                path,
                "spec.template.spec.containers[1].(protobuf field 999)"
            );
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(
        err.to_string(),
        "field spec.template.spec.containers[1].(protobuf field 999) of the protobuf object \
         cannot be converted to JSON, send the object as JSON instead"
    );
}

#[test]
fn unknown_fields_at_top_level_inline_and_in_maps() {
    // top level
    let raw = with_unknown_field(core::Namespace::default().encode_to_vec(), 77, b"x");
    let err = decode_object(&envelope_raw("v1", "Namespace", raw)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "(protobuf field 77)"),
        "{err}"
    );

    // an unknown field holding the zero value is tolerated (Go always sends value fields)
    let mut raw = core::Namespace {
        metadata: Some(meta("ns", &[])),
        ..Default::default()
    }
    .encode_to_vec();
    prost::encoding::encode_key(78, prost::encoding::WireType::Varint, &mut raw);
    prost::encoding::encode_varint(0, &mut raw);
    let raw = with_unknown_field(raw, 79, b"");
    assert_eq!(
        decode_object(&envelope_raw("v1", "Namespace", raw)).unwrap(),
        json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ns"}})
    );

    // inside an inlined message (Volume.volumeSource.emptyDir): the JSON path has no
    // volumeSource segment
    let empty_dir = with_unknown_field(Vec::new(), 50, b"y");
    let mut volume_source = Vec::new();
    prost::encoding::bytes::encode(2, &empty_dir, &mut volume_source);
    let mut volume = core::Volume {
        name: s("v"),
        volume_source: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &volume_source, &mut volume);
    let mut pod_spec = Vec::new();
    prost::encoding::bytes::encode(1, &volume, &mut pod_spec);
    let mut pod = Vec::new();
    prost::encoding::bytes::encode(2, &pod_spec, &mut pod);
    let err = decode_object(&envelope_raw("v1", "Pod", pod)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "spec.volumes[0].emptyDir.(protobuf field 50)"),
        "{err}"
    );

    // inside a map value (ResourceList entry)
    let qty = with_unknown_field(quantity("1").encode_to_vec(), 9, b"z");
    let mut entry = Vec::new();
    prost::encoding::string::encode(1, &"cpu".to_owned(), &mut entry);
    prost::encoding::bytes::encode(2, &qty, &mut entry);
    let mut status = Vec::new();
    prost::encoding::bytes::encode(1, &entry, &mut status);
    let mut node = Vec::new();
    prost::encoding::bytes::encode(3, &status, &mut node);
    let err = decode_object(&envelope_raw("v1", "Node", node)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "status.capacity[cpu].(protobuf field 9)"),
        "{err}"
    );
}

#[test]
fn invalid_values_are_reported_with_their_path() {
    let mut d = create_deployment();
    d.spec.as_mut().unwrap().strategy = Some(apps::DeploymentStrategy {
        r#type: s("RollingUpdate"),
        rolling_update: Some(apps::RollingUpdateDeployment {
            max_unavailable: Some(IntOrString {
                r#type: Some(5),
                int_val: None,
                str_val: None,
            }),
            max_surge: None,
        }),
    });
    let err = decode_object(&envelope("apps/v1", "Deployment", &d)).unwrap_err();
    match err {
        ProtoError::InvalidField { path, reason } => {
            assert_eq!(path, "spec.strategy.rollingUpdate.maxUnavailable");
            assert!(reason.contains("unknown type 5"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }

    let mut pod = core::Pod {
        metadata: Some(meta("p", &[])),
        spec: Some(pod_spec(vec![container("c", "i")])),
        status: None,
    };
    pod.spec.as_mut().unwrap().containers[0].resources = Some(core::ResourceRequirements {
        limits: [("memory".to_owned(), Quantity { string: s("") })]
            .into_iter()
            .collect(),
        ..Default::default()
    });
    let err = decode_object(&envelope("v1", "Pod", &pod)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { path, .. } if path == "spec.containers[0].resources.limits[memory]"),
        "{err}"
    );

    let mut cm = core::ConfigMap {
        metadata: Some(meta("c", &[])),
        ..Default::default()
    };
    cm.metadata.as_mut().unwrap().creation_timestamp = Some(meta::Time {
        seconds: Some(-70_000_000_000),
        nanos: None,
    });
    let err = decode_object(&envelope("v1", "ConfigMap", &cm)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { path, .. } if path == "metadata.creationTimestamp"),
        "{err}"
    );
}

#[test]
fn invalid_utf8_is_a_decode_error() {
    let mut raw = Vec::new();
    let mut md = Vec::new();
    prost::encoding::bytes::encode(1, &vec![0xffu8, 0xfe], &mut md);
    prost::encoding::bytes::encode(1, &md, &mut raw);
    let err = decode_object(&envelope_raw("v1", "ConfigMap", raw)).unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::Decode {
                message: "ConfigMap",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn content_type_helper_and_kind_list() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(is_protobuf(
        "Application/VND.Kubernetes.Protobuf; charset=utf-8"
    ));
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf;stream=watch"
    ));
    assert!(!is_protobuf("application/json"));
    assert!(SUPPORTED_KINDS.contains(&("apps/v1", "Deployment")));
    assert!(SUPPORTED_KINDS.contains(&("*", "DeleteOptions")));
    assert!(SUPPORTED_KINDS.contains(&("batch/v1", "CronJob")));
    assert!(SUPPORTED_KINDS.contains(&("v1", "ReplicationController")));
    assert_eq!(SUPPORTED_KINDS.len(), 30);
}
