//! Authorization: after authentication, every request is decided on what it asks for
//! ([`request_info`]). `--authorization-mode` is a comma list as upstream's:
//! `AlwaysAllow`, `Node` (upstream's Node authorizer over the graph [`sync`] keeps of
//! pods and PVCs), and `RBAC` over the Roles, ClusterRoles and bindings the server holds
//! (kept current from the watch cache by [`sync`]). Members of `system:masters` are
//! always allowed, before any mode (kube-apiserver's privileged-group authorizer).

pub mod impersonation;
pub mod request_info;
pub mod sync;

use cairn_api::status::Status;
use cairn_auth::node::{self, NodeGraph};
use cairn_auth::{forbidden_message, Attributes, Decision, RbacAuthorizer, UserInfo};
use k8s_openapi::api::rbac::v1::PolicyRule;
use parking_lot::RwLock;

pub use request_info::RequestInfo;

/// The authorizers `--authorization-mode` turns on. Node runs before RBAC (the order
/// only changes which reasons a 403 lists, as every mode allows or has no opinion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub always_allow: bool,
    pub node: bool,
    pub rbac: bool,
}

impl Mode {
    /// kubeadm's and cairn's default, `Node,RBAC`.
    pub const NODE_RBAC: Mode = Mode {
        always_allow: false,
        node: true,
        rbac: true,
    };

    /// Parses `--authorization-mode`.
    pub fn parse(flag: &str) -> Result<Mode, String> {
        let mut mode = Mode {
            always_allow: false,
            node: false,
            rbac: false,
        };
        for m in flag.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            match m {
                "AlwaysAllow" => mode.always_allow = true,
                "Node" => mode.node = true,
                "RBAC" => mode.rbac = true,
                other => {
                    return Err(format!(
                        "--authorization-mode: unknown mode {other:?} (AlwaysAllow, Node, RBAC)"
                    ))
                }
            }
        }
        if mode
            == (Mode {
                always_allow: false,
                node: false,
                rbac: false,
            })
        {
            return Err("--authorization-mode: no mode given".to_string());
        }
        Ok(mode)
    }
}

pub struct Authorizer {
    mode: Mode,
    pub rbac: RwLock<RbacAuthorizer>,
    /// What each node's pods reach, for the Node authorizer (kept by [`sync`]).
    pub node_graph: RwLock<NodeGraph>,
    /// Upstream's `system:node` rules, for what the graph does not subdivide.
    node_rules: Vec<PolicyRule>,
}

impl Authorizer {
    pub fn new(mode: Mode) -> Authorizer {
        Authorizer {
            mode,
            rbac: RwLock::new(RbacAuthorizer::default()),
            node_graph: RwLock::new(NodeGraph::new()),
            node_rules: cairn_auth::rbac::bootstrap::node_rules(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What `user` may do in `namespace` (SelfSubjectRulesReview): everything for
    /// `system:masters` and under AlwaysAllow, else RBAC's rules (as upstream, the
    /// Node authorizer lists none).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> cairn_auth::RulesReview {
        if user.in_group(cairn_auth::user::MASTERS) || self.mode.always_allow {
            return everything();
        }
        self.rbac.read().rules_for(user, namespace)
    }

    /// The decision for a request without a field selector (reviews, impersonation).
    pub fn decide(&self, attrs: &Attributes<'_>) -> Decision {
        self.decide_selected(attrs, "")
    }

    /// The chain's decision: the first authorizer that allows wins; otherwise the
    /// reasons the others gave, one per line, as upstream's union authorizer.
    pub fn decide_selected(&self, attrs: &Attributes<'_>, field_selector: &str) -> Decision {
        if attrs.user.in_group(cairn_auth::user::MASTERS) || self.mode.always_allow {
            return Decision::Allow(String::new());
        }
        let mut reasons = Vec::new();
        if self.mode.node {
            let graph = self.node_graph.read();
            match node::decide(attrs, field_selector, &graph, &self.node_rules) {
                Decision::NoOpinion(reason) => reasons.push(reason),
                decided => return decided,
            }
        }
        if self.mode.rbac {
            match self.rbac.read().authorize(attrs) {
                Decision::NoOpinion(reason) => reasons.push(reason),
                decided => return decided,
            }
        }
        reasons.retain(|r| !r.is_empty());
        Decision::NoOpinion(reasons.join("\n"))
    }
}

/// The attributes of `info` for `user`.
pub fn attributes<'a>(user: &'a UserInfo, info: &'a RequestInfo) -> Attributes<'a> {
    if !info.resource_request {
        return Attributes::non_resource(user, &info.verb, &info.path);
    }
    Attributes::resource(user, &info.verb, &info.api_group, &info.resource)
        .namespace(&info.namespace)
        .subresource(&info.subresource)
        .name(&info.name)
        .api_version(&info.api_version)
        .path(&info.path)
}

/// Upstream's 403 for a refused request.
pub fn forbidden(attrs: &Attributes<'_>, decision: &Decision) -> Status {
    let mut s = Status::forbidden(forbidden_message(attrs, decision.reason()));
    if attrs.resource_request {
        s = s.with_details(attrs.api_group, attrs.resource, attrs.name);
    }
    s
}

/// `*` on every resource and URL, as upstream reports a privileged user's rules.
fn everything() -> cairn_auth::RulesReview {
    use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};
    let all = || vec!["*".to_string()];
    cairn_auth::RulesReview {
        resource_rules: vec![ResourceRule {
            verbs: all(),
            api_groups: Some(all()),
            resources: Some(all()),
            resource_names: None,
        }],
        non_resource_rules: vec![NonResourceRule {
            verbs: all(),
            non_resource_urls: Some(all()),
        }],
        incomplete: false,
        evaluation_error: String::new(),
    }
}
