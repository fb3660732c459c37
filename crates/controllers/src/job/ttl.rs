//! The TTL-after-finished controller (upstream `pkg/controller/ttlafterfinished`): a
//! finished Job with `ttlSecondsAfterFinished` is deleted (with its pods, in the
//! foreground) that many seconds after it finished.

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use super::Error;
use crate::reconcile_loop;

pub struct Ctx {
    pub client: Client,
    pub jobs: Store<Job>,
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Job>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.jobs.clone();
    reconcile_loop::run(
        "ttl-after-finished",
        store,
        triggers,
        resync,
        4,
        ctx,
        reconcile,
    )
    .await;
}

/// When the Job finished (its Complete or Failed condition's transition).
fn finished_at(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or_else(Timestamp::now, |t| t.0)
        })
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    let (Some(ttl), Some(done)) = (ttl, finished_at(&job)) else {
        return Ok(Action::await_change());
    };
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let left = done.as_second() + i64::from(ttl) - Timestamp::now().as_second();
    if left > 0 {
        return Ok(Action::requeue(Duration::from_secs(left as u64)));
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let dp = DeleteParams {
        // The Job as it was checked: a changed TTL is looked at again first.
        preconditions: Some(Preconditions {
            uid: job.uid(),
            resource_version: job.resource_version(),
        }),
        ..DeleteParams::foreground()
    };
    match api.delete(&job.name_any(), &dp).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Action::await_change()),
        Err(source) => Err(Error::Api {
            key: reconcile_loop::key_of(job.as_ref()),
            source,
        }),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.jobs.subscribe(|j: &Job| vec![ObjectRef::from_obj(j)]);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        jobs: inf.jobs.reader(),
    });
    Box::pin(run(ctx, own, resync_ticks()))
}
