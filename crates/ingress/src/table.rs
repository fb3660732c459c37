//! The route table: every Ingress of cairn's class merged into host groups of path
//! rules, the default backend and the TLS certificates by host.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use crate::host::{request_host, HostMatch};
use crate::path::{PathError, PathMatch};

/// The IngressClass cairn serves (`spec.controller: cairn.io/ingress`).
pub const CLASS_NAME: &str = "cairn";
/// The legacy annotation some Ingresses still name their class with.
const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// An Ingress, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IngressKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for IngressKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A Service port, by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortRef {
    Number(i32),
    Name(String),
}

/// A backend Service in the Ingress's namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: PortRef,
}

/// One path rule of a host group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub ingress: IngressKey,
    pub path: PathMatch,
    pub backend: ServiceRef,
}

/// A TLS host's certificate: a `kubernetes.io/tls` Secret in the Ingress's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsCertificate {
    pub ingress: IngressKey,
    pub namespace: String,
    pub secret: String,
}

/// Something of an Ingress that the table left out, and why (for its status and a
/// Warning event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub ingress: IngressKey,
    pub message: String,
}

/// Where requests go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// Host groups, the most specific first within each kind; each group's routes in
    /// precedence order.
    exact: BTreeMap<String, Vec<Route>>,
    /// By suffix (`.example.com`).
    wildcard: BTreeMap<String, Vec<Route>>,
    any: Vec<Route>,
    default_backend: Option<(IngressKey, ServiceRef)>,
    tls: BTreeMap<HostMatch, TlsCertificate>,
    pub conflicts: Vec<Conflict>,
}

fn key_of(ingress: &Ingress) -> IngressKey {
    IngressKey {
        namespace: ingress.metadata.namespace.clone().unwrap_or_default(),
        name: ingress.metadata.name.clone().unwrap_or_default(),
    }
}

/// Whether an Ingress is cairn's: its class is `cairn`, or it names none and cairn's
/// class is the cluster's default.
pub fn is_ours(ingress: &Ingress, default_class: bool) -> bool {
    let named = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            let annotations = ingress.metadata.annotations.as_ref()?;
            annotations.get(CLASS_ANNOTATION).map(String::as_str)
        });
    match named {
        Some(class) => class == CLASS_NAME,
        None => default_class,
    }
}

fn service_of(namespace: &str, backend: &IngressBackend) -> Option<ServiceRef> {
    let service = backend.service.as_ref()?;
    let port = service.port.as_ref()?;
    let port = match (&port.name, port.number) {
        (Some(name), _) if !name.is_empty() => PortRef::Name(name.clone()),
        (_, Some(number)) => PortRef::Number(number),
        _ => return None,
    };
    Some(ServiceRef {
        namespace: namespace.to_string(),
        name: service.name.clone(),
        port,
    })
}

