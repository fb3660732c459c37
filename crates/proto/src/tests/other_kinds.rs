//! The remaining kinds kubectl can create.

use super::*;

#[test]
fn other_kubectl_create_kinds() {
    job_and_cronjob_decode();
    roles_and_binding_decode();
    ingress_decodes();
    pod_disruption_budget_decodes();
    priority_class_decodes();
    resource_quota_decodes();
    token_request_decodes();
}

fn job_and_cronjob_decode() {
    use k8s_pb::api::batch::v1 as batch;

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
}

fn roles_and_binding_decode() {
    use k8s_pb::api::rbac::v1 as rbac;

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
}

fn ingress_decodes() {
    use k8s_pb::api::networking::v1 as networking;

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
}

fn pod_disruption_budget_decodes() {
    use k8s_pb::api::policy::v1 as policy;

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
}

fn priority_class_decodes() {
    use k8s_pb::api::scheduling::v1 as scheduling;

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
}

fn resource_quota_decodes() {
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
}

fn token_request_decodes() {
    use k8s_pb::api::authentication::v1 as authn;

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
