//! The server's shared state and the object write pipeline used by every handler and by
//! the built-in loops (namespace finalization, garbage collection):
//! decode → default → admit (namespace, allocation) → validate → store → wait for the
//! watch cache, so a client that gets an answer reads its own write afterwards.

use std::net::Ipv4Addr;
use std::sync::Arc;

use bytes::Bytes;
use cairn_api::registry::{self, ResourceInfo, RESOURCES};
use cairn_api::status::{Cause, Status};
use cairn_store::cache::{CachedObject, WatchCache};
use cairn_store::{Revision, StoreError};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tracing::{debug, info, warn};

use crate::allocator::{AllocError, IpAllocator, PortAllocator};
use crate::decorate::{OWNER_UIDS_FIELD, UID_FIELD};
use crate::objects::*;

mod binding;
mod bootstrap;

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
    pub field_manager: Option<String>,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// Server-side apply: recorded as an `Apply` operation in managedFields.
    pub apply: bool,
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
    pub bytes: Bytes,
    pub revision: Revision,
    /// Warnings for the `Warning` response header.
    pub warnings: Vec<String>,
}

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
}

pub struct ApiState {
    pub cache: Arc<WatchCache>,
    pub settings: ServerSettings,
    cluster_ips: Mutex<IpAllocator>,
    node_ports: Mutex<PortAllocator>,
    priority_classes: crate::priority::ClassMemo,
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

/// Kinds whose `metadata.generation` tracks spec changes.
fn tracks_generation(r: &ResourceInfo) -> bool {
    r.group == "apps"
}

fn has_status_subresource(r: &ResourceInfo) -> bool {
    r.subresource("status").is_some()
}

const GENERATE_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated_suffix() -> String {
    let id = uuid::Uuid::new_v4();
    id.as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(GENERATE_NAME_ALPHABET[usize::from(*b) % GENERATE_NAME_ALPHABET.len()]))
        .collect()
}

/// Service allocations made for one write, released if the write fails.
#[derive(Default)]
struct Allocations {
    ips: Vec<Ipv4Addr>,
    ports: Vec<u16>,
}

fn service_ips(svc: &Value) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    if let Some(ips) = svc.pointer("/spec/clusterIPs").and_then(Value::as_array) {
        out.extend(
            ips.iter()
                .filter_map(|i| i.as_str()?.parse::<Ipv4Addr>().ok()),
        );
    }
    if let Some(ip) = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|i| i.parse().ok())
    {
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

fn service_node_ports(svc: &Value) -> Vec<u16> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| {
                    p.get("nodePort")?
                        .as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                })
                .filter(|p| *p != 0)
                .collect()
        })
        .unwrap_or_default()
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(
        svc.pointer("/spec/type").and_then(Value::as_str),
        Some("NodePort") | Some("LoadBalancer")
    )
}

impl ApiState {
    pub fn new(
        cache: Arc<WatchCache>,
        settings: ServerSettings,
        service_cidr: ipnetwork::Ipv4Network,
        node_port_range: (u16, u16),
    ) -> Arc<ApiState> {
        let state = Arc::new(ApiState {
            cache,
            settings,
            cluster_ips: Mutex::new(IpAllocator::new(service_cidr)),
            node_ports: Mutex::new(PortAllocator::new(node_port_range.0, node_port_range.1)),
            priority_classes: Default::default(),
        });
        state.restore_allocations();
        state
    }

