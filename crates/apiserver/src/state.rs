//! The server's shared state and the object write pipeline used by every handler and by
//! the built-in loops (namespace finalization, garbage collection):
//! decode → default → admit (namespace, allocation) → validate → store → wait for the
//! watch cache, so a client that gets an answer reads its own write afterwards.

use std::net::Ipv4Addr;
use std::sync::Arc;

use bytes::Bytes;
use cairn_api::kinds::Admission;
use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::{Cause, Status};
use cairn_store::cache::{CachedObject, WatchCache};
use cairn_store::{Revision, StoreError};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::allocator::{IpAllocator, PortAllocator};
use crate::objects::*;
use allocate::{service_ips, service_node_ports, Allocations};

mod allocate;
mod binding;
mod bootstrap;
mod bootstrap_api;
pub mod claim_repair;
mod claims;
mod client_ca;
mod convert;
mod create;
mod csr;
mod custom_admission;
mod delete;
mod eviction;
mod lookup;
pub mod master_leases;
mod node_restriction;
mod policy_admission;
mod rbac_defaults;
mod rbac_escalation;
mod update;
mod webhook_admission;

pub use node_restriction::NodeWrite;
pub use webhook_admission::CachedServices;
use webhook_admission::WebhookWrite;

/// How unknown fields in a body are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options of a write request.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Who writes, for the checks that depend on it (RBAC escalation); None for the
    /// server's own writes.
    pub requester: Option<Requester>,
    pub field_manager: Option<String>,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// Server-side apply: recorded as an `Apply` operation in managedFields.
    pub apply: bool,
}

/// The authenticated writer of a request and the authorizer its rights come from.
#[derive(Clone)]
pub struct Requester {
    pub user: cairn_auth::UserInfo,
    pub authorizer: Arc<crate::authz::Authorizer>,
}

impl std::fmt::Debug for Requester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requester")
            .field("user", &self.user.username)
            .finish()
    }
}

/// Options of a delete request (query and DeleteOptions body merged).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

/// The outcome of a write: the object as clients see it.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object's name (a generated one included), for the audit record.
    pub name: String,
    pub bytes: Bytes,
    pub revision: Revision,
    /// Warnings for the `Warning` response header.
    pub warnings: Vec<String>,
}

/// The name of the object a handler wrote, on its response: the audit record of a
/// create names it without reading the body (protobuf answers included).
#[derive(Debug, Clone)]
pub struct WrittenName(pub String);

impl Written {
    pub fn value(&self) -> Result<Value, Status> {
        serde_json::from_slice(&self.bytes)
            .map_err(|e| Status::internal(format!("decoding stored object: {e}")))
    }
}

pub struct ServerSettings {
    /// What the `kubernetes` Service's endpoints point at.
    pub advertise_address: Ipv4Addr,
    pub advertise_port: u16,
    /// Seconds of the default `not-ready` and `unreachable` tolerations added to pods.
    pub default_toleration_seconds: (i64, i64),
    /// Whether bootstrap creates the default `local-path` StorageClass.
    pub local_path_storage_class: bool,
    /// Whether bootstrap creates the default `cairn` IngressClass.
    pub default_ingress_class: bool,
    /// Create `kube-system/kube-dns` (agents serve it) when missing.
    pub cluster_dns_service: bool,
    /// Longest ServiceAccount token issued, in seconds (0: what is asked). A test knob
    /// below upstream's one-hour floor for `--service-account-max-token-expiration`.
    pub max_token_seconds: i64,
}

pub struct ApiState {
    pub cache: Arc<WatchCache>,
    pub settings: ServerSettings,
    cluster_ips: Mutex<IpAllocator>,
    node_ports: Mutex<PortAllocator>,
    priority_classes: crate::priority::ClassMemo,
    /// The resources CRDs define.
    pub custom: crate::custom::CustomRegistry,
    policy_expressions: policy_admission::ExpressionCache,
    /// Admission webhooks: the configured ones, and how they are called.
    webhook_hooks: crate::admission::webhook::Hooks,
    webhook_caller: Arc<dyn crate::admission::webhook::Caller>,
    /// HTTPS to the agents' ports, as the API server's own client.
    pub agents: Arc<crate::agent_dial::AgentDialer>,
    /// The nodes' last resource metrics scrapes (`metrics.k8s.io`).
    pub resource_metrics: crate::metrics_api::ResourceMetrics,
    /// The server's own Prometheus metrics (`GET /metrics`).
    pub metrics: Arc<crate::server_metrics::ServerMetrics>,
}

