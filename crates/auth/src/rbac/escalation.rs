//! Escalation prevention (upstream's `validation.Covers`, `ConfirmNoEscalation` and the
//! RBAC registry's checks): a user may write a Role or ClusterRole only with rules it
//! already holds there, or with `escalate` on it; a RoleBinding or
//! ClusterRoleBinding only to a role whose rules it holds, or with `bind` on that role.
//! Members of `system:masters` may always.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
};

use super::authorizer::RbacAuthorizer;
use super::rule::list;
use crate::attributes::Attributes;
use crate::gofmt::{quote, quote_list};
use crate::user::{UserInfo, MASTERS};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Create or update: on create the request URL carries no name, so an `escalate`
/// grant limited by resourceNames cannot apply (as upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// Why a write of an RBAC object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscalationError {
    /// 403. `message` is the whole `Status` message.
    #[error("{message}")]
    Forbidden {
        resource: &'static str,
        name: String,
        message: String,
    },
    /// 404: the binding's role does not exist (upstream checks `bind` first).
    #[error("{resource}.rbac.authorization.k8s.io {} not found", quote(name))]
    RoleNotFound {
        resource: &'static str,
        name: String,
    },
}

/// Whether `owner` rules cover every `requested` one, and those they do not, broken
/// down to one group, resource, verb and name each (upstream's `Covers`).
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let uncovered: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (uncovered.is_empty(), uncovered)
}

fn one(s: &str) -> Option<Vec<String>> {
    Some(vec![s.to_string()])
}

/// One rule per (group, resource, verb[, name]) and per (url, verb).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                let names = list(&rule.resource_names);
                for name in names {
                    out.push(PolicyRule {
                        resource_names: one(name),
                        ..base.clone()
                    });
                }
                if names.is_empty() {
                    out.push(base);
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        owner
            .iter()
            .any(|o| o == path || (o.ends_with('*') && path.starts_with(o.trim_end_matches('*'))))
    })
}

/// Whether `owner` covers a broken-down `sub` rule.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups_owner = list(&owner.api_groups);
    let groups = has(groups_owner, "*") || has_all(groups_owner, list(&sub.api_groups));
    let resources = resources_cover(list(&owner.resources), list(&sub.resources));
    let urls = urls_cover(list(&owner.non_resource_urls), list(&sub.non_resource_urls));
    let owner_names = list(&owner.resource_names);
    let sub_names = list(&sub.resource_names);
    // A rule for every name is covered only by a rule for every name.
    let names =
        owner_names.is_empty() || (!sub_names.is_empty() && has_all(owner_names, sub_names));
    verbs && groups && resources && urls && names
}

/// Upstream's `CompactRules`: rules of a single group and resource and nothing but
/// verbs are merged per (group, resource); the others are kept as they are.
pub fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let mut simple: HashMap<(String, String), usize> = HashMap::new();
    for r in rules {
        let groups = list(&r.api_groups);
        let resources = list(&r.resources);
        let is_simple = list(&r.resource_names).is_empty()
            && list(&r.non_resource_urls).is_empty()
            && groups.len() == 1
            && resources.len() == 1;
        if !is_simple {
            out.push(r.clone());
            continue;
        }
        let key = (groups[0].clone(), resources[0].clone());
        match simple.get(&key) {
            Some(&i) => out[i].verbs.extend(r.verbs.iter().cloned()),
            None => {
                simple.insert(key, out.len());
                out.push(r.clone());
            }
        }
    }
    out
}

/// `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`, as upstream's `CompactString`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    let mut field = |label: &str, v: &[String]| {
        if !v.is_empty() {
            parts.push(format!("{label}:{}", quote_list(v)));
        }
    };
    field("APIGroups", list(&rule.api_groups));
    field("Resources", list(&rule.resources));
    field("NonResourceURLs", list(&rule.non_resource_urls));
    field("ResourceNames", list(&rule.resource_names));
    field("Verbs", &rule.verbs);
    format!("{{{}}}", parts.join(", "))
}

/// `ConfirmNoEscalation`: `Ok` when the rules `user` holds in `namespace` cover
/// `rules`, else upstream's message naming the missing permissions, sorted and
/// deduplicated.
pub fn confirm_no_escalation(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owner, errors) = authz.policy_rules_for(user, namespace);
    let (ok, missing) = covers(&owner, rules);
    if ok {
        return Ok(());
    }
    let missing: BTreeSet<String> = compact_rules(&missing).iter().map(compact_string).collect();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quote(&user.username),
        quote_list(&user.groups),
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        // Go's `%v` of a `[]error`.
        msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(msg)
}

