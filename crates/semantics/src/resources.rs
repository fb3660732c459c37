//! A pod's effective resource requests, computed as Kubernetes' `PodRequests` does: the
//! larger of (app containers + sidecars) and the biggest init-container step, plus
//! the pod overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{self, QuantityError};

/// Requests a container without a cpu request counts with when nodes are scored
/// (upstream `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Same for memory (upstream `DefaultMemoryRequest`, 200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of every resource kind the scheduler and the kubelet account for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Only meaningful for node allocatable (`pods`).
    pub pods: i64,
    /// Extended resources and hugepages, by resource name.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// Reads a resource list; the first malformed quantity is an error naming it.
    pub fn try_from_list(list: &BTreeMap<String, Quantity>) -> Result<Resources, QuantityError> {
        let mut r = Resources::default();
        for (name, q) in list {
            r.set(name, q)?;
        }
        Ok(r)
    }

    /// Reads a resource list, skipping malformed quantities (returned by name).
    pub fn from_list_lossy(list: &BTreeMap<String, Quantity>) -> (Resources, Vec<String>) {
        let mut r = Resources::default();
        let mut bad = Vec::new();
        for (name, q) in list {
            if r.set(name, q).is_err() {
                bad.push(name.clone());
            }
        }
        (r, bad)
    }

    fn set(&mut self, name: &str, q: &Quantity) -> Result<(), QuantityError> {
        match name {
            "cpu" => self.milli_cpu = quantity::milli(q)?,
            "memory" => self.memory = quantity::value(q)?,
            "ephemeral-storage" => self.ephemeral_storage = quantity::value(q)?,
            "pods" => self.pods = quantity::value(q)?,
            other => {
                self.scalar.insert(other.to_string(), quantity::value(q)?);
            }
        }
        Ok(())
    }

    /// Applies `f` kind by kind (a scalar missing on one side counts as zero).
    fn combine(&mut self, o: &Resources, f: fn(i64, i64) -> i64) {
        self.milli_cpu = f(self.milli_cpu, o.milli_cpu);
        self.memory = f(self.memory, o.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, o.ephemeral_storage);
        self.pods = f(self.pods, o.pods);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = f(*e, *v);
        }
    }

    pub fn add(&mut self, o: &Resources) {
        self.combine(o, i64::saturating_add);
    }

    pub fn sub(&mut self, o: &Resources) {
        self.combine(o, i64::saturating_sub);
    }

    /// Each kind set to the larger of the two.
    pub fn max_with(&mut self, o: &Resources) {
        self.combine(o, i64::max);
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// How a container's missing requests are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingRequests {
    /// As zero (what admission and the fit check use).
    Zero,
    /// As 100m cpu / 200 MiB memory (what scoring uses, so empty pods still spread).
    Defaulted,
}

/// A container's requests; a resource with a limit but no request counts its limit, as
/// API defaulting would have set it.
pub fn container_requests(c: &Container, missing: MissingRequests) -> Resources {
    let mut r = Resources::default();
    if let Some(res) = &c.resources {
        let mut merged: BTreeMap<String, Quantity> = res.limits.clone().unwrap_or_default();
        merged.extend(res.requests.clone().unwrap_or_default());
        merged.remove("pods");
        r = Resources::from_list_lossy(&merged).0;
        if missing == MissingRequests::Defaulted {
            if !merged.contains_key("cpu") {
                r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
            }
            if !merged.contains_key("memory") {
                r.memory = DEFAULT_MEMORY_REQUEST;
            }
        }
    } else if missing == MissingRequests::Defaulted {
        r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        r.memory = DEFAULT_MEMORY_REQUEST;
    }
    r
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's effective requests (upstream `resourcehelper.PodRequests`): app containers
/// and sidecars summed, each plain init container counted with the sidecars started
/// before it, the larger of the two, plus `spec.overhead`.
pub fn pod_requests(spec: &PodSpec, missing: MissingRequests) -> Resources {
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(&container_requests(c, missing));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c, missing);
        let step = if is_sidecar(c) {
            total.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut s = own;
            s.add(&sidecars);
            s
        };
        init_peak.max_with(&step);
    }
    total.max_with(&init_peak);
    if let Some(overhead) = &spec.overhead {
        total.add(&Resources::from_list_lossy(overhead).0);
    }
    total
}

