//! One sync of one HPA decided without IO, upstream's `reconcileAutoscaler`: the
//! replicas every metric asks for, bounded by min/max, stabilized and rate-limited by
//! `behavior` (or upstream's rules for an HPA without one), with the status, the
//! conditions and the Events upstream writes at each step.

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricSpec, MetricStatus, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::behavior::{self, Args, Normalized, Timed};
use super::calculator::Tunables;
use super::metric::{self, Facts, Failure, Proposal};

/// What one HPA remembers between syncs (upstream keeps the same in memory).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Recommendations before normalization, newest last.
    pub recommendations: Vec<Timed>,
    /// Replicas added or removed per rescale (HPAs with `behavior` only).
    pub scale_up_events: Vec<Timed>,
    pub scale_down_events: Vec<Timed>,
}

/// The knobs of upstream's `--horizontal-pod-autoscaler-*` flags that decide.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    pub downscale_stabilization: SignedDuration,
    pub tunables: Tunables,
}

/// An Event to record about the HPA.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// A scale to write through `/scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rescale {
    pub replicas: i32,
    pub reason: String,
}

/// The sync's outcome: the status to write, the Events, the rescale if any, and the
/// error that makes the sync count as failed (after the status is written).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub status: HorizontalPodAutoscalerStatus,
    pub notes: Vec<Note>,
    pub rescale: Option<Rescale>,
    pub error: Option<String>,
}

impl Plan {
    /// A plan that starts from the HPA's status as written.
    pub fn from(hpa: &HorizontalPodAutoscaler) -> Plan {
        Plan {
            status: hpa.status.clone().unwrap_or_default(),
            notes: Vec::new(),
            rescale: None,
            error: None,
        }
    }

    /// Upstream's `setConditionInList`: the transition time moves only with the status.
    pub fn condition(
        &mut self,
        type_: &str,
        status: bool,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) {
        let status = if status { "True" } else { "False" };
        let list = self.status.conditions.get_or_insert_with(Vec::new);
        let i = match list.iter().position(|c| c.type_ == type_) {
            Some(i) => i,
            None => {
                list.push(HorizontalPodAutoscalerCondition {
                    type_: type_.to_string(),
                    ..Default::default()
                });
                list.len() - 1
            }
        };
        let c = &mut list[i];
        if c.status != status || c.last_transition_time.is_none() {
            c.last_transition_time = Some(Time(now));
        }
        c.status = status.to_string();
        c.reason = Some(reason.to_string());
        c.message = Some(message.to_string());
    }

    pub fn note(&mut self, warning: bool, reason: &str, message: String) {
        self.notes.push(Note {
            warning,
            reason: reason.to_string(),
            message,
        });
    }

    /// The target's Scale could not be read.
    pub fn scale_unreadable(&mut self, error: &str, now: Timestamp) {
        self.note(true, "FailedGetScale", error.to_string());
        let message =
            format!("the HPA controller was unable to get the target's current scale: {error}");
        self.condition("AbleToScale", false, "FailedGetScale", &message, now);
        self.error = Some(format!("failed to query scale subresource: {error}"));
    }

    /// The Scale has no selector to find the pods by.
    pub fn selector_missing(&mut self, now: Timestamp) {
        self.note(true, "SelectorRequired", "selector is required".into());
        let message = "the HPA target's scale is missing a selector";
        self.condition("ScalingActive", false, "InvalidSelector", message, now);
        self.error = Some("selector is required".into());
    }

