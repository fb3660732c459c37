//! The ClusterRole aggregation controller (upstream
//! `pkg/controller/clusterroleaggregation`): a ClusterRole with an `aggregationRule` holds
//! the rules of every other ClusterRole its selectors match, in name order, each rule once.
//! Any ClusterRole change wakes every aggregating role.

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;

use cairn_semantics::selector::Selector;
use futures::Stream;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::info;

#[derive(Debug, Error)]
#[error("clusterrole-aggregation controller, clusterrole {name}: {source}")]
pub struct Error {
    name: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub roles: Store<ClusterRole>,
}

/// A touched (or deleted) ClusterRole wakes every aggregating ClusterRole, itself included:
/// it may now match or not.
pub fn aggregators(
    roles: Store<ClusterRole>,
) -> impl Fn(&ClusterRole, bool) -> Vec<ObjectRef<ClusterRole>> {
    move |touched, _deleted| {
        let mut out: Vec<ObjectRef<ClusterRole>> = roles
            .state()
            .iter()
            .filter(|r| r.aggregation_rule.is_some())
            .map(|r| ObjectRef::from_obj(r.as_ref()))
            .collect();
        let own = ObjectRef::from_obj(touched);
        if touched.aggregation_rule.is_some() && !out.contains(&own) {
            out.push(own);
        }
        out
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<ClusterRole>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.roles.clone();
    crate::reconcile_loop::run(
        "clusterrole-aggregation",
        store,
        triggers,
        resync,
        2,
        ctx,
        reconcile,
    )
    .await;
}

/// The rules `role` aggregates from `all`; `None` when it does not aggregate.
pub fn aggregated_rules(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Option<Vec<PolicyRule>> {
    let rule = role.aggregation_rule.as_ref()?;
    let mut sorted: Vec<&Arc<ClusterRole>> = all.iter().collect();
    sorted.sort_by_key(|r| r.name_any());
    let mut out: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        // A selector that does not parse matches nothing (validation refuses it anyway).
        let selector =
            Selector::from_label_selector(selector).unwrap_or_else(|_| Selector::nothing());
        for other in &sorted {
            if other.name_any() == role.name_any() || !selector.matches(other.labels()) {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
        }
    }
    Some(out)
}

async fn reconcile(role: Arc<ClusterRole>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let all = ctx.roles.state();
    let Some(rules) = aggregated_rules(&role, &all) else {
        return Ok(Action::await_change());
    };
    if role.rules.as_deref().unwrap_or_default() == rules.as_slice() {
        return Ok(Action::await_change());
    }
    let name = role.name_any();
    info!(clusterrole = %name, rules = rules.len(), "aggregating rules");
    let mut updated = (*role).clone();
    updated.rules = Some(rules);
    let api: Api<ClusterRole> = Api::all(ctx.client.clone());
    match api.replace(&name, &PostParams::default(), &updated).await {
        Ok(_) => Ok(Action::await_change()),
        // 404: deleted meanwhile. A 409 is retried by the runner with the newer object.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(Error { name, source }),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let roles = inf.clusterroles.reader();
    let triggers = inf
        .clusterroles
        .subscribe_with_deletions(aggregators(roles.clone()));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        roles,
    });
    Box::pin(run(ctx, triggers, resync_ticks()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn role(name: &str, label: Option<&str>, verbs: &[&str]) -> Arc<ClusterRole> {
        Arc::new(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: label.map(|l| [(l.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            rules: Some(
                verbs
                    .iter()
                    .map(|v| PolicyRule {
                        verbs: vec![v.to_string()],
                        api_groups: Some(vec![String::new()]),
                        resources: Some(vec!["pods".into()]),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        })
    }

    #[test]
    fn aggregates_matching_roles_in_name_order_without_duplicates() {
        let mut monitoring = (*role("monitoring", None, &[])).clone();
        monitoring.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("agg".to_string(), "true".to_string())].into()),
                ..Default::default()
            }]),
        });
        let all = vec![
            role("b-endpoints", Some("agg"), &["list", "get"]),
            role("a-pods", Some("agg"), &["get"]),
            role("unrelated", Some("other"), &["delete"]),
            Arc::new(monitoring.clone()),
        ];
        let rules = aggregated_rules(&monitoring, &all).unwrap();
        let verbs: Vec<&str> = rules.iter().map(|r| r.verbs[0].as_str()).collect();
        assert_eq!(verbs, ["get", "list"]);
        assert!(aggregated_rules(&all[0], &all).is_none());
    }
}
