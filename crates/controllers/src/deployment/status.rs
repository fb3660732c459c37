//! Deployment status (upstream `calculateStatus` and `syncRolloutStatus`): replica
//! counts summed over its ReplicaSets, `Available`, and `Progressing` with the reasons
//! `kubectl rollout status` reads (NewReplicaSetAvailable, ReplicaSetUpdated,
//! ProgressDeadlineExceeded, DeploymentPaused/Resumed). The `revision` annotation follows
//! the new ReplicaSet's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::util::{self, spec_replicas};
use super::{key_of, Ctx, Error};

const PROGRESSING: &str = "Progressing";
const AVAILABLE: &str = "Available";

pub fn calculate(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> DeploymentStatus {
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| all.iter().map(|rs| f(rs)).sum::<i32>();
    let available = sum(&util::available);
    let total_spec = sum(&spec_replicas);
    let old = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(sum(&|rs| util::status_of(rs).0)),
        updated_replicas: Some(new.map(|n| util::status_of(n).0).unwrap_or(0)),
        ready_replicas: Some(sum(&|rs| util::status_of(rs).1)),
        available_replicas: Some(available),
        unavailable_replicas: Some((total_spec - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: old.terminating_replicas,
    };
    let (kind, reason, message) = if available >= util::desired(d) - util::max_unavailable(d) {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    set_condition(&mut status, condition(AVAILABLE, kind, reason, message));
    status
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> DeploymentCondition {
    let now = Some(Time(Timestamp::now()));
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_update_time: now.clone(),
        last_transition_time: now,
    }
}

fn get_condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// Upstream `SetDeploymentCondition`: same status and reason → nothing changes; same
/// status → the transition time is kept.
fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let conds = s.conditions.get_or_insert_with(Vec::new);
    if let Some(cur) = conds.iter().find(|x| x.type_ == c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    conds.retain(|x| x.type_ != c.type_);
    conds.push(c);
}

fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = s.conditions.as_mut() {
        c.retain(|x| x.type_ != type_);
    }
}

/// Every replica updated and available, and the spec observed (upstream `DeploymentComplete`).
fn is_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let want = Some(util::desired(d));
    s.updated_replicas == want
        && s.replicas == want
        && s.available_replicas == want
        && s.observed_generation >= d.metadata.generation
}

pub fn complete(d: &Deployment, all: &[Arc<ReplicaSet>], new: Option<&ReplicaSet>) -> bool {
    is_complete(d, &calculate(d, all, new))
}

/// Some progress since the stored status (upstream `DeploymentProgressing`).
fn progressed(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let v = |x: Option<i32>| x.unwrap_or(0);
    let old_stale = v(old.replicas) - v(old.updated_replicas);
    let new_stale = v(new.replicas) - v(new.updated_replicas);
    v(new.updated_replicas) > v(old.updated_replicas)
        || new_stale < old_stale
        || v(new.ready_replicas) > v(old.ready_replicas)
        || v(new.available_replicas) > v(old.available_replicas)
}

fn deadline(d: &Deployment) -> Option<i64> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
        .map(i64::from)
}

fn rs_name(d: &Deployment, new: Option<&ReplicaSet>) -> String {
    match new {
        Some(n) => format!("ReplicaSet \"{}\"", n.name_any()),
        None => format!("Deployment \"{}\"", d.name_any()),
    }
}

/// Sets Progressing; returns when to look again if the deadline may pass meanwhile.
fn progress(
    d: &Deployment,
    s: &mut DeploymentStatus,
    new: Option<&ReplicaSet>,
) -> Option<Duration> {
    let Some(deadline) = deadline(d) else {
        remove_condition(s, PROGRESSING);
        return None;
    };
    let paused = d.spec.as_ref().and_then(|x| x.paused).unwrap_or(false);
    let current = get_condition(s, PROGRESSING).cloned();
    let reason = current
        .as_ref()
        .and_then(|c| c.reason.clone())
        .unwrap_or_default();
    if reason == "ProgressDeadlineExceeded" && !is_complete(d, s) {
        return None;
    }
    if paused {
        set_condition(
            s,
            condition(
                PROGRESSING,
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
            ),
        );
        return None;
    }
    if reason == "DeploymentPaused" {
        set_condition(
            s,
            condition(
                PROGRESSING,
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed",
            ),
        );
    }
    let name = rs_name(d, new);
    if s.replicas == s.updated_replicas && reason == "NewReplicaSetAvailable" {
        return None;
    }
    if is_complete(d, s) {
        let msg = format!("{name} has successfully progressed.");
        set_condition(
            s,
            condition(PROGRESSING, "True", "NewReplicaSetAvailable", &msg),
        );
        return None;
    }
    let old = d.status.clone().unwrap_or_default();
    if progressed(&old, s) || current.is_none() {
        let mut c = condition(
            PROGRESSING,
            "True",
            "ReplicaSetUpdated",
            &format!("{name} is progressing."),
        );
        if let Some(cur) = current.as_ref().filter(|c| c.status == "True") {
            c.last_transition_time = cur.last_transition_time.clone();
        }
        remove_condition(s, PROGRESSING);
        s.conditions.get_or_insert_with(Vec::new).push(c);
        return Some(Duration::from_secs(deadline as u64 + 1));
    }
    let since = current
        .and_then(|c| c.last_update_time)
        .map(|t| t.0)
        .unwrap_or_else(Timestamp::now);
    let due = since + SignedDuration::from_secs(deadline);
    let now = Timestamp::now();
    if due < now {
        let msg = format!("{name} has timed out progressing.");
        set_condition(
            s,
            condition(PROGRESSING, "False", "ProgressDeadlineExceeded", &msg),
        );
        return None;
    }
    Some(Duration::from_secs(
        now.duration_until(due).as_secs().max(0) as u64 + 1,
    ))
}

