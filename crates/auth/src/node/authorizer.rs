//! Upstream's Node authorizer (`plugin/pkg/auth/authorizer/node/node_authorizer.go`,
//! with `AuthorizeNodeWithSelectors` on, its 1.32+ default): a kubelet reads only the
//! objects its pods use. It decides for `system:node:<name>` users in `system:nodes`
//! and has no opinion on anyone else, nor on resources it does not subdivide (RBAC
//! decides those).

use crate::attributes::{Attributes, Decision};
use crate::gofmt::quote;
use crate::node::graph::{Kind, NodeGraph};
use crate::rbac::rule::rules_allow;
use crate::user::{NODES, NODE_USER_PREFIX};
use k8s_openapi::api::rbac::v1::PolicyRule;

/// The namespace of node heartbeats (`kube-node-lease`).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is, upstream's `NodeIdentity`: `None` for non-nodes, `Some("")`
/// for a `system:node:` user whose name is missing.
pub fn node_identity(user: &crate::UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_USER_PREFIX)?;
    user.in_group(NODES).then_some(name)
}

/// Upstream's whole Node authorizer: the resources it subdivides by the graph
/// ([`authorize_with_field_selector`]), everything else a node asks by the static
/// `node_rules` (upstream's `system:node` rules, [`crate::rbac::bootstrap::node_rules`]).
pub fn decide(
    attrs: &Attributes<'_>,
    field_selector: &str,
    graph: &NodeGraph,
    node_rules: &[PolicyRule],
) -> Decision {
    let decision = authorize_with_field_selector(attrs, field_selector, graph);
    if decision.is_allowed() || subdivides(attrs) {
        return decision;
    }
    match node_identity(attrs.user) {
        Some(node) if !node.is_empty() && rules_allow(attrs, node_rules) => allow(),
        _ => decision,
    }
}

/// Whether the graph rules decide this request (the static rules never widen them).
pub fn subdivides(attrs: &Attributes<'_>) -> bool {
    attrs.is_resource_request()
        && matches!(
            (attrs.api_group, attrs.resource),
            (
                "",
                "secrets"
                    | "configmaps"
                    | "persistentvolumeclaims"
                    | "persistentvolumes"
                    | "serviceaccounts"
                    | "nodes"
                    | "pods"
            ) | ("resource.k8s.io", "resourceclaims" | "resourceslices")
                | ("storage.k8s.io", "volumeattachments" | "csinodes")
                | ("coordination.k8s.io", "leases")
        )
}

/// [`authorize_with_field_selector`] without a field selector: list/watch of pods and
/// ResourceSlices then get no opinion here.
pub fn authorize(attrs: &Attributes<'_>, graph: &NodeGraph) -> Decision {
    authorize_with_field_selector(attrs, "", graph)
}

/// Decides a node's request. `field_selector` is the request's raw `fieldSelector`
/// (`spec.nodeName=n1,...`), which scopes a node's pod and ResourceSlice lists.
/// Secrets and ConfigMaps are listed and watched by name: the API server's request
/// info puts a `metadata.name=` selector's value in `attrs.name`, as upstream.
pub fn authorize_with_field_selector(
    attrs: &Attributes<'_>,
    field_selector: &str,
    graph: &NodeGraph,
) -> Decision {
    let Some(node) = node_identity(attrs.user) else {
        return no_opinion("");
    };
    if node.is_empty() {
        let reason = format!("unknown node for user {}", quote(&attrs.user.username));
        return Decision::NoOpinion(reason);
    }
    if !attrs.is_resource_request() {
        return no_opinion("");
    }
    let cx = Cx {
        node,
        attrs,
        graph,
        selector: field_selector,
    };
    match (attrs.api_group, attrs.resource) {
        ("", "secrets") => cx.read_namespaced(Kind::Secret),
        ("", "configmaps") => cx.read_namespaced(Kind::ConfigMap),
        ("", "persistentvolumeclaims") if attrs.subresource == "status" => cx.status_update(),
        ("", "persistentvolumeclaims") => cx.get(Some(Kind::PersistentVolumeClaim)),
        ("", "persistentvolumes") => cx.get(Some(Kind::PersistentVolume)),
        // Not indexed here: upstream's graph would relate them through pods and
        // VolumeAttachments; without those edges the answer is "no relationship".
        ("resource.k8s.io", "resourceclaims") | ("storage.k8s.io", "volumeattachments") => {
            cx.get(None)
        }
        ("", "serviceaccounts") => cx.create_token(),
        ("coordination.k8s.io", "leases") => cx.lease(),
        ("storage.k8s.io", "csinodes") => cx.csinode(),
        ("resource.k8s.io", "resourceslices") => cx.resource_slice(),
        ("", "nodes") => cx.node_object(),
        ("", "pods") => cx.pod(),
        _ => no_opinion(""),
    }
}

