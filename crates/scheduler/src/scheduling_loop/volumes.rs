//! VolumeBinding's pre-bind: each unbound `WaitForFirstConsumer` claim of the pod is
//! annotated with the chosen node (`volume.kubernetes.io/selected-node`, what
//! provisioners and the binder wait for), and the pod is bound only once its claims are
//! (upstream waits the same way, up to its bind timeout).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;

use crate::plugins::volume_binding::SELECTED_NODE;

/// How long a bind waits for the pod's claims to be bound.
pub const BIND_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(200);

pub async fn pre_bind(
    client: &Client,
    claims: &[(String, String)],
    node: &str,
) -> Result<(), String> {
    for (ns, name) in claims {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        let patch = json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                format!("selecting node {node} for persistentvolumeclaim {ns}/{name}: {e}")
            })?;
    }
    let deadline = Instant::now() + BIND_TIMEOUT;
    for (ns, name) in claims {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        loop {
            let claim = api
                .get(name)
                .await
                .map_err(|e| format!("reading persistentvolumeclaim {ns}/{name}: {e}"))?;
            let bound = claim
                .spec
                .and_then(|s| s.volume_name)
                .is_some_and(|v| !v.is_empty());
            if bound {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("binding volumes: timed out waiting for persistentvolumeclaim {ns}/{name} to be bound"));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}
