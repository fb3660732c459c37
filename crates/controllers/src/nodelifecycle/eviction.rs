//! Taint-based eviction (upstream `taint-eviction-controller`): a pod on a node with a
//! NoExecute taint it does not tolerate is deleted at once; one it tolerates for
//! `tolerationSeconds` is deleted that long after the taint was added (the shortest such
//! toleration decides); one it tolerates without a limit stays. A taint removed in time
//! cancels the eviction: each pass looks afresh.

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Recorder};
use cairn_semantics::pod_state::{self, PodView};
use futures::Stream;
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;

#[derive(Debug, Error)]
#[error("taint eviction, pod {pod}: {source}")]
pub struct Error {
    pod: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub nodes: Store<Node>,
    pub pods: Store<CachedPod>,
    pub recorder: Recorder,
}

/// A pod wakes its node.
pub fn pod_node(pod: &CachedPod) -> Vec<ObjectRef<Node>> {
    pod.node_name
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| ObjectRef::new(n))
        .collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Node>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.nodes.clone();
    crate::reconcile_loop::run("taint-eviction", store, triggers, resync, 4, ctx, reconcile).await;
}

/// When a pod with `tolerations` must leave a node with `taints` (NoExecute ones): `None`
/// for never, `Some(t <= now)` for at once.
pub fn eviction_time(
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Timestamp,
) -> Option<Timestamp> {
    let mut due: Option<Timestamp> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let matching = tolerations
            .iter()
            .filter(|t| cairn_semantics::taints::tolerates(t, taint));
        // The most generous matching toleration applies to this taint.
        let mut limit: Option<Option<i64>> = None;
        for t in matching {
            limit = Some(match (limit, t.toleration_seconds) {
                (Some(None), _) | (_, None) => None,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                (None, Some(b)) => Some(b),
            });
        }
        let taint_due = match limit {
            None => Some(now),
            Some(None) => None,
            Some(Some(secs)) => {
                let added = taint.time_added.as_ref().map_or(now, |t| t.0);
                Some(added + k8s_openapi::jiff::SignedDuration::from_secs(secs.max(0)))
            }
        };
        if let Some(t) = taint_due {
            due = Some(due.map_or(t, |d| d.min(t)));
        }
    }
    due
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let taints: Vec<Taint> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.effect == "NoExecute")
        .cloned()
        .collect();
    if taints.is_empty() {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let name = node.name_any();
    let mut next: Option<Timestamp> = None;
    for pod in ctx
        .pods
        .state()
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(name.as_str()))
    {
        if pod_state::is_terminal(pod.as_ref()) || pod.deleting() {
            continue;
        }
        match eviction_time(&taints, &pod.no_execute_tolerations, now) {
            Some(t) if t <= now => evict(&ctx, pod).await?,
            Some(t) => next = Some(next.map_or(t, |n| n.min(t))),
            None => {}
        }
    }
    Ok(match next {
        Some(t) => Action::requeue(
            Duration::try_from(t.duration_since(now)).unwrap_or_default()
                + Duration::from_millis(50),
        ),
        None => Action::await_change(),
    })
}

async fn evict(ctx: &Ctx, pod: &CachedPod) -> Result<(), Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {
            let message = format!("Marking for deletion Pod {ns}/{name}");
            crate::reconcile_loop::note(
                &ctx.recorder,
                pod,
                EventType::Normal,
                "TaintManagerEviction",
                &message,
            );
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(Error {
            pod: format!("{ns}/{name}"),
            source,
        }),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.nodes.subscribe(|n: &Node| vec![ObjectRef::from_obj(n)]);
    let pods = inf.pods.subscribe(pod_node);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        recorder: Recorder::start(client.clone(), "taint-eviction-controller"),
    });
    Box::pin(run(ctx, futures::stream::select(own, pods), resync_ticks()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taint(key: &str, added: &str) -> Taint {
        serde_json::from_value(json!({"key": key, "effect": "NoExecute", "timeAdded": added}))
            .unwrap()
    }

    fn toleration(key: &str, secs: Option<i64>) -> Toleration {
        serde_json::from_value(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs})).unwrap()
    }

    #[test]
    fn the_shortest_tolerated_time_decides() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let unreachable = taint("node.kubernetes.io/unreachable", "2026-01-01T00:00:00Z");
        let t300 = toleration("node.kubernetes.io/unreachable", Some(300));
        let due = eviction_time(
            std::slice::from_ref(&unreachable),
            std::slice::from_ref(&t300),
            now,
        )
        .unwrap();
        assert_eq!(due.to_string(), "2026-01-01T00:05:00Z");
        // Untolerated: at once. Tolerated forever: never.
        assert_eq!(
            eviction_time(std::slice::from_ref(&unreachable), &[], now),
            Some(now)
        );
        let forever = toleration("node.kubernetes.io/unreachable", None);
        assert_eq!(
            eviction_time(std::slice::from_ref(&unreachable), &[forever], now),
            None
        );
        // Two taints: the earlier deadline.
        let other = taint("example.com/maintenance", "2026-01-01T00:00:30Z");
        let t10 = toleration("example.com/maintenance", Some(10));
        let due = eviction_time(&[unreachable, other], &[t300, t10], now).unwrap();
        assert_eq!(due.to_string(), "2026-01-01T00:00:40Z");
    }
}
