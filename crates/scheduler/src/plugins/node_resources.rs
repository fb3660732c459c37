//! NodeResourcesFit (filter + LeastAllocated / MostAllocated / RequestedToCapacityRatio
//! scoring) and NodeResourcesBalancedAllocation.

use cairn_semantics::Resources;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::verdict::{Unfit, MAX_NODE_SCORE};

#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    LeastAllocated,
    MostAllocated,
    /// (utilization %, score 0–10) points of a broken line.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

/// A resource name resolved once at configuration, so scoring does not compare strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceName {
    Cpu,
    Memory,
    EphemeralStorage,
    Pods,
    Scalar(String),
}

impl ResourceName {
    pub fn parse(name: &str) -> ResourceName {
        match name {
            "cpu" => ResourceName::Cpu,
            "memory" => ResourceName::Memory,
            "ephemeral-storage" => ResourceName::EphemeralStorage,
            "pods" => ResourceName::Pods,
            other => ResourceName::Scalar(other.to_string()),
        }
    }

    /// The default cpu and memory, weight 1 each.
    pub fn cpu_and_memory() -> Vec<(ResourceName, i64)> {
        vec![(ResourceName::Cpu, 1), (ResourceName::Memory, 1)]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitArgs {
    pub strategy: Strategy,
    /// (resource, weight).
    pub resources: Vec<(ResourceName, i64)>,
}

impl Default for FitArgs {
    fn default() -> Self {
        FitArgs {
            strategy: Strategy::LeastAllocated,
            resources: ResourceName::cpu_and_memory(),
        }
    }
}

fn amount(r: &Resources, name: &ResourceName) -> i64 {
    match name {
        ResourceName::Cpu => r.milli_cpu,
        ResourceName::Memory => r.memory,
        ResourceName::EphemeralStorage => r.ephemeral_storage,
        ResourceName::Pods => r.pods,
        ResourceName::Scalar(other) => r.scalar.get(other).copied().unwrap_or(0),
    }
}

/// Every resource the pod asks for must fit in allocatable minus what is requested.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    let mut reasons = Vec::new();
    let allowed = node.allocatable.pods;
    if node.pods.len() as i64 + 1 > allowed {
        reasons.push("Too many pods".to_string());
    }
    let (req, alloc, used) = (&pod.requests, &node.allocatable, &node.requested);
    for (name, want, free) in [
        ("cpu", req.milli_cpu, alloc.milli_cpu - used.milli_cpu),
        ("memory", req.memory, alloc.memory - used.memory),
        (
            "ephemeral-storage",
            req.ephemeral_storage,
            alloc.ephemeral_storage - used.ephemeral_storage,
        ),
    ] {
        if want > 0 && want > free {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    for (name, want) in &req.scalar {
        let free = alloc.scalar.get(name).copied().unwrap_or(0)
            - used.scalar.get(name).copied().unwrap_or(0);
        if *want > 0 && *want > free {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Unfit {
            reasons,
            unresolvable: false,
        })
    }
}

fn least(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

fn most(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// The broken line through `shape` (scores 0–10 scaled to 0–100) at `utilization` %.
fn broken_line(shape: &[(i64, i64)], utilization: i64) -> i64 {
    let scaled: Vec<(i64, i64)> = shape.iter().map(|(u, s)| (*u, s * 10)).collect();
    let Some(first) = scaled.first() else {
        return 0;
    };
    if utilization <= first.0 {
        return first.1;
    }
    for w in scaled.windows(2) {
        let ((u0, s0), (u1, s1)) = (w[0], w[1]);
        if utilization <= u1 {
            return s0 + (s1 - s0) * (utilization - u0) / (u1 - u0).max(1);
        }
    }
    scaled.last().map_or(0, |l| l.1)
}

/// Node score under the configured strategy; requests counted with scoring defaults.
pub fn score(pod: &PodInfo, node: &NodeInfo, args: &FitArgs) -> i64 {
    let (mut total, mut weights) = (0i64, 0i64);
    for (name, weight) in &args.resources {
        let capacity = amount(&node.allocatable, name);
        if capacity == 0 {
            continue;
        }
        let requested =
            amount(&node.non_zero_requested, name) + amount(&pod.non_zero_requests, name);
        let s = match &args.strategy {
            Strategy::LeastAllocated => least(requested, capacity),
            Strategy::MostAllocated => most(requested, capacity),
            Strategy::RequestedToCapacityRatio(shape) => {
                broken_line(shape, requested.min(capacity) * 100 / capacity)
            }
        };
        total += s * weight;
        weights += weight;
    }
    if weights == 0 {
        0
    } else {
        total / weights
    }
}

/// Balanced allocation: 100 × (1 − the spread of the resources' utilisation fractions),
/// actual requests (not defaulted).
pub fn balanced_score(pod: &PodInfo, node: &NodeInfo, resources: &[(ResourceName, i64)]) -> i64 {
    let mut fractions = Vec::with_capacity(resources.len());
    for (name, _) in resources {
        let capacity = amount(&node.allocatable, name);
        if capacity == 0 {
            continue;
        }
        let requested = amount(&node.requested, name) + amount(&pod.requests, name);
        fractions.push((requested as f64 / capacity as f64).min(1.0));
    }
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            (fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64)
                .sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Balanced allocation says nothing about a pod that requests nothing it weighs.
pub fn balanced_skip(pod: &PodInfo, resources: &[(ResourceName, i64)]) -> bool {
    resources
        .iter()
        .all(|(name, _)| amount(&pod.requests, name) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;
    use crate::testing::{node, pod};

    fn snap_with(pods: &[(&str, &str)]) -> Snapshot {
        let mut s = Snapshot::default();
        s.upsert_node(&node("n", "2", "4Gi", &[]));
        for (name, cpu) in pods {
            s.add_pod(pod(name).cpu(cpu).info(), "n");
        }
        s
    }

    #[test]
    fn fit_exact_overcommit_and_zero() {
        let s = snap_with(&[("a", "1500m")]);
        let n = s.node("n").unwrap();
        assert!(filter(&pod("p").cpu("500m").info(), n).is_ok(), "exact fit");
        let err = filter(&pod("p").cpu("501m").memory("5Gi").info(), n).unwrap_err();
        assert_eq!(err.reasons, ["Insufficient cpu", "Insufficient memory"]);
        assert!(
            filter(&pod("p").info(), n).is_ok(),
            "zero requests always fit"
        );
    }

    #[test]
    fn pod_count_and_extended_resources() {
        let mut s = Snapshot::default();
        let mut n = node("n", "2", "4Gi", &[]);
        let alloc = n.status.as_mut().unwrap().allocatable.as_mut().unwrap();
        alloc.insert(
            "pods".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
        alloc.insert(
            "example.com/gpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
        s.upsert_node(&n);
        let gpu = |name: &str, q: &str| {
            pod(name)
                .with(|p| {
                    p.spec.as_mut().unwrap().containers[0].resources =
                        Some(k8s_openapi::api::core::v1::ResourceRequirements {
                            requests: Some(
                                [(
                                    "example.com/gpu".to_string(),
                                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                                        q.into(),
                                    ),
                                )]
                                .into(),
                            ),
                            ..Default::default()
                        })
                })
                .info()
        };
        assert!(filter(&gpu("p", "1"), s.node("n").unwrap()).is_ok());
        assert_eq!(
            filter(&gpu("p", "2"), s.node("n").unwrap())
                .unwrap_err()
                .reasons,
            ["Insufficient example.com/gpu"]
        );
        s.add_pod(pod("a").info(), "n");
        assert_eq!(
            filter(&pod("b").info(), s.node("n").unwrap())
                .unwrap_err()
                .reasons,
            ["Too many pods"]
        );
    }

    #[test]
    fn least_and_most_allocated() {
        let s = snap_with(&[("a", "1")]);
        let n = s.node("n").unwrap();
        let p = pod("p").cpu("500m").memory("1Gi").info();
        // cpu (2000-1500)/2000 = 25; memory: a defaults to 200Mi, p 1Gi → (4096-1224)/4096 = 70.
        assert_eq!(score(&p, n, &FitArgs::default()), (25 + 70) / 2);
        let most = FitArgs {
            strategy: Strategy::MostAllocated,
            ..FitArgs::default()
        };
        assert_eq!(score(&p, n, &most), (75 + 29) / 2);
        let ratio = FitArgs {
            strategy: Strategy::RequestedToCapacityRatio(vec![(0, 0), (100, 10)]),
            ..FitArgs::default()
        };
        assert_eq!(score(&p, n, &ratio), (75 + 29) / 2);
    }

    #[test]
    fn balanced_allocation() {
        let s = snap_with(&[]);
        let n = s.node("n").unwrap();
        let res = ResourceName::cpu_and_memory();
        // cpu 1/2 = .5, memory 2/4 = .5 → perfectly balanced.
        assert_eq!(
            balanced_score(&pod("p").cpu("1").memory("2Gi").info(), n, &res),
            100
        );
        // cpu 1.0, memory 0 → std .5 → 50.
        assert_eq!(balanced_score(&pod("p").cpu("2").info(), n, &res), 50);
        assert!(balanced_skip(&pod("p").info(), &res));
    }
}
