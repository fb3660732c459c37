//! Where a DaemonSet's pods belong and what they look like (upstream
//! `NodeShouldRunDaemonPod`, `CreatePodTemplate`, `ReplaceDaemonSetPodNodeNameNodeAffinity`).

use cairn_semantics::selector::{NodeSelectorTerms, Selector};
use cairn_semantics::taints;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::owner;

pub const HASH_LABEL: &str = "controller-revision-hash";

/// The tolerations every daemon pod gets (operator Exists, no tolerationSeconds).
fn default_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut out: Vec<(&str, &str)> = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        out.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    out.into_iter()
        .map(|(key, effect)| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        })
        .collect()
}

/// The template's tolerations with the defaults added (an existing one for the same
/// key and effect is replaced, as upstream's add-or-update does).
fn tolerations(ds: &DaemonSet) -> Vec<Toleration> {
    let spec = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let mut out = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    for d in default_tolerations(host_network) {
        out.retain(|t| !(t.key == d.key && t.effect == d.effect));
        out.push(d);
    }
    out
}

/// Whether the daemon should run on `node`: its nodeSelector, required node affinity
/// and NoSchedule/NoExecute taints (against the template's and the default tolerations).
pub fn should_run(ds: &DaemonSet, node: &Node) -> bool {
    let spec = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let empty = Default::default();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.name_any();
    if let Some(sel) = spec.and_then(|s| s.node_selector.as_ref()) {
        if !Selector::from_map(sel).matches(labels) {
            return false;
        }
    }
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(req) = required {
        match NodeSelectorTerms::compile(req) {
            Ok(terms) if terms.matches(&name, labels) => {}
            _ => return false,
        }
    }
    let node_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints::first_untolerated(&node_taints, &tolerations(ds), &["NoSchedule", "NoExecute"])
        .is_none()
}

/// A new daemon pod for `node`: the template, the revision label, the default
/// tolerations and a required node-affinity term naming the node (the scheduler binds it).
pub fn pod_for(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.into());
    let mut spec = template.spec.unwrap_or_default();
    spec.tolerations = Some(tolerations(ds));
    let pinned = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            match_expressions: None,
        }],
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(pinned);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", ds.name_any())),
            namespace: ds.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner::controller_ref(ds)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached_pod::CachedPod;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};

    fn node(name: &str, taint: Option<(&str, &str)>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("disk".to_string(), "ssd".to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: taint.map(|(k, e)| {
                    vec![Taint {
                        key: k.into(),
                        effect: e.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn ds(spec: serde_json::Value) -> DaemonSet {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "agent", "namespace": "kube-system", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}}, "spec": spec}}}))
        .unwrap()
    }

    #[test]
    fn eligibility_follows_selectors_and_taints() {
        let plain = ds(serde_json::json!({"containers": [{"name": "c", "image": "i"}]}));
        assert!(should_run(&plain, &node("n", None)));
        assert!(!should_run(
            &plain,
            &node("n", Some(("dedicated", "NoSchedule")))
        ));
        assert!(should_run(
            &plain,
            &node("n", Some(("dedicated", "PreferNoSchedule")))
        ));
        // Default tolerations: cordoned and not-ready nodes still run daemons.
        assert!(should_run(
            &plain,
            &node(
                "n",
                Some(("node.kubernetes.io/unschedulable", "NoSchedule"))
            )
        ));
        assert!(should_run(
            &plain,
            &node("n", Some(("node.kubernetes.io/not-ready", "NoExecute")))
        ));
        let tolerant = ds(
            serde_json::json!({"containers": [{"name": "c", "image": "i"}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
        );
        assert!(should_run(
            &tolerant,
            &node("n", Some(("dedicated", "NoSchedule")))
        ));
        let picky = ds(
            serde_json::json!({"containers": [{"name": "c", "image": "i"}], "nodeSelector": {"disk": "hdd"}}),
        );
        assert!(!should_run(&picky, &node("n", None)));
    }

    #[test]
    fn pods_are_pinned_labelled_and_tolerant() {
        let d = ds(
            serde_json::json!({"containers": [{"name": "c", "image": "i"}], "hostNetwork": true}),
        );
        let pod = pod_for(&d, "node-7", "abc");
        assert_eq!(pod.metadata.labels.as_ref().unwrap()[HASH_LABEL], "abc");
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("agent-"));
        assert_eq!(
            pod.spec
                .as_ref()
                .unwrap()
                .tolerations
                .as_ref()
                .unwrap()
                .len(),
            7
        );
        assert_eq!(CachedPod::from(pod).pinned_node.as_deref(), Some("node-7"));
    }
}
