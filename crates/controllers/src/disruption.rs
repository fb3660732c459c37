//! The disruption controller (upstream `pkg/controller/disruption`): keeps each
//! PodDisruptionBudget's status — expected pods, desired and current healthy pods,
//! disruptions allowed, the `DisruptionAllowed` condition — from the pods it selects, so
//! the `pods/eviction` subresource can answer. Pods an eviction just took (recorded in
//! `status.disruptedPods`) do not count as healthy until they are gone or two minutes
//! passed.

use crate::wiring::{resync_ticks, Informers, Task};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_semantics::pod_state::{self, PodView};
use cairn_semantics::selector::Selector;
use futures::Stream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::reconcile_loop::key_of;

/// How long an eviction's pod stays out of the healthy count if it is not deleted.
const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

#[derive(Debug, Error)]
#[error("disruption controller, budget {budget}: writing its status: {source}")]
pub struct Error {
    budget: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub budgets: Store<PodDisruptionBudget>,
    pub pods: Store<CachedPod>,
    pub replicasets: Store<ReplicaSet>,
    pub deployments: Store<Deployment>,
    pub statefulsets: Store<StatefulSet>,
}

fn selector_of(pdb: &PodDisruptionBudget) -> Option<Selector> {
    // policy/v1: a missing selector selects no pod.
    let sel = pdb.spec.as_ref()?.selector.as_ref()?;
    Selector::from_label_selector(sel).ok()
}

/// The budgets whose selector matches a touched pod.
pub fn pod_budgets(
    budgets: &Store<PodDisruptionBudget>,
    pod: &CachedPod,
) -> Vec<ObjectRef<PodDisruptionBudget>> {
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    budgets
        .state()
        .iter()
        .filter(|b| b.metadata.namespace == pod.metadata.namespace)
        .filter(|b| selector_of(b).is_some_and(|s| s.matches(labels)))
        .map(|b| ObjectRef::from_obj(b.as_ref()))
        .collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<PodDisruptionBudget>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.budgets.clone();
    crate::reconcile_loop::run("disruption", store, triggers, resync, 2, ctx, reconcile).await;
}

/// `value` of `total`, rounding up as upstream's `GetScaledValueFromIntOrPercent(.., true)`.
fn scaled(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            i32::try_from((pct * i64::from(total) + 99) / 100).unwrap_or(i32::MAX)
        }
    }
}

/// The replicas the pods' controllers want, summed over distinct controllers (a
/// ReplicaSet's Deployment counts for it).
fn controllers_scale(ctx: &Ctx, pods: &[Arc<CachedPod>]) -> i32 {
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    for pod in pods {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let Some(owner) = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
        else {
            continue;
        };
        let scale = match owner.kind.as_str() {
            "ReplicaSet" => ctx
                .replicasets
                .get(&ObjectRef::new(&owner.name).within(&ns))
                .map(|rs| {
                    let parent = rs
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.kind == "Deployment" && o.controller == Some(true))
                        .cloned();
                    match parent
                        .and_then(|d| ctx.deployments.get(&ObjectRef::new(&d.name).within(&ns)))
                    {
                        Some(d) => (
                            format!("Deployment/{}", d.name_any()),
                            d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                        ),
                        None => (
                            format!("ReplicaSet/{}", owner.name),
                            rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                        ),
                    }
                }),
            "StatefulSet" => ctx
                .statefulsets
                .get(&ObjectRef::new(&owner.name).within(&ns))
                .map(|s| {
                    (
                        format!("StatefulSet/{}", owner.name),
                        s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    )
                }),
            _ => None,
        };
        if let Some((key, n)) = scale {
            scales.insert(key, n);
        }
    }
    scales.values().sum()
}