    /// The outcome of writing the rescale.
    pub fn rescaled(&mut self, result: Result<(), String>, now: Timestamp) {
        let Some(r) = self.rescale.clone() else {
            return;
        };
        match result {
            Ok(()) => {
                let message = format!(
                    "the HPA controller was able to update the target scale to {}",
                    r.replicas
                );
                self.condition("AbleToScale", true, "SucceededRescale", &message, now);
                self.note(
                    false,
                    "SuccessfulRescale",
                    format!("New size: {}; reason: {}", r.replicas, r.reason),
                );
                self.status.last_scale_time = Some(Time(now));
            }
            Err(e) => {
                let message =
                    format!("the HPA controller was unable to update the target scale: {e}");
                self.condition("AbleToScale", false, "FailedUpdateScale", &message, now);
                self.note(
                    true,
                    "FailedRescale",
                    format!("New size: {}; reason: {}; error: {e}", r.replicas, r.reason),
                );
                self.status.desired_replicas = self.status.current_replicas.unwrap_or(0);
                self.error = Some(format!("failed to rescale: {e}"));
            }
        }
    }
}

/// The metrics an HPA without any get (upstream's defaulting): 80 % CPU.
fn metric_specs(hpa: &HorizontalPodAutoscaler) -> Vec<MetricSpec> {
    let given = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.clone())
        .unwrap_or_default();
    if !given.is_empty() {
        return given;
    }
    vec![MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(80),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]
}

/// Decides one sync once the Scale (`facts.current`) and the pods and usage are known.
pub fn plan(
    hpa: &HorizontalPodAutoscaler,
    facts: &Facts<'_>,
    history: &mut History,
    knobs: &Knobs,
) -> Plan {
    let mut p = Plan::from(hpa);
    let now = facts.now;
    p.condition(
        "AbleToScale",
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
        now,
    );
    let spec = hpa.spec.clone().unwrap_or_default();
    let (min, max, current) = (
        spec.min_replicas.unwrap_or(1),
        spec.max_replicas,
        facts.current,
    );
    p.status.current_replicas = Some(current);
    let (desired, reason) = if current == 0 && min != 0 {
        let message = "scaling is disabled since the replica count of the target is zero";
        p.condition("ScalingActive", false, "ScalingDisabled", message, now);
        (0, None)
    } else if current > max {
        (
            max,
            Some("Current number of replicas above Spec.MaxReplicas".to_string()),
        )
    } else if current < min {
        (
            min,
            Some("Current number of replicas below Spec.MinReplicas".to_string()),
        )
    } else {
        match from_metrics(hpa, facts, &mut p, knobs) {
            Some(proposal) => {
                let reason = rescale_reason(current, proposal.replicas, &proposal.name);
                let normalized = normalize(
                    hpa,
                    current,
                    proposal.replicas,
                    min,
                    max,
                    history,
                    knobs,
                    now,
                );
                limit_conditions(&mut p, proposal.replicas, &normalized, now);
                (normalized.replicas, reason)
            }
            None => return p,
        }
    };
    p.status.desired_replicas = desired;
    // The disabled branch gives no reason, so it never rescales.
    if let (Some(reason), true) = (reason, desired != current) {
        p.rescale = Some(Rescale {
            replicas: desired,
            reason,
        });
        record_scale_event(hpa, history, current, desired, now);
    }
    p
}

fn rescale_reason(current: i32, desired: i32, metric: &str) -> Option<String> {
    match desired.cmp(&current) {
        std::cmp::Ordering::Greater => Some(format!("{metric} above target")),
        std::cmp::Ordering::Less => Some("All metrics below target".into()),
        std::cmp::Ordering::Equal => None,
    }
}

