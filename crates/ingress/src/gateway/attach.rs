//! Which Gateways are cairn's, which of their listeners can serve, and which HTTPRoutes
//! attach to which listeners, with every condition upstream asks for (sources and
//! reasons: `docs/upstream/gateway-api-semantics.md` §2 and §4). The data plane serves
//! the listeners' tables; the controller writes the conditions.
//!
//! Every node serves every cairn Gateway on its own addresses, so listeners of different
//! Gateways share ports: the older Gateway keeps a port's protocol and a hostname on it,
//! and a newer one's listener that collides is `Conflicted` (within one Gateway, all
//! colliding listeners are, as upstream says).

use std::collections::{BTreeMap, BTreeSet};

use cairn_semantics::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use super::cond::Cond;
use super::hostname;
use super::objects::{Gateway, GatewayClass, Listener, ReferenceGrant, RouteGroupKind, GROUP};
use super::refs::{granted, resolve_backends, From, To};
use super::route::{HttpRoute, ParentRef};
use super::table::ListenerTable;

/// The `controllerName` of cairn's GatewayClasses.
pub const CONTROLLER_NAME: &str = "cairn.io/gateway-controller";

/// Namespace and name.
pub type Key = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Http,
    Https,
}

/// What attachment reads.
#[derive(Default)]
pub struct Inputs<'a> {
    pub classes: Vec<&'a GatewayClass>,
    pub gateways: Vec<&'a Gateway>,
    pub routes: Vec<&'a HttpRoute>,
    pub grants: Vec<&'a ReferenceGrant>,
    /// Namespaces' labels by name (`allowedRoutes` selectors).
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub services: BTreeSet<Key>,
    /// The `kubernetes.io/tls` Secrets.
    pub tls_secrets: BTreeSet<Key>,
}

/// A listener that serves, with its routes.
pub struct ServedListener {
    pub gateway: Key,
    pub name: String,
    pub port: u16,
    pub protocol: Protocol,
    pub hostname: Option<String>,
    /// The Secret of an HTTPS listener.
    pub certificate: Option<Key>,
    pub table: ListenerTable,
}

pub struct ListenerState {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    /// Accepted, ResolvedRefs, Programmed and Conflicted, in that order.
    pub conditions: Vec<(&'static str, Cond)>,
}

pub struct GatewayState {
    pub generation: Option<i64>,
    /// Accepted and Programmed.
    pub conditions: Vec<(&'static str, Cond)>,
    pub listeners: Vec<ListenerState>,
}

/// One `status.parents[]` entry of an HTTPRoute.
pub struct ParentState {
    /// The spec's parentRef with its defaults filled in.
    pub parent_ref: ParentRef,
    /// Accepted and ResolvedRefs.
    pub conditions: Vec<(&'static str, Cond)>,
}

pub struct RouteState {
    pub generation: Option<i64>,
    pub parents: Vec<ParentState>,
}

#[derive(Default)]
pub struct Attachment {
    pub listeners: Vec<ServedListener>,
    /// cairn's GatewayClasses, all accepted.
    pub classes: Vec<String>,
    pub gateways: BTreeMap<Key, GatewayState>,
    /// Only routes with a parentRef to one of cairn's Gateways.
    pub routes: BTreeMap<Key, RouteState>,
}

pub fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The namespace/name keys of objects (`Inputs::services`, `Inputs::tls_secrets`).
pub fn keys<'a>(metas: impl IntoIterator<Item = &'a ObjectMeta>) -> BTreeSet<Key> {
    metas.into_iter().map(key_of).collect()
}

/// Namespaces' labels by name (`Inputs::namespaces`).
pub fn labels_by_name<'a>(
    metas: impl IntoIterator<Item = &'a ObjectMeta>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    metas
        .into_iter()
        .map(|m| {
            let name = m.name.clone().unwrap_or_default();
            (name, m.labels.clone().unwrap_or_default())
        })
        .collect()
}

/// A listener as checked on its own and against the others.
struct Checked<'a> {
    gateway: Key,
    listener: &'a Listener,
    protocol: Option<Protocol>,
    accepted: Cond,
    resolved: Cond,
    conflicted: Option<Cond>,
    supported_kinds: Vec<RouteGroupKind>,
    certificate: Option<Key>,
    attached: Vec<HttpRoute>,
}

