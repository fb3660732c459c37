//! The replica calculator for Resource and ContainerResource metrics, upstream's
//! `replica_calculator.go` (no IO): pods are grouped into ready, unready (CPU only:
//! still initialising or never ready), missing (no metric) and ignored (deleting or
//! failed); the usage ratio against the target decides, within the tolerance; missing
//! and unready pods are then counted against the direction of the change (100 % of
//! request on a scale-down, 0 on a scale-up) and a change that flips direction is none.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What the calculator needs of a pod.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub name: String,
    pub pending: bool,
    /// Being deleted, or Failed: never counted.
    pub ignored: bool,
    /// The Ready condition: its status and last transition.
    pub ready: Option<(bool, Timestamp)>,
    pub start_time: Option<Timestamp>,
    /// The request for the metric's resource, summed over the pod's containers (or the
    /// one container of a ContainerResource metric); else the container that lacks it.
    pub request_milli: Result<i64, String>,
}

/// A pod's usage of the resource (milli-units) over `window` ending at `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    pub value_milli: i64,
    pub timestamp: Timestamp,
    pub window: SignedDuration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Percent of the pods' requests.
    Utilization(i32),
    /// Milli-units per pod.
    AverageValue(i64),
}

/// Upstream's controller defaults that shape the calculation.
#[derive(Debug, Clone, Copy)]
pub struct Tunables {
    pub tolerance: f64,
    pub cpu_initialization_period: SignedDuration,
    pub initial_readiness_delay: SignedDuration,
}

impl Default for Tunables {
    fn default() -> Tunables {
        Tunables {
            tolerance: 0.1,
            cpu_initialization_period: SignedDuration::from_secs(300),
            initial_readiness_delay: SignedDuration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    pub replicas: i32,
    /// Current utilization (percent of request) for a Utilization target.
    pub utilization: Option<i32>,
    /// Current average value per pod (milli-units).
    pub average_milli: i64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalcError {
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoMetrics,
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        resource: String,
        container: String,
        pod: String,
    },
}

struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

/// One metric's question: the scale target's pods, their metrics (by pod name), the
/// target, and the resource (`cpu` decides readiness handling).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub current: i32,
    pub pods: &'a [PodInfo],
    pub metrics: &'a BTreeMap<String, PodMetric>,
    pub target: Target,
    pub resource: &'a str,
}

/// Replicas for the input's target.
pub fn replicas(
    input: Input<'_>,
    t: &Tunables,
    now: Timestamp,
) -> Result<Recommendation, CalcError> {
    let Input {
        current,
        pods,
        metrics,
        target,
        resource,
    } = input;
    let cpu = resource == "cpu";
    if pods.is_empty() {
        return Err(CalcError::NoPods);
    }
    let groups = group_pods(pods, metrics, cpu, t, now);
    let mut usable: BTreeMap<String, i64> = metrics
        .iter()
        .filter(|(p, _)| !groups.ignored.contains(*p) && !groups.unready.contains(*p))
        .filter(|(p, _)| pods.iter().any(|pod| &pod.name == *p))
        .map(|(p, m)| (p.clone(), m.value_milli))
        .collect();
    if usable.is_empty() {
        return Err(CalcError::NoMetrics);
    }
    // Only a utilization needs the requests (upstream's raw-value path never reads them).
    let requests = match target {
        Target::Utilization(_) => requests(pods, resource)?,
        Target::AverageValue(_) => BTreeMap::new(),
    };
    let first = ratio(&usable, &requests, target);
    let scale_up_with_unready = !groups.unready.is_empty() && first.ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        let replicas = match (1.0 - first.ratio).abs() <= t.tolerance {
            true => current,
            false => (first.ratio * groups.ready as f64).ceil() as i32,
        };
        return Ok(first.recommend(replicas));
    }
    fill_in(
        &mut usable,
        &groups,
        &requests,
        target,
        first.ratio,
        scale_up_with_unready,
    );
    let second = ratio(&usable, &requests, target);
    let flipped =
        (first.ratio < 1.0 && second.ratio > 1.0) || (first.ratio > 1.0 && second.ratio < 1.0);
    if (1.0 - second.ratio).abs() <= t.tolerance || flipped {
        return Ok(first.recommend(current));
    }
    let proposed = (second.ratio * usable.len() as f64).ceil() as i32;
    let against =
        (second.ratio < 1.0 && proposed > current) || (second.ratio > 1.0 && proposed < current);
    Ok(first.recommend(if against { current } else { proposed }))
}

