//! Pods, Deployments, ReplicaSets, DaemonSets, Nodes and the small kinds around them.

use super::*;

#[test]
fn pod_with_common_fields() {
    let pod = core::Pod {
        metadata: Some(meta("app", &[("app", "web")])),
        spec: Some(common_pod_spec()),
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
    let want = common_pod_json();
    assert_eq!(got, want);
}

/// The container of `pod_with_common_fields`: one of each common container field.
fn common_app_container() -> core::Container {
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
    app.env = common_app_env();
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
    set_common_probes_and_hooks(&mut app);
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
    app
}

fn common_app_env() -> Vec<core::EnvVar> {
    vec![
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
    ]
}

fn set_common_probes_and_hooks(app: &mut core::Container) {
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
}

fn common_pod_spec() -> core::PodSpec {
    let mut init = container("init", "busybox");
    init.restart_policy = s("Always");

    let mut spec = pod_spec(vec![common_app_container()]);
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
    spec.volumes = common_volumes();
    spec
}

fn common_volumes() -> Vec<core::Volume> {
    vec![
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
    ]
}

/// `pod_with_common_fields` as kube-apiserver serves it in JSON.
fn common_pod_json() -> Value {
    json!({
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
    })
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
    lease_decodes_micro_times();
    event_decodes();
    endpoints_decode();
    endpoint_slice_decodes();
    scale_decodes();
    delete_options_decode_under_every_group();
}

fn lease_decodes_micro_times() {
    use k8s_pb::api::coordination::v1 as coordination;

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
}

fn event_decodes() {
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
}

fn endpoints_decode() {
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
}

fn endpoint_slice_decodes() {
    use k8s_pb::api::discovery::v1 as discovery;

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
}

fn scale_decodes() {
    use k8s_pb::api::autoscaling::v1 as autoscaling;

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
}

fn delete_options_decode_under_every_group() {
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
