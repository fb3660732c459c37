//! Static pods: manifests in a directory run without the API (the agent is their only
//! source), each mirrored into the API as a read-only mirror pod for visibility.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use sha2::Digest;
use tracing::{info, warn};

use crate::pod_meta::{api_name, MIRROR_ANNOTATION, SOURCE_ANNOTATION};
use crate::pods::{Desired, PodManager};
use crate::Agent;

const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
const SCAN_INTERVAL: Duration = Duration::from_secs(5);

/// The name a pod has in the API (static pods carry the node suffix already).
#[derive(Debug, thiserror::Error)]
pub enum StaticPodError {
    #[error("reading static pod manifest {path}: {message}")]
    Manifest { path: String, message: String },
}

/// Parses one manifest into the pod the agent runs: `<name>-<node>`, a UID derived from the
/// content, the config annotations the kubelet sets.
pub fn load(path: &Path, node: &str) -> Result<Pod, StaticPodError> {
    let bad = |message: String| StaticPodError::Manifest {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let value: Value = serde_yaml::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    if value.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Err(bad("kind is not Pod".into()));
    }
    let mut pod: Pod = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
    let name = pod
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad("metadata.name is required".into()))?;
    let mut hasher = sha2::Sha256::new();
    hasher.update(&text);
    hasher.update(path.display().to_string().as_bytes());
    hasher.update(node.as_bytes());
    let hash = hex::encode(hasher.finalize());
    let uid = format!(
        "{}-{}-{}-{}-{}",
        &hash[0..8],
        &hash[8..12],
        &hash[12..16],
        &hash[16..20],
        &hash[20..32]
    );
    pod.metadata.name = Some(format!("{name}-{node}"));
    pod.metadata
        .namespace
        .get_or_insert_with(|| "default".into());
    pod.metadata.uid = Some(uid);
    let ann = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    ann.insert(SOURCE_ANNOTATION.into(), "file".into());
    ann.insert(HASH_ANNOTATION.into(), hash[..32].to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node.to_string());
    Ok(pod)
}

/// Scans the manifest dir, runs/stops static pods and keeps their mirror pods in the API.
pub async fn run(agent: Arc<Agent>, manager: Arc<PodManager>) {
    let mut running: HashMap<String, Pod> = HashMap::new();
    loop {
        let mut current: HashMap<String, Pod> = HashMap::new();
        if let Ok(entries) = std::fs::read_dir(&agent.config.static_pod_dir) {
            for e in entries.flatten() {
                let path = e.path();
                let ext = path.extension().and_then(|x| x.to_str()).unwrap_or("");
                if !matches!(ext, "yaml" | "yml" | "json") {
                    continue;
                }
                match load(&path, &agent.config.node_name) {
                    Ok(pod) => {
                        current.insert(pod.metadata.uid.clone().unwrap_or_default(), pod);
                    }
                    Err(e) => warn!(error = %e, "skipping static pod manifest"),
                }
            }
        }
        for (uid, pod) in &running {
            if !current.contains_key(uid) {
                info!(pod = %api_name(pod), "static pod manifest removed");
                manager.dispatch(Desired::Gone(Box::new(pod.clone())));
                delete_mirror(&agent, pod).await;
            }
        }
        for (uid, pod) in &current {
            if !running.contains_key(uid) {
                info!(pod = %api_name(pod), "static pod manifest found");
            }
            manager.dispatch(Desired::Run(Box::new(pod.clone())));
            ensure_mirror(&agent, pod).await;
        }
        running = current;
        tokio::time::sleep(SCAN_INTERVAL).await;
    }
}

async fn ensure_mirror(agent: &Agent, pod: &Pod) {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), &ns);
    let name = api_name(pod);
    let hash = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HASH_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    match api.get_opt(&name).await {
        Ok(Some(existing)) => {
            let mirror_hash = existing
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MIRROR_ANNOTATION))
                .cloned();
            if mirror_hash.as_deref() == Some(hash.as_str())
                && existing.metadata.deletion_timestamp.is_none()
            {
                return;
            }
            // Stale, deleted or not a mirror: replace it. A failed delete makes the create
            // below fail with AlreadyExists, which is logged; the next pass tries again.
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            if let Err(e) = api.delete(&name, &params).await {
                warn!(pod = %name, error = %e, "deleting a stale mirror pod");
            }
        }
        Ok(None) => {}
        // The Node authorizer lets a node read only pods bound to it: a mirror that is
        // not there yet is "forbidden", not "not found".
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        Err(e) => {
            warn!(pod = %name, error = %e, "looking up mirror pod");
            return;
        }
    }
    let mut mirror = serde_json::to_value(pod).unwrap_or(Value::Null);
    mirror["metadata"]["annotations"][MIRROR_ANNOTATION] = json!(hash);
    if let Some(m) = mirror["metadata"].as_object_mut() {
        m.remove("uid");
        m.remove("resourceVersion");
    }
    if let Ok(Some(node)) = Api::<k8s_openapi::api::core::v1::Node>::all(agent.client.clone())
        .get_opt(&agent.config.node_name)
        .await
    {
        mirror["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "Node", "name": agent.config.node_name,
            "uid": node.metadata.uid.unwrap_or_default(), "controller": true
        }]);
    }
    let Ok(mirror) = serde_json::from_value::<Pod>(mirror) else {
        return;
    };
    if let Err(e) = api.create(&PostParams::default(), &mirror).await {
        warn!(pod = %name, error = %e, "creating mirror pod");
    }
}

async fn delete_mirror(agent: &Agent, pod: &Pod) {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), &ns);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    match api.delete(&api_name(pod), &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        // The mirror stays until the API's pod GC or the next agent start removes it.
        Err(e) => warn!(pod = %api_name(pod), error = %e, "deleting a mirror pod"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_becomes_node_pod() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("web.yaml");
        std::fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n").unwrap();
        let p = load(&f, "node1").unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("web-node1"));
        assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("node1"));
        let again = load(&f, "node1").unwrap();
        assert_eq!(p.metadata.uid, again.metadata.uid);
        std::fs::write(&f, "kind: Service\n").unwrap();
        assert!(load(&f, "node1").is_err());
    }
}