fn no_opinion(reason: &str) -> Decision {
    Decision::NoOpinion(reason.to_string())
}

fn allow() -> Decision {
    Decision::Allow(String::new())
}

/// Whether a raw field selector requires `field` to equal `value` (`=` or `==`).
pub fn selects(field_selector: &str, field: &str, value: &str) -> bool {
    field_selector.split(',').any(|req| {
        let req = req.trim();
        let Some((k, v)) = req.split_once('=') else {
            return false;
        };
        if k.ends_with('!') {
            return false;
        }
        let v = v.strip_prefix('=').unwrap_or(v);
        k.trim() == field && v.trim() == value
    })
}

struct Cx<'a, 'b> {
    node: &'a str,
    attrs: &'a Attributes<'b>,
    graph: &'a NodeGraph,
    selector: &'a str,
}

impl Cx<'_, '_> {
    fn verb(&self) -> &str {
        self.attrs.verb
    }

    /// The graph lookup every relationship rule ends in. `None`: a kind not indexed.
    fn related(&self, kind: Option<Kind>) -> Decision {
        let a = self.attrs;
        if a.name.is_empty() {
            return no_opinion("No Object name found");
        }
        if kind.is_some_and(|k| self.graph.related(self.node, k, a.namespace, a.name)) {
            return allow();
        }
        let reason = format!(
            "no relationship found between node '{}' and this object",
            self.node
        );
        Decision::NoOpinion(reason)
    }

    fn read_namespaced(&self, kind: Kind) -> Decision {
        if !matches!(self.verb(), "get" | "list" | "watch") {
            return no_opinion("can only read resources of this type");
        }
        if !self.attrs.subresource.is_empty() {
            return no_opinion("cannot read subresource");
        }
        if self.attrs.namespace.is_empty() {
            return no_opinion("can only read namespaced object of this type");
        }
        self.related(Some(kind))
    }

    fn get(&self, kind: Option<Kind>) -> Decision {
        if self.verb() != "get" {
            return no_opinion("can only get individual resources of this type");
        }
        if !self.attrs.subresource.is_empty() {
            return no_opinion("cannot get subresource");
        }
        self.related(kind)
    }

    /// A PVC's status, which kubelets write after expanding a volume.
    fn status_update(&self) -> Decision {
        if !matches!(self.verb(), "update" | "patch") {
            return no_opinion("can only get/update/patch this type");
        }
        self.related(Some(Kind::PersistentVolumeClaim))
    }

    /// Upstream also binds the token to a pod on the node: NodeRestriction admission
    /// checks the TokenRequest's pod reference ([`crate::node::restriction`]).
    fn create_token(&self) -> Decision {
        if self.verb() != "create" || self.attrs.name.is_empty() {
            return no_opinion("can only create tokens for individual service accounts");
        }
        if self.attrs.subresource != "token" {
            return no_opinion("can only create token subresource of serviceaccount");
        }
        self.related(Some(Kind::ServiceAccount))
    }

