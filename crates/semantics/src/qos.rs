//! A pod's QoS class (upstream `GetPodQOS`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// Upstream `GetPodQOS` on a defaulted pod: only positive cpu/memory quantities count. BestEffort when no
/// container asks for any; Guaranteed when every container limits both cpu and memory
/// and the summed requests equal the summed limits; Burstable otherwise.
pub fn qos_class(spec: &PodSpec) -> QosClass {
    let mut requests: BTreeMap<&str, i64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i64> = BTreeMap::new();
    let mut guaranteed = true;
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        let res = c.resources.as_ref();
        let mut limited = 0;
        for name in ["cpu", "memory"] {
            let positive = |list: Option<&BTreeMap<String, Quantity>>| {
                list.and_then(|m| m.get(name))
                    .and_then(|q| crate::quantity::milli(q).ok())
                    .filter(|v| *v > 0)
            };
            let limit = positive(res.and_then(|r| r.limits.as_ref()));
            // A missing request is its limit, as API defaulting sets it.
            let request = match res
                .and_then(|r| r.requests.as_ref())
                .and_then(|m| m.get(name))
            {
                Some(_) => positive(res.and_then(|r| r.requests.as_ref())),
                None => limit,
            };
            if let Some(v) = request {
                *requests.entry(name).or_default() += v;
            }
            if let Some(v) = limit {
                *limits.entry(name).or_default() += v;
                limited += 1;
            }
        }
        if limited < 2 {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    let equal = requests.iter().all(|(k, v)| limits.get(k) == Some(v));
    if guaranteed && equal && requests.len() == limits.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    fn spec(req: &[(&str, &str)], lim: &[(&str, &str)]) -> PodSpec {
        let list = |l: &[(&str, &str)]| {
            Some(
                l.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: list(req),
                    limits: list(lim),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn classes() {
        assert_eq!(qos_class(&spec(&[], &[])), QosClass::BestEffort);
        let both = [("cpu", "1"), ("memory", "1Gi")];
        assert_eq!(qos_class(&spec(&both, &both)), QosClass::Guaranteed);
        // 1000m equals 1: compared as quantities, not strings.
        let milli = [("cpu", "1000m"), ("memory", "1Gi")];
        assert_eq!(qos_class(&spec(&milli, &both)), QosClass::Guaranteed);
        assert_eq!(qos_class(&spec(&[("cpu", "1")], &[])), QosClass::Burstable);
        assert_eq!(qos_class(&spec(&[], &[("cpu", "1")])), QosClass::Burstable);
        // Limits only: requests default to them.
        assert_eq!(qos_class(&spec(&[], &both)), QosClass::Guaranteed);
        // Zero quantities do not count.
        assert_eq!(qos_class(&spec(&[("cpu", "0")], &[])), QosClass::BestEffort);
    }
}
