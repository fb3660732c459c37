//! HorizontalPodAutoscaler (autoscaling): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY_V1: Strategy = Strategy {
    default: Some(default_v1),
    validate: Some(crate::validation::cluster::validate_hpa),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler>,
    ..Strategy::NONE
};

pub const STRATEGY_V2: Strategy = Strategy {
    default: Some(default_v2),
    validate: Some(crate::validation::cluster::validate_hpa),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
    ..Strategy::NONE
};

fn default_v1(o: &mut Map<String, Value>) {
    crate::defaults::breadth::default_hpa("v1", o)
}

fn default_v2(o: &mut Map<String, Value>) {
    crate::defaults::breadth::default_hpa("v2", o)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Reference", "string", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
        col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization."),
        col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
        col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
        col("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    hpa_row(obj, name, created)
}
