//! RBAC escalation prevention, as upstream's RBAC storage does it: a Role or ClusterRole
//! is written only by a user who holds every rule it grants (or may `escalate`), a
//! binding only by one who holds the rules of the role it binds (or may `bind` it).
//! Members of `system:masters` and the server's own writes pass.

use cairn_api::kinds::Admission;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_auth::rbac::escalation::{self, EscalationError, Operation};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::Value;

use super::{ApiState, WriteOptions};

fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<T, Status> {
    serde_json::from_value(obj.clone())
        .map_err(|e| Status::internal(format!("reading the RBAC object: {e}")))
}

fn status(e: EscalationError) -> Status {
    match e {
        EscalationError::Forbidden {
            resource,
            name,
            message,
        } => Status::forbidden(message).with_details("rbac.authorization.k8s.io", resource, &name),
        not_found @ EscalationError::RoleNotFound { .. } => {
            Status::new(404, "NotFound", not_found.to_string())
        }
    }
}

impl ApiState {
    /// Checks a Role, ClusterRole or binding about to be stored (`old` on update).
    pub(super) fn check_rbac_escalation(
        &self,
        r: &ResourceInfo,
        obj: &Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> Result<(), Status> {
        if !r.strategy.admits(Admission::RbacEscalation) {
            return Ok(());
        }
        let Some(req) = &opts.requester else {
            return Ok(());
        };
        // Upstream skips the check when only metadata changed (finalizers, owners).
        if old.is_some_and(|o| same_but_metadata(o, obj)) {
            return Ok(());
        }
        let op = if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        };
        let rbac = req.authorizer.rbac.read();
        let user = &req.user;
        let checked = match r.kind {
            "Role" => escalation::check_role(&rbac, user, &typed::<Role>(obj)?, op),
            "ClusterRole" => {
                escalation::check_cluster_role(&rbac, user, &typed::<ClusterRole>(obj)?, op)
            }
            "RoleBinding" => {
                escalation::check_role_binding(&rbac, user, &typed::<RoleBinding>(obj)?)
            }
            "ClusterRoleBinding" => escalation::check_cluster_role_binding(
                &rbac,
                user,
                &typed::<ClusterRoleBinding>(obj)?,
            ),
            _ => Ok(()),
        };
        checked.map_err(status)
    }
}

fn same_but_metadata(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
        }
        v
    };
    strip(a) == strip(b)
}
