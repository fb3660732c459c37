//! The `system:controller:<name>` ClusterRoles of the controllers cairn runs (upstream's
//! `controller_policy.go`), each bound to the service account `kube-system/<name>`.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};

use super::{cluster_binding, cluster_role, events_rule, named, rule, service_account, READ};

/// Prefix of every controller role's name.
pub const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

const APPS: &str = "apps";
const EXTENSIONS: &str = "extensions";
const BATCH: &str = "batch";
const CERTS: &str = "certificates.k8s.io";

/// `(controller name, rules)`; the service account is the controller name.
fn controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    let mut all = workload_controllers();
    all.extend(cluster_controllers());
    all.extend(volume_controllers());
    all
}

fn workload_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    let mut all = cronjob_daemonset_deployment_controllers();
    all.extend(disruption_hpa_and_job_controllers());
    all.extend(replicaset_statefulset_ttl_controllers());
    all
}

fn cronjob_daemonset_deployment_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "cronjob-controller",
            vec![
                rule(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(&["update"], &[BATCH], &["cronjobs/status"]),
                rule(&["update"], &[BATCH], &["cronjobs/finalizers"]),
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(READ, &[EXTENSIONS, APPS], &["daemonsets"]),
                rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/status"]),
                rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/finalizers"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(&["create"], &[""], &["pods/binding"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                events_rule(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                rule(&["update"], &[EXTENSIONS, APPS], &["deployments/status"]),
                rule(
                    &["update"],
                    &[EXTENSIONS, APPS],
                    &["deployments/finalizers"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(&["get", "list", "watch", "update"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
    ]
}

fn disruption_hpa_and_job_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(READ, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(
                    &["update"],
                    &["autoscaling"],
                    &["horizontalpodautoscalers/status"],
                ),
                rule(&["get", "update"], &["*"], &["*/scale"]),
                rule(&["list"], &[""], &["pods"]),
                rule(&["list"], &["metrics.k8s.io"], &["pods"]),
                rule(&["get", "list"], &["custom.metrics.k8s.io"], &["*"]),
                rule(&["get", "list"], &["external.metrics.k8s.io"], &["*"]),
                events_rule(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(READ, &[EXTENSIONS, APPS], &["deployments"]),
                rule(READ, &[APPS, EXTENSIONS], &["replicasets"]),
                rule(READ, &[""], &["replicationcontrollers"]),
                rule(READ, &["policy"], &["poddisruptionbudgets"]),
                rule(READ, &[APPS], &["statefulsets"]),
                rule(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                rule(&["get"], &["*"], &["*/scale"]),
                events_rule(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(&["update"], &[BATCH], &["jobs/status"]),
                rule(&["update"], &[BATCH], &["jobs/finalizers"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
    ]
}

/// ReplicaSets, ReplicationControllers, StatefulSets, finished-Job TTLs.
fn replicaset_statefulset_ttl_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "replicaset-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(&["update"], &[APPS, EXTENSIONS], &["replicasets/status"]),
                rule(
                    &["update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets/finalizers"],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["replicationcontrollers"],
                ),
                rule(&["update"], &[""], &["replicationcontrollers/status"]),
                rule(&["update"], &[""], &["replicationcontrollers/finalizers"]),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&["list", "watch"], &[""], &["pods"]),
                rule(READ, &[APPS], &["statefulsets"]),
                rule(&["update"], &[APPS], &["statefulsets/status"]),
                rule(&["update"], &[APPS], &["statefulsets/finalizers"]),
                rule(
                    &["get", "create", "delete", "update", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                rule(
                    &["get", "create", "list", "watch"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update", "delete"], &[""], &["persistentvolumeclaims"]),
                rule(&["update"], &[""], &["pods/finalizers"]),
                events_rule(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[BATCH], &["jobs"]),
                events_rule(),
            ],
        ),
    ]
}

fn cluster_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    let mut all = aggregation_and_endpoint_controllers();
    all.extend(lifecycle_controllers());
    all.extend(certificate_controllers());
    all
}

/// ClusterRole aggregation; Endpoints and EndpointSlices.
fn aggregation_and_endpoint_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "clusterrole-aggregation-controller",
            vec![
                // It rewrites any ClusterRole's rules, so it must be able to escalate.
                rule(
                    &["escalate", "get", "list", "watch", "update", "patch"],
                    &["rbac.authorization.k8s.io"],
                    &["clusterroles"],
                ),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(READ, &[""], &["services", "pods"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[""],
                    &["endpoints"],
                ),
                rule(&["create"], &[""], &["endpoints/restricted"]),
                events_rule(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(READ, &[""], &["services", "pods", "nodes"]),
                rule(&["update"], &[""], &["services/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
                events_rule(),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(READ, &[""], &["services", "endpoints"]),
                rule(&["update"], &[""], &["services/finalizers"]),
                rule(&["update"], &[""], &["endpoints/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
                events_rule(),
            ],
        ),
    ]
}

/// Garbage collection, namespaces, nodes, quota, service accounts.
fn lifecycle_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[""], &["namespaces"]),
                rule(
                    &["update"],
                    &[""],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[""],
                    &["nodes"],
                ),
                rule(&["patch", "update"], &[""], &["nodes/status"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                rule(&["list", "watch", "get", "delete"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                rule(READ, &[""], &["nodes"]),
                rule(&["patch"], &[""], &["pods/status"]),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["update"], &[""], &["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"], &[""], &["serviceaccounts"]),
                events_rule(),
            ],
        ),
    ]
}

/// CSR approval and signing; the root CA ConfigMap.
fn certificate_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "certificate-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CERTS],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["update"],
                    &[CERTS],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                named(
                    &["approve"],
                    &[CERTS],
                    &["signers"],
                    &["kubernetes.io/kube-apiserver-client-kubelet"],
                ),
                named(
                    &["sign"],
                    &[CERTS],
                    &["signers"],
                    &[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ],
                ),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[""], &["configmaps"]),
                events_rule(),
            ],
        ),
    ]
}

fn volume_controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            "persistent-volume-binder",
            vec![
                rule(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(&["update"], &[""], &["persistentvolumes/status"]),
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[""], &["persistentvolumeclaims/status"]),
                rule(
                    &["list", "watch", "get", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                events_rule(),
                // The recycler watches its pod's events.
                rule(&["watch"], &[""], &["events"]),
                rule(&["get"], &[""], &["services"]),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["list", "watch", "get"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumes"],
                ),
                events_rule(),
            ],
        ),
    ]
}

/// The controllers' ClusterRoles, by name as upstream lists them.
pub fn controller_roles() -> Vec<ClusterRole> {
    let mut roles: Vec<ClusterRole> = controllers()
        .into_iter()
        .map(|(name, rules)| cluster_role(&format!("{CONTROLLER_ROLE_PREFIX}{name}"), rules))
        .collect();
    roles.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    roles
}

/// Each controller role bound to the service account `kube-system/<controller>`.
pub fn controller_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut names: Vec<&str> = controllers().into_iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    names
        .into_iter()
        .map(|n| {
            cluster_binding(
                &format!("{CONTROLLER_ROLE_PREFIX}{n}"),
                vec![service_account("kube-system", n)],
            )
        })
        .collect()
}
