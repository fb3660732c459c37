//! cairn's own additions to the bootstrap policy, for components that upstream splits
//! into several identities and cairn runs as one:
//!
//! - `cairn:controller-manager` (user `system:kube-controller-manager`): the in-process
//!   controllers share one client, so one role holds the union of the
//!   `system:controller:*` roles of the controllers cairn runs (upstream runs each under
//!   its own ServiceAccount with `--use-service-account-credentials`), plus what
//!   ServiceLB needs.
//! - `cairn:node` (group `system:nodes`): what the agent's embedded components need
//!   beyond the kubelet's rights, which the Node authorizer grants (upstream runs these
//!   as CoreDNS's, flannel's and the local-path provisioner's ServiceAccounts): cluster
//!   DNS reads Services, EndpointSlices and Namespaces and publishes the node in
//!   `kube-dns`'s EndpointSlices; the network controller reads every Node for its
//!   routes; the provisioner lists claims and manages PersistentVolumes. Secrets and
//!   ConfigMaps are not here: a node reads only those of its own pods, and
//!   `kube-system/extension-apiserver-authentication` (the client CA its port checks
//!   client certificates against) through upstream's Role for reading it.
//! - `cairn:network-policy` (user `system:kube-proxy`): cairn-proxy enforces
//!   NetworkPolicy on its node, and reads every policy, Pod and Namespace for it (peers
//!   are pods of any node), as kube-router's and Calico's ServiceAccounts do. Not the
//!   node's identity: the Node authorizer keeps a node to its own pods.
//! - `cairn:ingress` (user `system:kube-proxy`): cairn-proxy's Ingress data plane
//!   reads every Ingress, IngressClass, Gateway API object (GatewayClass, Gateway,
//!   HTTPRoute, ReferenceGrant), Namespace and Secret (the `kubernetes.io/tls` ones it
//!   serves; RBAC cannot narrow a list by type), as ingress-nginx's and Traefik's
//!   ServiceAccounts do from a DaemonSet on every node. Delete the binding, and run the
//!   proxies with `--ingress=false`, to keep Secrets from nodes' proxies.
//! - `cairn:certificatesigningrequests:kubeproxyclient` (group `system:nodes`): a
//!   node may have a `system:kube-proxy` client certificate approved for its proxy (the
//!   approver asks for `create` on `certificatesigningrequests/kubeproxyclient`). This
//!   is what upstream grants in effect: a node's kubelet may request the token of any
//!   ServiceAccount a pod bound to it runs as, kube-proxy's and the policy agent's
//!   DaemonSet pods among them; here the node's own identity stays confined.
//! - `cairn:kube-apiserver-kubelet-client`: the API server's client certificate for the
//!   agents' ports gets `system:kubelet-api-admin` (kubeadm binds its
//!   `kube-apiserver-kubelet-client` the same way).

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, Subject,
};

use super::{cluster_binding, cluster_role, group, rule, user};

pub const CONTROLLER_MANAGER_ROLE: &str = "cairn:controller-manager";
pub const NODE_ROLE: &str = "cairn:node";
pub const NETWORK_POLICY_ROLE: &str = "cairn:network-policy";
pub const INGRESS_ROLE: &str = "cairn:ingress";
pub const KUBE_PROXY_CLIENT_ROLE: &str = "cairn:certificatesigningrequests:kubeproxyclient";
/// The user of the API server's client certificate for the agents' ports.
pub const KUBELET_API_CLIENT: &str = "kube-apiserver-kubelet-client";

fn node_extras() -> Vec<PolicyRule> {
    let read = ["get", "list", "watch"];
    vec![
        rule(&read, &[""], &["services", "namespaces", "endpoints"]),
        rule(
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
            &["discovery.k8s.io"],
            &["endpointslices"],
        ),
        rule(
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
            &[""],
            &["persistentvolumes"],
        ),
        rule(
            &["get", "list", "watch", "update", "patch"],
            &[""],
            &["persistentvolumeclaims"],
        ),
        rule(&read, &["storage.k8s.io"], &["storageclasses", "csinodes"]),
        rule(&read, &[""], &["nodes"]),
    ]
}

