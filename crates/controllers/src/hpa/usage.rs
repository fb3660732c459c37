//! Reading `metrics.k8s.io/v1beta1` PodMetrics (the API cairn-control serves, or any
//! metrics-server) into [`PodUsage`]: what the resource metrics client of upstream's
//! HPA controller reads.

use std::collections::BTreeMap;

use cairn_semantics::quantity;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use kube::Client;
use serde_json::Value;

use super::metric::PodUsage;

fn pod_metrics_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "PodMetrics".into(),
        plural: "pods".into(),
    }
}

/// The PodMetrics of the pods `selector` selects in `namespace`; the error in words.
pub async fn list(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<PodUsage>, String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &pod_metrics_resource());
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| e.to_string())?;
    Ok(list.items.iter().filter_map(decode).collect())
}

/// One PodMetrics; None when its name or timestamp is unreadable.
pub fn decode(item: &DynamicObject) -> Option<PodUsage> {
    let timestamp: Timestamp = item.data.get("timestamp")?.as_str()?.parse().ok()?;
    let window = item
        .data
        .get("window")
        .and_then(Value::as_str)
        .and_then(go_duration)
        .unwrap_or(SignedDuration::ZERO);
    let containers = item
        .data
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?.to_string();
            let usage: BTreeMap<String, i64> = c
                .get("usage")?
                .as_object()?
                .iter()
                .filter_map(|(r, q)| Some((r.clone(), quantity::parse_milli(q.as_str()?).ok()?)))
                .collect();
            Some((name, usage))
        })
        .collect();
    Some(PodUsage {
        pod: item.metadata.name.clone()?,
        timestamp,
        window,
        containers,
    })
}

/// A Go `time.Duration` string (`15s`, `1m0.5s`, `1.002s`, `500ms`).
pub fn go_duration(s: &str) -> Option<SignedDuration> {
    let d = cairn_semantics::duration::parse_go(s)?;
    SignedDuration::try_from(d).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(
            go_duration("1m0.5s"),
            Some(SignedDuration::from_millis(60_500))
        );
        assert_eq!(go_duration("15"), None);
    }

    #[test]
    fn pod_metrics_decode_to_milli_units() {
        let item: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": "web-1", "namespace": "default"},
            "timestamp": "2026-11-29T10:00:00Z", "window": "15.002s",
            "containers": [{"name": "web", "usage": {"cpu": "250123456n", "memory": "64Mi"}}]
        }))
        .expect("json");
        let u = decode(&item).expect("decodes");
        assert_eq!(u.pod, "web-1");
        assert_eq!(u.window, SignedDuration::from_millis(15_002));
        let web = &u.containers[0].1;
        assert_eq!(web["cpu"], 251, "rounded up as MilliValue does");
        assert_eq!(web["memory"], 67_108_864_000);
    }
}
