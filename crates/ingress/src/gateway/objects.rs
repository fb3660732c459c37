//! The parts of `gateway.networking.k8s.io/v1` GatewayClass, Gateway and ReferenceGrant
//! that attachment reads (field names and defaults as in `apis/v1/gateway_types.go`,
//! `gatewayclass_types.go`, `referencegrant_types.go`), and the k8s-openapi resource
//! traits that let kube's typed `Api` and reflectors serve them and HTTPRoute.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

use super::route::HttpRoute;

/// The API group of every kind here.
pub const GROUP: &str = "gateway.networking.k8s.io";

macro_rules! resource {
    ($type:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $type {
            const API_VERSION: &'static str = "gateway.networking.k8s.io/v1";
            const GROUP: &'static str = GROUP;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::ListableResource for $type {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }

        impl k8s_openapi::Metadata for $type {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(
    GatewayClass,
    "GatewayClass",
    "gatewayclasses",
    k8s_openapi::ClusterResourceScope
);
resource!(
    Gateway,
    "Gateway",
    "gateways",
    k8s_openapi::NamespaceResourceScope
);
resource!(
    HttpRoute,
    "HTTPRoute",
    "httproutes",
    k8s_openapi::NamespaceResourceScope
);
resource!(
    ReferenceGrant,
    "ReferenceGrant",
    "referencegrants",
    k8s_openapi::NamespaceResourceScope
);

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GatewayClass {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GatewayClassSpec,
    /// Read only to compare with what the controller would write.
    pub status: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    #[serde(default)]
    pub controller_name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Gateway {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GatewaySpec,
    /// Read only to compare with what the controller would write.
    pub status: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    #[serde(default)]
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    pub hostname: Option<String>,
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed name.
    pub protocol: String,
    pub tls: Option<ListenerTls>,
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (default) or `Passthrough`.
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<ObjectRef>,
}

/// A `SecretObjectReference` (group "" and kind `Secret` by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AllowedRoutes {
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default)]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteNamespaces {
    /// `Same` (default), `All` or `Selector`.
    pub from: Option<String>,
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteGroupKind {
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReferenceGrant {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ReferenceGrantSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<GrantFrom>,
    #[serde(default)]
    pub to: Vec<GrantTo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GrantFrom {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GrantTo {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: Option<String>,
}