/// ReplicaFailure conditions of the ReplicaSets, surfaced on the Deployment.
fn replica_failure(s: &mut DeploymentStatus, all: &[Arc<ReplicaSet>], new: Option<&ReplicaSet>) {
    let from = |rs: &ReplicaSet| {
        rs.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "ReplicaFailure")
            .cloned()
    };
    let failure = new
        .and_then(from)
        .or_else(|| all.iter().find_map(|rs| from(rs)));
    match failure {
        Some(f) => set_condition(
            s,
            DeploymentCondition {
                type_: "ReplicaFailure".into(),
                status: f.status,
                reason: f.reason,
                message: f.message,
                last_update_time: f.last_transition_time.clone(),
                last_transition_time: f.last_transition_time,
            },
        ),
        None => remove_condition(s, "ReplicaFailure"),
    }
}

pub async fn sync_rollout_status(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> Result<Action, Error> {
    let mut s = calculate(d, all, new);
    let recheck = progress(d, &mut s, new);
    replica_failure(&mut s, all, new);
    write_revision(d, ctx, new).await?;
    write(d, ctx, &s).await?;
    Ok(recheck.map_or_else(Action::await_change, Action::requeue))
}

pub async fn sync_only(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
) -> Result<Action, Error> {
    let (new, _) = util::split(d, all);
    write(d, ctx, &calculate(d, all, new.as_deref())).await?;
    Ok(Action::await_change())
}

pub async fn observe_generation_only(d: &Deployment, ctx: &Ctx) -> Result<(), Error> {
    let mut s = d.status.clone().unwrap_or_default();
    s.observed_generation = d.metadata.generation;
    write(d, ctx, &s).await
}

pub async fn bump_collision_count(d: &Deployment, ctx: &Ctx) -> Result<(), Error> {
    let mut s = d.status.clone().unwrap_or_default();
    s.collision_count = Some(s.collision_count.unwrap_or(0) + 1);
    write(d, ctx, &s).await
}

fn api_err(d: &Deployment) -> impl Fn(kube::Error) -> Error + '_ {
    move |source| Error::Api {
        key: key_of(d),
        source,
    }
}

/// The Deployment's revision annotation follows its new ReplicaSet's.
async fn write_revision(d: &Deployment, ctx: &Ctx, new: Option<&ReplicaSet>) -> Result<(), Error> {
    let Some(n) = new else { return Ok(()) };
    let revision = util::revision(n).to_string();
    if d.annotations().get(util::REVISION) == Some(&revision) {
        return Ok(());
    }
    let api: Api<Deployment> =
        Api::namespaced(ctx.client.clone(), &d.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": {util::REVISION: revision}}});
    api.patch(&d.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(api_err(d))
}

/// Status fields upstream leaves out when zero or empty (`omitempty`).
const OMITTED_WHEN_EMPTY: [&str; 6] = [
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "conditions",
];

/// The status as it is stored: zero counts and no conditions left out.
fn stored_form(s: &DeploymentStatus) -> Value {
    let mut value = serde_json::to_value(s).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.retain(|key, v| {
            let empty = match v {
                Value::Null => true,
                Value::Number(n) => n.as_i64() == Some(0),
                Value::Array(a) => a.is_empty(),
                _ => false,
            };
            !(empty && OMITTED_WHEN_EMPTY.contains(&key.as_str()))
        });
    }
    value
}

/// Writes `s` unless it is what is stored (compared as stored: a computed zero is the
/// stored absence, so an unchanged status never turns into a write, and the write's own
/// watch event never into another one). Zero counts are left out, as upstream's
/// `omitempty` fields are.
async fn write(d: &Deployment, ctx: &Ctx, s: &DeploymentStatus) -> Result<(), Error> {
    let value = stored_form(s);
    if d.status.as_ref().map(stored_form).as_ref() == Some(&value) {
        return Ok(());
    }
    let mut value = value;
    for key in OMITTED_WHEN_EMPTY {
        if value.get(key).is_none() {
            // A merge patch removes what the stored status still has.
            value[key] = Value::Null;
        }
    }
    let api: Api<Deployment> =
        Api::namespaced(ctx.client.clone(), &d.namespace().unwrap_or_default());
    match api
        .patch_status(
            &d.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": value})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(api_err(d)(e)),
    }
}

#[cfg(test)]
mod stored_form_tests {
    use super::*;

    /// A computed zero is the stored absence: comparing the two as stored finds no change,
    /// so a settled Deployment is not written again and again.
    #[test]
    fn a_computed_zero_matches_the_stored_absence() {
        let computed = DeploymentStatus {
            replicas: Some(2),
            ready_replicas: Some(2),
            unavailable_replicas: Some(0),
            conditions: Some(vec![]),
            observed_generation: Some(1),
            ..Default::default()
        };
        let stored: DeploymentStatus = serde_json::from_value(
            json!({"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}),
        )
        .unwrap();
        assert_ne!(Some(&computed), Some(&stored));
        assert_eq!(stored_form(&computed), stored_form(&stored));
        let changed = DeploymentStatus {
            ready_replicas: Some(1),
            ..computed
        };
        assert_ne!(stored_form(&changed), stored_form(&stored));
    }
}
