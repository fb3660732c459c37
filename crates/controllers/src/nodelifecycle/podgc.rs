//! The pod garbage collector (upstream `pkg/controller/podgc`), every 20 s: pods bound to a
//! node that no longer exists (seen missing on two passes in a row, so a node just
//! created is not mistaken) and unscheduled pods being deleted are removed at once
//! (grace 0: no kubelet will finish them); finished pods beyond
//! `--terminated-pod-gc-threshold` are deleted oldest first.

use crate::wiring::{Informers, Task};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_semantics::pod_state::{self, PodView};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use tracing::{info, warn};

use crate::cached_pod::CachedPod;

pub const PERIOD: Duration = Duration::from_secs(20);

pub struct Ctx {
    pub client: Client,
    pub nodes: Store<Node>,
    pub pods: Store<CachedPod>,
    /// `--terminated-pod-gc-threshold` (12,500; 0 turns that part off).
    pub terminated_threshold: usize,
}

/// What one pass deletes: `(namespace, name)`.
#[derive(Debug, Default, PartialEq)]
pub struct Collect {
    pub orphaned: Vec<(String, String)>,
    pub unscheduled_terminating: Vec<(String, String)>,
    pub terminated: Vec<(String, String)>,
}

fn id(p: &CachedPod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pods to delete; `missing` are the nodes found missing on the last pass (updated).
pub fn plan(
    pods: &[Arc<CachedPod>],
    node_exists: &dyn Fn(&str) -> bool,
    missing: &mut HashSet<String>,
    terminated_threshold: usize,
) -> Collect {
    let mut out = Collect::default();
    let mut missing_now = HashSet::new();
    for p in pods {
        let node = p.node_name.clone().unwrap_or_default();
        if node.is_empty() {
            if p.deleting() {
                out.unscheduled_terminating.push(id(p));
            }
            continue;
        }
        if !node_exists(&node) {
            if missing.contains(&node) {
                out.orphaned.push(id(p));
            }
            missing_now.insert(node);
        }
    }
    *missing = missing_now;
    let mut finished: Vec<&Arc<CachedPod>> = pods
        .iter()
        .filter(|p| pod_state::is_terminal(p.as_ref()))
        .collect();
    if terminated_threshold > 0 && finished.len() > terminated_threshold {
        finished.sort_by_key(|p| p.created());
        let excess = finished.len() - terminated_threshold;
        out.terminated = finished[..excess].iter().map(|p| id(p)).collect();
    }
    out
}

pub async fn run(ctx: Arc<Ctx>) {
    let mut missing = HashSet::new();
    let mut tick = tokio::time::interval(PERIOD);
    loop {
        tick.tick().await;
        let pods = ctx.pods.state();
        let exists = |n: &str| ctx.nodes.get(&ObjectRef::new(n)).is_some();
        let collect = plan(&pods, &exists, &mut missing, ctx.terminated_threshold);
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        for (ns, name) in collect
            .orphaned
            .iter()
            .chain(&collect.unscheduled_terminating)
        {
            delete(
                &ctx,
                ns,
                name,
                &force,
                "pod of a node that is gone, or unscheduled and terminating",
            )
            .await;
        }
        for (ns, name) in &collect.terminated {
            delete(
                &ctx,
                ns,
                name,
                &DeleteParams::default(),
                "finished pod over the threshold",
            )
            .await;
        }
    }
}

async fn delete(ctx: &Ctx, ns: &str, name: &str, params: &DeleteParams, why: &str) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    match api.delete(name, params).await {
        Ok(_) => info!(pod = %format!("{ns}/{name}"), why, "garbage-collected pod"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        // The next pass tries again.
        Err(e) => warn!(pod = %format!("{ns}/{name}"), error = %e, "garbage-collecting pod"),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        terminated_threshold: inf.settings.terminated_pod_gc_threshold,
    });
    Box::pin(run(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, phase: &str, created: &str) -> Arc<CachedPod> {
        let mut p = CachedPod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("d".into());
        p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            created.parse().unwrap(),
        ));
        p.node_name = (!node.is_empty()).then(|| node.to_string());
        p.phase = Some(phase.into());
        Arc::new(p)
    }

    #[test]
    fn orphans_after_two_passes_and_oldest_finished_first() {
        let pods = vec![
            pod("a", "gone", "Running", "2026-01-01T00:00:00Z"),
            pod("b", "here", "Succeeded", "2026-01-01T00:00:02Z"),
            pod("c", "here", "Failed", "2026-01-01T00:00:01Z"),
            pod("d", "here", "Running", "2026-01-01T00:00:00Z"),
        ];
        let exists = |n: &str| n == "here";
        let mut missing = HashSet::new();
        let first = plan(&pods, &exists, &mut missing, 1);
        assert!(first.orphaned.is_empty(), "a node missing once may be new");
        assert_eq!(first.terminated, [("d".to_string(), "c".to_string())]);
        let second = plan(&pods, &exists, &mut missing, 1);
        assert_eq!(second.orphaned, [("d".to_string(), "a".to_string())]);
    }
}