impl RouteTable {
    /// The table of `ingresses` (cairn's, [`is_ours`]). Older Ingresses are merged
    /// first, so on a conflict the oldest keeps its rule.
    pub fn build<'a>(ingresses: impl IntoIterator<Item = &'a Ingress>) -> RouteTable {
        let mut sorted: Vec<&Ingress> = ingresses.into_iter().collect();
        sorted.sort_by_key(|i| {
            (
                i.metadata.creation_timestamp.clone().map(|t| t.0),
                key_of(i),
            )
        });
        let mut table = RouteTable::default();
        for ingress in sorted {
            table.add(ingress);
        }
        for routes in table.groups_mut() {
            // Stable: among equals, the older Ingress's rule stays first.
            routes.sort_by_key(|r| std::cmp::Reverse(r.path.specificity()));
        }
        table
    }

    fn groups_mut(&mut self) -> impl Iterator<Item = &mut Vec<Route>> {
        self.exact
            .values_mut()
            .chain(self.wildcard.values_mut())
            .chain(std::iter::once(&mut self.any))
    }

    fn conflict(&mut self, ingress: &IngressKey, message: String) {
        self.conflicts.push(Conflict {
            ingress: ingress.clone(),
            message,
        });
    }

    fn add(&mut self, ingress: &Ingress) {
        let key = key_of(ingress);
        let Some(spec) = &ingress.spec else {
            return;
        };
        if let Some(backend) = &spec.default_backend {
            self.add_default(&key, backend);
        }
        for rule in spec.rules.iter().flatten() {
            let host = HostMatch::parse(rule.host.as_deref());
            for path in rule.http.iter().flat_map(|h| &h.paths) {
                let parsed = PathMatch::parse(path.path.as_deref(), &path.path_type);
                self.add_path(&key, &host, parsed, &path.backend);
            }
        }
        for tls in spec.tls.iter().flatten() {
            let Some(secret) = tls.secret_name.clone().filter(|s| !s.is_empty()) else {
                continue;
            };
            for host in tls.hosts.iter().flatten() {
                self.add_tls(&key, HostMatch::parse(Some(host)), &secret);
            }
        }
    }

    fn add_default(&mut self, key: &IngressKey, backend: &IngressBackend) {
        let Some(service) = service_of(&key.namespace, backend) else {
            let why = "defaultBackend: only Service backends are supported".to_string();
            return self.conflict(key, why);
        };
        match &self.default_backend {
            Some((owner, _)) => {
                let why = format!("defaultBackend: {owner}'s, an older Ingress's, is in use");
                self.conflict(key, why)
            }
            None => self.default_backend = Some((key.clone(), service)),
        }
    }

    fn add_path(
        &mut self,
        key: &IngressKey,
        host: &HostMatch,
        path: Result<PathMatch, PathError>,
        backend: &IngressBackend,
    ) {
        let path = match path {
            Ok(p) => p,
            Err(e) => return self.conflict(key, e.to_string()),
        };
        let Some(service) = service_of(&key.namespace, backend) else {
            let why = format!("{path:?}: only Service backends are supported");
            return self.conflict(key, why);
        };
        let group = match host {
            HostMatch::Exact(h) => self.exact.entry(h.clone()).or_default(),
            HostMatch::Wildcard(s) => self.wildcard.entry(s.clone()).or_default(),
            HostMatch::Any => &mut self.any,
        };
        if let Some(owner) = group
            .iter()
            .find(|r| r.path == path)
            .map(|r| r.ingress.clone())
        {
            let why = format!("host {host:?} path {path:?}: {owner}, an older Ingress, routes it");
            return self.conflict(key, why);
        }
        group.push(Route {
            ingress: key.clone(),
            path,
            backend: service,
        });
    }

    fn add_tls(&mut self, key: &IngressKey, host: HostMatch, secret: &str) {
        if let Some(owner) = self.tls.get(&host) {
            if owner.ingress != *key || owner.secret != secret {
                let why = format!(
                    "tls host {host:?}: {}'s certificate is in use",
                    owner.ingress
                );
                self.conflict(key, why);
            }
            return;
        }
        let cert = TlsCertificate {
            ingress: key.clone(),
            namespace: key.namespace.clone(),
            secret: secret.to_string(),
        };
        self.tls.insert(host, cert);
    }

    /// The host group a request for `host` goes to: its exact host, else the wildcard
    /// matching it, else the rules with no host. An Ingress wildcard covers exactly one
    /// label, so the only one that can match is the host less its first label: one
    /// lookup per request, whatever the number of wildcards.
    fn group(&self, host: &str) -> &[Route] {
        if let Some(routes) = self.exact.get(host) {
            return routes;
        }
        wildcard_suffix(host)
            .and_then(|suffix| self.wildcard.get(suffix))
            .map_or(&self.any, |routes| routes)
    }

    /// The Service a request for `authority` and `path` (query included or not) goes to;
    /// `None`: a 404.
    pub fn route(&self, authority: &str, path: &str) -> Option<&ServiceRef> {
        let host = request_host(authority);
        let path = path.split(['?', '#']).next().unwrap_or(path);
        self.group(&host)
            .iter()
            .find(|r| r.path.matches(path))
            .map(|r| &r.backend)
            .or(self.default_backend.as_ref().map(|(_, s)| s))
    }

    /// The certificate for a TLS client's server name (SNI): its exact host's, else a
    /// wildcard's.
    pub fn certificate(&self, server_name: &str) -> Option<&TlsCertificate> {
        let host = request_host(server_name);
        let wildcard = || {
            let suffix = wildcard_suffix(&host)?;
            self.tls.get(&HostMatch::Wildcard(suffix.to_string()))
        };
        self.tls
            .get(&HostMatch::Exact(host.clone()))
            .or_else(wildcard)
    }

    /// Every TLS host's certificate, once per host.
    pub fn tls_certificates(&self) -> impl Iterator<Item = &TlsCertificate> {
        self.tls.values()
    }

    /// Every Service the table routes to (to follow their endpoints).
    pub fn services(&self) -> impl Iterator<Item = &ServiceRef> {
        self.exact
            .values()
            .chain(self.wildcard.values())
            .chain(std::iter::once(&self.any))
            .flatten()
            .map(|r| &r.backend)
            .chain(self.default_backend.as_ref().map(|(_, s)| s))
    }
}

/// The suffix a wildcard matching `host` holds (`.example.com` for `a.example.com`):
/// `host` less its first label, which must not be empty.
fn wildcard_suffix(host: &str) -> Option<&str> {
    host.find('.').filter(|&i| i > 0).map(|i| &host[i..])
}
