//! The ResourceQuota controller (upstream `pkg/controller/resourcequota`): keeps each
//! quota's `status.hard` (its spec) and `status.used` (what the namespace's objects
//! charge, by the shared rules of `cairn_semantics::quota`). Pods and Services come from
//! the shared caches and wake their namespace's quotas; other counted kinds are listed
//! when a quota is synced (on its changes and every [`RESYNC`]).
//!
//! Admission charges a quota before the object is stored, so for a moment a count can
//! trail the charge; a decrease is therefore written only once it has held for
//! [`SETTLE`] (increases at once), so the controller never hands a charge back that an
//! object is about to claim.

mod counted;
// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .quotas
        .subscribe(|q: &ResourceQuota| vec![ObjectRef::from_obj(q)]);
    let quotas = inf.quotas.reader();
    let pods = inf.pods.subscribe_with_deletions(move |p: &CachedPod, _| {
        namespace_quotas(&quotas, p.metadata.namespace.as_deref())
    });
    let quotas = inf.quotas.reader();
    let services = inf
        .services
        .subscribe_with_deletions(move |s: &Service, _| {
            namespace_quotas(&quotas, s.metadata.namespace.as_deref())
        });
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        quotas: inf.quotas.reader(),
        pods: inf.pods.reader(),
        services: inf.services.reader(),
        decreases: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), services.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}

#[cfg(test)]
mod tests;

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_semantics::quota::{self, PodQuota, Usage};
use futures::Stream;
use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use thiserror::Error;
use tracing::debug;

use crate::cached_pod::CachedPod;
use crate::reconcile_loop::key_of;

/// How often every quota is recounted (kinds without a watch are counted then).
pub const RESYNC: Duration = Duration::from_secs(10);
/// How long a lower count must hold before it is written.
pub const SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug, Error)]
pub enum Error {
    #[error("resourcequota controller, quota {quota}: writing its status: {source}")]
    Write {
        quota: String,
        #[source]
        source: kube::Error,
    },
    #[error("resourcequota controller, quota {quota}: counting {resource}: {source}")]
    Count {
        quota: String,
        resource: String,
        #[source]
        source: kube::Error,
    },
    #[error("resourcequota controller, quota {quota}: {message}")]
    Invalid { quota: String, message: String },
}

pub struct Ctx {
    pub client: Client,
    pub quotas: Store<ResourceQuota>,
    pub pods: Store<CachedPod>,
    pub services: Store<Service>,
    /// Lower counts seen, by quota key, with when they were first seen.
    pub decreases: Mutex<HashMap<String, (Usage, Instant)>>,
}

/// The quotas of a namespace (what a pod or service event wakes).
pub fn namespace_quotas(
    quotas: &Store<ResourceQuota>,
    ns: Option<&str>,
) -> Vec<ObjectRef<ResourceQuota>> {
    quotas
        .state()
        .iter()
        .filter(|q| q.metadata.namespace.as_deref() == ns)
        .map(|q| ObjectRef::from_obj(q.as_ref()))
        .collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<ResourceQuota>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.quotas.clone();
    crate::reconcile_loop::run("resourcequota", store, triggers, resync, 2, ctx, reconcile).await;
}

/// What the pods of the namespace charge the quota: those its scopes select, at `now`.
pub fn pods_usage<'a>(
    spec: &ResourceQuotaSpec,
    pods: impl Iterator<Item = &'a CachedPod>,
    now: Timestamp,
) -> Usage {
    let hard = spec.hard.clone().unwrap_or_default();
    if !hard.keys().any(|n| PodQuota::is_pod_resource(n)) {
        return Usage::default();
    }
    let selectors = quota::quota_selectors(spec);
    let mut used = Usage::default();
    for pod in pods {
        let facts = pod.quota.as_deref().cloned().unwrap_or_default();
        if quota::pod_matches(&selectors, &facts.scopes) {
            used.add(&facts.usage(now));
        }
    }
    used
}

/// What the namespace's services charge (nothing under a scoped quota).
pub fn services_usage<'a>(
    spec: &ResourceQuotaSpec,
    services: impl Iterator<Item = &'a Service>,
) -> Usage {
    let mut used = Usage::default();
    if quota::quota_selectors(spec).is_empty() {
        services.for_each(|s| used.add(&quota::service_usage(s)));
    }
    used
}

/// The `used` to write: `computed`, except that decreases wait until they have held for
/// [`SETTLE`]; `Some(wait)` when a decrease is still settling.
fn settled(ctx: &Ctx, key: &str, current: &Usage, computed: Usage) -> (Usage, Option<Duration>) {
    let lower = computed
        .iter()
        .any(|(n, v)| current.get(n).is_some_and(|c| v < c));
    let mut decreases = ctx.decreases.lock();
    if !lower {
        decreases.remove(key);
        return (computed, None);
    }
    let now = Instant::now();
    let seen = decreases
        .entry(key.to_string())
        .or_insert((computed.clone(), now));
    if seen.0 != computed {
        *seen = (computed.clone(), now);
    }
    let held = now.duration_since(seen.1);
    if held >= SETTLE {
        decreases.remove(key);
        return (computed, None);
    }
    let mut partial = computed.clone();
    for (n, c) in current.iter() {
        if partial.get(n).is_some_and(|v| v < c) {
            partial.set(n, c);
        }
    }
    (partial, Some(SETTLE - held))
}

fn parse(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    quota: &str,
) -> Result<Usage, Error> {
    list.map(Usage::parse)
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| Error::Invalid {
            quota: quota.to_string(),
            message: e.to_string(),
        })
}

#[tracing::instrument(skip_all, fields(quota = %key_of(q.as_ref())))]
async fn reconcile(q: Arc<ResourceQuota>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = key_of(q.as_ref());
    let ns = q.namespace().unwrap_or_default();
    let spec = q.spec.clone().unwrap_or_default();
    let hard = spec.hard.clone().unwrap_or_default();
    let names: Vec<&str> = hard.keys().map(String::as_str).collect();
    let pods = ctx.pods.state();
    let in_ns = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()));
    let mut computed = pods_usage(&spec, in_ns.map(|p| p.as_ref()), Timestamp::now());
    let services = ctx.services.state();
    let svcs = services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns.as_str()));
    computed.add(&services_usage(&spec, svcs.map(|s| s.as_ref())));
    computed.add(&counted::usage(&ctx.client, &key, &ns, &spec).await?);
    let computed = computed.restricted_to(names.iter().copied());
    let status = q.status.clone().unwrap_or_default();
    let current = parse(status.used.as_ref(), &key)?;
    let (used, wait) = settled(&ctx, &key, &current, computed);
    let hard_now = parse(status.hard.as_ref(), &key)?;
    if used != current || hard_now != parse(Some(&hard), &key)? || status.used.is_none() {
        debug!(used = %used.pretty(), "writing quota status");
        let mut next = (*q).clone();
        next.metadata.managed_fields = None;
        next.status = Some(ResourceQuotaStatus {
            hard: Some(hard),
            used: Some(used.to_list()),
        });
        let api: Api<ResourceQuota> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&q.name_any(), &PostParams::default(), &next)
            .await
            .map_err(|source| Error::Write { quota: key, source })?;
    }
    Ok(Action::requeue(wait.unwrap_or(RESYNC)))
}
