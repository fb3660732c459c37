//! The scale target of an HPA through its `/scale` subresource, whatever its kind
//! (Deployments, ReplicaSets, StatefulSets, custom resources with a scale
//! subresource), found by discovery once per kind and remembered.

use std::collections::HashMap;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use parking_lot::Mutex;

/// Kinds already looked up: `(apiVersion, kind)` → resource.
#[derive(Default)]
pub struct Kinds {
    known: Mutex<HashMap<(String, String), ApiResource>>,
}

impl Kinds {
    async fn resource(
        &self,
        client: &Client,
        r: &CrossVersionObjectReference,
    ) -> Result<ApiResource, String> {
        let api_version = r.api_version.clone().unwrap_or_else(|| "v1".into());
        let key = (api_version.clone(), r.kind.clone());
        if let Some(found) = self.known.lock().get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &r.kind);
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| format!("unable to determine resource for scale target reference: {e}"))?;
        self.known.lock().insert(key, resource.clone());
        Ok(resource)
    }

    fn api(client: &Client, namespace: &str, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, resource)
    }

    /// The target's Scale.
    pub async fn get(
        &self,
        client: &Client,
        namespace: &str,
        r: &CrossVersionObjectReference,
    ) -> Result<Scale, String> {
        let resource = self.resource(client, r).await?;
        Self::api(client, namespace, &resource)
            .get_scale(&r.name)
            .await
            .map_err(|e| e.to_string())
    }

    /// Writes `replicas` into the Scale as read (a conflict is an error; the next sync
    /// reads again).
    pub async fn set(
        &self,
        client: &Client,
        namespace: &str,
        r: &CrossVersionObjectReference,
        mut scale: Scale,
        replicas: i32,
    ) -> Result<(), String> {
        let resource = self.resource(client, r).await?;
        scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        Self::api(client, namespace, &resource)
            .replace_scale(&r.name, &PostParams::default(), &scale)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
