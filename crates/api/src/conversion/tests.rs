use super::*;
use crate::registry::find;

fn hpa_v1() -> &'static ResourceInfo {
    find("autoscaling", "v1", "horizontalpodautoscalers").unwrap()
}

fn hpa_v2() -> &'static ResourceInfo {
    find("autoscaling", "v2", "horizontalpodautoscalers").unwrap()
}

#[test]
fn hpa_v1_cpu_target_becomes_a_v2_resource_metric_and_back() {
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
        "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 70}});
    let v2 = convert(&v1, hpa_v2()).unwrap();
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );
    assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());
    assert_eq!(
        v2["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
        70
    );
    assert_eq!(convert(&v2, hpa_v1()).unwrap(), v1);
}

#[test]
fn what_v1_cannot_hold_survives_a_round_trip_through_annotations() {
    let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {"team": "a"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
        "status": {"desiredReplicas": 1, "conditions": [{"type": "AbleToScale", "status": "True"}]}});
    let v1 = convert(&v2, hpa_v1()).unwrap();
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
    let annotations = &v1["metadata"]["annotations"];
    assert_eq!(annotations["team"], "a");
    assert!(annotations[HPA_METRICS_ANNOTATION]
        .as_str()
        .unwrap()
        .contains("memory"));
    assert!(annotations[HPA_BEHAVIOR_ANNOTATION].is_string());
    assert!(annotations[HPA_CONDITIONS_ANNOTATION].is_string());
    let back = convert(&v1, hpa_v2()).unwrap();
    // The CPU metric comes first after the trip; everything else is kept.
    assert_eq!(back["spec"]["metrics"].as_array().unwrap().len(), 2);
    assert_eq!(back["spec"]["behavior"], v2["spec"]["behavior"]);
    assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
    assert_eq!(back["metadata"]["annotations"], json!({"team": "a"}));
}

#[test]
fn events_rename_their_fields_both_ways() {
    let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web"}, "reason": "Started", "message": "started",
        "source": {"component": "kubelet"}, "count": 2, "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:01Z", "type": "Normal", "reportingComponent": "kubelet"});
    let events = find("events.k8s.io", "v1", "events").unwrap();
    let new = convert(&core, events).unwrap();
    assert_eq!(new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new["regarding"]["name"], "web");
    assert_eq!(new["note"], "started");
    assert_eq!(new["deprecatedCount"], 2);
    assert_eq!(new["reportingController"], "kubelet");
    assert!(new.get("message").is_none());
    assert_eq!(
        convert(&new, find("", "v1", "events").unwrap()).unwrap(),
        core
    );
}

#[test]
fn same_shape_is_unchanged_and_unknown_pairs_are_errors() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod"});
    assert_eq!(convert(&pod, find("", "v1", "pods").unwrap()).unwrap(), pod);
    let err = convert(&json!({"apiVersion": "v9"}), hpa_v1()).unwrap_err();
    assert!(
        err.to_string().contains("from v9 to autoscaling/v1"),
        "{err}"
    );
    // A non-object body is an error, not a panic.
    assert!(convert(&json!(["x"]), hpa_v1()).is_err());
}

#[test]
fn versions_of_one_group_and_kind_only_change_api_version() {
    let v2 = crate::registry::find("autoscaling", "v2", "horizontalpodautoscalers").unwrap();
    // Not a real conversion of HPAs (those have their own), but the fallback's shape:
    // another group's object of another kind is refused.
    let other = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(convert(&other, v2).is_err());
    assert!(same_group("example.com/v1", "example.com/v1beta1"));
    assert!(!same_group("v1", "example.com/v1"));
}
