//! The node lifecycle controller (upstream `pkg/controller/nodelifecycle`): every
//! `monitor_period` it judges each node by its Lease and status ([`health`]) — a node
//! silent past the grace period gets every kubelet condition `Unknown` — keeps the
//! `not-ready`/`unreachable` taints in step with the Ready condition (NoSchedule at once,
//! NoExecute paced per zone, [`zones`]), and marks the pods of a node that is not Ready
//! not ready themselves, so endpoints drop them without waiting for an eviction.
//! [`eviction`] deletes pods from NoExecute-tainted nodes; [`podgc`] collects pods.

pub mod eviction;
pub mod health;
pub mod podgc;
pub mod zones;

use crate::wiring::{Informers, Task};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::cached_pod::CachedPod;
use health::Readiness;
use zones::{Limiters, Pacing, ZoneState};

pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The controller's tunables (upstream flags of the same names).
#[derive(Debug, Clone)]
pub struct NodeLifecycleSettings {
    /// `--node-monitor-grace-period` (40 s).
    pub grace_period: Duration,
    /// `--node-monitor-period` (5 s).
    pub monitor_period: Duration,
    pub pacing: Pacing,
}

impl Default for NodeLifecycleSettings {
    fn default() -> Self {
        NodeLifecycleSettings {
            grace_period: Duration::from_secs(40),
            monitor_period: Duration::from_secs(5),
            pacing: Pacing::default(),
        }
    }
}

pub struct Ctx {
    pub client: Client,
    pub nodes: Store<Node>,
    pub leases: Store<Lease>,
    pub pods: Store<CachedPod>,
    pub settings: NodeLifecycleSettings,
}

pub async fn run(ctx: Arc<Ctx>) {
    let mut limiters = Limiters::default();
    let mut tick = tokio::time::interval(ctx.settings.monitor_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        monitor(&ctx, &mut limiters).await;
    }
}

fn lease_renewed(ctx: &Ctx, node: &str) -> Option<Timestamp> {
    let lease = ctx
        .leases
        .get(&ObjectRef::new(node).within("kube-node-lease"))?;
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

fn zone_of(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(ZONE_LABEL))
        .cloned()
        .unwrap_or_default()
}

/// One pass over every node.
async fn monitor(ctx: &Ctx, limiters: &mut Limiters) {
    let now = Timestamp::now();
    let grace = SignedDuration::try_from(ctx.settings.grace_period)
        .unwrap_or(SignedDuration::from_secs(40));
    let mut judged: Vec<(Arc<Node>, Readiness)> = Vec::new();
    for node in ctx.nodes.state() {
        let name = node.name_any();
        let mut readiness = health::readiness(&node);
        if let Some(conditions) =
            health::silenced_conditions(&node, lease_renewed(ctx, &name), grace, now)
        {
            info!(node = %name, "node stopped posting status; its conditions are now Unknown");
            if let Err(e) = patch_conditions(ctx, &name, &conditions).await {
                // The next pass tries again.
                warn!(node = %name, error = %e, "marking node conditions Unknown");
                continue;
            }
            readiness = Readiness::Unknown;
        }
        judged.push((node, readiness));
    }
    let states = zone_states(&judged, &ctx.settings.pacing);
    let all_down = !states.is_empty()
        && states
            .values()
            .all(|(s, _)| *s == ZoneState::FullDisruption);
    if all_down {
        warn!("every node is unhealthy: the control plane is probably cut off; no evictions");
    }
    for (node, readiness) in &judged {
        let (state, size) = states
            .get(&zone_of(node))
            .copied()
            .unwrap_or((ZoneState::Normal, 1));
        let rate = ctx.settings.pacing.rate(state, size);
        taint(ctx, node, *readiness, all_down, rate, limiters, now).await;
        if *readiness != Readiness::Ready {
            mark_pods_not_ready(ctx, &node.name_any()).await;
        }
    }
}

/// Each zone's state and size.
fn zone_states(
    judged: &[(Arc<Node>, Readiness)],
    pacing: &Pacing,
) -> BTreeMap<String, (ZoneState, usize)> {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (node, readiness) in judged {
        let c = counts.entry(zone_of(node)).or_default();
        if *readiness == Readiness::Ready {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
    }
    counts
        .into_iter()
        .map(|(zone, (ready, not_ready))| {
            let state = zones::zone_state(ready, not_ready, pacing.unhealthy_zone_threshold);
            (zone, (state, ready + not_ready))
        })
        .collect()
}

/// Brings the node's readiness taints in step: NoSchedule at once, NoExecute added when the
/// zone's pace allows (never while every zone is down), removed at once.
async fn taint(
    ctx: &Ctx,
    node: &Node,
    readiness: Readiness,
    all_down: bool,
    rate: f64,
    limiters: &mut Limiters,
    now: Timestamp,
) {
    let name = node.name_any();
    let Some(mut wanted) = health::desired_taints(node, readiness, now) else {
        return;
    };
    let had_no_execute = |key: &str| {
        node.spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .any(|t| t.key == key && t.effect == "NoExecute")
    };
    let adds_no_execute = wanted
        .iter()
        .any(|t| t.effect == "NoExecute" && is_ours(&t.key) && !had_no_execute(&t.key));
    let allowed = !all_down
        && (!adds_no_execute
            || limiters.try_take(&zone_of(node), rate, tokio::time::Instant::now()));
    if all_down || !allowed {
        // Only the NoExecute taints wait (or, with every zone down, go).
        wanted.retain(|t| !(t.effect == "NoExecute" && is_ours(&t.key)));
    }
    let current: Vec<_> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.clone().unwrap_or_default())
        .collect();
    if wanted == current {
        return;
    }
    let patch = json!({"spec": {"taints": wanted}});
    let api: Api<Node> = Api::all(ctx.client.clone());
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => info!(node = %name, readiness = ?readiness, "node taints updated"),
        // The next pass tries again.
        Err(e) => warn!(node = %name, error = %e, "updating node taints"),
    }
}

fn is_ours(key: &str) -> bool {
    key == health::NOT_READY_TAINT || key == health::UNREACHABLE_TAINT
}

async fn patch_conditions(
    ctx: &Ctx,
    node: &str,
    conditions: &[k8s_openapi::api::core::v1::NodeCondition],
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let patch = json!({"status": {"conditions": conditions}});
    api.patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Pods on a node that is not Ready are not ready either (upstream `MarkPodsNotReady`).
async fn mark_pods_not_ready(ctx: &Ctx, node: &str) {
    let pods = ctx.pods.state();
    let on_node = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node))
        .filter(|p| matches!(p.ready, Some((true, _))));
    for pod in on_node {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        ))
        .unwrap_or_default();
        let patch = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": now},
        ]}});
        let params = PatchParams::default();
        if let Err(e) = api
            .patch_status(&name, &params, &Patch::Strategic(&patch))
            .await
        {
            // The next pass tries again; a vanished pod needs nothing.
            warn!(pod = %format!("{ns}/{name}"), error = %e, "marking pod not ready");
        }
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        leases: inf.leases.reader(),
        pods: inf.pods.reader(),
        settings: inf.settings.node_lifecycle.clone(),
    });
    Box::pin(run(ctx))
}