/// The status the budget should have at `now`.
pub fn desired_status(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<CachedPod>],
    controllers_scale: i32,
    now: Timestamp,
) -> (PodDisruptionBudgetStatus, Option<Duration>) {
    let spec = pdb.spec.clone().unwrap_or_default();
    let old = pdb.status.clone().unwrap_or_default();
    let count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let (expected, desired) = match (&spec.max_unavailable, &spec.min_available) {
        (Some(max), _) => (
            controllers_scale,
            (controllers_scale - scaled(max, controllers_scale)).max(0),
        ),
        (None, Some(IntOrString::Int(n))) => (count, *n),
        (None, Some(pct)) => (controllers_scale, scaled(pct, controllers_scale)),
        (None, None) => (count, count),
    };
    // Evicted pods stay out of the count until deleted, for at most two minutes.
    let mut disrupted = BTreeMap::new();
    let mut recheck: Option<Duration> = None;
    for (name, t) in old.disrupted_pods.clone().unwrap_or_default() {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
        let expires = t.0 + DELETION_TIMEOUT;
        if pod.is_some_and(|p| !p.deleting()) && expires > now {
            let left = Duration::try_from(expires.duration_since(now)).unwrap_or_default();
            recheck = Some(recheck.map_or(left, |r| r.min(left)));
            disrupted.insert(name, t);
        }
    }
    let healthy = pods
        .iter()
        .filter(|p| pod_state::is_ready(p.as_ref()) && !p.deleting())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or("")))
        .count();
    let healthy = i32::try_from(healthy).unwrap_or(i32::MAX);
    let allowed = if expected <= 0 {
        0
    } else {
        (healthy - desired).max(0)
    };
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let previous = old
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed");
    let since = previous
        .filter(|c| c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: "DisruptionAllowed".into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        last_transition_time: since,
        observed_generation: pdb.metadata.generation,
    };
    let status = PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: desired,
        expected_pods: expected,
        disruptions_allowed: allowed,
        observed_generation: pdb.metadata.generation,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        conditions: Some(vec![condition]),
    };
    (status, recheck)
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = pdb.namespace().unwrap_or_default();
    let pods: Vec<Arc<CachedPod>> = match selector_of(&pdb) {
        Some(sel) => {
            let empty = Default::default();
            ctx.pods
                .state()
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|p| !pod_state::is_terminal(p.as_ref()))
                .filter(|p| sel.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
                .collect()
        }
        None => Vec::new(),
    };
    let scale = controllers_scale(&ctx, &pods);
    let (status, recheck) = desired_status(&pdb, &pods, scale, Timestamp::now());
    if pdb.status.as_ref() != Some(&status) {
        let mut next = (*pdb).clone();
        next.status = Some(status);
        next.metadata.managed_fields = None;
        let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&pdb.name_any(), &PostParams::default(), &next)
            .await
            .map_err(|source| Error {
                budget: key_of(pdb.as_ref()),
                source,
            })?;
    }
    Ok(recheck.map_or_else(Action::await_change, Action::requeue))
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .budgets
        .subscribe(|b: &PodDisruptionBudget| vec![ObjectRef::from_obj(b)]);
    let budgets = inf.budgets.reader();
    let pods = inf
        .pods
        .subscribe(move |p: &CachedPod| pod_budgets(&budgets, p));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        budgets: inf.budgets.reader(),
        pods: inf.pods.reader(),
        replicasets: inf.replicasets.reader(),
        deployments: inf.deployments.reader(),
        statefulsets: inf.statefulsets.reader(),
    });
    Box::pin(run(ctx, futures::stream::select(own, pods), resync_ticks()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool) -> Arc<CachedPod> {
        let mut p = CachedPod::default();
        p.metadata.name = Some(name.into());
        p.phase = Some("Running".into());
        p.ready = Some((ready, None));
        Arc::new(p)
    }

    fn pdb(spec: serde_json::Value, status: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(
            json!({"metadata": {"name": "b", "generation": 2}, "spec": spec, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn allowed_disruptions_follow_healthy_pods() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let pods = [pod("a", true), pod("b", true), pod("c", false)];
        let min1 = pdb(json!({"minAvailable": 1}), json!({}));
        let (s, _) = desired_status(&min1, &pods, 3, now);
        assert_eq!(
            (
                s.expected_pods,
                s.desired_healthy,
                s.current_healthy,
                s.disruptions_allowed
            ),
            (3, 1, 2, 1)
        );
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.conditions.unwrap()[0].reason, "SufficientPods");
        // maxUnavailable 50 % of a scale of 3 rounds up to 2: one healthy pod must stay.
        let max50 = pdb(json!({"maxUnavailable": "50%"}), json!({}));
        let (s, _) = desired_status(&max50, &pods, 3, now);
        assert_eq!((s.desired_healthy, s.disruptions_allowed), (1, 1));
        // A pod an eviction just took does not count, until two minutes pass.
        let taken = pdb(
            json!({"minAvailable": 1}),
            json!({"disruptedPods": {"a": "2025-12-31T23:59:30Z"}}),
        );
        let (s, recheck) = desired_status(&taken, &pods, 3, now);
        assert_eq!((s.current_healthy, s.disruptions_allowed), (1, 0));
        assert_eq!(s.conditions.unwrap()[0].reason, "InsufficientPods");
        assert_eq!(recheck, Some(Duration::from_secs(90)));
        let later = now + SignedDuration::from_secs(100);
        let (s, _) = desired_status(&taken, &pods, 3, later);
        assert!(s.disrupted_pods.is_none());
    }
}