fn forbidden(resource: &'static str, name: &str, reason: &str) -> EscalationError {
    EscalationError::Forbidden {
        resource,
        name: name.to_string(),
        message: format!(
            "{resource}.{RBAC_GROUP} {} is forbidden: {reason}",
            quote(name)
        ),
    }
}

fn allowed(authz: &RbacAuthorizer, attrs: &Attributes<'_>) -> bool {
    attrs.user.in_group(MASTERS) || authz.authorize(attrs).is_allowed()
}

/// May `user` write `role` (`RoleEscalationAuthorized` or `ConfirmNoEscalation`)?
pub fn check_role(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    role: &Role,
    op: Operation,
) -> Result<(), EscalationError> {
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let ns = role.metadata.namespace.as_deref().unwrap_or_default();
    let url_name = if op == Operation::Create { "" } else { name };
    let escalate = Attributes::resource(user, "escalate", RBAC_GROUP, "roles")
        .namespace(ns)
        .name(url_name)
        .api_version("*");
    if allowed(authz, &escalate) {
        return Ok(());
    }
    confirm_no_escalation(authz, user, ns, list(&role.rules))
        .map_err(|m| forbidden("roles", name, &m))
}

/// The whole of cluster-admin: what setting an `aggregationRule` requires, since it
/// can gather anything.
fn full_authority() -> Vec<PolicyRule> {
    let all = Some(vec!["*".to_string()]);
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: all.clone(),
            resources: all.clone(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: all,
            ..PolicyRule::default()
        },
    ]
}

/// May `user` write `role`? As [`check_role`], cluster-wide, and an `aggregationRule`
/// needs cluster-admin's powers.
pub fn check_cluster_role(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    role: &ClusterRole,
    op: Operation,
) -> Result<(), EscalationError> {
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let url_name = if op == Operation::Create { "" } else { name };
    let escalate = Attributes::resource(user, "escalate", RBAC_GROUP, "clusterroles")
        .name(url_name)
        .api_version("*");
    if allowed(authz, &escalate) {
        return Ok(());
    }
    confirm_no_escalation(authz, user, "", list(&role.rules))
        .map_err(|m| forbidden("clusterroles", name, &m))?;
    let aggregates = role
        .aggregation_rule
        .as_ref()
        .is_some_and(|a| !list_selectors(a).is_empty());
    if aggregates && confirm_no_escalation(authz, user, "", &full_authority()).is_err() {
        return Err(forbidden(
            "clusterroles",
            name,
            "must have cluster-admin privileges to use the aggregationRule",
        ));
    }
    Ok(())
}

fn list_selectors(
    a: &k8s_openapi::api::rbac::v1::AggregationRule,
) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector] {
    a.cluster_role_selectors.as_deref().unwrap_or(&[])
}

/// May `user` create a binding in `namespace` ("" for a ClusterRoleBinding) to
/// `role_ref`? `bind` on the role (its name checked against resourceNames), else the
/// role's rules must be held in that namespace.
fn check_binding(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    namespace: &str,
    role_ref: &RoleRef,
    resource: &'static str,
    binding_name: &str,
) -> Result<(), EscalationError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let role_resource = match role_ref.kind.as_str() {
        "ClusterRole" => Some("clusterroles"),
        "Role" => Some("roles"),
        _ => None,
    };
    if let Some(role_resource) = role_resource {
        let bind = Attributes::resource(user, "bind", &role_ref.api_group, role_resource)
            .namespace(namespace)
            .name(&role_ref.name);
        if authz.authorize(&bind).is_allowed() {
            return Ok(());
        }
    }
    let rules =
        authz
            .role_ref_rules(role_ref, namespace)
            .map_err(|_| EscalationError::RoleNotFound {
                resource: role_resource.unwrap_or("roles"),
                name: role_ref.name.clone(),
            })?;
    confirm_no_escalation(authz, user, namespace, rules)
        .map_err(|m| forbidden(resource, binding_name, &m))
}

/// May `user` write `binding`?
pub fn check_role_binding(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    binding: &RoleBinding,
) -> Result<(), EscalationError> {
    let name = binding.metadata.name.as_deref().unwrap_or_default();
    let ns = binding.metadata.namespace.as_deref().unwrap_or_default();
    check_binding(authz, user, ns, &binding.role_ref, "rolebindings", name)
}

/// May `user` write `binding`?
pub fn check_cluster_role_binding(
    authz: &RbacAuthorizer,
    user: &UserInfo,
    binding: &ClusterRoleBinding,
) -> Result<(), EscalationError> {
    let name = binding.metadata.name.as_deref().unwrap_or_default();
    check_binding(
        authz,
        user,
        "",
        &binding.role_ref,
        "clusterrolebindings",
        name,
    )
}
