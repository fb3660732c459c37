//! [`RbacAuthorizer`]: upstream's RBAC authorizer over Roles, ClusterRoles and their
//! bindings, kept current one object at a time (`upsert_*`/`remove_*`, as an
//! informer delivers them) and indexed by subject so that a decision looks only at
//! the bindings naming the user or one of its groups.
//!
//! A decision visits ClusterRoleBindings, then the RoleBindings of the request's
//! namespace, and stops at the first rule allowing the request, as upstream does.
//! `system:masters` is allowed through the bootstrap `cluster-admin`
//! ClusterRoleBinding like any other group (upstream's API server additionally puts a
//! privileged-group authorizer in front of RBAC; that is the caller's to add).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use super::index::{Grant, SubjectIndex};
use super::rule::{list, rule_allows};
use super::subject::{describe, first_applying};
use crate::attributes::{Attributes, Decision};
use crate::gofmt::{aggregate, quote};
use crate::user::UserInfo;

/// Everything a user may do in a namespace, as SelfSubjectRulesReview reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RulesReview {
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Set when a binding's role could not be resolved (the API server's authorizer
    /// union reports that as incomplete).
    pub incomplete: bool,
    pub evaluation_error: String,
}

/// The RBAC authorizer. Holds the four kinds by namespace and name.
#[derive(Debug, Default)]
pub struct RbacAuthorizer {
    roles: HashMap<String, HashMap<String, Role>>,
    cluster_roles: HashMap<String, ClusterRole>,
    role_bindings: HashMap<String, HashMap<String, RoleBinding>>,
    cluster_role_bindings: HashMap<String, ClusterRoleBinding>,
    cluster_index: SubjectIndex,
    namespace_index: HashMap<String, SubjectIndex>,
}

/// Where a visited rule came from.
struct Source<'a> {
    /// The binding's namespace; "" for a ClusterRoleBinding.
    namespace: &'a str,
    grant: &'a Grant,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

impl RbacAuthorizer {
    pub fn new(
        roles: impl IntoIterator<Item = Role>,
        cluster_roles: impl IntoIterator<Item = ClusterRole>,
        role_bindings: impl IntoIterator<Item = RoleBinding>,
        cluster_role_bindings: impl IntoIterator<Item = ClusterRoleBinding>,
    ) -> RbacAuthorizer {
        let mut a = RbacAuthorizer::default();
        roles.into_iter().for_each(|r| a.upsert_role(r));
        cluster_roles
            .into_iter()
            .for_each(|r| a.upsert_cluster_role(r));
        role_bindings
            .into_iter()
            .for_each(|b| a.upsert_role_binding(b));
        cluster_role_bindings
            .into_iter()
            .for_each(|b| a.upsert_cluster_role_binding(b));
        a
    }

    pub fn upsert_role(&mut self, role: Role) {
        let (ns, name) = (namespace_of(&role.metadata), name_of(&role.metadata));
        self.roles.entry(ns).or_default().insert(name, role);
    }

    pub fn remove_role(&mut self, namespace: &str, name: &str) -> Option<Role> {
        let in_ns = self.roles.get_mut(namespace)?;
        let removed = in_ns.remove(name);
        if in_ns.is_empty() {
            self.roles.remove(namespace);
        }
        removed
    }

    pub fn upsert_cluster_role(&mut self, role: ClusterRole) {
        self.cluster_roles.insert(name_of(&role.metadata), role);
    }

    pub fn remove_cluster_role(&mut self, name: &str) -> Option<ClusterRole> {
        self.cluster_roles.remove(name)
    }

    pub fn upsert_role_binding(&mut self, binding: RoleBinding) {
        let (ns, name) = (namespace_of(&binding.metadata), name_of(&binding.metadata));
        self.remove_role_binding(&ns, &name);
        let grant = Grant::new(&name, &binding.role_ref);
        self.namespace_index.entry(ns.clone()).or_default().insert(
            &grant,
            subjects(&binding.subjects),
            &ns,
        );
        self.role_bindings
            .entry(ns)
            .or_default()
            .insert(name, binding);
    }

    pub fn remove_role_binding(&mut self, namespace: &str, name: &str) -> Option<RoleBinding> {
        let in_ns = self.role_bindings.get_mut(namespace)?;
        let old = in_ns.remove(name)?;
        if in_ns.is_empty() {
            self.role_bindings.remove(namespace);
        }
        if let Some(index) = self.namespace_index.get_mut(namespace) {
            index.remove(name, subjects(&old.subjects), namespace);
            if index.is_empty() {
                self.namespace_index.remove(namespace);
            }
        }
        Some(old)
    }

    pub fn upsert_cluster_role_binding(&mut self, binding: ClusterRoleBinding) {
        let name = name_of(&binding.metadata);
        self.remove_cluster_role_binding(&name);
        let grant = Grant::new(&name, &binding.role_ref);
        self.cluster_index
            .insert(&grant, subjects(&binding.subjects), "");
        self.cluster_role_bindings.insert(name, binding);
    }

    pub fn remove_cluster_role_binding(&mut self, name: &str) -> Option<ClusterRoleBinding> {
        let old = self.cluster_role_bindings.remove(name)?;
        self.cluster_index.remove(name, subjects(&old.subjects), "");
        Some(old)
    }

    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRole> {
        self.cluster_roles.get(name)
    }

    pub fn role(&self, namespace: &str, name: &str) -> Option<&Role> {
        self.roles.get(namespace)?.get(name)
    }