    fn lease(&self) -> Decision {
        let verb = self.verb();
        if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
            return no_opinion("can only get, create, update, patch, or delete a node lease");
        }
        if self.attrs.namespace != NODE_LEASE_NAMESPACE {
            let reason = format!(
                "can only access leases in the {} system namespace",
                quote(NODE_LEASE_NAMESPACE)
            );
            return Decision::NoOpinion(reason);
        }
        // A create carries no name in the attributes; admission checks the object.
        if verb != "create" && self.attrs.name != self.node {
            return no_opinion(
                "can only access node lease with the same name as the requesting node",
            );
        }
        allow()
    }

    fn csinode(&self) -> Decision {
        let verb = self.verb();
        if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
            return no_opinion("can only get, create, update, patch, or delete a CSINode");
        }
        if !self.attrs.subresource.is_empty() {
            return no_opinion("cannot authorize CSINode subresources");
        }
        if verb != "create" && self.attrs.name != self.node {
            return no_opinion("can only access CSINode with the same name as the requesting node");
        }
        allow()
    }

    /// Slices are not indexed, so named access gets "no relationship"; creates are
    /// left to admission, lists need the node's own `spec.nodeName` selector.
    fn resource_slice(&self) -> Decision {
        if !self.attrs.subresource.is_empty() {
            return no_opinion("cannot authorize ResourceSlice subresources");
        }
        match self.verb() {
            "create" => allow(),
            "get" | "update" | "patch" | "delete" => self.related(None),
            "watch" | "list" | "deletecollection" => {
                if selects(self.selector, "spec.nodeName", self.node) {
                    allow()
                } else {
                    no_opinion(
                        "can only list/watch/deletecollection resourceslices with nodeName field selector",
                    )
                }
            }
            _ => no_opinion("only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection"),
        }
    }

    /// Writes are left to NodeRestriction; reads only of the node's own object, by
    /// name so a kubelet can look before it registers.
    fn node_object(&self) -> Decision {
        let (verb, name) = (self.verb(), self.attrs.name);
        match (self.attrs.subresource, verb) {
            ("", "create" | "update" | "patch") | ("status", "update" | "patch") => allow(),
            ("", "get" | "list" | "watch") if name == self.node => allow(),
            ("", "get" | "list" | "watch") if name.is_empty() => Decision::NoOpinion(format!(
                "node '{}' cannot read all nodes, only its own Node object",
                self.node
            )),
            ("", "get" | "list" | "watch") => Decision::NoOpinion(format!(
                "node '{}' cannot read '{name}', only its own Node object",
                self.node
            )),
            _ => no_opinion(""),
        }
    }

    /// Mirror-pod writes, status and evictions are left to NodeRestriction.
    fn pod(&self) -> Decision {
        match (self.attrs.subresource, self.verb()) {
            ("", "get") => self.get(Some(Kind::Pod)),
            ("", "list" | "watch") => {
                if selects(self.selector, "spec.nodeName", self.node) {
                    allow()
                } else if !self.attrs.name.is_empty() {
                    self.related(Some(Kind::Pod))
                } else {
                    no_opinion("can only list/watch pods with spec.nodeName field selector")
                }
            }
            ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => {
                allow()
            }
            _ => no_opinion(""),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::UserInfo;
    use serde_json::json;

    fn node(name: &str) -> UserInfo {
        UserInfo::new(format!("system:node:{name}"), vec![NODES.into()])
    }

    fn graph() -> NodeGraph {
        let mut g = NodeGraph::new();
        let pod = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"nodeName": "n1", "containers": [],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "s1"}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
                ]}
        }))
        .unwrap();
        g.upsert_pod(&pod);
        let pvc = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "data"}, "spec": {"volumeName": "pv1"}
        }))
        .unwrap();
        g.upsert_pvc(&pvc);
        g
    }

    /// (user, verb, group, resource, subresource, namespace, name, selector, allowed, reason)
    type Case<'a> = (
        &'a UserInfo,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        bool,
        &'a str,
    );

    #[test]
    fn table() {
        let g = graph();
        let n1 = node("n1");
        let n2 = node("n2");
        let bob = UserInfo::new("bob", vec![]);
        let spoof = UserInfo::new("system:node:n1", vec![]);
        let nameless = node("");
        let none = "no relationship found between node 'n1' and this object";
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            (&bob, "get", "", "secrets", "", "ns", "s1", "", false, ""),
            (&spoof, "get", "", "secrets", "", "ns", "s1", "", false, ""),
            (&nameless, "get", "", "secrets", "", "ns", "s1", "", false, "unknown node for user \"system:node:\""),
            (&n1, "get", "", "secrets", "", "ns", "s1", "", true, ""),
            (&n1, "watch", "", "secrets", "", "ns", "s1", "", true, ""),
            (&n1, "list", "", "secrets", "", "ns", "", "", false, "No Object name found"),
            (&n1, "get", "", "secrets", "", "ns", "s2", "", false, none),
            (&n2, "get", "", "secrets", "", "ns", "s1", "", false, "no relationship found between node 'n2' and this object"),
            (&n1, "update", "", "secrets", "", "ns", "s1", "", false, "can only read resources of this type"),
            (&n1, "get", "", "configmaps", "", "", "c", "", false, "can only read namespaced object of this type"),
            (&n1, "get", "", "persistentvolumeclaims", "", "ns", "data", "", true, ""),
            (&n1, "list", "", "persistentvolumeclaims", "", "ns", "data", "", false, "can only get individual resources of this type"),
            (&n1, "patch", "", "persistentvolumeclaims", "status", "ns", "data", "", true, ""),
            (&n1, "get", "", "persistentvolumes", "", "", "pv1", "", true, ""),
            (&n2, "get", "", "persistentvolumes", "", "", "pv1", "", false, "no relationship found between node 'n2' and this object"),
            (&n1, "get", "storage.k8s.io", "volumeattachments", "", "", "va", "", false, none),
            (&n1, "create", "", "serviceaccounts", "token", "ns", "default", "", true, ""),
            (&n1, "create", "", "serviceaccounts", "token", "ns", "other", "", false, none),
            (&n1, "get", "", "serviceaccounts", "", "ns", "default", "", false, "can only create tokens for individual service accounts"),
            (&n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1", "", true, ""),
            (&n1, "create", "coordination.k8s.io", "leases", "", "kube-node-lease", "", "", true, ""),
            (&n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2", "", false, "can only access node lease with the same name as the requesting node"),
            (&n1, "get", "coordination.k8s.io", "leases", "", "default", "n1", "", false, "can only access leases in the \"kube-node-lease\" system namespace"),
            (&n1, "list", "coordination.k8s.io", "leases", "", "kube-node-lease", "", "", false, "can only get, create, update, patch, or delete a node lease"),
            (&n1, "get", "storage.k8s.io", "csinodes", "", "", "n1", "", true, ""),
            (&n1, "get", "storage.k8s.io", "csinodes", "", "", "n2", "", false, "can only access CSINode with the same name as the requesting node"),
            (&n1, "create", "resource.k8s.io", "resourceslices", "", "", "", "", true, ""),
            (&n1, "list", "resource.k8s.io", "resourceslices", "", "", "", "spec.nodeName=n1", true, ""),
            (&n1, "watch", "resource.k8s.io", "resourceslices", "", "", "", "spec.nodeName=n2", false, "can only list/watch/deletecollection resourceslices with nodeName field selector"),
            (&n1, "get", "", "nodes", "", "", "n1", "", true, ""),
            (&n1, "list", "", "nodes", "", "", "", "", false, "node 'n1' cannot read all nodes, only its own Node object"),
            (&n1, "get", "", "nodes", "", "", "n2", "", false, "node 'n1' cannot read 'n2', only its own Node object"),
            (&n1, "patch", "", "nodes", "status", "", "n2", "", true, ""),
            (&n1, "delete", "", "nodes", "", "", "n1", "", false, ""),
            (&n1, "get", "", "pods", "", "ns", "web", "", true, ""),
            (&n2, "get", "", "pods", "", "ns", "web", "", false, "no relationship found between node 'n2' and this object"),
            (&n1, "watch", "", "pods", "", "", "", "spec.nodeName==n1", true, ""),
            (&n1, "list", "", "pods", "", "", "", "spec.nodeName!=n1", false, "can only list/watch pods with spec.nodeName field selector"),
            (&n1, "create", "", "pods", "eviction", "ns", "web", "", true, ""),
            (&n1, "update", "", "pods", "", "ns", "web", "", false, ""),
            (&n1, "create", "", "events", "", "ns", "", "", false, ""),
        ];
        for (u, verb, group, res, sub, ns, name, sel, allowed, reason) in cases {
            let a = Attributes::resource(u, verb, group, res)
                .subresource(sub)
                .namespace(ns)
                .name(name);
            let d = authorize_with_field_selector(&a, sel, &g);
            let case = format!("{} {verb} {res}/{sub} {ns}/{name} {sel}", u.username);
            assert_eq!(d.is_allowed(), allowed, "{case}: {d:?}");
            assert_eq!(d.reason(), reason, "{case}");
        }
    }

    #[test]
    fn non_resource_requests_get_no_opinion() {
        let n1 = node("n1");
        let a = Attributes::non_resource(&n1, "get", "/healthz");
        assert_eq!(authorize(&a, &NodeGraph::new()), no_opinion(""));
    }

    #[test]
    fn static_rules_decide_what_the_graph_does_not() {
        let (n1, g) = (node("n1"), graph());
        let rules = crate::rbac::bootstrap::node_rules();
        let decide_one = |verb, res: &str, ns, name| {
            let a = Attributes::resource(&n1, verb, "", res)
                .namespace(ns)
                .name(name);
            decide(&a, "", &g, &rules).is_allowed()
        };
        assert!(decide_one("create", "events", "ns", ""));
        assert!(decide_one("list", "services", "", ""));
        // Subdivided kinds never fall back, though system:node lists them.
        assert!(!decide_one("get", "secrets", "ns", "other"));
        assert!(decide_one("get", "secrets", "ns", "s1"));
        assert!(!decide_one("list", "pods", "", ""));
        assert!(!decide_one("delete", "services", "ns", "x"));
        let other = UserInfo::new("alice", vec![]);
        let a = Attributes::resource(&other, "create", "", "events").namespace("ns");
        assert!(!decide(&a, "", &g, &rules).is_allowed());
    }

    #[test]
    fn selector_parsing() {
        assert!(selects("a=b,spec.nodeName=n1", "spec.nodeName", "n1"));
        assert!(selects("spec.nodeName==n1", "spec.nodeName", "n1"));
        assert!(!selects("spec.nodeName!=n1", "spec.nodeName", "n1"));
        assert!(!selects("", "spec.nodeName", "n1"));
        assert!(!selects("spec.nodeName=n10", "spec.nodeName", "n1"));
    }
}
