//! What an authorizer decides on (upstream's `authorizer.AttributesRecord`), the
//! [`Decision`] it returns, and the 403 text the API server answers a refusal with
//! ([`forbidden_message`], upstream's `responsewriters.Forbidden` + `NewForbidden`).
//!
//! `Attributes` borrows everything, so building one per request costs nothing:
//!
//! ```
//! use cairn_auth::{Attributes, UserInfo};
//! let alice = UserInfo::new("alice", vec![]);
//! let a = Attributes::resource(&alice, "get", "", "pods").namespace("ns1").name("web");
//! assert!(a.is_resource_request());
//! ```

use crate::gofmt::quote;
use crate::user::UserInfo;

/// One request as an authorizer sees it. A resource request names group, resource,
/// subresource and name; a non-resource request only a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    /// False for non-resource requests (`/healthz`, `/api`), which carry `path`.
    pub resource_request: bool,
    pub path: &'a str,
    pub namespace: &'a str,
    pub api_group: &'a str,
    pub api_version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
}

impl<'a> Attributes<'a> {
    /// A resource request on `resource` of `api_group` ("" for the core group),
    /// cluster-scoped until [`Attributes::namespace`] is set.
    pub fn resource(
        user: &'a UserInfo,
        verb: &'a str,
        api_group: &'a str,
        resource: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            resource_request: true,
            path: "",
            namespace: "",
            api_group,
            api_version: "",
            resource,
            subresource: "",
            name: "",
        }
    }

    /// A request for a path outside the resource tree (`/healthz`, `/version`).
    pub fn non_resource(user: &'a UserInfo, verb: &'a str, path: &'a str) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            resource_request: false,
            path,
            namespace: "",
            api_group: "",
            api_version: "",
            resource: "",
            subresource: "",
            name: "",
        }
    }

    pub fn namespace(mut self, namespace: &'a str) -> Self {
        self.namespace = namespace;
        self
    }

    pub fn subresource(mut self, subresource: &'a str) -> Self {
        self.subresource = subresource;
        self
    }

    pub fn name(mut self, name: &'a str) -> Self {
        self.name = name;
        self
    }

    pub fn api_version(mut self, api_version: &'a str) -> Self {
        self.api_version = api_version;
        self
    }

    pub fn path(mut self, path: &'a str) -> Self {
        self.path = path;
        self
    }

    pub fn is_resource_request(&self) -> bool {
        self.resource_request
    }
}

/// An authorizer's answer with its reason (upstream returns the pair).
/// RBAC never says `Deny`: without a matching rule it has no opinion, and the chain's
/// end turns that into a 403.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
    NoOpinion(String),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// The message of the 403 `Status` upstream answers a refused request with, e.g.
/// `pods "web" is forbidden: User "bob" cannot get resource "pods" in API group "" in
/// the namespace "ns1"`; `reason` (the authorizers' reason, often empty) follows a
/// colon. The `Status` details carry `group` = `api_group`, `kind` = `resource` and
/// `name` = `name`.
pub fn forbidden_message(attrs: &Attributes<'_>, reason: &str) -> String {
    let mut msg = sanitize(&refusal(attrs));
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.to_string()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    if attrs.api_group.is_empty() && attrs.resource.is_empty() {
        format!("forbidden: {msg}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {msg}")
    } else {
        format!("{qualified} {} is forbidden: {msg}", quote(attrs.name))
    }
}

/// Upstream's `forbiddenMessage`: who cannot do what, where.
fn refusal(attrs: &Attributes<'_>) -> String {
    let user = quote(&attrs.user.username);
    if !attrs.resource_request {
        return format!(
            "User {user} cannot {} path {}",
            attrs.verb,
            quote(attrs.path)
        );
    }
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.to_string()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let (resource, group) = (quote(&resource), quote(attrs.api_group));
    if attrs.namespace.is_empty() {
        format!(
            "User {user} cannot {} resource {resource} in API group {group} at the cluster scope",
            attrs.verb
        )
    } else {
        format!(
            "User {user} cannot {} resource {resource} in API group {group} in the namespace {}",
            attrs.verb,
            quote(attrs.namespace)
        )
    }
}

/// Upstream escapes what could read as HTML in the refusal text.
fn sanitize(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bob() -> UserInfo {
        UserInfo::new("bob", vec!["system:authenticated".into()])
    }

    #[test]
    fn namespaced_named_resource() {
        let u = bob();
        let a = Attributes::resource(&u, "get", "", "pods")
            .namespace("ns1")
            .name("web");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"pods "web" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "ns1""#
        );
    }

    #[test]
    fn cluster_scope_group_and_subresource() {
        let u = bob();
        let a = Attributes::resource(&u, "list", "apps", "deployments").subresource("scale");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"deployments.apps is forbidden: User "bob" cannot list resource "deployments/scale" in API group "apps" at the cluster scope"#
        );
    }

    #[test]
    fn non_resource_path_with_reason() {
        let u = UserInfo::anonymous();
        let a = Attributes::non_resource(&u, "get", "/api");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"forbidden: User "system:anonymous" cannot get path "/api""#
        );
        assert_eq!(
            forbidden_message(&a, "RBAC: oops"),
            r#"forbidden: User "system:anonymous" cannot get path "/api": RBAC: oops"#
        );
    }

    #[test]
    fn html_is_escaped_in_the_refusal() {
        let u = UserInfo::new("<b>", vec![]);
        let a = Attributes::non_resource(&u, "get", "/x&y");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"forbidden: User "&lt;b&gt;" cannot get path "/x&amp;y""#
        );
    }
}
