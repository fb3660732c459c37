//! The controller's decisions from upstream's side: conditions, Events and status for
//! the situations `kubectl describe hpa` shows.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::behavior::Timed;
use super::calculator::Tunables;
use super::metric::{Facts, PodUsage};
use super::plan::{plan, History, Knobs, Plan};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("time")
}

fn hpa(min: i32, max: i32, percent: i32) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            min_replicas: Some(min),
            max_replicas: max,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(percent),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            behavior: None,
        }),
        ..Default::default()
    }
}

/// Running, Ready pods started an hour ago, each requesting 500m.
fn pods(n: usize) -> Vec<Pod> {
    let long_ago = Time(now() - SignedDuration::from_hours(1));
    (0..n)
        .map(|i| Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("web-{i}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "web".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(long_ago.clone()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(long_ago.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
        .collect()
}

fn usage(cpu_milli: &[i64]) -> Result<Vec<PodUsage>, String> {
    Ok(cpu_milli
        .iter()
        .enumerate()
        .map(|(i, m)| PodUsage {
            pod: format!("web-{i}"),
            timestamp: now(),
            window: SignedDuration::from_secs(15),
            containers: vec![("web".into(), BTreeMap::from([("cpu".into(), *m)]))],
        })
        .collect())
}

fn knobs() -> Knobs {
    Knobs {
        downscale_stabilization: SignedDuration::from_secs(300),
        tunables: Tunables::default(),
    }
}

fn decide(
    h: &HorizontalPodAutoscaler,
    current: i32,
    levels: &[i64],
    history: &mut History,
) -> Plan {
    let pods = pods(current as usize);
    let usage = usage(levels);
    let facts = Facts {
        current,
        pods: &pods,
        usage: &usage,
        now: now(),
    };
    plan(h, &facts, history, &knobs())
}

fn condition(p: &Plan, type_: &str) -> (String, String, String) {
    let c = p
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .expect(type_);
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[test]
fn a_busy_target_scales_out_with_upstreams_words() {
    let mut history = History::default();
    let mut p = decide(&hpa(1, 10, 50), 2, &[500, 500], &mut history);
    let r = p.rescale.clone().expect("rescale");
    assert_eq!(r.replicas, 4, "100 % of request against 50 %");
    assert_eq!(
        r.reason,
        "cpu resource utilization (percentage of request) above target"
    );
    assert_eq!(
        condition(&p, "ScalingActive"),
        ("True".into(), "ValidMetricFound".into(), "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)".into())
    );
    assert_eq!(condition(&p, "ScalingLimited").1, "DesiredWithinRange");
    let current = &p.status.current_metrics.as_ref().expect("metrics")[0];
    let cpu = current.resource.as_ref().expect("resource").current.clone();
    assert_eq!(
        (cpu.average_utilization, cpu.average_value),
        (Some(100), Some(Quantity("500m".into())))
    );
    p.rescaled(Ok(()), now());
    assert_eq!(condition(&p, "AbleToScale").1, "SucceededRescale");
    let event = p.notes.last().expect("event");
    assert_eq!(
        (event.reason.as_str(), event.message.as_str()),
        (
            "SuccessfulRescale",
            "New size: 4; reason: cpu resource utilization (percentage of request) above target"
        )
    );
    assert!(p.status.last_scale_time.is_some());
    assert_eq!(p.status.desired_replicas, 4);
}

#[test]
fn without_metrics_scaling_is_inactive_and_said_so() {
    let h = hpa(1, 10, 50);
    let pods = pods(2);
    let empty = Ok(Vec::new());
    let facts = Facts {
        current: 2,
        pods: &pods,
        usage: &empty,
        now: now(),
    };
    let p = plan(&h, &facts, &mut History::default(), &knobs());
    assert!(p.rescale.is_none());
    assert_eq!(
        condition(&p, "ScalingActive"),
        ("False".into(), "FailedGetResourceMetric".into(), "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API".into())
    );
    let reasons: Vec<&str> = p.notes.iter().map(|n| n.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["FailedGetResourceMetric", "FailedComputeMetricsReplicas"]
    );
    assert!(p.notes[1].message.starts_with(
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization"
    ));
    assert!(p.error.is_some());
}

#[test]
fn scale_in_waits_for_the_stabilization_window() {
    let h = hpa(1, 10, 50);
    let mut history = History {
        recommendations: vec![Timed {
            at: now() - SignedDuration::from_secs(60),
            replicas: 4,
        }],
        ..Default::default()
    };
    let p = decide(&h, 4, &[10, 10, 10, 10], &mut history);
    assert!(p.rescale.is_none(), "4 was recommended a minute ago");
    assert_eq!(condition(&p, "AbleToScale").1, "ScaleDownStabilized");
    assert_eq!(p.status.desired_replicas, 4);
    let mut later = History {
        recommendations: vec![Timed {
            at: now() - SignedDuration::from_secs(301),
            replicas: 4,
        }],
        ..Default::default()
    };
    let p = decide(&h, 4, &[10, 10, 10, 10], &mut later);
    let r = p.rescale.expect("scale in");
    assert_eq!(
        (r.replicas, r.reason.as_str()),
        (1, "All metrics below target")
    );
}

#[test]
fn bounds_and_a_zero_target() {
    let p = decide(&hpa(1, 3, 50), 5, &[250; 5], &mut History::default());
    let r = p.rescale.expect("down to max");
    assert_eq!(
        (r.replicas, r.reason.as_str()),
        (3, "Current number of replicas above Spec.MaxReplicas")
    );
    let p = decide(&hpa(1, 3, 50), 0, &[], &mut History::default());
    assert!(p.rescale.is_none());
    assert_eq!(condition(&p, "ScalingActive").1, "ScalingDisabled");
}

#[test]
fn a_failed_rescale_is_a_condition_and_a_warning() {
    let mut p = decide(&hpa(1, 10, 50), 2, &[500, 500], &mut History::default());
    p.rescaled(Err("the server rejected it".into()), now());
    assert_eq!(condition(&p, "AbleToScale").0, "False");
    assert_eq!(condition(&p, "AbleToScale").1, "FailedUpdateScale");
    assert_eq!(p.notes.last().expect("event").reason, "FailedRescale");
    assert_eq!(p.status.desired_replicas, 2);
}
