//! What the data plane serves at one moment: the route table, each routed Service's
//! ready endpoints (or why it has none) and the TLS certificates the table names. A
//! snapshot is built whole from the API objects and swapped in as one pointer
//! ([`Routes`]), so no request ever sees half of an update.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use cairn_ingress::gateway::dispatch::listener_for;
use cairn_ingress::gateway::{Action, Protocol, ServedListener};
use cairn_ingress::{endpoints, BackendError, IngressKey, PortRef, RouteTable, ServiceRef};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use rustls::sign::CertifiedKey;

use crate::certs::secret_certificate;
use crate::metrics::ServiceName;

/// A routed Service's ready endpoints, taken in turn.
#[derive(Debug)]
pub struct Backend {
    endpoints: Vec<SocketAddr>,
    next: AtomicUsize,
    /// Its requests' labels.
    pub service: ServiceName,
}

impl Backend {
    pub fn new(service: ServiceName, endpoints: Vec<SocketAddr>) -> Backend {
        Backend {
            endpoints,
            next: AtomicUsize::new(0),
            service,
        }
    }

    /// The endpoints in the order this request tries them: round robin over requests,
    /// the rest after the first for retries.
    pub fn order(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let n = self.endpoints.len().max(1);
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let (head, tail) = self.endpoints.split_at(start.min(self.endpoints.len()));
        tail.iter().chain(head).copied()
    }

    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }
}

/// Something an Ingress asks for that the snapshot could not serve: for its status and
/// a Warning event on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub ingress: IngressKey,
    /// The event reason, in upstream's CamelCase.
    pub reason: &'static str,
    pub message: String,
}

/// The data plane's whole state.
#[derive(Default)]
pub struct Snapshot {
    pub table: RouteTable,
    backends: HashMap<ServiceRef, Result<Arc<Backend>, BackendError>>,
    /// By Secret namespace and name.
    certificates: HashMap<(String, String), Arc<CertifiedKey>>,
    /// The Gateway API listeners that serve, with their routes.
    pub gateways: Vec<ServedListener>,
    /// Counts weighted draws among an HTTPRoute rule's backends.
    draws: AtomicU64,
}

/// The API objects a snapshot is built from (cairn's Ingresses only).
#[derive(Default)]
pub struct Inputs<'a> {
    pub ingresses: Vec<&'a Ingress>,
    pub services: Vec<&'a Service>,
    pub slices: Vec<&'a EndpointSlice>,
    pub secrets: Vec<&'a Secret>,
    /// The listeners of cairn's Gateways that serve (`cairn_ingress::gateway::attach`).
    pub gateways: Vec<ServedListener>,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    let namespace = meta.namespace.clone().unwrap_or_default();
    (namespace, meta.name.clone().unwrap_or_default())
}

impl Snapshot {
    /// The snapshot of `inputs`, and what of them it could not serve.
    pub fn build(mut inputs: Inputs<'_>) -> (Snapshot, Vec<Problem>) {
        let gateways = std::mem::take(&mut inputs.gateways);
        let inputs = &inputs;
        let table = RouteTable::build(inputs.ingresses.iter().copied());
        let mut problems: Vec<Problem> = table
            .conflicts
            .iter()
            .map(|c| Problem {
                ingress: c.ingress.clone(),
                reason: "Conflict",
                message: c.message.clone(),
            })
            .collect();
        let services = table.services().cloned().chain(gateway_services(&gateways));
        let backends = backends_of(services, inputs);
        let mut certificates = certificates_of(&table, inputs, &mut problems);
        gateway_certificates(&gateways, inputs, &mut certificates);
        let snapshot = Snapshot {
            table,
            backends,
            certificates,
            gateways,
            draws: AtomicU64::new(0),
        };
        (snapshot, problems)
    }

    /// Where a request goes: its Service's backend, or why there is none; `None` when no
    /// rule matches (a 404).
    pub fn backend(
        &self,
        authority: &str,
        path: &str,
    ) -> Option<Result<&Arc<Backend>, &BackendError>> {
        let service = self.table.route(authority, path)?;
        let found = self.backends.get(service)?;
        Some(found.as_ref())
    }

    /// Why a routed Service cannot be served, for status: `None` when it can.
    pub fn backend_error(&self, service: &ServiceRef) -> Option<&BackendError> {
        self.backends.get(service).and_then(|b| b.as_ref().err())
    }

    /// The certificate for a TLS client's server name, when an Ingress names a valid one.
    pub fn certificate(&self, server_name: &str) -> Option<&Arc<CertifiedKey>> {
        let tls = self.table.certificate(server_name)?;
        let key = (tls.namespace.clone(), tls.secret.clone());
        self.certificates.get(&key)
    }

    /// The certificate for a server name on port `port`: its Gateway listener's, else
    /// (on the Ingress port, `ingress`) an Ingress's.
    pub fn certificate_on(
        &self,
        port: u16,
        ingress: bool,
        server_name: &str,
    ) -> Option<&Arc<CertifiedKey>> {
        let name = server_name.to_ascii_lowercase();
        let listener = listener_for(&self.gateways, port, Protocol::Https, &name);
        match listener.and_then(|l| l.certificate.as_ref()) {
            Some(key) => self.certificates.get(key),
            None if ingress => self.certificate(&name),
            None => None,
        }
    }