fn controller_extras() -> Vec<PolicyRule> {
    vec![
        rule(
            &["get", "list", "watch", "update", "patch"],
            &[""],
            &["services", "services/status"],
        ),
        rule(&["get", "list", "watch"], &[""], &["nodes", "pods"]),
        // The Ingress controller's status addresses and events.
        rule(
            &["get", "list", "watch"],
            &["networking.k8s.io"],
            &["ingresses", "ingressclasses"],
        ),
        rule(
            &["update", "patch"],
            &["networking.k8s.io"],
            &["ingresses/status"],
        ),
        // The Gateway controller's conditions (the Gateway API kinds are CRDs).
        rule(&["get", "list", "watch"], &[GATEWAY_GROUP], &GATEWAY_KINDS),
        rule(
            &["update", "patch"],
            &[GATEWAY_GROUP],
            &[
                "gatewayclasses/status",
                "gateways/status",
                "httproutes/status",
            ],
        ),
        rule(&["get", "list", "watch"], &[""], &["namespaces", "secrets"]),
    ]
}

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
/// What both halves of the Gateway controller read.
const GATEWAY_KINDS: [&str; 4] = [
    "gatewayclasses",
    "gateways",
    "httproutes",
    "referencegrants",
];

/// The roles, built from the bootstrap roles they extend.
pub fn roles(controller_roles: &[ClusterRole]) -> Vec<ClusterRole> {
    let mut controllers: Vec<PolicyRule> = controller_roles
        .iter()
        .flat_map(|r| r.rules.clone().unwrap_or_default())
        .collect();
    controllers.extend(controller_extras());
    vec![
        cluster_role(CONTROLLER_MANAGER_ROLE, controllers),
        cluster_role(NODE_ROLE, node_extras()),
        cluster_role(
            KUBE_PROXY_CLIENT_ROLE,
            vec![rule(
                &["create"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests/kubeproxyclient"],
            )],
        ),
        cluster_role(
            NETWORK_POLICY_ROLE,
            vec![
                rule(&["get", "list", "watch"], &[""], &["pods", "namespaces"]),
                rule(
                    &["get", "list", "watch"],
                    &["networking.k8s.io"],
                    &["networkpolicies"],
                ),
            ],
        ),
        cluster_role(
            INGRESS_ROLE,
            vec![
                rule(&["get", "list", "watch"], &[""], &["secrets"]),
                rule(
                    &["get", "list", "watch"],
                    &["networking.k8s.io"],
                    &["ingresses", "ingressclasses"],
                ),
                rule(&["get", "list", "watch"], &[GATEWAY_GROUP], &GATEWAY_KINDS),
                // allowedRoutes selects namespaces by their labels.
                rule(&["get", "list", "watch"], &[""], &["namespaces"]),
            ],
        ),
    ]
}

/// The group bootstrap tokens authenticate in.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";

/// A binding named `name` of the ClusterRole `role` (kubeadm's join bindings).
fn binding_of(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    let mut b = cluster_binding(name, subjects);
    b.role_ref.name = role.to_string();
    b
}

/// kubeadm's join bindings under cairn's names: bootstrappers may ask for a node
/// client certificate and have it approved; nodes may renew their own.
fn join_bindings() -> Vec<ClusterRoleBinding> {
    let csr_role =
        |kind: &str| format!("system:certificates.k8s.io:certificatesigningrequests:{kind}");
    vec![
        binding_of(
            "cairn:kubelet-bootstrap",
            "system:node-bootstrapper",
            vec![group(BOOTSTRAPPERS)],
        ),
        binding_of(
            "cairn:node-autoapprove-bootstrap",
            &csr_role("nodeclient"),
            vec![group(BOOTSTRAPPERS)],
        ),
        binding_of(
            "cairn:node-autoapprove-certificate-rotation",
            &csr_role("selfnodeclient"),
            vec![group(crate::user::NODES)],
        ),
        binding_of(
            "cairn:node-autoapprove-kube-proxy",
            KUBE_PROXY_CLIENT_ROLE,
            vec![group(crate::user::NODES)],
        ),
    ]
}

pub fn bindings() -> Vec<ClusterRoleBinding> {
    let mut all = join_bindings();
    all.extend([
        cluster_binding(
            CONTROLLER_MANAGER_ROLE,
            vec![user("system:kube-controller-manager")],
        ),
        cluster_binding(NODE_ROLE, vec![group(crate::user::NODES)]),
        cluster_binding(NETWORK_POLICY_ROLE, vec![user("system:kube-proxy")]),
        cluster_binding(INGRESS_ROLE, vec![user("system:kube-proxy")]),
        binding_of(
            "cairn:kube-apiserver-kubelet-client",
            "system:kubelet-api-admin",
            vec![user(KUBELET_API_CLIENT)],
        ),
    ]);
    all
}

/// Nodes read the client CA the API server publishes for servers that check client
/// certificates (their own port).
pub fn role_bindings() -> Vec<RoleBinding> {
    vec![super::namespaced::binding(
        "kube-system",
        "cairn:node-extension-apiserver-authentication-reader",
        "extension-apiserver-authentication-reader",
        vec![group(crate::user::NODES)],
    )]
}
