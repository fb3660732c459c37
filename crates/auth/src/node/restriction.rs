//! Upstream's NodeRestriction admission plugin
//! (`plugin/pkg/admission/noderestriction/admission.go`) over JSON objects: a node
//! writes only its own Node (without steering labels or taints), mirror pods bound to
//! itself, status of its own pods, evictions of its own pods, its own lease, CSINode
//! and ResourceSlices, and tokens bound to its own pods.
//!
//! Messages are upstream's inner errors; the API server wraps a
//! [`RestrictionError::Forbidden`] into its 403 (`pods "x" is forbidden: <msg>`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::gofmt::quote;
use crate::node::authorizer::{node_identity, NODE_LEASE_NAMESPACE};
use crate::node::graph::{visit_configmap_names, visit_secret_names, MIRROR_POD_ANNOTATION};
use crate::user::UserInfo;

/// The admission operations NodeRestriction handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        })
    }
}

/// One write as admission sees it. `object` is the new object (the body of a
/// create, the result of an update); `old_object` the stored one (update, delete).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub user: &'a UserInfo,
    pub operation: Operation,
    pub api_group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

/// A stored pod, as far as NodeRestriction asks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredPod {
    pub uid: String,
    pub node_name: String,
}

/// The stored objects some checks need (upstream reads them from informers).
pub trait Lookup {
    /// The pod a delete, eviction or TokenRequest names.
    fn pod(&self, namespace: &str, name: &str) -> Option<StoredPod>;
    /// The uid of a Node, which a mirror pod's owner reference must carry.
    fn node_uid(&self, name: &str) -> Option<String>;
}

/// Why NodeRestriction refused a write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestrictionError {
    /// 403 with this message after the `<resource> "<name>" is forbidden: ` prefix.
    #[error("{0}")]
    Forbidden(String),
    /// 404: the pod or node a check needs does not exist (upstream returns that error).
    #[error("{resource} {} not found", quote(.name))]
    NotFound {
        resource: &'static str,
        name: String,
    },
}

type Outcome = Result<(), RestrictionError>;

fn forbid(msg: impl Into<String>) -> Outcome {
    Err(RestrictionError::Forbidden(msg.into()))
}

/// NodeRestriction's verdict. Users that are not nodes pass untouched.
pub fn admit(req: &Request<'_>, lookup: &dyn Lookup) -> Outcome {
    let Some(node) = node_identity(req.user) else {
        return Ok(());
    };
    if node.is_empty() {
        return forbid(format!(
            "could not determine node from user {}",
            quote(&req.user.username)
        ));
    }
    let cx = Cx { node, req, lookup };
    match (req.api_group, req.resource) {
        ("", "pods") => match req.subresource {
            "" => cx.pod(),
            "status" => cx.pod_status(),
            "eviction" => cx.eviction(),
            other => forbid(format!(
                "unexpected pod subresource {}, only 'status' and 'eviction' are allowed",
                quote(other)
            )),
        },
        ("", "nodes") => cx.node_object(),
        ("", "persistentvolumeclaims") if req.subresource == "status" => cx.pvc_status(),
        ("", "persistentvolumeclaims") => forbid("may only update PVC status"),
        ("", "serviceaccounts") => cx.token(),
        ("coordination.k8s.io", "leases") => cx.lease(),
        ("storage.k8s.io", "csinodes") => cx.csinode(),
        ("resource.k8s.io", "resourceslices") => cx.resource_slice(),
        _ => Ok(()),
    }
}

fn at<'v>(v: Option<&'v Value>, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v?, |v, k| v.get(k))
}

fn str_at<'v>(v: Option<&'v Value>, path: &[&str]) -> &'v str {
    at(v, path).and_then(Value::as_str).unwrap_or_default()
}