    /// The rules a binding in `binding_namespace` ("" for a ClusterRoleBinding) grants
    /// through `role_ref` (upstream's `GetRoleReferenceRules`), or upstream's error text.
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        binding_namespace: &str,
    ) -> Result<&[PolicyRule], String> {
        self.rules_of(&role_ref.kind, &role_ref.name, binding_namespace)
    }

    fn rules_of(&self, kind: &str, name: &str, namespace: &str) -> Result<&[PolicyRule], String> {
        match kind {
            "Role" => self
                .role(namespace, name)
                .map(|r| list(&r.rules))
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {} not found", quote(name))),
            "ClusterRole" => self
                .cluster_roles
                .get(name)
                .map(|r| list(&r.rules))
                .ok_or_else(|| {
                    format!(
                        "clusterrole.rbac.authorization.k8s.io {} not found",
                        quote(name)
                    )
                }),
            other => Err(format!("unsupported role reference kind: {}", quote(other))),
        }
    }

    /// Visits the rules applying to `user` in `namespace` until `visit` returns false;
    /// resolution failures go to `errors`. `once` visits each binding a single time.
    fn visit_rules<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
        once: bool,
        errors: &mut Vec<String>,
        mut visit: impl FnMut(&Source<'a>, &'a PolicyRule) -> bool,
    ) {
        let scopes = std::iter::once(("", Some(&self.cluster_index))).chain(
            (!namespace.is_empty()).then(|| (namespace, self.namespace_index.get(namespace))),
        );
        for (ns, index) in scopes {
            let Some(index) = index else { continue };
            let mut seen = HashSet::new();
            for grant in index.for_user(user) {
                if once && !seen.insert(&grant.binding) {
                    continue;
                }
                match self.rules_of(&grant.role_kind, &grant.role_name, ns) {
                    Ok(rules) => {
                        let source = Source {
                            namespace: ns,
                            grant,
                        };
                        if !rules.iter().all(|r| visit(&source, r)) {
                            return;
                        }
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
    }

    /// Upstream's RBAC decision: `Allow` with the binding that allowed it, else
    /// `NoOpinion` (its reason lists roles that could not be resolved, if any).
    pub fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        let mut errors = Vec::new();
        let mut allowed_by = None;
        self.visit_rules(
            attrs.user,
            attrs.namespace,
            false,
            &mut errors,
            |src, rule| {
                if rule_allows(attrs, rule) {
                    allowed_by = Some((src.namespace, src.grant));
                    return false;
                }
                true
            },
        );
        if let Some((ns, grant)) = allowed_by {
            return Decision::Allow(format!(
                "RBAC: allowed by {}",
                self.describe(attrs.user, ns, grant)
            ));
        }
        if errors.is_empty() {
            Decision::NoOpinion(String::new())
        } else {
            Decision::NoOpinion(format!("RBAC: {}", aggregate(&errors)))
        }
    }

    /// `ClusterRoleBinding "x" of ClusterRole "y" to User "z"` (or the RoleBinding
    /// form, named `binding/namespace`), the subject being the binding's first that
    /// names the user.
    fn describe(&self, user: &UserInfo, ns: &str, grant: &Grant) -> String {
        let (kind, binding, subjects_of) = if ns.is_empty() {
            let b = self.cluster_role_bindings.get(&*grant.binding);
            (
                "ClusterRoleBinding",
                grant.binding.to_string(),
                b.map(|b| &b.subjects),
            )
        } else {
            let b = self
                .role_bindings
                .get(ns)
                .and_then(|m| m.get(&*grant.binding));
            (
                "RoleBinding",
                format!("{}/{ns}", grant.binding),
                b.map(|b| &b.subjects),
            )
        };
        let subject = subjects_of
            .and_then(|s| first_applying(user, subjects(s), ns))
            .map(|s| describe(s, ns))
            .unwrap_or_default();
        format!(
            "{kind} {} of {} {} to {subject}",
            quote(&binding),
            grant.role_kind,
            quote(&grant.role_name)
        )
    }

    /// Every rule `user` holds in `namespace` ("" for cluster-wide rules only), with
    /// the resolution errors met on the way (upstream's `RulesFor`).
    pub fn policy_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<PolicyRule>, Vec<String>) {
        let mut errors = Vec::new();
        let mut rules = Vec::new();
        self.visit_rules(user, namespace, true, &mut errors, |_, rule| {
            rules.push(rule.clone());
            true
        });
        (rules, errors)
    }

    /// SelfSubjectRulesReview's answer (`kubectl auth can-i --list`).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesReview {
        let (rules, errors) = self.policy_rules_for(user, namespace);
        let mut review = RulesReview {
            incomplete: !errors.is_empty(),
            evaluation_error: aggregate(&errors),
            ..RulesReview::default()
        };
        for r in rules {
            if !list(&r.resources).is_empty() {
                review.resource_rules.push(ResourceRule {
                    verbs: r.verbs.clone(),
                    api_groups: r.api_groups.clone(),
                    resources: r.resources.clone(),
                    resource_names: r.resource_names.clone(),
                });
            }
            if !list(&r.non_resource_urls).is_empty() {
                review.non_resource_rules.push(NonResourceRule {
                    verbs: r.verbs,
                    non_resource_urls: r.non_resource_urls,
                });
            }
        }
        review
    }
}

fn subjects(s: &Option<Vec<Subject>>) -> &[Subject] {
    s.as_deref().unwrap_or(&[])
}