    /// The backend of a Service by name and port number, or why there is none.
    pub fn service_backend(
        &self,
        service: &ServiceRef,
    ) -> Option<Result<&Arc<Backend>, &BackendError>> {
        self.backends.get(service).map(Result::as_ref)
    }

    /// The next weighted draw's number.
    pub fn draw(&self) -> u64 {
        self.draws.fetch_add(1, Ordering::Relaxed)
    }
}

/// A backendRef's Service as the snapshot keys it.
pub fn service_ref(backend: &cairn_ingress::gateway::route::BackendRef) -> ServiceRef {
    ServiceRef {
        namespace: backend.namespace.clone().unwrap_or_default(),
        name: backend.name.clone(),
        port: PortRef::Number(backend.port.unwrap_or(0)),
    }
}

fn gateway_services(gateways: &[ServedListener]) -> Vec<ServiceRef> {
    let mut out = Vec::new();
    for listener in gateways {
        for action in listener.table.actions() {
            if let Action::Forward { backends, .. } = action {
                let resolved = backends.iter().filter(|(b, _)| b.unresolved.is_none());
                out.extend(resolved.map(|(b, _)| service_ref(b)));
            }
        }
    }
    out
}

/// The Gateway listeners' certificates; one that does not load is logged and the
/// default certificate served (the controller checked the Secret exists).
fn gateway_certificates(
    gateways: &[ServedListener],
    inputs: &Inputs<'_>,
    out: &mut HashMap<(String, String), Arc<CertifiedKey>>,
) {
    for key in gateways.iter().filter_map(|l| l.certificate.as_ref()) {
        if out.contains_key(key) {
            continue;
        }
        let secret = inputs
            .secrets
            .iter()
            .find(|s| name_of(&s.metadata) == *key)
            .copied();
        match secret_certificate(secret, &key.0, &key.1) {
            Ok(cert) => {
                out.insert(key.clone(), Arc::new(cert));
            }
            Err(e) => {
                tracing::warn!(secret = ?key, error = %e, "a Gateway listener's certificate; serving the default")
            }
        }
    }
}

fn backends_of(
    wanted: impl Iterator<Item = ServiceRef>,
    inputs: &Inputs<'_>,
) -> HashMap<ServiceRef, Result<Arc<Backend>, BackendError>> {
    let services: HashMap<(String, String), &Service> = inputs
        .services
        .iter()
        .map(|s| (name_of(&s.metadata), *s))
        .collect();
    let mut slices: BTreeMap<&str, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in &inputs.slices {
        let namespace = slice.metadata.namespace.as_deref().unwrap_or_default();
        slices.entry(namespace).or_default().push(slice);
    }
    let mut out = HashMap::new();
    for service in wanted {
        if out.contains_key(&service) {
            continue;
        }
        let key = (service.namespace.clone(), service.name.clone());
        let in_namespace = slices
            .get(service.namespace.as_str())
            .map_or(&[][..], |v| v);
        let found = endpoints(&service, services.get(&key).copied(), in_namespace);
        let name = ServiceName {
            namespace: service.namespace.as_str().into(),
            name: service.name.as_str().into(),
        };
        out.insert(
            service.clone(),
            found.map(|e| Arc::new(Backend::new(name, e))),
        );
    }
    out
}

fn certificates_of(
    table: &RouteTable,
    inputs: &Inputs<'_>,
    problems: &mut Vec<Problem>,
) -> HashMap<(String, String), Arc<CertifiedKey>> {
    let secrets: HashMap<(String, String), &Secret> = inputs
        .secrets
        .iter()
        .map(|s| (name_of(&s.metadata), *s))
        .collect();
    let mut out = HashMap::new();
    let mut failed = std::collections::HashSet::new();
    for tls in table.tls_certificates() {
        let key = (tls.namespace.clone(), tls.secret.clone());
        if out.contains_key(&key) || failed.contains(&(tls.ingress.clone(), key.clone())) {
            continue;
        }
        match secret_certificate(secrets.get(&key).copied(), &key.0, &key.1) {
            Ok(cert) => {
                out.insert(key, Arc::new(cert));
            }
            Err(e) => {
                problems.push(Problem {
                    ingress: tls.ingress.clone(),
                    reason: "InvalidCertificate",
                    message: format!("{e}; the default certificate is served instead"),
                });
                failed.insert((tls.ingress.clone(), key));
            }
        }
    }
    out
}

/// The snapshot in force, swapped whole.
pub struct Routes(ArcSwap<Snapshot>);

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Routes")
    }
}

impl Default for Routes {
    fn default() -> Routes {
        Routes(ArcSwap::from_pointee(Snapshot::default()))
    }
}

impl Routes {
    /// The snapshot a request or handshake uses from start to end.
    pub fn current(&self) -> Arc<Snapshot> {
        self.0.load_full()
    }

    pub fn replace(&self, next: Snapshot) {
        self.0.store(Arc::new(next));
    }
}
