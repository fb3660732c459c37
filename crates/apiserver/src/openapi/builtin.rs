//! OpenAPI v3 documents of the built-in kinds, generated from k8s-openapi's schemas
//! (its `schemars` feature: upstream's definition names and descriptions) once per
//! process: one document per served group/version, holding each kind's schema with its
//! `x-kubernetes-group-version-kind`, every definition it references, and the `get`
//! operation of its object path (what `kubectl explain` looks up).
//!
//! No `patch` operations are listed, on purpose: kubectl computes strategic merge patches
//! from a document's schemas only when the kind has a `patch` operation accepting them,
//! and these schemas carry no `x-kubernetes-patch-strategy`; without one kubectl keeps
//! using the patch strategies compiled into it, which are upstream's.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cairn_api::registry::{self, ResourceInfo};
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::JsonSchema;
use serde_json::{json, Map, Value};

/// One kind's schema, by the generator.
type SchemaOf = fn(&mut SchemaGenerator) -> k8s_openapi::schemars::Schema;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> k8s_openapi::schemars::Schema {
    generator.subschema_for::<T>()
}

/// `(apiVersion, kind)` of every built-in kind with a schema.
fn kinds() -> Vec<(&'static str, &'static str, SchemaOf)> {
    use k8s_openapi::api::*;
    macro_rules! kinds {
        ($($api_version:literal $kind:literal => $ty:ty),* $(,)?) => {
            vec![$(($api_version, $kind, schema_of::<$ty> as SchemaOf)),*]
        };
    }
    kinds![
        "v1" "ConfigMap" => core::v1::ConfigMap,
        "v1" "Endpoints" => core::v1::Endpoints,
        "v1" "Event" => core::v1::Event,
        "v1" "LimitRange" => core::v1::LimitRange,
        "v1" "Namespace" => core::v1::Namespace,
        "v1" "Node" => core::v1::Node,
        "v1" "PersistentVolume" => core::v1::PersistentVolume,
        "v1" "PersistentVolumeClaim" => core::v1::PersistentVolumeClaim,
        "v1" "Pod" => core::v1::Pod,
        "v1" "ReplicationController" => core::v1::ReplicationController,
        "v1" "ResourceQuota" => core::v1::ResourceQuota,
        "v1" "Secret" => core::v1::Secret,
        "v1" "Service" => core::v1::Service,
        "v1" "ServiceAccount" => core::v1::ServiceAccount,
        "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" => admissionregistration::v1::MutatingWebhookConfiguration,
        "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" => admissionregistration::v1::ValidatingWebhookConfiguration,
        "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicy" => admissionregistration::v1::ValidatingAdmissionPolicy,
        "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicyBinding" => admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        "apiextensions.k8s.io/v1" "CustomResourceDefinition" => k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        "apiregistration.k8s.io/v1" "APIService" => k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        "apps/v1" "ControllerRevision" => apps::v1::ControllerRevision,
        "apps/v1" "DaemonSet" => apps::v1::DaemonSet,
        "apps/v1" "Deployment" => apps::v1::Deployment,
        "apps/v1" "ReplicaSet" => apps::v1::ReplicaSet,
        "apps/v1" "StatefulSet" => apps::v1::StatefulSet,
        "autoscaling/v1" "HorizontalPodAutoscaler" => autoscaling::v1::HorizontalPodAutoscaler,
        "autoscaling/v2" "HorizontalPodAutoscaler" => autoscaling::v2::HorizontalPodAutoscaler,
        "batch/v1" "CronJob" => batch::v1::CronJob,
        "batch/v1" "Job" => batch::v1::Job,
        "certificates.k8s.io/v1" "CertificateSigningRequest" => certificates::v1::CertificateSigningRequest,
        "coordination.k8s.io/v1" "Lease" => coordination::v1::Lease,
        "discovery.k8s.io/v1" "EndpointSlice" => discovery::v1::EndpointSlice,
        "events.k8s.io/v1" "Event" => events::v1::Event,
        "networking.k8s.io/v1" "IPAddress" => networking::v1::IPAddress,
        "networking.k8s.io/v1" "Ingress" => networking::v1::Ingress,
        "networking.k8s.io/v1" "IngressClass" => networking::v1::IngressClass,
        "networking.k8s.io/v1" "NetworkPolicy" => networking::v1::NetworkPolicy,
        "networking.k8s.io/v1" "ServiceCIDR" => networking::v1::ServiceCIDR,
        "node.k8s.io/v1" "RuntimeClass" => node::v1::RuntimeClass,
        "policy/v1" "PodDisruptionBudget" => policy::v1::PodDisruptionBudget,
        "rbac.authorization.k8s.io/v1" "ClusterRole" => rbac::v1::ClusterRole,
        "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" => rbac::v1::ClusterRoleBinding,
        "rbac.authorization.k8s.io/v1" "Role" => rbac::v1::Role,
        "rbac.authorization.k8s.io/v1" "RoleBinding" => rbac::v1::RoleBinding,
        "scheduling.k8s.io/v1" "PriorityClass" => scheduling::v1::PriorityClass,
        "storage.k8s.io/v1" "StorageClass" => storage::v1::StorageClass,
    ]
}

