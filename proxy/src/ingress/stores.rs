//! The objects the Ingress data plane serves from, followed by reflectors, and the
//! snapshot they make.

use std::collections::BTreeMap;

use cairn_ingress::class::cairn_is_default;
use cairn_ingress::gateway::{attach, Gateway, GatewayClass, HttpRoute, ReferenceGrant};
use cairn_ingress::table::is_ours;
use cairn_ingress_proxy::{Inputs, Problem, Snapshot};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::reflector::Store;

use crate::follow::{trim_meta, Trim};

/// The legacy class annotation, the one annotation routing reads.
const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

pub(super) struct Stores {
    pub(super) ingresses: Store<Ingress>,
    pub(super) classes: Store<IngressClass>,
    pub(super) services: Store<Service>,
    pub(super) slices: Store<EndpointSlice>,
    /// `kubernetes.io/tls` Secrets only (a field selector).
    pub(super) secrets: Store<Secret>,
    pub(super) gateway: GatewayStores,
    /// The watches filling the stores: they stop when the stores are dropped.
    pub(super) _watches: tokio::task::JoinSet<()>,
}

/// The Gateway API's kinds (empty while their CRDs are not installed) and the
/// Namespaces `allowedRoutes` selectors read.
pub(super) struct GatewayStores {
    pub(super) classes: Store<GatewayClass>,
    pub(super) gateways: Store<Gateway>,
    pub(super) routes: Store<HttpRoute>,
    pub(super) grants: Store<ReferenceGrant>,
    pub(super) namespaces: Store<Namespace>,
    /// Each Gateway API kind's first list is in, or has failed.
    pub(super) listed: Vec<tokio::sync::watch::Receiver<bool>>,
}

impl Trim for GatewayClass {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for Gateway {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for HttpRoute {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for ReferenceGrant {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for Ingress {
    fn trim(&mut self) {
        let class = self
            .metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove_entry(CLASS_ANNOTATION));
        trim_meta(&mut self.metadata);
        self.metadata.annotations = class.map(|c| BTreeMap::from([c]));
    }
}

impl Trim for IngressClass {
    /// Keeps the annotations: the default-class one is read.
    fn trim(&mut self) {
        self.metadata.managed_fields = None;
    }
}

impl Trim for Service {
    /// Keeps the ports: a backend's port is found by number or name.
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        let ports: Option<Vec<ServicePort>> = self.spec.as_mut().and_then(|s| s.ports.take());
        self.spec = Some(ServiceSpec {
            ports,
            ..ServiceSpec::default()
        });
        self.status = None;
    }
}

impl Trim for EndpointSlice {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for Secret {
    /// A `kubectl apply`'s last-applied annotation would hold the key a second time.
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.string_data = None;
    }
}

impl Stores {
    /// The snapshot of what the stores hold now, and what it could not serve.
    pub(super) fn snapshot(&self) -> (Snapshot, Vec<Problem>) {
        let default = cairn_is_default(&self.classes.state());
        let ingresses = self.ingresses.state();
        let services = self.services.state();
        let slices = self.slices.state();
        let secrets = self.secrets.state();
        let inputs = Inputs {
            ingresses: ingresses
                .iter()
                .map(AsRef::as_ref)
                .filter(|i| is_ours(i, default))
                .collect(),
            services: services.iter().map(AsRef::as_ref).collect(),
            slices: slices.iter().map(AsRef::as_ref).collect(),
            secrets: secrets.iter().map(AsRef::as_ref).collect(),
            gateways: self.gateway_listeners(),
        };
        Snapshot::build(inputs)
    }

    /// The listeners of cairn's Gateways that serve, with their routes.
    fn gateway_listeners(&self) -> Vec<cairn_ingress::gateway::ServedListener> {
        let g = &self.gateway;
        let gateways = g.gateways.state();
        if gateways.is_empty() {
            return Vec::new();
        }
        let (classes, routes, grants) = (g.classes.state(), g.routes.state(), g.grants.state());
        let inputs = attach::Inputs {
            classes: classes.iter().map(AsRef::as_ref).collect(),
            gateways: gateways.iter().map(AsRef::as_ref).collect(),
            routes: routes.iter().map(AsRef::as_ref).collect(),
            grants: grants.iter().map(AsRef::as_ref).collect(),
            namespaces: attach::labels_by_name(g.namespaces.state().iter().map(|n| &n.metadata)),
            services: attach::keys(self.services.state().iter().map(|s| &s.metadata)),
            tls_secrets: attach::keys(self.secrets.state().iter().map(|s| &s.metadata)),
        };
        attach::attach(&inputs).listeners
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn a_trimmed_ingress_keeps_its_legacy_class() {
        let mut ingress: Ingress = serde_json::from_value(json!({
            "metadata": {"name": "a", "annotations": {
                "kubernetes.io/ingress.class": "cairn",
                "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(1000)}},
        }))
        .unwrap();
        ingress.trim();
        let kept = ingress.metadata.annotations.as_ref().unwrap();
        assert_eq!(kept.len(), 1);
        assert!(is_ours(&ingress, false));
    }
}