/// A container's limits (no defaulting: a missing limit is no limit).
fn container_limits(c: &Container) -> Resources {
    let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
    limits.map_or_else(Resources::default, |l| Resources::from_list_lossy(l).0)
}

/// The pod's effective limits (upstream `resourcehelper.PodLimits`): as
/// [`pod_requests`], with the overhead added only to resources that have a limit.
pub fn pod_limits(spec: &PodSpec) -> Resources {
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(&container_limits(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let mut step = container_limits(c);
        if is_sidecar(c) {
            total.add(&step);
            sidecars.add(&step);
            step = sidecars.clone();
        } else {
            step.add(&sidecars);
        }
        init_peak.max_with(&step);
    }
    total.max_with(&init_peak);
    if let Some(overhead) = &spec.overhead {
        let o = Resources::from_list_lossy(overhead).0;
        let keep = |limit: i64, extra: i64| {
            if limit == 0 {
                0
            } else {
                limit.saturating_add(extra)
            }
        };
        total.milli_cpu = keep(total.milli_cpu, o.milli_cpu);
        total.memory = keep(total.memory, o.memory);
        total.ephemeral_storage = keep(total.ephemeral_storage, o.ephemeral_storage);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn container(cpu: Option<&str>, mem: Option<&str>, sidecar: bool) -> Container {
        let mut req = BTreeMap::new();
        if let Some(c) = cpu {
            req.insert("cpu".to_string(), Quantity(c.into()));
        }
        if let Some(m) = mem {
            req.insert("memory".to_string(), Quantity(m.into()));
        }
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(req),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn app_containers_sum_and_init_takes_the_max() {
        let spec = PodSpec {
            containers: vec![
                container(Some("100m"), Some("1Mi"), false),
                container(Some("200m"), None, false),
            ],
            init_containers: Some(vec![container(Some("500m"), Some("512Ki"), false)]),
            ..Default::default()
        };
        let r = pod_requests(&spec, MissingRequests::Zero);
        assert_eq!(r.milli_cpu, 500);
        assert_eq!(r.memory, 1 << 20);
    }

    #[test]
    fn sidecars_add_to_app_containers_and_later_init_steps() {
        let spec = PodSpec {
            containers: vec![container(Some("100m"), None, false)],
            init_containers: Some(vec![
                container(Some("50m"), None, true),
                container(Some("300m"), None, false),
            ]),
            ..Default::default()
        };
        // app + sidecar = 150m; init step = 300m + 50m sidecar = 350m.
        assert_eq!(pod_requests(&spec, MissingRequests::Zero).milli_cpu, 350);
    }

    #[test]
    fn overhead_is_added_and_missing_requests_default_for_scoring() {
        let spec = PodSpec {
            containers: vec![container(None, None, false)],
            overhead: Some(BTreeMap::from([(
                "cpu".to_string(),
                Quantity("10m".into()),
            )])),
            ..Default::default()
        };
        assert_eq!(pod_requests(&spec, MissingRequests::Zero).milli_cpu, 10);
        let scored = pod_requests(&spec, MissingRequests::Defaulted);
        assert_eq!(scored.milli_cpu, 110);
        assert_eq!(scored.memory, DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let mut c = container(None, None, false);
        c.resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("cpu".to_string(), Quantity("1".into()))])),
            ..Default::default()
        });
        let r = container_requests(&c, MissingRequests::Zero);
        assert_eq!(r.milli_cpu, 1000);
    }
}
