//! The CSR approving and signing controllers (kube-controller-manager's `csrapproving`
//! and `csrsigning`), in the API server because it holds the CA keys. They follow the
//! CertificateSigningRequests in the watch cache:
//!
//! - approve kubelet client requests whose requester may `create` the
//!   `certificatesigningrequests/nodeclient` (bootstrap tokens) or `/selfnodeclient`
//!   (a node renewing its own) subresource, as upstream's SubjectAccessReview approver;
//!   `kube-apiserver-client` requests for exactly `system:kube-proxy` whose requester
//!   may `create` `certificatesigningrequests/kubeproxyclient` (cairn's: a node's
//!   credential for its proxy, [`review::kube_proxy_client`]); and kubelet serving requests naming only the requesting node's own names and
//!   addresses ([`review::serving_is_the_nodes_own`]);
//! - sign approved requests of the three built-in signers: kubelet client and
//!   `kube-apiserver-client` certificates by the client CA, kubelet serving
//!   certificates by the cluster CA; a request its signer cannot honour gets `Failed`.

pub mod review;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::Status;
use cairn_auth::{Attributes, UserInfo};
use cairn_pki::csr::{parse_request, usage_from_k8s};
use cairn_pki::ClusterPki;
use cairn_store::cache::WatchEventType;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::authz::Authorizer;
use crate::objects::{name_of, now_rfc3339};
use crate::state::{ApiState, WriteOptions};
use review::{Review, CLIENT_SIGNER, KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER};

const FIELD_MANAGER: &str = "cairn-control";

/// What the controllers act with.
#[derive(Clone)]
pub struct CsrControllers {
    pub state: Arc<ApiState>,
    pub authorizer: Arc<Authorizer>,
    pub pki: Arc<ClusterPki>,
}

fn csr_resource() -> Option<&'static ResourceInfo> {
    registry::find("certificates.k8s.io", "v1", "certificatesigningrequests")
}

/// Handles every request now and each change after, until the server stops.
pub async fn run(cx: CsrControllers) {
    let Some(r) = csr_resource() else {
        return warn!("CertificateSigningRequests are not registered");
    };
    let prefix = r.key_prefix();
    let cache = Arc::clone(&cx.state.cache);
    loop {
        let (objects, revision) = cache.list(&prefix);
        for o in &objects {
            cx.handle_bytes(r, &o.bytes).await;
        }
        let mut watcher = match cache.watch(&prefix, revision).await {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, "CSR controllers: watching requests");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(Ok(event)) = watcher.next().await {
            if !matches!(event.kind, WatchEventType::Deleted) {
                cx.handle_bytes(r, &event.object.bytes).await;
            }
        }
    }
}

fn has_condition(csr: &Value, kind: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind))
}

fn spec_str<'a>(csr: &'a Value, field: &str) -> &'a str {
    csr.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn decoded_request(csr: &Value) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(spec_str(csr, "request"))
        .ok()?;
    String::from_utf8(bytes).ok()
}

impl CsrControllers {
    async fn handle_bytes(&self, r: &'static ResourceInfo, bytes: &[u8]) {
        let Ok(csr) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        if let Err(e) = self.handle(r, &csr).await {
            // A conflict means a newer version is on its way: its event retries.
            if e.code != 409 {
                warn!(csr = %name_of(&csr), error = %e.message, "CSR controllers");
            }
        }
    }

    async fn handle(&self, r: &'static ResourceInfo, csr: &Value) -> Result<(), Status> {
        let done = ["Denied", "Failed"].iter().any(|k| has_condition(csr, k));
        let issued = csr.pointer("/status/certificate").is_some_and(|c| c != "");
        if done || issued {
            return Ok(());
        }
        let approved = has_condition(csr, "Approved");
        let Some(info) = decoded_request(csr).and_then(|pem| parse_request(&pem).ok()) else {
            if approved {
                let why = "unable to parse csr: the request is not a valid PEM CERTIFICATE REQUEST";
                return self.fail(r, csr, why).await;
            }
            return Ok(());
        };
        let review = Review {
            signer: spec_str(csr, "signerName"),
            username: spec_str(csr, "username"),
            usages: spec_usages(csr),
            request: &info,
        };
        if approved {
            return self.sign(r, csr, &review).await;
        }
        if let Some(message) = self.approval(csr, &review) {
            let mut next = csr.clone();
            push_condition(&mut next, "Approved", "AutoApproved", message);
            self.write(r, csr, "approval", next).await?;
            info!(csr = %name_of(csr), signer = review.signer, "approved");
        }
        Ok(())
    }

