//! The HorizontalPodAutoscaler controller (upstream `pkg/controller/podautoscaler`,
//! autoscaling/v2): every sync period each HPA reads its target's `/scale`, the pods
//! the Scale's selector selects and their usage from the resource metrics API, decides
//! ([`plan`]: the replica calculator and scaling behavior, pure), writes the new scale,
//! the status and the conditions, and records upstream's Events.
//!
//! Pods are listed from the API per sync rather than cached: the shared pod cache keeps
//! neither requests nor start times, and an HPA reads only its own target's pods.

pub mod behavior;
pub mod calculator;
pub mod metric;
pub mod plan;
mod target;
#[cfg(test)]
mod tests;
pub mod usage;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Recorder};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use parking_lot::Mutex;
use thiserror::Error;

use crate::reconcile_loop;
use crate::wiring::{resync_ticks, Informers, Task};
use plan::{History, Knobs, Plan};

/// upstream's `--horizontal-pod-autoscaler-*` flags.
#[derive(Debug, Clone, Copy)]
pub struct HpaSettings {
    /// How often every HPA is synced (upstream 15 s).
    pub sync_period: Duration,
    /// How long a scale-down waits for higher recommendations (upstream 5 min).
    pub downscale_stabilization: Duration,
    pub tolerance: f64,
    pub cpu_initialization_period: Duration,
    pub initial_readiness_delay: Duration,
}

impl Default for HpaSettings {
    fn default() -> Self {
        HpaSettings {
            sync_period: Duration::from_secs(15),
            downscale_stabilization: Duration::from_secs(300),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

impl HpaSettings {
    fn knobs(&self) -> Knobs {
        let d = |d: Duration| SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        Knobs {
            downscale_stabilization: d(self.downscale_stabilization),
            tunables: calculator::Tunables {
                tolerance: self.tolerance,
                cpu_initialization_period: d(self.cpu_initialization_period),
                initial_readiness_delay: d(self.initial_readiness_delay),
            },
        }
    }
}

#[derive(Debug, Error)]
pub enum Error {
    #[error("horizontalpodautoscaler {key}: writing status: {source}")]
    Status {
        key: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Ctx {
    pub client: Client,
    pub hpas: Store<HorizontalPodAutoscaler>,
    pub recorder: Recorder,
    pub settings: HpaSettings,
    kinds: target::Kinds,
    histories: Mutex<HashMap<String, History>>,
}

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .hpas
        .subscribe(|h: &HorizontalPodAutoscaler| vec![ObjectRef::from_obj(h)]);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        hpas: inf.hpas.reader(),
        recorder: Recorder::start(client.clone(), "horizontal-pod-autoscaler"),
        settings: inf.settings.hpa,
        kinds: target::Kinds::default(),
        histories: Mutex::new(HashMap::new()),
    });
    let store = ctx.hpas.clone();
    Box::pin(reconcile_loop::run(
        "horizontal-pod-autoscaler",
        store,
        own,
        resync_ticks(),
        4,
        ctx,
        reconcile,
    ))
}

/// Every HPA is synced once per sync period whatever happens (upstream requeues each
/// key at that fixed rate); a failed sync is in its status, Events and the log.
async fn reconcile(hpa: Arc<HorizontalPodAutoscaler>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = reconcile_loop::key_of(hpa.as_ref());
    if hpa.metadata.deletion_timestamp.is_some() {
        ctx.histories.lock().remove(&key);
        return Ok(Action::await_change());
    }
    let plan = sync(&hpa, &ctx, &key).await;
    for n in &plan.notes {
        let kind = if n.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        reconcile_loop::note(&ctx.recorder, hpa.as_ref(), kind, &n.reason, &n.message);
    }
    if let Some(e) = &plan.error {
        tracing::info!(hpa = %key, error = %e, "autoscaling did not decide");
    }
    write_status(&hpa, &ctx, &key, plan).await?;
    Ok(Action::requeue(ctx.settings.sync_period))
}

/// Reads the target, its pods and their usage, decides and rescales.
async fn sync(hpa: &HorizontalPodAutoscaler, ctx: &Ctx, key: &str) -> Plan {
    let now = Timestamp::now();
    let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
    let target_ref = hpa
        .spec
        .as_ref()
        .map(|s| s.scale_target_ref.clone())
        .unwrap_or_default();
    let mut p = Plan::from(hpa);
    let scale = match ctx.kinds.get(&ctx.client, &namespace, &target_ref).await {
        Ok(scale) => scale,
        Err(e) => {
            p.scale_unreadable(&e, now);
            return p;
        }
    };
    let selector = scale
        .status
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default();
    if selector.is_empty() {
        p.selector_missing(now);
        return p;
    }
    let pods: Vec<Pod> = match Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            p.error = Some(format!("listing the pods of {selector:?}: {e}"));
            return p;
        }
    };
    let usage = usage::list(&ctx.client, &namespace, &selector).await;
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let facts = metric::Facts {
        current,
        pods: &pods,
        usage: &usage,
        now,
    };
    let mut plan = {
        let mut histories = ctx.histories.lock();
        let history = histories.entry(key.to_string()).or_default();
        plan::plan(hpa, &facts, history, &ctx.settings.knobs())
    };
    if let Some(r) = plan.rescale.clone() {
        let written = ctx
            .kinds
            .set(&ctx.client, &namespace, &target_ref, scale, r.replicas)
            .await;
        plan.rescaled(written, Timestamp::now());
    }
    plan
}

/// Writes the status when the sync changed it.
async fn write_status(
    hpa: &HorizontalPodAutoscaler,
    ctx: &Ctx,
    key: &str,
    plan: Plan,
) -> Result<(), Error> {
    if hpa.status.as_ref() == Some(&plan.status) {
        return Ok(());
    }
    let mut updated = hpa.clone();
    updated.status = Some(plan.status);
    let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
    let name = hpa.metadata.name.as_deref().unwrap_or_default();
    Api::<HorizontalPodAutoscaler>::namespaced(ctx.client.clone(), namespace)
        .replace_status(name, &PostParams::default(), &updated)
        .await
        .map(|_| ())
        .map_err(|source| Error::Status {
            key: key.to_string(),
            source,
        })
}