/// Missing pods count as using 100 % of their request (at least the target) on a
/// scale-down and nothing on a scale-up; unready pods nothing, on a scale-up.
fn fill_in(
    usable: &mut BTreeMap<String, i64>,
    groups: &Groups,
    requests: &BTreeMap<String, i64>,
    target: Target,
    ratio: f64,
    scale_up_with_unready: bool,
) {
    for pod in &groups.missing {
        let value = match target {
            Target::Utilization(percent) if ratio < 1.0 => {
                let request = requests.get(pod).copied().unwrap_or(0);
                request * i64::from(percent.max(100)) / 100
            }
            // Upstream leaves missing pods out at exactly the target.
            Target::Utilization(_) if ratio <= 1.0 => continue,
            Target::AverageValue(per_pod) if ratio < 1.0 => per_pod,
            _ => 0,
        };
        usable.insert(pod.clone(), value);
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            usable.insert(pod.clone(), 0);
        }
    }
}

struct Ratio {
    ratio: f64,
    utilization: Option<i32>,
    average_milli: i64,
}

impl Ratio {
    fn recommend(&self, replicas: i32) -> Recommendation {
        Recommendation {
            replicas,
            utilization: self.utilization,
            average_milli: self.average_milli,
        }
    }
}

fn ratio(
    usable: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target: Target,
) -> Ratio {
    let total: i64 = usable.values().sum();
    let average_milli = total / (usable.len().max(1) as i64);
    match target {
        Target::Utilization(percent) => {
            let requested: i64 = usable.keys().filter_map(|p| requests.get(p)).sum();
            let utilization = (total * 100).checked_div(requested).unwrap_or(0);
            Ratio {
                ratio: utilization as f64 / f64::from(percent.max(1)),
                utilization: Some(utilization as i32),
                average_milli,
            }
        }
        Target::AverageValue(per_pod) => Ratio {
            ratio: total as f64 / (per_pod.max(1) as f64 * usable.len() as f64),
            utilization: None,
            average_milli,
        },
    }
}

fn requests(pods: &[PodInfo], resource: &str) -> Result<BTreeMap<String, i64>, CalcError> {
    pods.iter()
        .filter(|p| !p.ignored)
        .map(|p| match &p.request_milli {
            Ok(r) => Ok((p.name.clone(), *r)),
            Err(container) => Err(CalcError::MissingRequest {
                resource: resource.to_string(),
                container: container.clone(),
                pod: p.name.clone(),
            }),
        })
        .collect()
}

