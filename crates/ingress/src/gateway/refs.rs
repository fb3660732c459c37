//! References across namespaces and to backends: ReferenceGrant checks
//! (`referencegrant_types.go`: the grant lives in the target namespace; `from` and `to`
//! entries are ORed; no `to.name` covers the kind) and an HTTPRoute's backendRefs
//! resolved to Services, each unresolvable one marked with its `ResolvedRefs` reason.

use std::collections::BTreeSet;

use super::cond::Cond;
use super::objects::{ReferenceGrant, GROUP};
use super::route::HttpRoute;

/// The referring side of a reference: group, kind and namespace.
pub struct From<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
}

/// The referred-to object: group, kind, namespace and name.
pub struct To<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Whether a reference from `from` to `to` in another namespace is allowed.
pub fn granted(grants: &[&ReferenceGrant], from: &From<'_>, to: &To<'_>) -> bool {
    grants
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(to.namespace))
        .any(|g| {
            let from_ok = g.spec.from.iter().any(|f| {
                f.group == from.group && f.kind == from.kind && f.namespace == from.namespace
            });
            let to_ok = g.spec.to.iter().any(|t| {
                t.group == to.group
                    && t.kind == to.kind
                    && t.name.as_deref().is_none_or(|n| n == to.name)
            });
            from_ok && to_ok
        })
}

/// `route` with every backendRef's namespace filled in and the unresolvable ones
/// marked, and the route's `ResolvedRefs` condition (the first problem found).
pub fn resolve_backends(
    route: &HttpRoute,
    grants: &[&ReferenceGrant],
    services: &BTreeSet<(String, String)>,
) -> (HttpRoute, Cond) {
    let mut route = route.clone();
    let namespace = route.metadata.namespace.clone().unwrap_or_default();
    let mut first: Option<Cond> = None;
    for backend in route
        .spec
        .rules
        .iter_mut()
        .flat_map(|r| r.backend_refs.iter_mut())
    {
        let target = backend
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.clone());
        let group = backend.group.as_deref().unwrap_or("");
        let kind = backend.kind.as_deref().unwrap_or("Service");
        let shown = format!("{target}/{}", backend.name);
        let problem = if (group, kind) != ("", "Service") {
            Some(("InvalidKind", format!("backendRef {shown}: kind {kind:?} of group {group:?} is not supported (only Services)")))
        } else if target != namespace
            && !granted(
                grants,
                &From {
                    group: GROUP,
                    kind: "HTTPRoute",
                    namespace: &namespace,
                },
                &To {
                    group: "",
                    kind: "Service",
                    namespace: &target,
                    name: &backend.name,
                },
            )
        {
            Some(("RefNotPermitted", format!("backendRef {shown}: no ReferenceGrant in namespace {target} allows HTTPRoutes of {namespace} to refer to it")))
        } else if !services.contains(&(target.clone(), backend.name.clone())) {
            Some((
                "BackendNotFound",
                format!("backendRef {shown}: service \"{shown}\" not found"),
            ))
        } else {
            None
        };
        backend.namespace = Some(target);
        if let Some((reason, message)) = problem {
            backend.unresolved = Some(reason);
            first.get_or_insert(Cond::no(reason, message));
        }
    }
    let cond = first.unwrap_or_else(|| Cond::yes("ResolvedRefs", "all references are resolved"));
    (route, cond)
}