impl Checked<'_> {
    fn serves(&self) -> bool {
        self.accepted.status && self.resolved.status && self.conflicted.is_none()
    }

    fn allows_routes(&self) -> bool {
        self.supported_kinds.iter().any(|k| k.kind == "HTTPRoute")
    }
}

fn protocol_of(listener: &Listener) -> Result<Protocol, Cond> {
    match listener.protocol.as_str() {
        "HTTP" => Ok(Protocol::Http),
        "HTTPS" => match listener.tls.as_ref().and_then(|t| t.mode.as_deref()) {
            None | Some("Terminate") => Ok(Protocol::Https),
            Some(mode) => Err(Cond::no(
                "UnsupportedValue",
                format!("TLS mode {mode:?} is not supported on HTTPS listeners"),
            )),
        },
        other => Err(Cond::no(
            "UnsupportedProtocol",
            format!("protocol {other:?} is not supported; cairn serves HTTP and HTTPS listeners"),
        )),
    }
}

/// The route kinds a listener takes, and whether it named one cairn does not serve.
fn kinds_of(listener: &Listener) -> (Vec<RouteGroupKind>, Option<Cond>) {
    let http_route = RouteGroupKind {
        group: Some(GROUP.into()),
        kind: "HTTPRoute".into(),
    };
    let asked = listener.allowed_routes.as_ref().map(|a| &a.kinds);
    let Some(asked) = asked.filter(|k| !k.is_empty()) else {
        return (vec![http_route], None);
    };
    let (good, bad): (Vec<&RouteGroupKind>, Vec<&RouteGroupKind>) = asked
        .iter()
        .partition(|k| k.group.as_deref().unwrap_or(GROUP) == GROUP && k.kind == "HTTPRoute");
    let problem = bad.first().map(|k| {
        Cond::no(
            "InvalidRouteKinds",
            format!("route kind {:?} is not supported (only HTTPRoute)", k.kind),
        )
    });
    let supported = if good.is_empty() {
        vec![]
    } else {
        vec![http_route]
    };
    (supported, problem)
}

/// An HTTPS listener's certificate Secret, or why it has none.
fn certificate_of(gateway: &Key, listener: &Listener, inputs: &Inputs<'_>) -> Result<Key, Cond> {
    let refs = listener
        .tls
        .as_ref()
        .map(|t| &t.certificate_refs[..])
        .unwrap_or(&[]);
    let Some(secret) = refs.first() else {
        return Err(Cond::no(
            "InvalidCertificateRef",
            "an HTTPS listener needs tls.certificateRefs",
        ));
    };
    let namespace = secret
        .namespace
        .clone()
        .unwrap_or_else(|| gateway.0.clone());
    let shown = format!("{namespace}/{}", secret.name);
    let (group, kind) = (
        secret.group.as_deref().unwrap_or(""),
        secret.kind.as_deref().unwrap_or("Secret"),
    );
    if (group, kind) != ("", "Secret") {
        let why = format!("certificateRef {shown}: kind {kind:?} is not supported (only Secrets)");
        return Err(Cond::no("InvalidCertificateRef", why));
    }
    let from = From {
        group: GROUP,
        kind: "Gateway",
        namespace: &gateway.0,
    };
    let to = To {
        group: "",
        kind: "Secret",
        namespace: &namespace,
        name: &secret.name,
    };
    if namespace != gateway.0 && !granted(&inputs.grants, &from, &to) {
        let why =
            format!("certificateRef {shown}: no ReferenceGrant in namespace {namespace} allows it");
        return Err(Cond::no("RefNotPermitted", why));
    }
    let key = (namespace, secret.name.clone());
    if !inputs.tls_secrets.contains(&key) {
        let why = format!("certificateRef {shown}: no kubernetes.io/tls Secret of that name");
        return Err(Cond::no("InvalidCertificateRef", why));
    }
    Ok(key)
}

