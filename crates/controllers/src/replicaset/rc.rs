//! ReplicationControllers seen as ReplicaSets: an equality selector becomes `matchLabels`,
//! every other field has the same name and meaning (upstream converts the same way in
//! `pkg/controller/replication/conversion.go`).

use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub fn to_replica_set(rc: ReplicationController) -> ReplicaSet {
    let spec = rc.spec.unwrap_or_default();
    let status = rc.status.map(|s| ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.map(|cs| {
            cs.into_iter()
                .map(|c| ReplicaSetCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    last_transition_time: c.last_transition_time,
                })
                .collect()
        }),
        terminating_replicas: None,
    });
    ReplicaSet {
        metadata: rc.metadata,
        spec: Some(ReplicaSetSpec {
            replicas: spec.replicas,
            min_ready_seconds: spec.min_ready_seconds,
            selector: LabelSelector {
                match_labels: spec.selector,
                match_expressions: None,
            },
            template: spec.template,
        }),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ReplicationControllerSpec, ReplicationControllerStatus};
    use std::collections::BTreeMap;

    #[test]
    fn equality_selector_becomes_match_labels() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let rc = ReplicationController {
            spec: Some(ReplicationControllerSpec {
                replicas: Some(3),
                selector: Some(labels.clone()),
                ..Default::default()
            }),
            status: Some(ReplicationControllerStatus {
                replicas: 2,
                ready_replicas: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let rs = to_replica_set(rc);
        let spec = rs.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.selector.match_labels, Some(labels));
        let status = rs.status.unwrap();
        assert_eq!((status.replicas, status.ready_replicas), (2, Some(1)));
    }
}
