//! Typed decoding of the kinds of the RBAC, networking, node, certificates,
//! apiregistration, events.k8s.io and autoscaling groups (see the parent module).

use serde_json::Value;

use super::{go_zero_values, roundtrip, Normalized, SchemaError};

/// The kinds of the RBAC, networking, node, certificates, apiregistration, events.k8s.io
/// and autoscaling groups.
pub(super) fn normalize_api_breadth(
    api_version: &str,
    kind: &str,
    version: &str,
    obj: &Value,
) -> Result<Normalized, SchemaError> {
    use k8s_openapi::api::{autoscaling, certificates, events, networking, node, rbac};
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
    let mut out = match (api_version, kind) {
        ("rbac.authorization.k8s.io/v1", "Role") => roundtrip::<rbac::v1::Role>(kind, version, obj),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            roundtrip::<rbac::v1::ClusterRole>(kind, version, obj)
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            roundtrip::<rbac::v1::RoleBinding>(kind, version, obj)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            roundtrip::<rbac::v1::ClusterRoleBinding>(kind, version, obj)
        }
        ("networking.k8s.io/v1", "Ingress") => {
            roundtrip::<networking::v1::Ingress>(kind, version, obj)
        }
        ("networking.k8s.io/v1", "IngressClass") => {
            roundtrip::<networking::v1::IngressClass>(kind, version, obj)
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => {
            roundtrip::<networking::v1::NetworkPolicy>(kind, version, obj)
        }
        ("networking.k8s.io/v1", "IPAddress") => {
            roundtrip::<networking::v1::IPAddress>(kind, version, obj)
        }
        ("networking.k8s.io/v1", "ServiceCIDR") => {
            roundtrip::<networking::v1::ServiceCIDR>(kind, version, obj)
        }
        ("node.k8s.io/v1", "RuntimeClass") => {
            roundtrip::<node::v1::RuntimeClass>(kind, version, obj)
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            roundtrip::<certificates::v1::CertificateSigningRequest>(kind, version, obj)
        }
        ("apiregistration.k8s.io/v1", "APIService") => {
            roundtrip::<apiregistration::v1::APIService>(kind, version, obj)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            // Checked through the typed round trip (wrong types, unknown fields) but kept
            // as sent: schemas hold empty objects that mean something (`default: {}`,
            // `additionalProperties: {}`, `subresources.status: {}`), which the round trip
            // would drop as empty maps.
            roundtrip::<
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            >(kind, version, obj)
            .map(|n| Normalized {
                value: obj.clone(),
                unknown_fields: n.unknown_fields,
            })
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            roundtrip::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(
                kind, version, obj,
            )
        }
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            roundtrip::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(
                kind, version, obj,
            )
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            roundtrip::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>(
                kind, version, obj,
            )
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            roundtrip::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(
                kind, version, obj,
            )
        }
        ("events.k8s.io/v1", "Event") => roundtrip::<events::v1::Event>(kind, version, obj),
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            roundtrip::<autoscaling::v1::HorizontalPodAutoscaler>(kind, version, obj)
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            roundtrip::<autoscaling::v2::HorizontalPodAutoscaler>(kind, version, obj)
        }
        _ => {
            return Ok(Normalized {
                value: obj.clone(),
                unknown_fields: Vec::new(),
            })
        }
    }?;
    go_zero_values(kind, &mut out.value);
    Ok(out)
}
