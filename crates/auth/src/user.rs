//! An authenticated identity, as upstream's `user.Info`.

use std::collections::BTreeMap;

/// The user every unauthenticated request runs as.
pub const ANONYMOUS: &str = "system:anonymous";
/// Group of unauthenticated requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// Group added to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Superuser group: every request of its members is allowed.
pub const MASTERS: &str = "system:masters";
/// Group of the nodes' identities (`system:node:<name>`).
pub const NODES: &str = "system:nodes";
/// Prefix of a node's user name.
pub const NODE_USER_PREFIX: &str = "system:node:";

/// Who a request is: name, uid, groups and extra attributes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(username: impl Into<String>, groups: Vec<String>) -> UserInfo {
        UserInfo {
            username: username.into(),
            groups,
            ..UserInfo::default()
        }
    }

    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> UserInfo {
        UserInfo::new(ANONYMOUS, vec![UNAUTHENTICATED.to_string()])
    }

    /// Adds `system:authenticated` unless present, as upstream's authenticator union
    /// does for every authenticated user but the anonymous one.
    pub fn authenticated(mut self) -> UserInfo {
        if self.username != ANONYMOUS && !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The node name of a `system:node:<name>` user in `system:nodes`.
    pub fn node_name(&self) -> Option<&str> {
        if !self.in_group(NODES) {
            return None;
        }
        self.username
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|n| !n.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_group_is_added_once_and_never_to_anonymous() {
        let u = UserInfo::new("alice", vec![AUTHENTICATED.into()]).authenticated();
        assert_eq!(u.groups, vec![AUTHENTICATED.to_string()]);
        let a = UserInfo::anonymous().authenticated();
        assert_eq!(a.groups, vec![UNAUTHENTICATED.to_string()]);
    }

    #[test]
    fn node_name_needs_the_group_and_the_prefix() {
        let n = UserInfo::new("system:node:node-1", vec![NODES.into()]);
        assert_eq!(n.node_name(), Some("node-1"));
        assert_eq!(
            UserInfo::new("system:node:node-1", vec![]).node_name(),
            None
        );
        assert_eq!(
            UserInfo::new("system:node:", vec![NODES.into()]).node_name(),
            None
        );
    }
}
