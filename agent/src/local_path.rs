//! The `cairn.io/local-path` provisioner (what k3s users know as local-path-provisioner),
//! run by every agent for its own node, since the directories live there:
//! - a claim handed to it (`volume.kubernetes.io/storage-provisioner`) and placed on this
//!   node by the scheduler (`volume.kubernetes.io/selected-node`) gets a directory under
//!   `--local-path-root` and a `local` PersistentVolume with node affinity to this node,
//!   pre-bound to the claim (the binder completes the binding); a directory that cannot
//!   be made or written leaves the claim Pending with a `ProvisioningFailed` event;
//! - a bound claim that asks for more than its volume holds, in a class that allows
//!   expansion, has the volume's recorded capacity raised (a directory has no size to
//!   grow; the binder then reports the new capacity on the claim);
//! - a Released volume it made, with reclaim `Delete`, has its directory removed and is
//!   deleted.
//!
//! Each pass works from fresh lists (claims, volumes, classes) every few seconds and on
//! every claim or volume event; everything it does is idempotent.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use crate::events::{EventRecorder, EventType};

pub const PROVISIONER: &str = "cairn.io/local-path";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The node whose disk holds the volume's directory.
const NODE_ANNOTATION: &str = "cairn.io/local-path-node";
const PASS_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum LocalPathError {
    #[error("{action} {object}: {source}")]
    Api {
        action: &'static str,
        object: String,
        source: Box<kube::Error>,
    },
}

pub struct LocalPath {
    pub client: Client,
    pub node: String,
    pub root: PathBuf,
    pub events: Arc<EventRecorder>,
}