fn check<'a>(gateway: &'a Gateway, listener: &'a Listener, inputs: &Inputs<'_>) -> Checked<'a> {
    let key = key_of(&gateway.metadata);
    let protocol = protocol_of(listener);
    let (supported_kinds, kinds_problem) = kinds_of(listener);
    let certificate = match protocol {
        Ok(Protocol::Https) => Some(certificate_of(&key, listener, inputs)),
        _ => None,
    };
    let resolved = match (&certificate, kinds_problem) {
        (Some(Err(why)), _) => why.clone(),
        (_, Some(why)) => why,
        _ => Cond::yes("ResolvedRefs", "all references are resolved"),
    };
    let accepted = match &protocol {
        Ok(_) => Cond::yes("Accepted", "the listener is valid"),
        Err(why) => why.clone(),
    };
    Checked {
        gateway: key,
        listener,
        protocol: protocol.ok(),
        accepted,
        resolved,
        conflicted: None,
        supported_kinds,
        certificate: certificate.and_then(Result::ok),
        attached: Vec::new(),
    }
}

/// The listeners of one Gateway that collide among themselves: all are `Conflicted`.
fn conflicts_within(listeners: &mut [Checked<'_>]) {
    let mut protocols: BTreeMap<i32, BTreeSet<Protocol>> = BTreeMap::new();
    let mut hostnames: BTreeMap<(i32, Option<&str>), usize> = BTreeMap::new();
    for l in listeners.iter().filter(|l| l.protocol.is_some()) {
        protocols
            .entry(l.listener.port)
            .or_default()
            .extend(l.protocol);
        *hostnames
            .entry((l.listener.port, l.listener.hostname.as_deref()))
            .or_default() += 1;
    }
    for l in listeners.iter_mut().filter(|l| l.protocol.is_some()) {
        let port = l.listener.port;
        if protocols.get(&port).is_some_and(|p| p.len() > 1) {
            let why = format!("listeners of this Gateway on port {port} use different protocols");
            l.conflicted = Some(Cond::yes("ProtocolConflict", why));
        } else if hostnames.get(&(port, l.listener.hostname.as_deref())) > Some(&1) {
            let why = format!("listeners of this Gateway on port {port} have the same hostname");
            l.conflicted = Some(Cond::yes("HostnameConflict", why));
        }
    }
}

/// A port as the older Gateways hold it: its protocol and hostnames.
#[derive(Default)]
struct Claims(BTreeMap<i32, (Protocol, BTreeSet<Option<String>>, Key)>);

impl Claims {
    /// Marks `l` `Conflicted` if an older Gateway holds its port or hostname, else claims.
    fn take(&mut self, l: &mut Checked<'_>) {
        let (Some(protocol), true) = (l.protocol, l.conflicted.is_none()) else {
            return;
        };
        let port = l.listener.port;
        let hostname = l.listener.hostname.clone();
        let entry = self
            .0
            .entry(port)
            .or_insert_with(|| (protocol, BTreeSet::new(), l.gateway.clone()));
        let owner = format!("{}/{}", entry.2 .0, entry.2 .1);
        if entry.0 != protocol {
            let why =
                format!("port {port} is served with another protocol by the older Gateway {owner}");
            l.conflicted = Some(Cond::yes("ProtocolConflict", why));
        } else if entry.2 != l.gateway && entry.1.contains(&hostname) {
            let why =
                format!("port {port} with this hostname is served by the older Gateway {owner}");
            l.conflicted = Some(Cond::yes("HostnameConflict", why));
        } else {
            entry.1.insert(hostname);
        }
    }
}

fn created(meta: &ObjectMeta) -> (Option<String>, Key) {
    let at = meta.creation_timestamp.as_ref().map(|t| t.0.to_string());
    (at, key_of(meta))
}

/// cairn's Gateways, oldest first, with their listeners checked.
fn check_gateways<'a>(
    inputs: &'a Inputs<'_>,
    classes: &[String],
) -> Vec<(&'a Gateway, Vec<Checked<'a>>)> {
    let mut gateways: Vec<&Gateway> = inputs
        .gateways
        .iter()
        .copied()
        .filter(|g| classes.contains(&g.spec.gateway_class_name))
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .collect();
    gateways.sort_by_key(|g| created(&g.metadata));
    let mut claims = Claims::default();
    let mut out = Vec::new();
    for gateway in gateways {
        let mut listeners: Vec<Checked> = gateway
            .spec
            .listeners
            .iter()
            .map(|l| check(gateway, l, inputs))
            .collect();
        conflicts_within(&mut listeners);
        listeners.iter_mut().for_each(|l| claims.take(l));
        out.push((gateway, listeners));
    }
    out
}

