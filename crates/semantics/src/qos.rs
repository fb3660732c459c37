//! A pod's QoS class (upstream `GetPodQOS`).

use k8s_openapi::api::core::v1::PodSpec;

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

/// Guaranteed when every container limits cpu and memory with requests equal to the
/// limits, BestEffort when none asks for either, Burstable otherwise.
pub fn qos_class(spec: &PodSpec) -> QosClass {
    let mut any = false;
    let mut guaranteed = true;
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut count = 0;
    for c in containers {
        count += 1;
        let res = c.resources.as_ref();
        let requests = res.and_then(|r| r.requests.as_ref());
        let limits = res.and_then(|r| r.limits.as_ref());
        for name in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(name));
            let lim = limits.and_then(|m| m.get(name));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(r), Some(l)) if crate::quantity::milli(r) != crate::quantity::milli(l) => {
                    guaranteed = false
                }
                _ => {}
            }
        }
    }
    if !any {
        QosClass::BestEffort
    } else if guaranteed && count > 0 {
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
    }
}