/// A string map (labels); absent and null read as empty.
fn string_map(v: Option<&Value>, path: &[&str]) -> BTreeMap<String, String> {
    let Some(obj) = at(v, path).and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    obj.iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Upstream's semantic equality treats absent, null and empty lists alike.
fn list_at(v: Option<&Value>, path: &[&str]) -> Vec<Value> {
    at(v, path)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn not_found(resource: &'static str, name: &str) -> RestrictionError {
    RestrictionError::NotFound {
        resource,
        name: name.to_string(),
    }
}

struct Cx<'a, 'b> {
    node: &'a str,
    req: &'a Request<'b>,
    lookup: &'a dyn Lookup,
}

impl Cx<'_, '_> {
    fn q(&self) -> String {
        quote(self.node)
    }

    fn pod(&self) -> Outcome {
        match self.req.operation {
            Operation::Create => self.mirror_pod_create(),
            Operation::Delete => {
                let bound = match self.req.old_object {
                    Some(old) => str_at(Some(old), &["spec", "nodeName"]).to_string(),
                    None => self.stored_pod(self.req.name)?.node_name,
                };
                if bound != self.node {
                    return forbid(format!(
                        "node {} can only delete pods with spec.nodeName set to itself",
                        self.q()
                    ));
                }
                Ok(())
            }
            op => forbid(format!(
                "unexpected operation {}, node {} can only create and delete mirror pods",
                quote(&op.to_string()),
                self.q()
            )),
        }
    }

    fn stored_pod(&self, name: &str) -> Result<StoredPod, RestrictionError> {
        self.lookup
            .pod(self.req.namespace, name)
            .ok_or_else(|| not_found("pods", name))
    }

    /// A node may create only mirror pods of itself, owned by its Node, that reach
    /// no other object (else it could grant itself reads through the graph).
    fn mirror_pod_create(&self) -> Outcome {
        let pod: Pod = match self.req.object.map(|v| serde_json::from_value(v.clone())) {
            Some(Ok(p)) => p,
            _ => return forbid("unexpected type"),
        };
        let q = self.q();
        let annotations = pod.metadata.annotations.as_ref();
        if !annotations.is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION)) {
            return forbid(format!(
                "pod does not have {} annotation, node {q} can only create mirror pods",
                quote(MIRROR_POD_ANNOTATION)
            ));
        }
        let spec = pod.spec.unwrap_or_default();
        if spec.node_name.as_deref().unwrap_or_default() != self.node {
            return forbid(format!(
                "node {q} can only create pods with spec.nodeName set to itself"
            ));
        }
        self.mirror_owner(pod.metadata.owner_references.as_deref().unwrap_or_default())?;
        if !spec
            .service_account_name
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            return forbid(format!(
                "node {q} can not create pods that reference a service account"
            ));
        }
        let mut secrets = false;
        visit_secret_names(&spec, &mut |_| secrets = true);
        if secrets {
            return forbid(format!(
                "node {q} can not create pods that reference secrets"
            ));
        }
        let mut configmaps = false;
        visit_configmap_names(&spec, &mut |_| configmaps = true);
        if configmaps {
            return forbid(format!(
                "node {q} can not create pods that reference configmaps"
            ));
        }
        let volumes = spec.volumes.unwrap_or_default();
        let sources = volumes
            .iter()
            .filter_map(|v| v.projected.as_ref()?.sources.as_ref())
            .flatten();
        if sources
            .into_iter()
            .any(|s| s.cluster_trust_bundle.is_some())
        {
            return forbid(format!(
                "node {q} can not create pods that reference clustertrustbundles"
            ));
        }
        if volumes.iter().any(|v| v.persistent_volume_claim.is_some()) {
            return forbid(format!(
                "node {q} can not create pods that reference persistentvolumeclaims"
            ));
        }
        Ok(())
    }

    /// Exactly one owner reference: the node's own Node, as controller, not blocking
    /// deletion, with the Node's current uid.
    fn mirror_owner(
        &self,
        owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    ) -> Outcome {
        let q = self.q();
        let owner = match owners {
            [] => {
                return forbid(format!(
                    "node {q} can only create pods with an owner reference set to itself"
                ))
            }
            [one] => one,
            _ => {
                return forbid(format!(
                    "node {q} can only create pods with a single owner reference set to itself"
                ))
            }
        };
        if owner.api_version != "v1" || owner.kind != "Node" || owner.name != self.node {
            return forbid(format!(
                "node {q} can only create pods with an owner reference set to itself"
            ));
        }
        if owner.controller != Some(true) {
            return forbid(format!(
                "node {q} can only create pods with a controller owner reference set to itself"
            ));
        }
        if owner.block_owner_deletion == Some(true) {
            return forbid(format!(
                "node {q} must not set blockOwnerDeletion on an owner reference"
            ));
        }
        let uid = self
            .lookup
            .node_uid(self.node)
            .ok_or_else(|| not_found("nodes", self.node))?;
        if owner.uid != uid {
            return forbid(format!(
                "node {} UID mismatch: expected {} got {uid}",
                self.node, owner.uid
            ));
        }
        Ok(())
    }

    fn pod_status(&self) -> Outcome {
        let op = self.req.operation;
        if op != Operation::Update {
            return forbid(format!("unexpected operation {}", quote(&op.to_string())));
        }
        let (old, new) = (self.req.old_object, self.req.object);
        let q = self.q();
        if str_at(old, &["spec", "nodeName"]) != self.node {
            return forbid(format!(
                "node {q} can only update pod status for pods with spec.nodeName set to itself"
            ));
        }
        if string_map(old, &["metadata", "labels"]) != string_map(new, &["metadata", "labels"]) {
            return forbid(format!("node {q} cannot update labels through pod status"));
        }
        if claim_statuses(old) != claim_statuses(new) {
            return forbid(format!("node {q} cannot update resource claim statues"));
        }
        Ok(())
    }

    fn eviction(&self) -> Outcome {
        let op = self.req.operation;
        if op != Operation::Create {
            return forbid(format!("unexpected operation {op}"));
        }
        // The URL's pod name wins over the submitted Eviction's.
        let name = match self.req.name {
            "" => str_at(self.req.object, &["metadata", "name"]),
            n => n,
        };
        if name.is_empty() {
            return forbid("could not determine pod from request data");
        }
        if self.stored_pod(name)?.node_name != self.node {
            return forbid(format!(
                "node {} can only evict pods with spec.nodeName set to itself",
                self.node
            ));
        }
        Ok(())
    }

    /// Kubelets write a PVC's capacity and conditions after expanding it, nothing else.
    fn pvc_status(&self) -> Outcome {
        let op = self.req.operation;
        if op != Operation::Update {
            return forbid(format!("unexpected operation {}", quote(&op.to_string())));
        }
        let (old, new) = (
            pvc_sans_status(self.req.old_object),
            pvc_sans_status(self.req.object),
        );
        if old != new {
            return forbid(format!(
                "node {} is not allowed to update fields other than status.quantity and status.conditions: {}",
                self.q(),
                differing_fields(&old, &new).join(", ")
            ));
        }
        Ok(())
    }

    fn node_object(&self) -> Outcome {
        let q = self.q();
        if self.req.name != self.node {
            return forbid(format!(
                "node {q} is not allowed to modify node {}",
                quote(self.req.name)
            ));
        }
        let (old, new) = (self.req.old_object, self.req.object);
        match self.req.operation {
            Operation::Create => {
                if !at(new, &["spec", "configSource"]).is_none_or(Value::is_null) {
                    return forbid(format!(
                        "node {q} is not allowed to create pods with a non-nil configSource"
                    ));
                }
                let labels = string_map(new, &["metadata", "labels"]);
                let forbidden = forbidden_labels(&labels, &BTreeMap::new());
                if !forbidden.is_empty() {
                    return forbid(format!(
                        "node {q} is not allowed to set the following labels: {}",
                        forbidden.join(", ")
                    ));
                }
                Ok(())
            }
            Operation::Update => self.node_update(old, new),
            Operation::Delete => Ok(()),
        }
    }

    fn node_update(&self, old: Option<&Value>, new: Option<&Value>) -> Outcome {
        let q = self.q();
        let source = at(new, &["spec", "configSource"]).filter(|v| !v.is_null());
        let old_source = at(old, &["spec", "configSource"]).filter(|v| !v.is_null());
        // A nil new source passes: old kubelets drop the field on status updates.
        if source.is_some() && source != old_source {
            return forbid(format!(
                "node {q} is not allowed to update configSource to a new non-nil configSource"
            ));
        }
        if list_at(new, &["spec", "taints"]) != list_at(old, &["spec", "taints"]) {
            return forbid(format!("node {q} is not allowed to modify taints"));
        }
        let forbidden = forbidden_labels(
            &string_map(new, &["metadata", "labels"]),
            &string_map(old, &["metadata", "labels"]),
        );
        if !forbidden.is_empty() {
            return forbid(format!(
                "is not allowed to modify labels: {}",
                forbidden.join(", ")
            ));
        }
        Ok(())
    }

    /// TokenRequests from a node must bind the token to a pod on that node.
    fn token(&self) -> Outcome {
        if self.req.operation != Operation::Create || self.req.subresource != "token" {
            return Ok(());
        }
        let Some(tr) = self.req.object else {
            return forbid("unexpected type");
        };
        let r = at(Some(tr), &["spec", "boundObjectRef"]);
        let field = |k: &str| str_at(r, &[k]);
        if field("apiVersion") != "v1" || field("kind") != "Pod" || field("name").is_empty() {
            return forbid("node requested token not bound to a pod");
        }
        let uid = field("uid");
        if uid.is_empty() {
            return forbid("node requested token with a pod binding without a uid");
        }
        let pod = self.stored_pod(field("name"))?;
        if pod.uid != uid {
            return forbid(format!("the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"));
        }
        if pod.node_name != self.node {
            return forbid("node requested token bound to a pod scheduled on a different node");
        }
        Ok(())
    }

    fn lease(&self) -> Outcome {
        if self.req.namespace != NODE_LEASE_NAMESPACE {
            return forbid(format!(
                "can only access leases in the {} system namespace",
                quote(NODE_LEASE_NAMESPACE)
            ));
        }
        if self.own_name() != self.node {
            return forbid("can only access node lease with the same name as the requesting node");
        }
        Ok(())
    }

    /// The object's name: from the body on create (the URL has none), else the URL's.
    fn own_name(&self) -> &str {
        match self.req.operation {
            Operation::Create => str_at(self.req.object, &["metadata", "name"]),
            _ => self.req.name,
        }
    }

    fn csinode(&self) -> Outcome {
        if self.own_name() != self.node {
            return forbid("can only access CSINode with the same name as the requesting node");
        }
        Ok(())
    }

    /// Creates and deletes are checked here; other verbs by the authorizer.
    fn resource_slice(&self) -> Outcome {
        match self.req.operation {
            Operation::Create if str_at(self.req.object, &["spec", "nodeName"]) != self.node => {
                forbid(
                    "can only create ResourceSlice with the same NodeName as the requesting node",
                )
            }
            Operation::Delete
                if str_at(self.req.old_object, &["spec", "nodeName"]) != self.node =>
            {
                forbid(
                    "can only delete ResourceSlice with the same NodeName as the requesting node",
                )
            }
            _ => Ok(()),
        }
    }
}