fn api_err(action: &'static str, object: String) -> impl FnOnce(kube::Error) -> LocalPathError {
    move |e| LocalPathError::Api {
        action,
        object,
        source: Box::new(e),
    }
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The volume name for a claim, as upstream provisioners name them.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// Makes the directory and proves it writable.
pub fn make_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    let probe = dir.join(".cairn-write-test");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

impl LocalPath {
    /// Runs passes until the process stops: every few seconds and on claim/volume events.
    pub async fn run(self: Arc<Self>) {
        let claims = watcher::watcher(
            Api::<PersistentVolumeClaim>::all(self.client.clone()),
            Default::default(),
        );
        let volumes = watcher::watcher(
            Api::<PersistentVolume>::all(self.client.clone()),
            Default::default(),
        );
        let mut events = futures::stream::select(claims.map(|_| ()), volumes.map(|_| ())).boxed();
        loop {
            if let Err(e) = self.pass().await {
                warn!(error = %e, "local-path provisioner pass failed");
            }
            // Whichever comes first: a change, or the interval.
            let _ = tokio::time::timeout(PASS_INTERVAL, events.next()).await;
        }
    }

    async fn pass(&self) -> Result<(), LocalPathError> {
        let lp = ListParams::default();
        let claims = Api::<PersistentVolumeClaim>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(api_err("listing", "persistentvolumeclaims".into()))?;
        let volumes = Api::<PersistentVolume>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(api_err("listing", "persistentvolumes".into()))?;
        let classes = Api::<StorageClass>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(api_err("listing", "storageclasses".into()))?;
        for c in &claims.items {
            let class = c
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref());
            let class = classes
                .items
                .iter()
                .find(|k| k.metadata.name.as_deref() == class);
            if self.wants_volume(c, &volumes.items) {
                self.provision(c, class).await?;
            } else if let Some(v) = self.expandable(c, class, &volumes.items) {
                self.expand(c, v).await?;
            }
        }
        for v in volumes.items.iter().filter(|v| self.is_released_own(v)) {
            self.delete(v).await?;
        }
        Ok(())
    }

    fn wants_volume(&self, c: &PersistentVolumeClaim, volumes: &[PersistentVolume]) -> bool {
        let unbound = c
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default()
            .is_empty();
        unbound
            && c.metadata.deletion_timestamp.is_none()
            && annotation(&c.metadata, STORAGE_PROVISIONER) == Some(PROVISIONER)
            && annotation(&c.metadata, SELECTED_NODE) == Some(self.node.as_str())
            && !volumes
                .iter()
                .any(|v| v.metadata.name.as_deref() == Some(volume_name(c).as_str()))
    }

    #[tracing::instrument(skip_all, fields(claim = %format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any())))]
    async fn provision(
        &self,
        c: &PersistentVolumeClaim,
        class: Option<&StorageClass>,
    ) -> Result<(), LocalPathError> {
        let ns = c.namespace().unwrap_or_default();
        let name = volume_name(c);
        let dir = self.root.join(format!("{name}_{ns}_{}", c.name_any()));
        let class_name = class
            .and_then(|k| k.metadata.name.clone())
            .unwrap_or_default();
        if let Err(e) = make_dir(&dir) {
            let msg = format!(
                "failed to provision volume with StorageClass \"{class_name}\": directory {} on node {} is not writable: {e}",
                dir.display(),
                self.node
            );
            self.events
                .claim(c, EventType::Warning, "ProvisioningFailed", &msg);
            return Ok(());
        }
        let spec = c.spec.clone().unwrap_or_default();
        let storage = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned();
        let reclaim = class
            .and_then(|k| k.reclaim_policy.clone())
            .unwrap_or_else(|| "Delete".into());
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER, NODE_ANNOTATION: self.node}},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": spec.access_modes,
                "persistentVolumeReclaimPolicy": reclaim,
                "storageClassName": class_name,
                "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
                "local": {"path": dir},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [self.node]}]}]}},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                    "name": c.name_any(), "uid": c.metadata.uid},
            }
        }))
        .map_err(|e| LocalPathError::Api {
            action: "building",
            object: name.clone(),
            source: Box::new(kube::Error::SerdeError(e)),
        })?;
        match Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &pv)
            .await
        {
            Ok(_) => {
                info!(volume = %name, dir = %dir.display(), "provisioned");
                let msg = format!("Successfully provisioned volume {name}");
                self.events
                    .claim(c, EventType::Normal, "ProvisioningSucceeded", &msg);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(api_err("creating", name)(e)),
        }
    }

    /// The volume of a bound claim that asks for more, if its class allows expansion.
    fn expandable<'a>(
        &self,
        c: &PersistentVolumeClaim,
        class: Option<&StorageClass>,
        volumes: &'a [PersistentVolume],
    ) -> Option<&'a PersistentVolume> {
        if class.and_then(|k| k.allow_volume_expansion) != Some(true) {
            return None;
        }
        let bound = c.spec.as_ref()?.volume_name.as_deref()?;
        let v = volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(bound))?;
        if annotation(&v.metadata, NODE_ANNOTATION) != Some(self.node.as_str()) {
            return None;
        }
        let bytes = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.and_then(|q| cairn_semantics::quantity::value(q).ok())
                .unwrap_or(0)
        };
        let asked = bytes(
            c.spec
                .as_ref()?
                .resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage"),
        );
        let has = bytes(v.spec.as_ref()?.capacity.as_ref()?.get("storage"));
        (asked > has).then_some(v)
    }

    async fn expand(
        &self,
        c: &PersistentVolumeClaim,
        v: &PersistentVolume,
    ) -> Result<(), LocalPathError> {
        let asked = c
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned();
        let patch = json!({"spec": {"capacity": {"storage": asked}}});
        Api::<PersistentVolume>::all(self.client.clone())
            .patch(
                &v.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(api_err("expanding", v.name_any()))?;
        let msg = format!(
            "volume {} expanded to {}",
            v.name_any(),
            asked.map(|q| q.0).unwrap_or_default()
        );
        self.events
            .claim(c, EventType::Normal, "FileSystemResizeSuccessful", &msg);
        Ok(())
    }

    fn is_released_own(&self, v: &PersistentVolume) -> bool {
        annotation(&v.metadata, PROVISIONED_BY) == Some(PROVISIONER)
            && annotation(&v.metadata, NODE_ANNOTATION) == Some(self.node.as_str())
            && v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released")
            && v.spec
                .as_ref()
                .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                == Some("Delete")
            && v.metadata.deletion_timestamp.is_none()
    }

    async fn delete(&self, v: &PersistentVolume) -> Result<(), LocalPathError> {
        let dir = v
            .spec
            .as_ref()
            .and_then(|s| s.local.as_ref())
            .map(|l| PathBuf::from(&l.path));
        // Only directories under our root are ours to remove.
        if let Some(dir) = dir.filter(|d| d.starts_with(&self.root)) {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => info!(dir = %dir.display(), "removed released volume's directory"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(dir = %dir.display(), error = %e, "removing a released volume's directory");
                    return Ok(());
                }
            }
        }
        match Api::<PersistentVolume>::all(self.client.clone())
            .delete(&v.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_err("deleting", v.name_any())(e)),
        }
    }
}