/// The generated documents by index path (`api/v1`, `apis/apps/v1`), with their hashes.
pub fn documents() -> &'static BTreeMap<String, (Value, String)> {
    static DOCUMENTS: OnceLock<BTreeMap<String, (Value, String)>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let mut by_gv: BTreeMap<String, Vec<(&'static ResourceInfo, SchemaOf)>> = BTreeMap::new();
        for (api_version, kind, schema) in kinds() {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let served = registry::find_by_kind(api_version, kind);
            if let Some(r) = served {
                by_gv
                    .entry(index_path(group, version))
                    .or_default()
                    .push((r, schema));
            }
        }
        by_gv
            .into_iter()
            .map(|(path, kinds)| {
                let doc = document(&kinds);
                let hash = super::hash(&doc);
                (path, (doc, hash))
            })
            .collect()
    })
}

/// `api/v1` for the core group, `apis/<group>/<version>` for the others.
pub fn index_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The object path of `r` with its `get` operation answering `definition`.
pub(super) fn get_operation(r: &ResourceInfo, definition: &str) -> (String, Value) {
    let prefix = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let path = if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{prefix}/{}/{{name}}", r.plural)
    };
    let op = json!({"get": {
        "description": format!("read the specified {}", r.kind),
        "operationId": format!("read{}", r.kind),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{definition}")}}}}},
        "x-kubernetes-action": "get",
        "x-kubernetes-group-version-kind": {"group": r.group, "kind": r.kind, "version": r.version},
    }});
    (path, op)
}

fn document(kinds: &[(&'static ResourceInfo, SchemaOf)]) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut paths = Map::new();
    let mut roots = Vec::new();
    for (r, schema_of) in kinds {
        let reference = schema_of(&mut generator);
        let name = reference
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|p| p.rsplit('/').next())
            .unwrap_or(r.kind)
            .to_string();
        let (path, op) = get_operation(r, &name);
        paths.insert(path, op);
        roots.push((name, *r));
    }
    let mut schemas = generator.take_definitions(true);
    for (name, r) in roots {
        if let Some(s) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": r.group, "kind": r.kind, "version": r.version}]),
            );
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// ObjectMeta and what it references, for the custom resources' documents.
pub fn object_meta_definitions() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let _ = generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(); // Only its definitions are wanted.
    let _ = generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>(); // Likewise.
    generator.take_definitions(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_built_in_kind_has_a_document_with_its_gvk() {
        let docs = documents();
        let core = &docs["api/v1"].0;
        let pod = &core["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        // References resolve inside the document, wrapped as upstream wraps them.
        let spec = &pod["properties"]["spec"];
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodSpec"
        );
        assert!(
            core["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
                .is_object()
        );
        assert!(core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["get"].is_object());
        let apps = &docs["apis/apps/v1"].0;
        assert!(apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());
        assert!(apps["paths"]
            .as_object()
            .is_some_and(|p| p.values().all(|op| op.get("patch").is_none())));
        // Every served built-in kind with a schema is in some document.
        let served = kinds().len();
        let documented: usize = docs
            .values()
            .map(|(d, _)| d["paths"].as_object().map_or(0, Map::len))
            .sum();
        assert_eq!(documented, served);
    }
}