/// `(name, resourceClaimName)` of each `status.resourceClaimStatuses` entry, in order.
fn claim_statuses(pod: Option<&Value>) -> Vec<(String, Option<String>)> {
    list_at(pod, &["status", "resourceClaimStatuses"])
        .iter()
        .map(|s| {
            let name = str_at(Some(s), &["name"]).to_string();
            let claim = s.get("resourceClaimName").and_then(Value::as_str);
            (name, claim.map(str::to_string))
        })
        .collect()
}

/// A PVC without what a kubelet may write (and the bookkeeping a write changes):
/// resourceVersion, managedFields, status capacity, conditions and the
/// expansion-recovery fields (`RecoverVolumeExpansionFailure`, on since 1.32).
fn pvc_sans_status(pvc: Option<&Value>) -> Value {
    let mut v = pvc.cloned().unwrap_or(Value::Null);
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
        for k in [
            "capacity",
            "conditions",
            "allocatedResourceStatuses",
            "allocatedResources",
        ] {
            status.remove(k);
        }
    }
    strip_nulls(&mut v);
    v
}

/// Absent and null fields are the same object to upstream's typed comparison.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Top-level `section.field` paths that differ (upstream prints a full diff).
fn differing_fields(a: &Value, b: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    for section in ["metadata", "spec", "status"] {
        let (x, y) = (a.get(section), b.get(section));
        let keys = [x, y]
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|m| m.keys());
        for k in keys {
            if x.and_then(|x| x.get(k)) != y.and_then(|y| y.get(k)) {
                out.insert(format!("{section}.{k}"));
            }
        }
    }
    out.into_iter().collect()
}

