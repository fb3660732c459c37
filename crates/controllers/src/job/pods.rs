//! Creating and deleting a Job's pods: from the template with the tracking finalizer and,
//! for Indexed Jobs, the completion index (annotation, label, hostname and the
//! `JOB_COMPLETION_INDEX` variable).

use std::sync::Arc;

use cairn_events::EventType;
use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;

use super::indexes::INDEX_ANNOTATION;
use super::tracking::TRACKING_FINALIZER;
use super::Ctx;
use crate::cached_pod::CachedPod;
use crate::owner;

/// A new pod for `job`, for completion index `index` when the Job is Indexed.
pub fn pod_for(job: &Job, index: Option<i32>) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let name = job.name_any();
    let mut finalizers = meta.finalizers.unwrap_or_default();
    finalizers.push(TRACKING_FINALIZER.into());
    let mut pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some(match index {
                Some(i) => format!("{name}-{i}-"),
                None => format!("{name}-"),
            }),
            namespace: job.namespace(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: Some(finalizers),
            owner_references: Some(vec![owner::controller_ref(job)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    };
    if let Some(i) = index {
        add_index(&mut pod, &name, i);
    }
    pod
}

fn add_index(pod: &mut Pod, job_name: &str, i: i32) {
    let value = i.to_string();
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(INDEX_ANNOTATION.into(), value.clone());
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(INDEX_ANNOTATION.into(), value);
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.hostname.is_none() {
        spec.hostname = Some(format!("{job_name}-{i}"));
    }
    let env = EnvVar {
        name: "JOB_COMPLETION_INDEX".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.annotations['{INDEX_ANNOTATION}']"),
            }),
            ..Default::default()
        }),
    };
    let add = |c: &mut Container| c.env.get_or_insert_with(Vec::new).push(env.clone());
    spec.containers.iter_mut().for_each(add);
    spec.init_containers.iter_mut().flatten().for_each(add);
}

/// Creates pods for `indexes` (one pod each; `None` entries for a NonIndexed Job) in
/// slow-start batches; the first error.
pub async fn create(
    job: &Job,
    ctx: &Ctx,
    key: &str,
    indexes: &[Option<i32>],
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let pp = PostParams::default();
    crate::slow_start::in_batches(indexes.len(), |slot| {
        let pod = pod_for(job, indexes[slot]);
        let (api, pp) = (&api, &pp);
        async move {
            match api.create(pp, &pod).await {
                Ok(created) => {
                    let name = created.name_any();
                    ctx.expectations.created(key, &name);
                    note(
                        ctx,
                        job,
                        EventType::Normal,
                        "SuccessfulCreate",
                        &format!("Created pod: {name}"),
                    );
                    Ok(())
                }
                Err(e) if crate::slow_start::namespace_terminating(&e) => Ok(()),
                Err(e) => {
                    note(
                        ctx,
                        job,
                        EventType::Warning,
                        "FailedCreate",
                        &format!("Error creating: {e}"),
                    );
                    Err(e)
                }
            }
        }
    })
    .await
}

/// Deletes `pods`, releasing their tracking finalizer first: pods the controller removes
/// (excess parallelism, suspension, a failed Job) are not counted as failures.
pub async fn delete(
    job: &Job,
    ctx: &Ctx,
    key: &str,
    pods: &[Arc<CachedPod>],
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let release = Patch::Strategic(serde_json::json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}
    }));
    let results = join_all(pods.iter().map(|p| {
        let name = p.name_any();
        ctx.expectations.deleted(key, &name);
        let (api, release) = (&api, &release);
        async move {
            api.patch(&name, &PatchParams::default(), release).await?;
            api.delete(&name, &DeleteParams::default()).await?;
            Ok::<_, kube::Error>(name)
        }
    }))
    .await;
    let mut first_error = None;
    for r in results {
        match r {
            Ok(name) => note(
                ctx,
                job,
                EventType::Normal,
                "SuccessfulDelete",
                &format!("Deleted pod: {name}"),
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                note(
                    ctx,
                    job,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Error deleting: {e}"),
                );
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

pub fn note(ctx: &Ctx, job: &Job, kind: EventType, reason: &str, message: &str) {
    crate::reconcile_loop::note(&ctx.recorder, job, kind, reason, message);
}