    /// The approval message when the request is one the approver grants.
    fn approval(&self, csr: &Value, review: &Review<'_>) -> Option<&'static str> {
        if let Some(sub) = review::client_approval_subresource(review) {
            let user = requester(csr);
            let attrs = Attributes::resource(
                &user,
                "create",
                "certificates.k8s.io",
                "certificatesigningrequests",
            )
            .subresource(sub);
            return self
                .authorizer
                .decide(&attrs)
                .is_allowed()
                .then(|| review::client_approval_message(sub));
        }
        let node = review.request.common_name.strip_prefix("system:node:")?;
        let (names, ips) = self.node_names(node);
        review::serving_is_the_nodes_own(review, &names, &ips)
            .then_some("Auto approving kubelet serving certificate: every name is the node's own.")
    }

    /// The names and addresses the Node `name` reports, less any another Node also
    /// reports: a node may not get a certificate for an address that is someone else's.
    fn node_names(&self, name: &str) -> (Vec<String>, Vec<IpAddr>) {
        let mut names = vec![name.to_string()];
        let mut ips = Vec::new();
        let Some(nodes) = registry::find("", "v1", "nodes") else {
            return (names, ips);
        };
        let (all, _) = self.state.cache.list(&nodes.list_prefix(None));
        let (mut other_names, mut other_ips) = (Vec::new(), Vec::new());
        for node in all
            .iter()
            .filter_map(|o| serde_json::from_slice::<NodeAddresses>(&o.bytes).ok())
        {
            if node.metadata.name == name {
                node.status.add_to(&mut names, &mut ips);
            } else {
                other_names.push(node.metadata.name);
                node.status.add_to(&mut other_names, &mut other_ips);
            }
        }
        // Nor a Service's name or address (`kubernetes.default.svc`, its ClusterIP): a
        // node must not get a certificate the cluster's clients would take for the API
        // server's. (A node beside the API server shares its host address and name.)
        names.retain(|n| !other_names.contains(n) && !is_service_name(n));
        ips.retain(|ip| !other_ips.contains(ip) && !self.state.is_service_ip(*ip));
        (names, ips)
    }

    async fn sign(
        &self,
        r: &'static ResourceInfo,
        csr: &Value,
        review: &Review<'_>,
    ) -> Result<(), Status> {
        let (authority, valid) = match review.signer {
            KUBELET_CLIENT_SIGNER => (&self.pki.client_ca, review::kubelet_client(review)),
            KUBELET_SERVING_SIGNER => (&self.pki.cluster_ca, review::kubelet_serving(review)),
            CLIENT_SIGNER => (&self.pki.client_ca, Ok(())),
            // Another signer's request: not ours to sign.
            _ => return Ok(()),
        };
        if let Err(why) = valid {
            return self.fail(r, csr, &why.to_string()).await;
        }
        let usages: Vec<_> = review
            .usages
            .iter()
            .filter_map(|u| usage_from_k8s(u))
            .collect();
        let pem = decoded_request(csr).unwrap_or_default();
        let cert = match authority.sign_request(&pem, &usages, self.lifetime(csr)) {
            Ok(cert) => cert,
            Err(e) => return self.fail(r, csr, &e.to_string()).await,
        };
        let mut next = csr.clone();
        next["status"]["certificate"] =
            json!(base64::engine::general_purpose::STANDARD.encode(cert));
        self.write(r, csr, "status", next).await?;
        info!(csr = %name_of(csr), signer = review.signer, "signed");
        Ok(())
    }

    /// The leaf lifetime, shortened to `spec.expirationSeconds` when that asks less.
    fn lifetime(&self, csr: &Value) -> Duration {
        let leaf = self.pki.lifetimes.leaf;
        let asked = csr
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_u64);
        asked.map_or(leaf, |s| leaf.min(Duration::from_secs(s)))
    }

