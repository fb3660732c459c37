//! Authorization: after authentication, every request is decided on what it asks for
//! ([`request_info`]). `--authorization-mode` is a comma list as upstream's:
//! `AlwaysAllow`, or `RBAC` over the Roles, ClusterRoles and bindings the server holds
//! (kept current from the watch cache by [`sync`]). Members of `system:masters` are
//! always allowed, before any mode (kube-apiserver's privileged-group authorizer).

pub mod impersonation;
pub mod request_info;
pub mod sync;

use cairn_api::status::Status;
use cairn_auth::{forbidden_message, Attributes, Decision, RbacAuthorizer, UserInfo};
use parking_lot::RwLock;

pub use request_info::RequestInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    AlwaysAllow,
    Rbac,
}

impl Mode {
    /// Parses `--authorization-mode` (`Node` is accepted beside `RBAC` and, until the
    /// node authorizer lands, decided by RBAC alone).
    pub fn parse(flag: &str) -> Result<Mode, String> {
        let mut mode = None;
        for m in flag.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            match m {
                "AlwaysAllow" => mode = mode.or(Some(Mode::AlwaysAllow)),
                "RBAC" | "Node" => mode = Some(Mode::Rbac),
                other => {
                    return Err(format!(
                        "--authorization-mode: unknown mode {other:?} (AlwaysAllow, Node, RBAC)"
                    ))
                }
            }
        }
        mode.ok_or_else(|| "--authorization-mode: no mode given".to_string())
    }
}

pub struct Authorizer {
    mode: Mode,
    pub rbac: RwLock<RbacAuthorizer>,
}

impl Authorizer {
    pub fn new(mode: Mode) -> Authorizer {
        Authorizer {
            mode,
            rbac: RwLock::new(RbacAuthorizer::default()),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What `user` may do in `namespace` (SelfSubjectRulesReview): everything for
    /// `system:masters` and under AlwaysAllow, else RBAC's rules.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> cairn_auth::RulesReview {
        if user.in_group(cairn_auth::user::MASTERS) || self.mode == Mode::AlwaysAllow {
            return everything();
        }
        self.rbac.read().rules_for(user, namespace)
    }

    pub fn decide(&self, attrs: &Attributes<'_>) -> Decision {
        if attrs.user.in_group(cairn_auth::user::MASTERS) {
            return Decision::Allow(String::new());
        }
        match self.mode {
            Mode::AlwaysAllow => Decision::Allow(String::new()),
            Mode::Rbac => self.rbac.read().authorize(attrs),
        }
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
    let reason = match decision {
        // RBAC's "no rule matched" is not shown, as upstream's chain ends with an empty reason.
        Decision::NoOpinion(_) => "",
        d => d.reason(),
    };
    let mut s = Status::forbidden(forbidden_message(attrs, reason));
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
