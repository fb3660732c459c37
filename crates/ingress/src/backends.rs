//! A backend Service's ready endpoints: the Service port the Ingress names (by number or
//! name), then the EndpointSlice port of that Service port's name, on every endpoint not
//! marked unready (upstream: a missing `ready` condition means ready). Terminating
//! endpoints are left out: the proxy sends straight to pods, so a pod going away must
//! stop getting new requests at once.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::table::{PortRef, ServiceRef};

/// The label EndpointSlices name their Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One ready endpoint.
pub type Endpoint = SocketAddr;

/// Why a backend has nothing to send to: the 503's body and the Ingress's condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("service \"{namespace}/{name}\" not found")]
    NoService { namespace: String, name: String },
    #[error("service \"{namespace}/{name}\" has no port {port}")]
    NoPort {
        namespace: String,
        name: String,
        port: String,
    },
    #[error("service \"{namespace}/{name}\" has no ready endpoints")]
    NoEndpoints { namespace: String, name: String },
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(n) => write!(f, "{n:?}"),
        }
    }
}

/// The ready endpoints of `backend`, from its Service (if it exists) and the
/// EndpointSlices in its namespace.
pub fn endpoints(
    backend: &ServiceRef,
    service: Option<&Service>,
    slices: &[&EndpointSlice],
) -> Result<Vec<Endpoint>, BackendError> {
    let (namespace, name) = (backend.namespace.clone(), backend.name.clone());
    let Some(service) = service else {
        return Err(BackendError::NoService { namespace, name });
    };
    let ports = service.spec.iter().flat_map(|s| s.ports.iter().flatten());
    let port = ports.into_iter().find(|p| match &backend.port {
        PortRef::Number(n) => p.port == *n,
        PortRef::Name(n) => p.name.as_deref() == Some(n),
    });
    let Some(port) = port else {
        let port = backend.port.to_string();
        return Err(BackendError::NoPort {
            namespace,
            name,
            port,
        });
    };
    let port_name = port.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    for slice in slices
        .iter()
        .filter(|s| of_service(s, &backend.namespace, &backend.name))
    {
        let Some(number) = slice_port(slice, &port_name) else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let c = endpoint.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            if !ready || terminating {
                continue;
            }
            let ips = endpoint
                .addresses
                .iter()
                .filter_map(|a| a.parse::<IpAddr>().ok());
            out.extend(ips.map(|ip| SocketAddr::new(ip, number)));
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(BackendError::NoEndpoints { namespace, name });
    }
    Ok(out)
}

fn of_service(slice: &EndpointSlice, namespace: &str, name: &str) -> bool {
    slice.metadata.namespace.as_deref() == Some(namespace)
        && slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .is_some_and(|n| n == name)
}

/// The slice's TCP port named `name` (a Service port's name; unnamed: "").
fn slice_port(slice: &EndpointSlice, name: &str) -> Option<u16> {
    slice.ports.iter().flatten().find_map(|p| {
        let tcp = p.protocol.as_deref().unwrap_or("TCP") == "TCP";
        let same = p.name.as_deref().unwrap_or("") == name;
        (tcp && same)
            .then_some(p.port?)
            .and_then(|n| u16::try_from(n).ok())
    })
}