/// Attaches every route to the listeners of cairn's Gateways.
pub fn attach(inputs: &Inputs<'_>) -> Attachment {
    let classes: Vec<String> = inputs
        .classes
        .iter()
        .filter(|c| c.spec.controller_name == CONTROLLER_NAME)
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut gateways = check_gateways(inputs, &classes);
    let mut routes = BTreeMap::new();
    for route in &inputs.routes {
        if let Some(state) = attach_route(route, &mut gateways, inputs) {
            routes.insert(key_of(&route.metadata), state);
        }
    }
    let mut out = Attachment {
        classes,
        routes,
        ..Attachment::default()
    };
    for (gateway, listeners) in gateways {
        out.gateways.insert(
            key_of(&gateway.metadata),
            gateway_state(gateway, &listeners),
        );
        out.listeners
            .extend(listeners.into_iter().filter_map(serve));
    }
    out
}

fn serve(l: Checked<'_>) -> Option<ServedListener> {
    let protocol = l.protocol.filter(|_| l.serves())?;
    let port = u16::try_from(l.listener.port).ok()?;
    let hostname = l.listener.hostname.clone();
    let (table, _) = ListenerTable::build(hostname.as_deref(), &l.attached);
    Some(ServedListener {
        gateway: l.gateway,
        name: l.listener.name.clone(),
        port,
        protocol,
        hostname,
        certificate: l.certificate,
        table,
    })
}

fn gateway_state(gateway: &Gateway, listeners: &[Checked<'_>]) -> GatewayState {
    let serving = listeners.iter().filter(|l| l.serves()).count();
    let accepted = match (serving, listeners.len()) {
        (s, n) if s == n => Cond::yes("Accepted", "the Gateway is valid"),
        (0, _) => Cond::no("ListenersNotValid", "no listener is valid"),
        _ => Cond::yes("ListenersNotValid", "some listeners are not valid"),
    };
    let programmed = match serving {
        0 => Cond::no("Invalid", "no listener can be served"),
        _ => Cond::yes(
            "Programmed",
            "every node's cairn-proxy serves the valid listeners",
        ),
    };
    GatewayState {
        generation: gateway.metadata.generation,
        conditions: vec![("Accepted", accepted), ("Programmed", programmed)],
        listeners: listeners.iter().map(listener_state).collect(),
    }
}

fn listener_state(l: &Checked<'_>) -> ListenerState {
    let programmed = match l.serves() {
        true => Cond::yes("Programmed", "served on every node"),
        false => Cond::no("Invalid", "the listener is not valid"),
    };
    let conflicted = l
        .conflicted
        .clone()
        .unwrap_or_else(|| Cond::no("NoConflicts", "no conflict"));
    ListenerState {
        name: l.listener.name.clone(),
        supported_kinds: l.supported_kinds.clone(),
        attached_routes: i32::try_from(l.attached.len()).unwrap_or(i32::MAX),
        conditions: vec![
            ("Accepted", l.accepted.clone()),
            ("ResolvedRefs", l.resolved.clone()),
            ("Programmed", programmed),
            ("Conflicted", conflicted),
        ],
    }
}

/// Whether a listener of a Gateway in `gateway_ns` takes routes from `route_ns`.
fn allows_namespace(l: &Listener, gateway_ns: &str, route_ns: &str, inputs: &Inputs<'_>) -> bool {
    let namespaces = l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_deref()).unwrap_or("Same") {
        "All" => true,
        "Selector" => {
            let selector = namespaces
                .and_then(|n| n.selector.as_ref())
                .and_then(|s| Selector::from_label_selector(s).ok());
            let labels = inputs.namespaces.get(route_ns);
            matches!((selector, labels), (Some(s), Some(l)) if s.matches(l))
        }
        _ => gateway_ns == route_ns,
    }
}

