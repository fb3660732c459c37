use super::*;
use crate::registry::find_by_kind;

fn defaulted(api_version: &str, kind: &str, mut obj: Value) -> Value {
    apply_defaults(find_by_kind(api_version, kind).unwrap(), &mut obj);
    obj
}

#[test]
fn minimal_pod_matches_kubernetes() {
    let pod = defaulted(
        "v1",
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}),
    );
    assert_eq!(
        pod,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nginx", "namespace": "default"},
            "spec": {
                "containers": [{"name": "nginx", "image": "nginx", "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File", "resources": {}}],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
                "schedulerName": "default-scheduler",
                "enableServiceLinks": true,
                "serviceAccountName": "default",
                "serviceAccount": "default",
                "priority": 0,
                "preemptionPolicy": "PreemptLowerPriority",
                "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                ]
            },
            "status": {"phase": "Pending"}})
    );
}

#[test]
fn pod_nested_defaults() {
    let pod = defaulted(
        "v1",
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {
            "hostNetwork": true,
            "serviceAccount": "builder",
            "tolerations": [{"operator": "Exists"}],
            "initContainers": [{"name": "init", "image": "busybox:1.36",
                "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}],
            "containers": [{"name": "c", "image": "registry.local:5000/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "ports": [{"containerPort": 8080}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "livenessProbe": {"httpGet": {"port": 8080}},
                "readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 5},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
                "resources": {"limits": {"memory": "128Mi"}}}],
            "volumes": [{"name": "a"}, {"name": "b", "secret": {"secretName": "s"}},
                {"name": "c", "configMap": {"name": "cm", "defaultMode": 256}},
                {"name": "d", "hostPath": {"path": "/var"}},
                {"name": "e", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}},
                    {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]
        },
        "status": {"podIP": "10.0.0.5"}}),
    );
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "builder");
    assert_eq!(spec["serviceAccount"], "builder");
    // A toleration of everything already tolerates both taints.
    assert_eq!(spec["tolerations"], json!([{"operator": "Exists"}]));
    let c = &spec["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        c["ports"][0],
        json!({"containerPort": 8080, "protocol": "TCP", "hostPort": 8080})
    );
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
    assert_eq!(c["readinessProbe"]["grpc"]["service"], "");
    assert_eq!(
        c["lifecycle"]["preStop"]["httpGet"],
        json!({"port": 80, "path": "/quit", "scheme": "HTTP"})
    );
    assert_eq!(
        c["resources"],
        json!({"limits": {"memory": "128Mi"}, "requests": {"memory": "128Mi"}})
    );
    let init = &spec["initContainers"][0];
    assert_eq!(init["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        init["resources"]["requests"],
        json!({"memory": "1Gi", "cpu": "1"})
    );
    let v = &spec["volumes"];
    assert_eq!(v[0], json!({"name": "a", "emptyDir": {}}));
    assert_eq!(v[1]["secret"]["defaultMode"], 420);
    assert_eq!(v[2]["configMap"]["defaultMode"], 256);
    assert_eq!(v[3]["hostPath"], json!({"path": "/var", "type": ""}));
    assert_eq!(v[4]["projected"]["defaultMode"], 420);
    assert_eq!(
        v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    assert_eq!(
        v[4]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(
        pod["status"],
        json!({"podIP": "10.0.0.5", "phase": "Pending", "podIPs": [{"ip": "10.0.0.5"}]})
    );
}

#[test]
fn image_pull_policy_rules() {
    for (image, policy) in [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("docker.io/library/nginx", "Always"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v1", "IfNotPresent"),
        (
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "IfNotPresent",
        ),
        (
            "nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "Always",
        ),
        ("NGINX", "IfNotPresent"),
        ("", "IfNotPresent"),
        ("nginx:", "IfNotPresent"),
        ("registry.k8s.io/pause:3.10", "IfNotPresent"),
    ] {
        assert_eq!(default_image_pull_policy(image), policy, "{image}");
    }
}

#[test]
fn deployment_matches_kubernetes() {
    let d = defaulted(
        "apps/v1",
        "Deployment",
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}}),
    );
    assert_eq!(
        d["spec"],
        json!({"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {}}],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
                    "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler"}},
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600})
    );
    let recreate = defaulted(
        "apps/v1",
        "Deployment",
        json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}}),
    );
    assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(recreate["spec"]["replicas"], 0);

    let ds = defaulted(
        "apps/v1",
        "DaemonSet",
        json!({"spec": {"template": {"spec": {"containers": []}}}}),
    );
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    let rs = defaulted("apps/v1", "ReplicaSet", json!({"spec": {}}));
    assert_eq!(rs["spec"]["replicas"], 1);
}

