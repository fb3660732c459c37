//! Bindings indexed by the subjects they name, so a decision looks only at the
//! requesting user's bindings: one map for user names (service accounts indexed under
//! their `system:serviceaccount:` user name) and one for groups, per namespace for
//! RoleBindings and once for ClusterRoleBindings.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{RoleRef, Subject};

use super::subject::{
    service_account_namespace, service_account_username, GROUP_KIND, SERVICE_ACCOUNT_KIND,
    USER_KIND,
};
use crate::user::UserInfo;

/// What a binding grants, copied into the index so a decision needs one look-up (the
/// role's rules) per binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub binding: Arc<str>,
    pub role_kind: Arc<str>,
    pub role_name: Arc<str>,
}

impl Grant {
    pub fn new(binding: &str, role_ref: &RoleRef) -> Grant {
        Grant {
            binding: binding.into(),
            role_kind: role_ref.kind.as_str().into(),
            role_name: role_ref.name.as_str().into(),
        }
    }
}

/// Grants by user name and by group name, each list sorted by binding name so that
/// decisions (and their reasons) do not depend on arrival order.
#[derive(Debug, Default)]
pub(crate) struct SubjectIndex {
    users: HashMap<String, Vec<Grant>>,
    groups: HashMap<String, Vec<Grant>>,
}

impl SubjectIndex {
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// Indexes `grant` under every subject of its binding.
    pub fn insert(&mut self, grant: &Grant, subjects: &[Subject], binding_namespace: &str) {
        for s in subjects {
            if let Some((map, key)) = self.slot(s, binding_namespace) {
                let list = map.entry(key).or_default();
                if let Err(at) = list.binary_search_by(|g| g.binding.cmp(&grant.binding)) {
                    list.insert(at, grant.clone());
                }
            }
        }
    }

    /// Drops the binding named `binding` from the keys its `subjects` index it under.
    pub fn remove(&mut self, binding: &str, subjects: &[Subject], binding_namespace: &str) {
        for s in subjects {
            if let Some((map, key)) = self.slot(s, binding_namespace) {
                if let Some(list) = map.get_mut(&key) {
                    list.retain(|g| &*g.binding != binding);
                    if list.is_empty() {
                        map.remove(&key);
                    }
                }
            }
        }
    }

    fn slot(
        &mut self,
        s: &Subject,
        binding_namespace: &str,
    ) -> Option<(&mut HashMap<String, Vec<Grant>>, String)> {
        match s.kind.as_str() {
            USER_KIND => Some((&mut self.users, s.name.clone())),
            GROUP_KIND => Some((&mut self.groups, s.name.clone())),
            SERVICE_ACCOUNT_KIND => service_account_namespace(s, binding_namespace)
                .map(|ns| (&mut self.users, service_account_username(ns, &s.name))),
            _ => None,
        }
    }

    /// The grants naming `user`: by name first, then by each group in the user's
    /// order. A binding naming the user twice appears twice; callers that need each
    /// binding once dedupe.
    pub fn for_user<'a>(&'a self, user: &'a UserInfo) -> impl Iterator<Item = &'a Grant> + 'a {
        let by_name = self.users.get(&user.username).into_iter().flatten();
        let by_group = user
            .groups
            .iter()
            .filter_map(|g| self.groups.get(g))
            .flatten();
        by_name.chain(by_group)
    }
}
