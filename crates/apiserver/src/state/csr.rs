//! CertificateSigningRequests record who asked, as upstream's CSR strategy does on
//! create: `spec.username`, `uid`, `groups` and `extra` come from the authenticated
//! requester, never from the body, and a new request has no status (no approval, no
//! certificate). The approver and signer trust these fields.

use cairn_api::registry::ResourceInfo;
use serde_json::{json, Value};

use super::WriteOptions;

pub(super) fn is_csr(r: &ResourceInfo) -> bool {
    r.group == "certificates.k8s.io" && r.plural == "certificatesigningrequests"
}

/// Overwrites the requester fields of a new CSR from the request's user.
pub(super) fn stamp_requester(r: &ResourceInfo, obj: &mut Value, opts: &WriteOptions) {
    if !is_csr(r) {
        return;
    }
    if let Some(status) = obj.get_mut("status") {
        *status = json!({});
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["username", "uid", "groups", "extra"] {
        spec.remove(field);
    }
    let Some(req) = &opts.requester else {
        return;
    };
    let user = &req.user;
    spec.insert("username".into(), json!(user.username));
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}