/// The largest proposal of the metrics (upstream's `computeReplicasForMetrics`), or
/// None when the metrics cannot decide: all failed, or some failed and the rest would
/// scale down.
fn from_metrics(
    hpa: &HorizontalPodAutoscaler,
    facts: &Facts<'_>,
    p: &mut Plan,
    knobs: &Knobs,
) -> Option<Proposal> {
    let specs = metric_specs(hpa);
    let mut best: Option<Proposal> = None;
    let mut statuses: Vec<MetricStatus> = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    for spec in &specs {
        match metric::evaluate(spec, facts, &knobs.tunables) {
            Ok(proposal) => {
                statuses.push(proposal.status.clone());
                if best.as_ref().is_none_or(|b| proposal.replicas > b.replicas) {
                    best = Some(proposal);
                }
            }
            Err(failure) => {
                p.note(true, failure.reason, failure.error.clone());
                statuses.push(MetricStatus::default());
                failures.push(failure);
            }
        }
    }
    p.status.current_metrics = Some(statuses);
    let scaling_down = best.as_ref().is_some_and(|b| b.replicas < facts.current);
    if let Some(first) = failures.first().filter(|_| best.is_none() || scaling_down) {
        let message = format!(
            "the HPA was unable to compute the replica count: {}",
            first.error
        );
        p.condition("ScalingActive", false, first.reason, &message, facts.now);
        let error = format!(
            "invalid metrics ({} invalid out of {}), first error is: {}",
            failures.len(),
            specs.len(),
            first.error
        );
        p.note(true, "FailedComputeMetricsReplicas", error.clone());
        p.error = Some(format!(
            "failed to compute desired number of replicas based on listed metrics: {error}"
        ));
        return None;
    }
    let best = best?;
    let message = format!(
        "the HPA was able to successfully calculate a replica count from {}",
        best.name
    );
    p.condition(
        "ScalingActive",
        true,
        "ValidMetricFound",
        &message,
        facts.now,
    );
    Some(best)
}

#[allow(clippy::too_many_arguments)]
fn normalize(
    hpa: &HorizontalPodAutoscaler,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
    history: &mut History,
    knobs: &Knobs,
    now: Timestamp,
) -> Normalized {
    let behavior = hpa.spec.as_ref().and_then(|s| s.behavior.as_ref());
    let (up, down) = behavior::rules(behavior, knobs.downscale_stabilization);
    let keep = match behavior {
        Some(_) => up.stabilization.max(down.stabilization),
        None => knobs.downscale_stabilization,
    };
    history.recommendations.retain(|r| r.at >= now - keep);
    let args = Args {
        current,
        desired,
        min,
        max,
        recommendations: &history.recommendations,
        scale_up_events: &history.scale_up_events,
        scale_down_events: &history.scale_down_events,
        now,
    };
    let normalized = match behavior {
        Some(_) => behavior::normalize(&args, &up, &down),
        None => behavior::normalize_legacy(&args, knobs.downscale_stabilization),
    };
    history.recommendations.push(Timed {
        at: now,
        replicas: desired,
    });
    normalized
}

/// AbleToScale's stabilization reasons and ScalingLimited, as upstream sets them.
fn limit_conditions(p: &mut Plan, desired: i32, n: &Normalized, now: Timestamp) {
    let (reason, message) = match n.stabilized.cmp(&desired) {
        std::cmp::Ordering::Equal => ("ReadyForNewScale", "recommended size matches current size"),
        std::cmp::Ordering::Less => ("ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"),
        std::cmp::Ordering::Greater => ("ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"),
    };
    p.condition("AbleToScale", true, reason, message, now);
    p.condition(
        "ScalingLimited",
        n.replicas != n.stabilized,
        n.reason,
        n.message,
        now,
    );
}

/// Scale events count against `behavior`'s rate policies (upstream records them only
/// for HPAs with a behavior); events older than the longest period are dropped.
fn record_scale_event(
    hpa: &HorizontalPodAutoscaler,
    history: &mut History,
    from: i32,
    to: i32,
    now: Timestamp,
) {
    let Some(behavior) = hpa.spec.as_ref().and_then(|s| s.behavior.as_ref()) else {
        return;
    };
    let longest = |rules: Option<&k8s_openapi::api::autoscaling::v2::HPAScalingRules>| {
        let secs = rules
            .and_then(|r| r.policies.as_ref())
            .into_iter()
            .flatten()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(15);
        now - SignedDuration::from_secs(i64::from(secs))
    };
    let (events, cutoff) = match to > from {
        true => (
            &mut history.scale_up_events,
            longest(behavior.scale_up.as_ref()),
        ),
        false => (
            &mut history.scale_down_events,
            longest(behavior.scale_down.as_ref()),
        ),
    };
    events.retain(|e| e.at > cutoff);
    events.push(Timed {
        at: now,
        replicas: (to - from).abs(),
    });
}
