//! `kube-system/extension-apiserver-authentication`: where kube-apiserver publishes the
//! CA its clients' certificates are signed by (`client-ca-file`), so that other servers
//! that check client certificates (extension API servers, and here the agents' ports)
//! trust the same ones.

use cairn_api::registry;
use cairn_api::status::Status;
use serde_json::{json, Value};

use super::{ApiState, WriteOptions};

pub const CLIENT_CA_CONFIGMAP: &str = "extension-apiserver-authentication";
pub const CLIENT_CA_KEY: &str = "client-ca-file";

impl ApiState {
    /// Writes the client CA into the ConfigMap unless it already holds it.
    pub async fn publish_client_ca(&self, client_ca_pem: &str) -> Result<(), Status> {
        let cms = registry::find("", "v1", "configmaps")
            .ok_or_else(|| Status::internal("configmaps not registered"))?;
        let current = self
            .cache
            .get(&cms.key(Some("kube-system"), CLIENT_CA_CONFIGMAP))
            .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok());
        let published = current
            .as_ref()
            .and_then(|cm| cm.pointer(&format!("/data/{CLIENT_CA_KEY}")))
            .and_then(Value::as_str);
        if published == Some(client_ca_pem) {
            return Ok(());
        }
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CLIENT_CA_CONFIGMAP, "namespace": "kube-system"},
            "data": {CLIENT_CA_KEY: client_ca_pem},
        });
        let opts = WriteOptions {
            field_manager: Some("cairn-control".into()),
            ..Default::default()
        };
        if current.is_none() {
            return self
                .create(cms, Some("kube-system"), body, &opts)
                .await
                .map(|_| ());
        }
        self.update(
            cms,
            Some("kube-system"),
            CLIENT_CA_CONFIGMAP,
            None,
            body,
            &opts,
        )
        .await
        .map(|_| ())
    }
}