fn default_parent(parent: &ParentRef, route_ns: &str) -> ParentRef {
    ParentRef {
        group: Some(parent.group.clone().unwrap_or_else(|| GROUP.into())),
        kind: Some(parent.kind.clone().unwrap_or_else(|| "Gateway".into())),
        namespace: Some(parent.namespace.clone().unwrap_or_else(|| route_ns.into())),
        ..parent.clone()
    }
}

fn attach_route(
    route: &HttpRoute,
    gateways: &mut [(&Gateway, Vec<Checked<'_>>)],
    inputs: &Inputs<'_>,
) -> Option<RouteState> {
    let route_ns = route.metadata.namespace.clone().unwrap_or_default();
    let (resolved_route, resolved) = resolve_backends(route, &inputs.grants, &inputs.services);
    let mut parents = Vec::new();
    for parent in &route.spec.parent_refs {
        let parent_ref = default_parent(parent, &route_ns);
        if parent_ref.group.as_deref() != Some(GROUP)
            || parent_ref.kind.as_deref() != Some("Gateway")
        {
            continue;
        }
        let wanted = (
            parent_ref.namespace.clone().unwrap_or_default(),
            parent_ref.name.clone(),
        );
        let Some((_, listeners)) = gateways
            .iter_mut()
            .find(|(g, _)| key_of(&g.metadata) == wanted)
        else {
            continue;
        };
        let accepted = attach_to(&resolved_route, &parent_ref, &route_ns, listeners, inputs);
        let conditions = vec![("Accepted", accepted), ("ResolvedRefs", resolved.clone())];
        parents.push(ParentState {
            parent_ref,
            conditions,
        });
    }
    (!parents.is_empty()).then_some(RouteState {
        generation: route.metadata.generation,
        parents,
    })
}

/// Attaches `route` to the listeners `parent` names that take it; its `Accepted`.
fn attach_to(
    route: &HttpRoute,
    parent: &ParentRef,
    route_ns: &str,
    listeners: &mut [Checked<'_>],
    inputs: &Inputs<'_>,
) -> Cond {
    let named: Vec<&mut Checked> = listeners
        .iter_mut()
        .filter(|l| {
            parent
                .section_name
                .as_ref()
                .is_none_or(|s| *s == l.listener.name)
        })
        .filter(|l| parent.port.is_none_or(|p| p == l.listener.port))
        .collect();
    if named.is_empty() {
        return Cond::no(
            "NoMatchingParent",
            "no listener of the Gateway matches the parentRef's sectionName and port",
        );
    }
    let allowed: Vec<&mut Checked> = named
        .into_iter()
        .filter(|l| {
            l.allows_routes() && allows_namespace(l.listener, &l.gateway.0, route_ns, inputs)
        })
        .collect();
    if allowed.is_empty() {
        return Cond::no(
            "NotAllowedByListeners",
            format!("no listener of the Gateway allows HTTPRoutes from namespace {route_ns}"),
        );
    }
    let mut attached = 0;
    for l in allowed {
        let names = hostname::of_route(route);
        let listener = l.listener.hostname.as_deref();
        if names
            .iter()
            .any(|h| hostname::intersect(listener, *h).is_some())
        {
            l.attached.push(route.clone());
            attached += 1;
        }
    }
    match attached {
        0 => Cond::no(
            "NoMatchingListenerHostname",
            "no hostname of the route matches a listener's hostname",
        ),
        _ => Cond::yes("Accepted", "the route is attached"),
    }
}
