//! NodeRestriction admission (`cairn_auth::node::restriction`) on every write a node
//! makes: its own Node and Lease, its pods' status, mirror pods, evictions and tokens
//! of its own pods. On with the Node authorization mode, as kubeadm enables both.

use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_auth::node::restriction::{self, Lookup, Operation, RestrictionError, StoredPod};
use serde_json::Value;

use super::{ApiState, Requester};

/// One write as NodeRestriction sees it.
pub struct NodeWrite<'a> {
    pub resource: &'a ResourceInfo,
    pub subresource: &'a str,
    pub operation: Operation,
    pub namespace: &'a str,
    pub name: &'a str,
    /// The new object (create body, update result, eviction or TokenRequest body).
    pub object: Option<&'a Value>,
    /// The stored object (update, delete).
    pub old_object: Option<&'a Value>,
}

impl ApiState {
    /// Refuses a node's write outside its own objects, with upstream's 403.
    pub fn check_node_restriction(
        &self,
        write: &NodeWrite<'_>,
        requester: Option<&Requester>,
    ) -> Result<(), Status> {
        let Some(req) = requester.filter(|r| r.authorizer.mode().node) else {
            return Ok(());
        };
        let r = write.resource;
        let request = restriction::Request {
            user: &req.user,
            operation: write.operation,
            api_group: r.group,
            resource: r.plural,
            subresource: write.subresource,
            namespace: write.namespace,
            name: write.name,
            object: write.object,
            old_object: write.old_object,
        };
        restriction::admit(&request, self).map_err(|e| refusal(r, write.name, e))
    }
}

/// `<resource>[.<group>] "<name>" is forbidden: <why>`, as `admission.NewForbidden`.
fn refusal(r: &ResourceInfo, name: &str, e: RestrictionError) -> Status {
    match e {
        RestrictionError::Forbidden(why) => {
            let group_resource = if r.group.is_empty() {
                r.plural.to_string()
            } else {
                format!("{}.{}", r.plural, r.group)
            };
            Status::forbidden(format!("{group_resource} {name:?} is forbidden: {why}"))
                .with_details(r.group, r.plural, name)
        }
        not_found @ RestrictionError::NotFound { .. } => {
            Status::new(404, "NotFound", not_found.to_string())
        }
    }
}

impl Lookup for ApiState {
    fn pod(&self, namespace: &str, name: &str) -> Option<StoredPod> {
        let r = cairn_api::registry::find("", "v1", "pods")?;
        let (v, _) = self.get_value(r, Some(namespace), name).ok()?;
        let text = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some(StoredPod {
            uid: text("/metadata/uid"),
            node_name: text("/spec/nodeName"),
        })
    }

    fn node_uid(&self, name: &str) -> Option<String> {
        let r = cairn_api::registry::find("", "v1", "nodes")?;
        let (v, _) = self.get_value(r, None, name).ok()?;
        Some(v.pointer("/metadata/uid")?.as_str()?.to_string())
    }
}
