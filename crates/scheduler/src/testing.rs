//! Builders of nodes and pods for the scheduler's unit tests and benchmarks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, Node, NodeSpec, NodeStatus, Pod, PodAffinityTerm,
    PodAntiAffinity, PodSpec, ResourceRequirements, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::pod_info::{PodInfo, HOSTNAME_KEY};

/// A Ready node with the given allocatable cpu/memory, 110 pods and labels (plus the
/// hostname label).
pub fn node(name: &str, cpu: &str, memory: &str, labels: &[(&str, &str)]) -> Node {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.entry(HOSTNAME_KEY.into()).or_insert_with(|| name.into());
    let alloc = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.into())),
        ("memory".to_string(), Quantity(memory.into())),
        ("pods".to_string(), Quantity("110".into())),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(l),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(alloc.clone()),
            capacity: Some(alloc),
            ..Default::default()
        }),
    }
}

pub fn taint(mut n: Node, key: &str, effect: &str) -> Node {
    let spec = n.spec.get_or_insert_with(Default::default);
    spec.taints.get_or_insert_with(Vec::new).push(Taint {
        key: key.into(),
        value: None,
        effect: effect.into(),
        time_added: None,
    });
    n
}

/// A pod under construction.
#[derive(Clone)]
pub struct PodBuilder(pub Pod);

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    })
}

fn ls(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn request(mut self, name: &str, q: &str) -> Self {
        let c = &mut self.spec().containers[0];
        c.resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), Quantity(q.into()));
        self
    }

    pub fn cpu(self, q: &str) -> Self {
        self.request("cpu", q)
    }

    pub fn memory(self, q: &str) -> Self {
        self.request("memory", q)
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }

    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.into());
        self
    }

    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }

    pub fn host_port(mut self, port: i32) -> Self {
        self.spec().containers[0]
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                host_port: Some(port),
                ..Default::default()
            });
        self
    }

    pub fn tolerate(mut self, key: &str, effect: &str) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            });
        self
    }

    pub fn affinity(mut self, f: impl FnOnce(&mut Affinity)) -> Self {
        f(self.spec().affinity.get_or_insert_with(Default::default));
        self
    }

    /// Required anti-affinity to pods with `k=v` over `topology_key`.
    pub fn anti_affinity(self, k: &str, v: &str, topology_key: &str) -> Self {
        let term = PodAffinityTerm {
            label_selector: Some(ls(&[(k, v)])),
            topology_key: topology_key.into(),
            ..Default::default()
        };
        self.affinity(|a| {
            a.pod_anti_affinity
                .get_or_insert_with(PodAntiAffinity::default)
                .required_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .push(term)
        })
    }

    pub fn spread(mut self, key: &str, max_skew: i32, hard: bool, k: &str, v: &str) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(TopologySpreadConstraint {
                max_skew,
                topology_key: key.into(),
                when_unsatisfiable: if hard {
                    "DoNotSchedule"
                } else {
                    "ScheduleAnyway"
                }
                .into(),
                label_selector: Some(ls(&[(k, v)])),
                ..Default::default()
            });
        self
    }

    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }

    pub fn build(self) -> Pod {
        self.0
    }

    /// The compiled pod; builders only make valid pods, so a failure is a test bug.
    #[allow(clippy::expect_used)]
    pub fn info(self) -> PodInfo {
        PodInfo::from_pod(&self.0).expect("test pod compiles")
    }
}

pub fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    ls(pairs)
}
