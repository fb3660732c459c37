//! Unit tests of the worker's helpers.

use super::super::*;
use serde_json::json;

#[test]
fn backoff_grows_and_caps() {
    let mut c = ContainerStatus {
        id: "x".into(),
        sandbox_id: String::new(),
        pod_uid: String::new(),
        pod_namespace: String::new(),
        pod_name: String::new(),
        name: "c".into(),
        attempt: 0,
        spec_hash: String::new(),
        init: false,
        state: ContainerState::Exited,
        image_ref: String::new(),
        image_id: String::new(),
        pid: None,
        created_at: None,
        started_at: Some(Utc::now()),
        finished_at: Some(Utc::now()),
        exit_code: Some(1),
        reason: None,
        log_path: String::new(),
        cgroup: String::new(),
        termination_message_path: None,
        labels: Default::default(),
    };
    assert_eq!(restart_backoff(&c, Utc::now()).unwrap().num_seconds(), 10);
    c.attempt = 2;
    assert_eq!(restart_backoff(&c, Utc::now()).unwrap().num_seconds(), 40);
    c.attempt = 9;
    assert_eq!(restart_backoff(&c, Utc::now()).unwrap().num_seconds(), 300);
    c.finished_at = Some(Utc::now() - chrono::Duration::seconds(301));
    assert!(restart_backoff(&c, Utc::now()).is_none());
}

#[test]
fn resources_convert_to_cgroup_units() {
    let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}}]}})).unwrap();
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let r = container_resources(&pod, c, 8 << 30);
    assert_eq!(r.cpu_shares, Some(256));
    assert_eq!(r.cpu_quota, Some(50_000));
    assert_eq!(r.memory_limit, Some(64 << 20));
    let p = pod_resources(&pod);
    assert_eq!(p.memory_limit, Some(64 << 20));
}