    async fn fail(&self, r: &'static ResourceInfo, csr: &Value, why: &str) -> Result<(), Status> {
        let mut next = csr.clone();
        push_condition(&mut next, "Failed", "SignerValidationFailure", why);
        warn!(csr = %name_of(csr), reason = why, "CSR failed");
        self.write(r, csr, "status", next).await
    }

    async fn write(
        &self,
        r: &'static ResourceInfo,
        csr: &Value,
        sub: &str,
        next: Value,
    ) -> Result<(), Status> {
        let opts = WriteOptions {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..WriteOptions::default()
        };
        self.state
            .update(r, None, name_of(csr), Some(sub), next, &opts)
            .await
            .map(|_| ())
    }
}

fn spec_usages(csr: &Value) -> Vec<&str> {
    csr.pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A name clients use for a Service (the API server's own among them).
fn is_service_name(name: &str) -> bool {
    name == "kubernetes"
        || name.starts_with("kubernetes.default")
        || name.ends_with(".svc")
        || name.contains(".svc.")
}

/// Of a Node, only its name and reported addresses: the approver reads every Node
/// per serving request, and serde skips the rest without building it.
#[derive(serde::Deserialize)]
struct NodeAddresses {
    metadata: NodeName,
    #[serde(default)]
    status: ReportedAddresses,
}

#[derive(serde::Deserialize)]
struct NodeName {
    #[serde(default)]
    name: String,
}

#[derive(serde::Deserialize, Default)]
struct ReportedAddresses {
    #[serde(default)]
    addresses: Vec<NodeAddress>,
}

#[derive(serde::Deserialize)]
struct NodeAddress {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    address: String,
}

impl ReportedAddresses {
    /// Adds the names and addresses the Node's status reports.
    fn add_to(self, names: &mut Vec<String>, ips: &mut Vec<IpAddr>) {
        for a in self.addresses {
            match a.kind.as_str() {
                "InternalIP" | "ExternalIP" => ips.extend(a.address.parse::<IpAddr>().ok()),
                "Hostname" | "InternalDNS" | "ExternalDNS" => names.push(a.address),
                _ => {}
            }
        }
    }
}

/// The requester the API server stamped on the request.
fn requester(csr: &Value) -> UserInfo {
    let groups = csr
        .pointer("/spec/groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    UserInfo::new(spec_str(csr, "username"), groups)
}

fn push_condition(csr: &mut Value, kind: &str, reason: &str, message: &str) {
    let now = now_rfc3339();
    let condition = json!({
        "type": kind, "status": "True", "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    });
    if !csr.get("status").is_some_and(Value::is_object) {
        csr["status"] = json!({});
    }
    match csr["status"]["conditions"].as_array_mut() {
        Some(list) => list.push(condition),
        None => csr["status"]["conditions"] = json!([condition]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_node_is_read_for_its_name_and_reported_addresses_only() {
        let node = json!({
            "metadata": {"name": "node-1", "labels": {"a": "b"}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "198.18.0.11"},
                    {"type": "Hostname", "address": "node-1.lab"},
                    {"type": "ExternalDNS", "address": "n1.example.org"},
                    {"type": "InternalIP", "address": "not an address"},
                    {"type": "Other", "address": "ignored"}
                ],
                "capacity": {"cpu": "2"}
            }
        });
        let read: NodeAddresses =
            serde_json::from_slice(&serde_json::to_vec(&node).unwrap()).unwrap();
        assert_eq!(read.metadata.name, "node-1");
        let (mut names, mut ips) = (Vec::new(), Vec::new());
        read.status.add_to(&mut names, &mut ips);
        assert_eq!(names, ["node-1.lab", "n1.example.org"]);
        assert_eq!(ips, ["198.18.0.11".parse::<IpAddr>().unwrap()]);
        let bare: NodeAddresses = serde_json::from_str(r#"{"metadata":{"name":"n"}}"#).unwrap();
        let (mut names, mut ips) = (Vec::new(), Vec::new());
        bare.status.add_to(&mut names, &mut ips);
        assert!(
            names.is_empty() && ips.is_empty(),
            "a Node with no status reports nothing"
        );
    }
}