fn group_pods(
    pods: &[PodInfo],
    metrics: &BTreeMap<String, PodMetric>,
    cpu: bool,
    t: &Tunables,
    now: Timestamp,
) -> Groups {
    let mut g = Groups {
        ready: 0,
        unready: BTreeSet::new(),
        missing: BTreeSet::new(),
        ignored: BTreeSet::new(),
    };
    for pod in pods {
        if pod.ignored {
            g.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.pending {
            g.unready.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            g.missing.insert(pod.name.clone());
            continue;
        };
        if cpu && cpu_unready(pod, metric, t, now) {
            g.unready.insert(pod.name.clone());
            continue;
        }
        g.ready += 1;
    }
    g
}

/// Whether a pod's CPU sample is left out: unready while initialising, or a sample that
/// does not cover a whole window since the last readiness change; or never ready yet.
fn cpu_unready(pod: &PodInfo, metric: &PodMetric, t: &Tunables, now: Timestamp) -> bool {
    let (Some((ready, transition)), Some(start)) = (pod.ready, pod.start_time) else {
        return true;
    };
    let after = |at: Timestamp, d: SignedDuration| at.checked_add(d).unwrap_or(at);
    if after(start, t.cpu_initialization_period) > now {
        !ready || metric.timestamp < after(transition, metric.window)
    } else {
        !ready && after(start, t.initial_readiness_delay) > transition
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("time")
    }

    /// Running pods started an hour ago, Ready since then, each requesting 1000m.
    fn pods(n: usize) -> Vec<PodInfo> {
        let started = now() - SignedDuration::from_hours(1);
        (0..n)
            .map(|i| PodInfo {
                name: format!("p{i}"),
                pending: false,
                ignored: false,
                ready: Some((true, started)),
                start_time: Some(started),
                request_milli: Ok(1000),
            })
            .collect()
    }

    fn metrics(levels: &[i64]) -> BTreeMap<String, PodMetric> {
        let m = |v| PodMetric {
            value_milli: v,
            timestamp: now(),
            window: SignedDuration::from_secs(15),
        };
        levels
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("p{i}"), m(*v)))
            .collect()
    }

    fn cpu(
        current: i32,
        pods: &[PodInfo],
        levels: &[i64],
        percent: i32,
    ) -> Result<Recommendation, CalcError> {
        let metrics = metrics(levels);
        let target = Target::Utilization(percent);
        let input = Input {
            current,
            pods,
            metrics: &metrics,
            target,
            resource: "cpu",
        };
        replicas(input, &Tunables::default(), now())
    }

    #[test]
    fn scales_up_and_down_by_the_utilization_ratio() {
        // upstream's TestReplicaCalcScaleUp and TestReplicaCalcScaleDown
        let up = cpu(3, &pods(3), &[300, 500, 700], 30).expect("up");
        assert_eq!((up.replicas, up.utilization), (5, Some(50)));
        let down = cpu(5, &pods(5), &[100, 300, 500, 250, 250], 50).expect("down");
        assert_eq!((down.replicas, down.utilization), (3, Some(28)));
    }

    #[test]
    fn within_the_tolerance_nothing_changes() {
        let mut p = pods(3);
        p[0].request_milli = Ok(900);
        p[1].request_milli = Ok(1100);
        let same = cpu(3, &p, &[1010, 1030, 1020], 100).expect("tolerance");
        assert_eq!((same.replicas, same.utilization), (3, Some(102)));
    }

    #[test]
    fn unready_pods_count_as_idle_on_a_scale_up() {
        // upstream's TestReplicaCalcScaleUpUnreadyLessScale
        let mut p = pods(3);
        let started = p[0].start_time.expect("start");
        p[0].ready = Some((false, started));
        let up = cpu(3, &p, &[300, 500, 700], 30).expect("up");
        assert_eq!((up.replicas, up.utilization), (4, Some(60)));
    }

    #[test]
    fn missing_pods_count_as_fully_used_on_a_scale_down() {
        let down = cpu(4, &pods(4), &[100, 100, 100], 50).expect("down");
        assert_eq!(down.replicas, 3, "the missing pod at 100 % keeps one more");
        // Missing pods use nothing on a scale-up; a direction flip changes nothing.
        let flip = cpu(4, &pods(4), &[600, 600, 600], 50).expect("up");
        assert_eq!(flip.replicas, 4, "1.2 without the missing pod, 0.9 with it");
    }

    #[test]
    fn average_values_and_errors() {
        let (pods2, levels) = (pods(2), metrics(&[400, 600]));
        let target = Target::AverageValue(250);
        let input = Input {
            current: 2,
            pods: &pods2,
            metrics: &levels,
            target,
            resource: "memory",
        };
        let avg = replicas(input, &Tunables::default(), now());
        assert_eq!(avg.expect("average").replicas, 4);
        assert_eq!(cpu(1, &[], &[], 50), Err(CalcError::NoPods));
        assert_eq!(cpu(2, &pods(2), &[], 50), Err(CalcError::NoMetrics));
        let mut p = pods(1);
        p[0].request_milli = Err("web".into());
        let missing = cpu(1, &p, &[100], 50).expect_err("no request");
        assert_eq!(
            missing.to_string(),
            "missing request for cpu in container web of Pod p0"
        );
    }
}
