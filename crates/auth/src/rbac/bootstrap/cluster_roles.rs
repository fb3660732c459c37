//! Upstream's `ClusterRoles()`: the user-facing roles, their aggregation sources and
//! the system components' roles.

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{cluster_role, events_rule, meta, named, rule, urls, READ, READ_WRITE, WRITE};

const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

const CERTS: &str = "certificates.k8s.io";
const STORAGE: &str = "storage.k8s.io";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";

/// A role with no rules of its own that gathers those labelled `label: "true"`.
fn aggregated(name: &str, label: &str, own_labels: &[(&str, &str)]) -> ClusterRole {
    let selector = LabelSelector {
        match_labels: Some([(label.to_string(), "true".to_string())].into()),
        match_expressions: None,
    };
    ClusterRole {
        metadata: meta(name, None, own_labels),
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![selector]),
        }),
        rules: None,
    }
}

/// A role feeding an aggregated one through `label`.
fn aggregate_to(name: &str, label: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, None, &[(label, "true")]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles = vec![
        cluster_role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            vec![urls(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        cluster_role(
            "system:monitoring",
            vec![urls(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &[AUTHZ],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(&["create"], &[AUTHN], &["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            vec![urls(
                &["get"],
                &["/livez", "/readyz", "/healthz", "/version", "/version/"],
            )],
        ),
    ];
    roles.extend(user_facing_roles());
    roles.extend(component_roles());
    roles.extend(certificate_roles());
    roles
}

/// `admin`, `edit`, `view` and the roles they aggregate.
fn user_facing_roles() -> Vec<ClusterRole> {
    vec![
        aggregated("admin", AGGREGATE_TO_ADMIN, &[]),
        aggregated("edit", AGGREGATE_TO_EDIT, &[(AGGREGATE_TO_ADMIN, "true")]),
        aggregated("view", AGGREGATE_TO_VIEW, &[(AGGREGATE_TO_EDIT, "true")]),
        aggregate_to(
            "system:aggregate-to-admin",
            AGGREGATE_TO_ADMIN,
            vec![
                rule(&["create"], &[AUTHZ], &["localsubjectaccessreviews"]),
                rule(
                    READ_WRITE,
                    &["rbac.authorization.k8s.io"],
                    &["roles", "rolebindings"],
                ),
            ],
        ),
        aggregate_to(
            "system:aggregate-to-edit",
            AGGREGATE_TO_EDIT,
            aggregate_to_edit(),
        ),
        aggregate_to(
            "system:aggregate-to-view",
            AGGREGATE_TO_VIEW,
            aggregate_to_view(),
        ),
        metrics_reader(),
    ]
}

/// metrics-server's `system:aggregated-metrics-reader`: cairn serves `metrics.k8s.io`
/// itself, so the role its manifest adds is bootstrapped, feeding `view`, `edit` and
/// `admin` (what lets a `view` user run `kubectl top`).
fn metrics_reader() -> ClusterRole {
    let labels = [
        (AGGREGATE_TO_VIEW, "true"),
        (AGGREGATE_TO_EDIT, "true"),
        (AGGREGATE_TO_ADMIN, "true"),
    ];
    ClusterRole {
        metadata: meta("system:aggregated-metrics-reader", None, &labels),
        rules: Some(vec![rule(READ, &["metrics.k8s.io"], &["pods", "nodes"])]),
        aggregation_rule: None,
    }
}

/// `edit`'s own rules: write workloads, read secrets, exec into pods; never RBAC.
fn aggregate_to_edit() -> Vec<PolicyRule> {
    let mut all = edit_core();
    all.extend(edit_groups());
    all
}

/// The core group.
fn edit_core() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(
            WRITE,
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
    ]
}

/// Workload and other groups.
fn edit_groups() -> Vec<PolicyRule> {
    vec![
        rule(
            WRITE,
            &["apps"],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
        rule(
            WRITE,
            &["extensions"],
            &[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(READ_WRITE, &[COORDINATION], &["leases"]),
    ]
}

/// `view`'s rules: read everything in a namespace but secrets and RBAC.
fn aggregate_to_view() -> Vec<PolicyRule> {
    let mut all = view_core();
    all.extend(view_groups());
    all
}

/// The core group.
fn view_core() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        // Read access to namespaces in a namespace: the one namespace itself.
        rule(READ, &[""], &["namespaces"]),
    ]
}

/// Workload and other groups.
fn view_groups() -> Vec<PolicyRule> {
    vec![
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            &["extensions"],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
    ]
}

/// The control plane's and node components' roles.
fn component_roles() -> Vec<ClusterRole> {
    let mut all = node_component_roles();
    all.extend(control_plane_roles());
    all
}

/// Nodes, kube-proxy, kubelet clients, node bootstrap, delegated authentication.
fn node_component_roles() -> Vec<ClusterRole> {
    vec![
        cluster_role("system:node", node_rules()),
        cluster_role(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"], &[""], &["services", "endpoints"]),
                rule(READ, &[""], &["nodes"]),
                events_rule(),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        cluster_role(
            "system:kubelet-api-admin",
            vec![
                rule(READ, &[""], &["nodes"]),
                rule(&["proxy"], &[""], &["nodes"]),
                rule(
                    &["*"],
                    &[""],
                    &["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"],
                ),
            ],
        ),
        cluster_role(
            "system:node-bootstrapper",
            vec![rule(
                &["create", "get", "list", "watch"],
                &[CERTS],
                &["certificatesigningrequests"],
            )],
        ),
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["create"], &[AUTHN], &["tokenreviews"]),
                rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
            ],
        ),
    ]
}

/// Control-plane components, DNS, volume provisioning, node problem detection.
fn control_plane_roles() -> Vec<ClusterRole> {
    vec![
        cluster_role(
            "system:kube-aggregator",
            vec![rule(READ, &[""], &["services", "endpoints"])],
        ),
        cluster_role("system:kube-controller-manager", controller_manager_rules()),
        cluster_role(
            "system:kube-dns",
            vec![rule(&["list", "watch"], &[""], &["endpoints", "services"])],
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            vec![
                rule(
                    &["get", "list", "watch", "create", "delete"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(READ, &[STORAGE], &["storageclasses"]),
                rule(&["watch"], &[""], &["events"]),
                events_rule(),
            ],
        ),
        cluster_role(
            "system:node-problem-detector",
            vec![
                rule(&["get"], &[""], &["nodes"]),
                rule(&["patch"], &[""], &["nodes/status"]),
                events_rule(),
            ],
        ),
        cluster_role("system:kube-scheduler", scheduler_rules()),
        cluster_role(
            "system:volume-scheduler",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(READ, &[STORAGE], &["storageclasses"]),
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![urls(
                &["get"],
                &["/.well-known/openid-configuration", "/openid/v1/jwks"],
            )],
        ),
    ]
}

/// `system:node`: kept for clusters still binding it; the Node authorizer grants
/// nodes their access, with these rules for what it does not subdivide.
pub fn node_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["create"], &[AUTHN], &["tokenreviews"]),
        rule(
            &["create"],
            &[AUTHZ],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        rule(READ, &[""], &["services"]),
        rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
        rule(&["update", "patch"], &[""], &["nodes/status"]),
        rule(&["update", "patch"], &[""], &["nodes"]),
        rule(&["create", "update", "patch"], &[""], &["events"]),
        rule(READ, &[""], &["pods"]),
        rule(&["create", "delete"], &[""], &["pods"]),
        rule(&["update", "patch"], &[""], &["pods/status"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(READ, &[""], &["secrets", "configmaps"]),
        rule(
            &["get"],
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], &[""], &["endpoints"]),
        rule(
            &["create", "get", "list", "watch"],
            &[CERTS],
            &["certificatesigningrequests"],
        ),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &[COORDINATION],
            &["leases"],
        ),
        rule(&["get"], &[STORAGE], &["volumeattachments"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            &["get", "update", "patch"],
            &[""],
            &["persistentvolumeclaims/status"],
        ),
        rule(READ, &[STORAGE], &["csidrivers"]),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &[STORAGE],
            &["csinodes"],
        ),
        rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
    ]
}

fn controller_manager_rules() -> Vec<PolicyRule> {
    vec![
        events_rule(),
        rule(&["create"], &[COORDINATION], &["leases"]),
        named(
            &["get", "update"],
            &[COORDINATION],
            &["leases"],
            &["kube-controller-manager"],
        ),
        rule(&["create"], &[""], &["secrets", "serviceaccounts"]),
        rule(&["delete"], &[""], &["secrets"]),
        rule(
            &["get"],
            &[""],
            &["namespaces", "secrets", "serviceaccounts", "configmaps"],
        ),
        rule(&["update"], &[""], &["secrets", "serviceaccounts"]),
        rule(&["create"], &[AUTHN], &["tokenreviews"]),
        rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
        rule(&["list", "watch"], &["*"], &["*"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
    ]
}

fn scheduler_rules() -> Vec<PolicyRule> {
    vec![
        events_rule(),
        rule(&["create"], &[COORDINATION], &["leases"]),
        named(
            &["get", "update"],
            &[COORDINATION],
            &["leases"],
            &["kube-scheduler"],
        ),
        rule(READ, &[""], &["nodes"]),
        rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
        rule(&["create"], &[""], &["pods/binding", "bindings"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(READ, &[""], &["replicationcontrollers", "services"]),
        rule(READ, &["apps", "extensions"], &["replicasets"]),
        rule(READ, &["apps"], &["statefulsets"]),
        rule(READ, &["policy"], &["poddisruptionbudgets"]),
        rule(
            READ,
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["create"], &[AUTHN], &["tokenreviews"]),
        rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
        rule(READ, &[STORAGE], &["csinodes"]),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &[STORAGE], &["csidrivers"]),
        rule(READ, &[STORAGE], &["csistoragecapacities"]),
    ]
}

/// CSR creation for nodes and the approvers of the built-in signers.
fn certificate_roles() -> Vec<ClusterRole> {
    let approver = |name: &str, signer: &str| {
        cluster_role(
            name,
            vec![named(&["approve"], &[CERTS], &["signers"], &[signer])],
        )
    };
    vec![
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        approver(
            "system:certificates.k8s.io:legacy-unknown-approver",
            "kubernetes.io/legacy-unknown",
        ),
        approver(
            "system:certificates.k8s.io:kubelet-serving-approver",
            "kubernetes.io/kubelet-serving",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "kubernetes.io/kube-apiserver-client",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
    ]
}