    /// Rebuilds the allocators from the stored Services.
    fn restore_allocations(&self) {
        let Some(services) = registry::find("", "v1", "services") else {
            return;
        };
        let (objects, _) = self.cache.list(&services.list_prefix(None));
        let mut ips = self.cluster_ips.lock();
        let mut ports = self.node_ports.lock();
        for o in objects {
            if let Ok(svc) = serde_json::from_slice::<Value>(&o.bytes) {
                service_ips(&svc).into_iter().for_each(|ip| ips.restore(ip));
                service_node_ports(&svc)
                    .into_iter()
                    .for_each(|p| ports.restore(p));
            }
        }
        info!(cluster_ips = ips.in_use(), "restored service allocations");
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
        let bytes = self
            .cache
            .get(key)
            .filter(|o| o.mod_revision >= revision)
            .map(|o| o.bytes.clone())
            .ok_or_else(|| {
                Status::internal(format!("object {key} missing from the cache after write"))
            })?;
        Ok(Written {
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

    /// Creates an object. `ns` comes from the URL (None for cluster-scoped resources).
    pub async fn create(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, Status> {
        let mut obj = body;
        Self::check_type(r, &mut obj, r.kind)?;
        let (mut obj, warnings) = Self::normalize(r, obj, opts)?;
        if r.namespaced {
            let url_ns = ns.unwrap_or("default");
            match meta_str(&obj, "namespace") {
                Some(body_ns) if !body_ns.is_empty() && body_ns != url_ns => {
                    return Err(Status::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                _ => set_meta(&mut obj, "namespace", json!(url_ns)),
            }
        } else {
            remove_meta(&mut obj, "namespace");
        }
        let generate_name = meta_str(&obj, "generateName").map(str::to_string);
        if meta_str(&obj, "name").unwrap_or("").is_empty() {
            if let Some(prefix) = &generate_name {
                set_meta(
                    &mut obj,
                    "name",
                    json!(format!("{prefix}{}", generated_suffix())),
                );
            }
        }
        cairn_api::defaults::apply_defaults(r, &mut obj);
        {
            let meta = metadata_mut(&mut obj);
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            meta.remove("resourceVersion");
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            meta.remove("selfLink");
            if tracks_generation(r) {
                meta.insert("generation".into(), json!(1));
            } else {
                meta.remove("generation");
            }
        }
        let op = if opts.apply { "Apply" } else { "Update" };
        Self::record_manager(&mut obj, opts.field_manager.as_deref(), op, None);
        self.admit_kind_specific(r, &mut obj, None);
        let name = name_of(&obj).to_string();
        if r.kind == "Pod" && r.group.is_empty() {
            crate::priority::admit_pod(&self.priority_classes, &self.cache, &mut obj, &name)?;
        }
        if crate::priority::is_priority_class(r) {
            crate::priority::admit_class(&self.priority_classes, &self.cache, &obj, None)?;
        }
        let namespace = meta_str(&obj, "namespace").map(str::to_string);
        let causes = cairn_api::validation::validate_create(r, &obj);
        if !causes.is_empty() {
            return Err(Status::invalid(r.kind, r.group, &name, causes));
        }
        if let Some(ns) = namespace.as_deref() {
            self.check_namespace(ns)?;
        }
        let key = r.key(namespace.as_deref(), &name);
        let mut allocs = Allocations::default();
        if r.kind == "Service" {
            self.allocate_service(&mut obj, None, &mut allocs, &name)?;
        }
        if opts.dry_run {
            self.release(&allocs);
            let bytes = serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?;
            if self.cache.get(&key).is_some() {
                return Err(Status::already_exists(&r.group_resource(), &name)
                    .with_details(r.group, r.plural, &name));
            }
            return Ok(Written {
                bytes: Bytes::from(bytes),
                revision: self.cache.revision(),
                warnings,
            });
        }
        let bytes = serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?;
        match self.cache.backend().create(&key, Bytes::from(bytes)).await {
            Ok(rev) => {
                debug!(%key, rev, "created");
                self.written(&key, rev, warnings).await
            }
            Err(e) => {
                self.release(&allocs);
                Err(store_status(e, r, &name))
            }
        }
    }

    fn release(&self, allocs: &Allocations) {
        if !allocs.ips.is_empty() {
            let mut ips = self.cluster_ips.lock();
            allocs.ips.iter().for_each(|ip| ips.release(*ip));
        }
        if !allocs.ports.is_empty() {
            let mut ports = self.node_ports.lock();
            allocs.ports.iter().for_each(|p| ports.release(*p));
        }
    }

    /// Allocates the ClusterIP and NodePorts a Service needs (on create, `old` is None).
    fn allocate_service(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        allocs: &mut Allocations,
        name: &str,
    ) -> Result<(), Status> {
        let invalid = |field: &str, value: &str, e: AllocError| {
            Status::invalid(
                "Service",
                "",
                name,
                vec![Cause::invalid(field, value, &e.to_string())],
            )
        };
        let ty = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        let old_ips = old.map(service_ips).unwrap_or_default();
        if ty != "ExternalName" {
            let requested = svc
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if requested == "None" {
                svc["spec"]["clusterIPs"] = json!(["None"]);
            } else if requested.is_empty() {
                if let Some(ip) = old_ips.first() {
                    svc["spec"]["clusterIP"] = json!(ip.to_string());
                    svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
                } else {
                    let ip = self
                        .cluster_ips
                        .lock()
                        .allocate()
                        .map_err(|e| invalid("spec.clusterIPs", "", e))?;
                    allocs.ips.push(ip);
                    svc["spec"]["clusterIP"] = json!(ip.to_string());
                    svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
                }
            } else {
                let ip: Ipv4Addr = requested.parse().map_err(|_| {
                    Status::invalid(
                        "Service",
                        "",
                        name,
                        vec![Cause::invalid(
                            "spec.clusterIPs[0]",
                            &requested,
                            "must be a valid IP address",
                        )],
                    )
                })?;
                if !old_ips.contains(&ip) {
                    self.cluster_ips
                        .lock()
                        .reserve(ip)
                        .map_err(|e| invalid("spec.clusterIPs", &requested, e))?;
                    allocs.ips.push(ip);
                }
                svc["spec"]["clusterIPs"] = json!([requested]);
            }
        }
        if needs_node_ports(svc) {
            let old_ports = old.map(service_node_ports).unwrap_or_default();
            if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for (i, p) in ports.iter_mut().enumerate() {
                    let requested = p.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
                    if requested == 0 {
                        let port =
                            self.node_ports.lock().allocate().map_err(|e| {
                                invalid(&format!("spec.ports[{i}].nodePort"), "", e)
                            })?;
                        allocs.ports.push(port);
                        p["nodePort"] = json!(port);
                    } else {
                        let port = u16::try_from(requested).unwrap_or(0);
                        if !old_ports.contains(&port) {
                            self.node_ports.lock().reserve(port).map_err(|e| {
                                invalid(
                                    &format!("spec.ports[{i}].nodePort"),
                                    &requested.to_string(),
                                    e,
                                )
                            })?;
                            allocs.ports.push(port);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Mutations Kubernetes makes on admission that are not plain defaulting.
    fn admit_kind_specific(&self, r: &ResourceInfo, obj: &mut Value, old: Option<&Value>) {
        // Clients do not create status for these kinds (their strategies reset it).
        if old.is_none() && matches!(r.kind, "Deployment" | "ReplicaSet" | "DaemonSet" | "Pod") {
            obj["status"] = json!({});
            cairn_api::defaults::default_status_counters(r, obj);
        }
        if old.is_none() && r.kind == "Service" {
            obj["status"] = json!({"loadBalancer": {}});
        }
        match r.kind {
            "Pod" if old.is_none() => {
                obj["status"] = json!({"phase": "Pending", "qosClass": qos_class(obj)});
            }
            "Namespace" => {
                if old.is_none() {
                    obj["status"] = json!({"phase": "Active"});
                }
                // The namespace's name is also a label, as Kubernetes does since 1.21.
                let name = name_of(obj).to_string();
                let meta = metadata_mut(obj);
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if labels.is_object() {
                    labels["kubernetes.io/metadata.name"] = json!(name);
                }
            }
            _ => {}
        }
    }

    /// Prepares `new` as the update of `old` (main resource, or the `status` subresource).
    fn prepare_update(
        &self,
        r: &ResourceInfo,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), Status> {
        let mut new = new;
        Self::check_type(r, &mut new, r.kind)?;
        let (new, warnings) = Self::normalize(r, new, opts)?;
        let mut obj = scoped_update(r, old, new, subresource);
        cairn_api::defaults::apply_defaults(r, &mut obj);
        // Metadata the client may not change.
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old.get("metadata").and_then(|m| m.get(field)) {
                Some(v) => set_meta(&mut obj, field, v.clone()),
                None => remove_meta(&mut obj, field),
            }
        }
        for field in ["name", "namespace"] {
            let old_v = meta_str(old, field).unwrap_or("");
            let new_v = meta_str(&obj, field).unwrap_or("");
            if new_v.is_empty() {
                set_meta(&mut obj, field, json!(old_v));
            } else if new_v != old_v {
                return Err(Status::bad_request(format!(
                    "the {field} of the object ({new_v}) does not match the {field} on the URL ({old_v})"
                )));
            }
        }
        if !r.namespaced {
            remove_meta(&mut obj, "namespace");
        }
        remove_meta(&mut obj, "resourceVersion");
        if tracks_generation(r) && spec_of(&obj) != spec_of(old) {
            let gen = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            set_meta(&mut obj, "generation", json!(gen));
        }
        let op = if opts.apply { "Apply" } else { "Update" };
        Self::record_manager(&mut obj, opts.field_manager.as_deref(), op, subresource);
        self.admit_kind_specific(r, &mut obj, Some(old));
        if crate::priority::is_priority_class(r) {
            crate::priority::admit_class(&self.priority_classes, &self.cache, &obj, Some(old))?;
        }
        let causes = cairn_api::validation::validate_update(r, old, &obj);
        if !causes.is_empty() {
            return Err(Status::invalid(r.kind, r.group, name_of(&obj), causes));
        }
        Ok((obj, warnings))
    }

    /// Writes `obj` as the new state of `old` (at `old_rev`), handling Service allocations
    /// and the removal of terminating objects whose finalizers are gone.
    #[allow(clippy::too_many_arguments)]
    async fn commit_update(
        &self,
        r: &ResourceInfo,
        key: &str,
        old: &Value,
        old_rev: Revision,
        mut obj: Value,
        warnings: Vec<String>,
        dry_run: bool,
    ) -> Result<Written, Status> {
        let name = name_of(&obj).to_string();
        let mut allocs = Allocations::default();
        if r.kind == "Service" {
            self.allocate_service(&mut obj, Some(old), &mut allocs, &name)?;
        }
        if dry_run {
            self.release(&allocs);
            let bytes = serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?;
            return Ok(Written {
                bytes: Bytes::from(bytes),
                revision: old_rev,
                warnings,
            });
        }
        let bytes =
            Bytes::from(serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?);
        let rev = match self.cache.backend().update(key, bytes, old_rev).await {
            Ok(rev) => rev,
            Err(e) => {
                self.release(&allocs);
                return Err(store_status(e, r, &name));
            }
        };
        if r.kind == "Service" {
            self.release_dropped_service_allocations(old, &obj);
        }
        let written = self.written(key, rev, warnings).await?;
        // A terminating object whose last finalizer was just removed goes away now.
        if has_deletion_timestamp(&obj)
            && finalizers(&obj).is_empty()
            && spec_finalizers(&obj).is_empty()
            && !self.awaits_node(r, &obj)
        {
            self.remove_now(r, key, &obj, rev).await?;
        }
        Ok(written)
    }

    fn release_dropped_service_allocations(&self, old: &Value, new: &Value) {
        let new_ips = service_ips(new);
        let new_ports = if needs_node_ports(new) {
            service_node_ports(new)
        } else {
            Vec::new()
        };
        let allocs = Allocations {
            ips: service_ips(old)
                .into_iter()
                .filter(|ip| !new_ips.contains(ip))
                .collect(),
            ports: service_node_ports(old)
                .into_iter()
                .filter(|p| !new_ports.contains(p))
                .collect(),
        };
        self.release(&allocs);
    }

    /// A pod bound to a node stays until its node agent confirms the containers are gone.
    fn awaits_node(&self, r: &ResourceInfo, obj: &Value) -> bool {
        r.kind == "Pod"
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
        if r.kind == "Service" {
            self.release(&Allocations {
                ips: service_ips(obj),
                ports: service_node_ports(obj),
            });
        }
        self.settle(del_rev).await?;
        Ok(del_rev)
    }

    /// PUT: replaces the object (or its status). `resourceVersion` in the body, when given,
    /// is a precondition. Creates the object when it does not exist and the kind allows it.
    pub async fn update(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<(Written, bool), Status> {
        let key = r.key(ns, name);
        let Some(current) = self.cache.get(&key) else {
            if subresource.is_none()
                && matches!(
                    r.kind,
                    "Node" | "Lease" | "Endpoints" | "Event" | "EndpointSlice"
                )
            {
                // Kubernetes allows create-on-update for these kinds (AllowCreateOnUpdate).
                return Ok((self.create(r, ns, body, opts).await?, true));
            }
            return Err(
                Status::not_found(&r.group_resource(), name).with_details(r.group, r.plural, name)
            );
        };
        let body_name = meta_str(&body, "name").unwrap_or("");
        if !body_name.is_empty() && body_name != name {
            return Err(Status::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let expected = match meta_str(&body, "resourceVersion").filter(|v| !v.is_empty()) {
            Some(v) => Some(v.parse::<Revision>().map_err(|_| {
                Status::bad_request(format!("invalid resourceVersion {v:?}: must be an integer"))
            })?),
            None => None,
        };
        let old: Value =
            serde_json::from_slice(&current.bytes).map_err(|e| Status::internal(e.to_string()))?;
        if let Some(expected) = expected {
            if expected != current.mod_revision {
                return Err(store_status(
                    StoreError::Conflict {
                        key: key.clone(),
                        expected,
                        actual: current.mod_revision,
                    },
                    r,
                    name,
                ));
            }
        }
        let (obj, warnings) = self.prepare_update(r, &old, body, subresource, opts)?;
        let w = self
            .commit_update(
                r,
                &key,
                &old,
                expected.unwrap_or(current.mod_revision),
                obj,
                warnings,
                opts.dry_run,
            )
            .await?;
        Ok((w, false))
    }

    /// Read-modify-write with retries on conflict, as Kubernetes' GuaranteedUpdate:
    /// `mutate` gets the current object and returns the desired one.
    pub async fn guaranteed_update<F>(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        opts: &WriteOptions,
        mut mutate: F,
    ) -> Result<Written, Status>
    where
        F: FnMut(&Value) -> Result<Value, Status>,
    {
        let key = r.key(ns, name);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let current = self.get(r, ns, name)?;
            let old: Value = serde_json::from_slice(&current.bytes)
                .map_err(|e| Status::internal(e.to_string()))?;
            let desired = mutate(&old)?;
            let (obj, warnings) = self.prepare_update(r, &old, desired, subresource, opts)?;
            match self
                .commit_update(
                    r,
                    &key,
                    &old,
                    current.mod_revision,
                    obj,
                    warnings,
                    opts.dry_run,
                )
                .await
            {
                Err(s) if s.code == 409 && s.reason == "Conflict" && attempt < 10 => {
                    // The cache was behind the store: let it catch up and retry.
                    let rev = self.cache.backend().current_revision().await.unwrap_or(0);
                    self.settle(rev).await?;
                }
                other => return other,
            }
        }
    }

    /// DELETE of one object. Returns the object as it is after the call and whether it is
    /// gone (false: it is now terminating, waiting for finalizers or its node).
    pub async fn delete(
        self: &Arc<Self>,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Written, bool), Status> {
        let key = r.key(ns, name);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.delete_once(r, ns, name, &key, opts).await {
                Err(s) if s.code == 409 && s.reason == "Conflict" && attempt < 10 => {
                    let rev = self.cache.backend().current_revision().await.unwrap_or(0);
                    self.settle(rev).await?;
                }
                other => return other,
            }
        }
    }

    async fn delete_once(
        self: &Arc<Self>,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        key: &str,
        opts: &DeleteOptions,
    ) -> Result<(Written, bool), Status> {
        let current = self.get(r, ns, name)?;
        let mut obj: Value =
            serde_json::from_slice(&current.bytes).map_err(|e| Status::internal(e.to_string()))?;
        if let Some(uid) = &opts.precondition_uid {
            let actual = meta_str(&obj, "uid").unwrap_or("");
            if actual != uid {
                return Err(Status::conflict(
                    &r.group_resource(),
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_resource_version {
            if *rv != current.mod_revision.to_string() {
                return Err(Status::conflict(
                    &r.group_resource(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.mod_revision
                    ),
                ));
            }
        }
        let unchanged = Written {
            bytes: current.bytes.clone(),
            revision: current.mod_revision,
            warnings: Vec::new(),
        };
        if opts.dry_run {
            return Ok((unchanged, false));
        }
        let uid = meta_str(&obj, "uid").unwrap_or("").to_string();
        let propagation = opts.propagation_policy.as_deref().unwrap_or("Background");
        // Namespaces terminate first: their contents are removed by the namespace loop.
        if r.kind == "Namespace" {
            if has_deletion_timestamp(&obj) {
                return Ok((unchanged, false));
            }
            set_meta(&mut obj, "deletionTimestamp", json!(now_rfc3339()));
            set_meta(&mut obj, "deletionGracePeriodSeconds", json!(0));
            obj["status"] = json!({"phase": "Terminating"});
            let written = self
                .store_unadmitted(r, key, obj, current.mod_revision)
                .await?;
            info!(namespace = name, "namespace terminating");
            return Ok((written, false));
        }
        match propagation {
            "Orphan" => self.orphan_dependents(&uid).await,
            "Foreground" => self.delete_dependents(&uid).await,
            "Background" => {}
            other => {
                return Err(Status::bad_request(format!(
                    "propagationPolicy {other:?} is not one of Orphan, Foreground, Background"
                )))
            }
        }
        // Graceful pod deletion: the node agent finishes it.
        let mut grace = 0;
        if r.kind == "Pod" {
            let bound = obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let phase = obj
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            let spec_grace = obj
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30);
            grace = opts.grace_period_seconds.unwrap_or(spec_grace).max(0);
            if !bound || matches!(phase, "Succeeded" | "Failed") {
                grace = 0;
            }
        }
        let must_wait = !finalizers(&obj).is_empty() || grace > 0;
        if must_wait {
            let existing_grace = obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64);
            if has_deletion_timestamp(&obj) && existing_grace.is_some_and(|g| g <= grace) {
                return Ok((unchanged, false));
            }
            let deadline = chrono::Utc::now() + chrono::Duration::seconds(grace);
            set_meta(&mut obj, "deletionTimestamp", json!(rfc3339_at(deadline)));
            set_meta(&mut obj, "deletionGracePeriodSeconds", json!(grace));
            let written = self
                .store_unadmitted(r, key, obj, current.mod_revision)
                .await?;
            return Ok((written, false));
        }
        self.remove_now(r, key, &obj, current.mod_revision).await?;
        if propagation == "Background" && !uid.is_empty() {
            self.spawn_collect_orphans(uid);
        }
        Ok((unchanged, true))
    }

    /// Writes `obj` over `key` at `expected` revision, bypassing admission: for changes the
    /// server itself makes (deletion marks), which update validation would refuse.
    async fn store_unadmitted(
        &self,
        r: &ResourceInfo,
        key: &str,
        mut obj: Value,
        expected: Revision,
    ) -> Result<Written, Status> {
        remove_meta(&mut obj, "resourceVersion");
        let bytes =
            Bytes::from(serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?);
        let rev = self
            .cache
            .backend()
            .update(key, bytes, expected)
            .await
            .map_err(|e| store_status(e, r, name_of(&obj)))?;
        self.written(key, rev, Vec::new()).await
    }

    /// Every live object (of any resource) that names `owner_uid` among its owners.
    fn dependents_of(&self, owner_uid: &str) -> Vec<(&'static ResourceInfo, Arc<CachedObject>)> {
        let mut out = Vec::new();
        for r in RESOURCES {
            let (objects, _) = self.cache.list(&r.list_prefix(None));
            for o in objects {
                if o.fields
                    .get(OWNER_UIDS_FIELD)
                    .is_some_and(|uids| uids.split(',').any(|u| u == owner_uid))
                {
                    out.push((r, o));
                }
            }
        }
        out
    }

    fn uid_exists(&self, uid: &str) -> bool {
        RESOURCES.iter().any(|r| {
            let (objects, _) = self.cache.list(&r.list_prefix(None));
            objects
                .iter()
                .any(|o| o.fields.get(UID_FIELD).is_some_and(|u| u == uid))
        })
    }

    async fn orphan_dependents(&self, owner_uid: &str) {
        for (r, o) in self.dependents_of(owner_uid) {
            let ns = o.fields.get("metadata.namespace").cloned();
            let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
            let result = self
                .guaranteed_update(
                    r,
                    ns.as_deref(),
                    &name,
                    None,
                    &WriteOptions::default(),
                    |cur| {
                        let mut next = cur.clone();
                        if let Some(refs) = next
                            .pointer_mut("/metadata/ownerReferences")
                            .and_then(Value::as_array_mut)
                        {
                            refs.retain(|o| {
                                o.get("uid").and_then(Value::as_str) != Some(owner_uid)
                            });
                        }
                        Ok(next)
                    },
                )
                .await;
            if let Err(e) = result {
                warn!(object = %o.key, error = %e, "orphaning dependent failed");
            }
        }
    }

    /// Foreground deletion, done before the owner goes: delete every dependent.
    async fn delete_dependents(self: &Arc<Self>, owner_uid: &str) {
        for (r, o) in self.dependents_of(owner_uid) {
            let ns = o.fields.get("metadata.namespace").cloned();
            let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
            let opts = DeleteOptions {
                propagation_policy: Some("Background".into()),
                ..Default::default()
            };
            if let Err(e) = Box::pin(self.delete(r, ns.as_deref(), &name, &opts)).await {
                if e.code != 404 {
                    warn!(object = %o.key, error = %e, "deleting dependent failed");
                }
            }
        }
    }

    /// Background garbage collection after an owner is gone: delete dependents none of
    /// whose owners exist any more.
    fn spawn_collect_orphans(self: &Arc<Self>, owner_uid: String) {
        let state = Arc::clone(self);
        tokio::spawn(async move {
            for (r, o) in state.dependents_of(&owner_uid) {
                let alive = o
                    .fields
                    .get(OWNER_UIDS_FIELD)
                    .map(|uids| {
                        uids.split(',')
                            .any(|u| u != owner_uid && state.uid_exists(u))
                    })
                    .unwrap_or(false);
                if alive {
                    continue;
                }
                let ns = o.fields.get("metadata.namespace").cloned();
                let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
                let opts = DeleteOptions {
                    propagation_policy: Some("Background".into()),
                    ..Default::default()
                };
                if let Err(e) = state.delete(r, ns.as_deref(), &name, &opts).await {
                    if e.code != 404 {
                        warn!(object = %o.key, error = %e, "garbage collecting dependent failed");
                    }
                }
            }
        });
    }
}

/// What a write through `subresource` may change of `old`: `/finalize` only a
/// namespace's spec.finalizers, `/status` only status; the main resource everything but
/// status (for kinds with a status subresource) and a namespace's spec.
fn scoped_update(r: &ResourceInfo, old: &Value, new: Value, subresource: Option<&str>) -> Value {
    if subresource == Some("finalize") {
        // `namespaces/finalize` changes only spec.finalizers (the namespace controller
        // removes `kubernetes` once the namespace is empty).
        let mut merged = old.clone();
        let finalizers = new
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(json!([]));
        if !merged.get("spec").is_some_and(Value::is_object) {
            merged["spec"] = json!({});
        }
        merged["spec"]["finalizers"] = finalizers;
        merged
    } else if subresource == Some("status") {
        // Status writes change only status (and nothing of spec or metadata).
        let mut merged = old.clone();
        merged["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if merged["status"].is_null() {
            if let Some(m) = merged.as_object_mut() {
                m.remove("status");
            }
        }
        merged
    } else {
        let mut n = new;
        if r.kind == "Namespace" && r.group.is_empty() {
            // Only `namespaces/finalize` changes a namespace's spec, as upstream.
            n["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
        if has_status_subresource(r) {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        n
    }
}

/// A namespace's `spec.finalizers` (other kinds have none).
fn spec_finalizers(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The pod's QoS class (`cairn-semantics`, Kubernetes' GetPodQOS).
pub fn qos_class(pod: &Value) -> &'static str {
    let spec = pod.get("spec").and_then(|s| {
        serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>(s.clone()).ok()
    });
    match spec {
        Some(spec) => cairn_semantics::qos::qos_class(&spec).as_str(),
        None => "BestEffort",
    }
}

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