/// The label keys whose value differs between the two maps and that a node may not
/// set: the `node-restriction.kubernetes.io` namespace, and `kubernetes.io`/`k8s.io`
/// ones kubelets are not known to set. Sorted, as upstream's set listing.
pub fn forbidden_labels(
    new: &BTreeMap<String, String>,
    old: &BTreeMap<String, String>,
) -> Vec<String> {
    let changed = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .chain(old.iter().filter(|(k, v)| new.get(*k) != Some(v)))
        .map(|(k, _)| k.as_str());
    let set: BTreeSet<&str> = changed.filter(|k| is_forbidden_label(k)).collect();
    set.into_iter().map(str::to_string).collect()
}

const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// Labels kubelets set on their own Node (`k8s.io/api/core/v1` `KubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Label namespaces kubelets may use freely (`KubeletLabelNamespaces`).
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or_default()
}

fn in_namespace(ns: &str, domain: &str) -> bool {
    ns == domain || ns.strip_suffix(domain).is_some_and(|p| p.ends_with('.'))
}

fn is_forbidden_label(key: &str) -> bool {
    let ns = label_namespace(key);
    if in_namespace(ns, NODE_RESTRICTION_NAMESPACE) {
        return true;
    }
    let kubernetes = in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io");
    let kubelet = KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES.iter().any(|d| in_namespace(ns, d));
    kubernetes && !kubelet
}

#[cfg(test)]
#[path = "restriction_tests.rs"]
mod tests;