#[test]
fn service_matches_kubernetes() {
    let svc = defaulted(
        "v1",
        "Service",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"name": "x", "port": 81, "targetPort": "http"}]}}),
    );
    assert_eq!(
        svc["spec"],
        json!({"selector": {"app": "web"},
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                      {"name": "x", "port": 81, "targetPort": "http", "protocol": "TCP"}],
            "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster",
            "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]})
    );
    let np = defaulted(
        "v1",
        "Service",
        json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 443, "nodePort": 30443}],
        "sessionAffinity": "ClientIP", "clusterIP": "10.96.0.10"}}),
    );
    assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(np["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        np["spec"]["sessionAffinityConfig"],
        json!({"clientIP": {"timeoutSeconds": 10800}})
    );
    assert_eq!(np["spec"]["clusterIPs"], json!(["10.96.0.10"]));
    let headless = defaulted(
        "v1",
        "Service",
        json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    );
    assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
    let ext = defaulted(
        "v1",
        "Service",
        json!({"spec": {"type": "ExternalName", "externalName": "example.com"}}),
    );
    assert!(ext["spec"].get("ipFamilies").is_none());
    assert!(ext["spec"].get("internalTrafficPolicy").is_none());
}

#[test]
fn namespace_secret_and_others() {
    let ns = defaulted(
        "v1",
        "Namespace",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}}),
    );
    assert_eq!(
        ns["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "dev"})
    );
    assert_eq!(ns["spec"], json!({"finalizers": ["kubernetes"]}));
    assert_eq!(ns["status"], json!({"phase": "Active"}));

    let secret = defaulted(
        "v1",
        "Secret",
        json!({"metadata": {"name": "s"}, "data": {"a": "YQ=="},
        "stringData": {"b": "hello", "a": "x"}}),
    );
    assert_eq!(
        secret,
        json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "aGVsbG8="}, "type": "Opaque"})
    );

    let node = defaulted("v1", "Node", json!({"status": {"capacity": {"cpu": "4"}}}));
    assert_eq!(node["status"]["allocatable"], json!({"cpu": "4"}));

    let slice = defaulted(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        json!({"ports": [{"port": 80}]}),
    );
    assert_eq!(
        slice["ports"],
        json!([{"port": 80, "name": "", "protocol": "TCP"}])
    );
    let ep = defaulted(
        "v1",
        "Endpoints",
        json!({"subsets": [{"ports": [{"port": 80}]}]}),
    );
    assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
}

/// What `kubectl create deployment web --image=nginx` sends, through the whole pipeline.
#[test]
fn kubectl_create_deployment_end_to_end() {
    let deployments = find_by_kind("apps/v1", "Deployment").unwrap();
    let body = json!({"kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": null, "labels": {"app": "web"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}},
            "strategy": {}},
        "status": {}});
    let normalized = crate::schema::normalize(deployments, &body).unwrap();
    assert!(normalized.unknown_fields.is_empty());
    let mut obj = normalized.value;
    apply_defaults(deployments, &mut obj);
    assert!(crate::validation::validate_create(deployments, &obj).is_empty());
    assert_eq!(
        obj,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"labels": {"app": "web"}, "name": "web", "namespace": "default"},
            "spec": {
                "progressDeadlineSeconds": 600,
                "replicas": 1,
                "revisionHistoryLimit": 10,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                "template": {
                    "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"image": "nginx", "imagePullPolicy": "Always", "name": "nginx", "resources": {},
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                        "dnsPolicy": "ClusterFirst",
                        "restartPolicy": "Always",
                        "schedulerName": "default-scheduler",
                        "securityContext": {},
                        "terminationGracePeriodSeconds": 30
                    }
                }
            },
            "status": {}})
    );
}

#[test]
fn odd_shapes_do_not_panic() {
    for kind in crate::registry::RESOURCES {
        for v in [
            json!(null),
            json!([]),
            json!("x"),
            json!({"spec": 1, "status": [], "metadata": "m"}),
            json!({"spec": {"containers": "x", "volumes": [1, null, {"name": 2}], "template": {"spec": {"containers": [null]}},
                "ports": {"a": 1}, "strategy": 3, "updateStrategy": {"type": 7}}, "stringData": {"a": 1}, "subsets": [{"ports": 1}]}),
        ] {
            let mut v = v;
            apply_defaults(kind, &mut v);
        }
    }
}