pub fn store_status(e: StoreError, r: &ResourceInfo, name: &str) -> Status {
    match e {
        StoreError::NotFound { .. } => Status::not_found(&r.group_resource(), name).with_details(r.group, r.plural, name),
        StoreError::AlreadyExists { .. } => {
            Status::already_exists(&r.group_resource(), name).with_details(r.group, r.plural, name)
        }
        StoreError::Conflict { .. } => Status::conflict(
            &r.group_resource(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
        .with_details(r.group, r.plural, name),
        StoreError::Compacted { requested, compacted } => {
            Status::gone(format!("too old resource version: {requested} ({compacted})"))
        }
        StoreError::WatcherLagged => Status::gone("watch fell behind; list again"),
        StoreError::Closed => Status::unavailable("the store is shutting down"),
        StoreError::Backend(msg) => Status::internal(format!("storage error: {msg}")),
    }
}

fn has_status_subresource(r: &ResourceInfo) -> bool {
    r.subresource("status").is_some()
}

impl ApiState {
    pub fn new(
        cache: Arc<WatchCache>,
        settings: ServerSettings,
        service_cidr: ipnetwork::Ipv4Network,
        node_port_range: (u16, u16),
        metrics: Arc<crate::server_metrics::ServerMetrics>,
        agents: Arc<crate::agent_dial::AgentDialer>,
    ) -> Arc<ApiState> {
        let state = Arc::new(ApiState {
            cache: cache.clone(),
            settings,
            cluster_ips: Mutex::new(IpAllocator::new(service_cidr)),
            node_ports: Mutex::new(PortAllocator::new(node_port_range.0, node_port_range.1)),
            priority_classes: Default::default(),
            custom: Default::default(),
            policy_expressions: Default::default(),
            webhook_hooks: Default::default(),
            webhook_caller: Arc::new(crate::admission::webhook::client::HttpsCaller::new(
                Arc::new(CachedServices(cache.clone())),
            )),
            agents,
            resource_metrics: Default::default(),
            metrics,
        });
        state.restore_allocations();
        state
    }

    /// The resource served at `group`/`version` under `plural`: built-in or custom.
    pub fn find_resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&'static ResourceInfo> {
        registry::find(group, version, plural)
            .or_else(|| self.custom.find(group, version, plural).map(|c| c.info))
    }

    /// Every served resource: the built-in ones, then the custom ones.
    pub fn resources(&self) -> Vec<&'static ResourceInfo> {
        let custom = self.custom.all();
        registry::RESOURCES
            .iter()
            .chain(custom.iter().map(|c| c.info))
            .collect()
    }

    /// The resource whose shape `r`'s objects are stored in.
    pub fn storage_of(&self, r: &'static ResourceInfo) -> &'static ResourceInfo {
        match self.custom.of(r) {
            Some(c) => c.storage,
            None => registry::storage_of(r),
        }
    }

    /// How `r`'s objects are rendered.
    pub fn view(&self, r: &'static ResourceInfo) -> crate::render::View {
        let custom = self.custom.of(r);
        crate::render::View {
            served: r,
            storage: custom
                .as_ref()
                .map_or_else(|| registry::storage_of(r), |c| c.storage),
            conversion: self.conversion_webhook(r),
            custom,
        }
    }

    /// The conversion webhook of `r`'s CRD, when it converts through one.
    pub fn conversion_webhook(
        &self,
        r: &'static ResourceInfo,
    ) -> Option<crate::conversion_webhook::ConversionWebhook> {
        let hook = self.custom.of(r)?.conversion.clone()?;
        Some(crate::conversion_webhook::ConversionWebhook {
            hook,
            caller: self.webhook_caller.clone(),
        })
    }

    /// Rebuilds the custom resources from the stored CRDs.
    pub fn refresh_custom_resources(&self) {
        let Some(crds) = registry::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        else {
            return;
        };
        let (objects, _) = self.cache.list(&crds.list_prefix(None));
        let values: Vec<Value> = objects
            .iter()
            .filter_map(|o| serde_json::from_slice(&o.bytes).ok())
            .collect();
        self.custom.rebuild(&values);
    }

    /// Whether `ip` is in the Service range (`--service-cluster-ip-range`).
    pub fn is_service_ip(&self, ip: std::net::IpAddr) -> bool {
        match ip {
            std::net::IpAddr::V4(v4) => self.cluster_ips.lock().contains(v4),
            std::net::IpAddr::V6(_) => false,
        }
    }

    pub fn first_service_ip(&self) -> Ipv4Addr {
        self.cluster_ips.lock().first_address()
    }

    pub fn get(
        &self,
        r: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<CachedObject>, Status> {
        self.cache.get(&r.key(ns, name)).ok_or_else(|| {
            Status::not_found(&r.group_resource(), name).with_details(r.group, r.plural, name)
        })
    }

    pub fn get_value(
        &self,
        r: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(Value, Revision), Status> {
        let o = self.get(r, ns, name)?;
        let v = serde_json::from_slice(&o.bytes)
            .map_err(|e| Status::internal(format!("decoding {}: {e}", o.key)))?;
        Ok((v, o.mod_revision))
    }

    async fn settle(&self, revision: Revision) -> Result<(), Status> {
        self.cache.wait_for_revision(revision).await.map_err(|e| {
            Status::internal(format!(
                "watch cache did not catch up with revision {revision}: {e}"
            ))
        })
    }

    /// The object at `key` as clients see it, right after a write at `revision`.
    async fn written(
        &self,
        key: &str,
        revision: Revision,
        warnings: Vec<String>,
    ) -> Result<Written, Status> {
        self.settle(revision).await?;
        if key.starts_with("/registry/apiextensions.k8s.io/customresourcedefinitions/") {
            self.refresh_custom_resources();
        }
        let bytes = self
            .cache
            .get(key)
            .filter(|o| o.mod_revision >= revision)
            .map(|o| o.bytes.clone())
            .ok_or_else(|| {
                Status::internal(format!("object {key} missing from the cache after write"))
            })?;
        Ok(Written {
            name: key.rsplit('/').next().unwrap_or_default().to_string(),
            bytes,
            revision,
            warnings,
        })
    }

    /// Checks apiVersion/kind of a body against the resource and fills them in when absent.
    fn check_type(r: &ResourceInfo, obj: &mut Value, expect_kind: &str) -> Result<(), Status> {
        if !obj.is_object() {
            return Err(Status::bad_request(
                "the request body must be a JSON object",
            ));
        }
        let api_version = r.api_version();
        if let Some(v) = obj.get("apiVersion") {
            if v.as_str() != Some(api_version.as_str()) {
                return Err(Status::bad_request(format!(
                    "the API version in the data ({}) does not match the expected API version ({api_version})",
                    v.as_str().unwrap_or("?")
                )));
            }
        }
        if let Some(k) = obj.get("kind") {
            if k.as_str() != Some(expect_kind) {
                return Err(Status::bad_request(format!(
                    "the kind in the data ({}) does not match the expected kind ({expect_kind})",
                    k.as_str().unwrap_or("?")
                )));
            }
        }
        obj["apiVersion"] = json!(api_version);
        obj["kind"] = json!(expect_kind);
        Ok(())
    }

    /// Typed decode through the k8s-openapi schema: prunes unknown fields (rejecting them
    /// under `fieldValidation=Strict`) and rejects wrong types.
    fn normalize(
        r: &ResourceInfo,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), Status> {
        let normalized = cairn_api::schema::normalize(r, &obj)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        let mut warnings = Vec::new();
        if !normalized.unknown_fields.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => {
                    let list: Vec<String> = normalized
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.')))
                        .collect();
                    return Err(Status::bad_request(format!(
                        "strict decoding error: {}",
                        list.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(
                        normalized
                            .unknown_fields
                            .iter()
                            .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.'))),
                    );
                }
                FieldValidation::Ignore => {}
            }
        }
        Ok((normalized.value, warnings))
    }

    fn record_manager(
        obj: &mut Value,
        manager: Option<&str>,
        operation: &str,
        subresource: Option<&str>,
    ) {
        let Some(manager) = manager.filter(|m| !m.is_empty()) else {
            return;
        };
        let api_version = obj.get("apiVersion").cloned().unwrap_or(Value::Null);
        let meta = metadata_mut(obj);
        let mut entries: Vec<Value> = meta
            .get("managedFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        entries.retain(|e| {
            !(e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some(operation)
                && e.get("subresource").and_then(Value::as_str) == subresource)
        });
        let mut entry = json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        });
        if let Some(s) = subresource {
            entry["subresource"] = json!(s);
        }
        entries.push(entry);
        meta.insert("managedFields".into(), Value::Array(entries));
    }

    /// Refuses writes into namespaces that do not exist or are terminating.
    fn check_namespace(&self, ns: &str) -> Result<(), Status> {
        let Some(nsr) = registry::find("", "v1", "namespaces") else {
            return Ok(());
        };
        let obj = self.cache.get(&nsr.key(None, ns)).ok_or_else(|| {
            Status::not_found("namespaces", ns).with_details("", "namespaces", ns)
        })?;
        // A deleted namespace gets `status.phase: Terminating` in the same write as its
        // deletionTimestamp (see `delete_once`), so the cached field answers without a parse.
        if obj.fields.get("status.phase").map(String::as_str) == Some("Terminating") {
            let mut s = Status::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ));
            s.details.causes.push(Cause {
                reason: "NamespaceTerminating",
                field: "metadata.namespace".into(),
                message: format!("namespace {ns} is being terminated"),
            });
            return Err(s.with_details("", "namespaces", ns));
        }
        Ok(())
    }

    /// Mutations Kubernetes makes on admission that are not plain defaulting: the kind's
    /// strategy (upstream's PrepareForCreate/PrepareForUpdate).
    fn admit_kind_specific(&self, r: &ResourceInfo, obj: &mut Value, old: Option<&Value>) {
        if old.is_none() && r.strategy.resets_status {
            cairn_api::defaults::fresh_status(obj, r.strategy.status_counters);
        }
        match old {
            None => r.strategy.prepare_for_create.map(|prepare| prepare(obj)),
            Some(old) => r
                .strategy
                .prepare_for_update
                .map(|prepare| prepare(obj, old)),
        };
    }

    /// A pod bound to a node stays until its node agent confirms the containers are gone.
    fn awaits_node(&self, r: &ResourceInfo, obj: &Value) -> bool {
        r.strategy.admits(Admission::PodResources)
            && obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
            && obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                > 0
    }

    /// Deletes `key` from the store unconditionally at `rev` (after the checks are done).
    async fn remove_now(
        &self,
        r: &ResourceInfo,
        key: &str,
        obj: &Value,
        rev: Revision,
    ) -> Result<Revision, Status> {
        let name = name_of(obj).to_string();
        let (del_rev, _) = self
            .cache
            .backend()
            .delete(key, Some(rev))
            .await
            .map_err(|e| store_status(e, r, &name))?;
        if r.strategy.admits(Admission::ServiceAllocation) {
            let allocs = Allocations {
                ips: service_ips(obj),
                ports: service_node_ports(obj),
            };
            self.release_claimed(&allocs, &claims::owner_name(obj))
                .await;
        }
        self.settle(del_rev).await?;
        if r.strategy.admits(Admission::CustomResourceDefinition) {
            self.remove_custom_objects(obj).await;
        }
        Ok(del_rev)
    }
}

/// The pod's QoS class: the pod kind's rule.
pub use cairn_api::kinds::core::pod::qos_class;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        let besteffort = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&besteffort), "BestEffort");
        let guaranteed = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&guaranteed), "Guaranteed");
        let burstable =
            json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&burstable), "Burstable");
        let mismatch = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&mismatch), "Burstable");
    }
}
