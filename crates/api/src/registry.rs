//! The resources cairn-control serves, with what discovery documents need to say of them.

use crate::kinds::strategy::Strategy;

/// A subresource of a resource (`pods/status`, `deployments/scale`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    pub name: &'static str,
    /// Kind of the subresource's body, with its group/version when it differs from the parent.
    pub kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub verbs: &'static [&'static str],
}

/// One served resource.
#[derive(Debug, Clone, Copy)]
pub struct ResourceInfo {
    /// API group, `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// What the kind customises (defaulting, validation, tables, admission).
    pub strategy: &'static Strategy,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [Subresource],
    /// Field selector keys accepted in addition to `metadata.name` and `metadata.namespace`.
    pub field_selectors: &'static [&'static str],
}

/// Every field but the strategy, which is the same one for the same kind (function
/// pointers have no meaningful equality).
impl PartialEq for ResourceInfo {
    fn eq(&self, other: &Self) -> bool {
        let key = |r: &Self| {
            (
                (
                    r.group,
                    r.version,
                    r.kind,
                    r.plural,
                    r.singular,
                    r.namespaced,
                ),
                (r.short_names, r.categories, r.verbs, r.subresources),
                r.field_selectors,
            )
        };
        key(self) == key(other)
    }
}

impl Eq for ResourceInfo {}

impl ResourceInfo {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`, as used in Status details and messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether `field` may be used in a field selector on this resource.
    pub fn supports_field_selector(&self, field: &str) -> bool {
        field == "metadata.name"
            || (self.namespaced && field == "metadata.namespace")
            || self.field_selectors.contains(&field)
    }

    /// Storage key prefix for this resource: `/registry/<group-or-core>/<plural>/`.
    /// Resources stored in another's shape share its prefix (see [`storage_of`]).
    pub fn key_prefix(&self) -> String {
        let stored_group = stored_elsewhere(self).map_or(self.group, |(g, _)| g);
        let group = if stored_group.is_empty() {
            "core"
        } else {
            stored_group
        };
        format!("/registry/{group}/{}/", self.plural)
    }

    /// A resource the server answers itself and never stores (reviews, metrics).
    pub const fn unstored(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
        verbs: &'static [&'static str],
    ) -> ResourceInfo {
        ResourceInfo {
            group,
            version,
            kind,
            strategy: &crate::kinds::Strategy::NONE,
            plural,
            singular: "",
            namespaced,
            short_names: &[],
            categories: &[],
            verbs,
            subresources: &[],
            field_selectors: &[],
        }
    }

    /// Storage key of one object (`namespace` ignored for cluster-scoped resources).
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{}{ns}/{name}", self.key_prefix()),
            _ => format!("{}{name}", self.key_prefix()),
        }
    }

    /// Storage key prefix for listing: the whole resource, or one namespace of it.
    pub fn list_prefix(&self, namespace: Option<&str>) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{}{ns}/", self.key_prefix()),
            _ => self.key_prefix(),
        }
    }
}

mod resources;

pub use resources::{ALL_VERBS, RESOURCES, STATUS_VERBS};

/// Resources served in more than one shape keep their objects once, in one storage
/// resource, as kube-apiserver does: autoscaling/v1 HPAs are stored as autoscaling/v2, and
/// events.k8s.io/v1 Events are the core Events. `(group, version, plural)` served →
/// `(group, version)` of the resource whose shape is stored.
static STORED_ELSEWHERE: &[StoredElsewhere] = &[
    StoredElsewhere {
        served: ("autoscaling", "v1", "horizontalpodautoscalers"),
        stored: ("autoscaling", "v2"),
    },
    StoredElsewhere {
        served: ("events.k8s.io", "v1", "events"),
        stored: ("", "v1"),
    },
];

/// `served` (group, version, plural) keeps its objects in the shape of `stored`
/// (group, version) of the same plural.
struct StoredElsewhere {
    served: (&'static str, &'static str, &'static str),
    stored: (&'static str, &'static str),
}

fn stored_elsewhere(r: &ResourceInfo) -> Option<(&'static str, &'static str)> {
    STORED_ELSEWHERE
        .iter()
        .find(|e| e.served == (r.group, r.version, r.plural))
        .map(|e| e.stored)
}

/// The resource whose shape `r`'s objects are stored in: `r` itself for most.
pub fn storage_of(r: &'static ResourceInfo) -> &'static ResourceInfo {
    stored_elsewhere(r)
        .and_then(|(g, v)| find(g, v, r.plural))
        .unwrap_or(r)
}

/// The served group/versions in discovery order: `("", "v1")` first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The resource served at `group`/`version` under `plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have `apiVersion` and `kind`.
pub fn find_by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_prefixes() {
        let pods = find("", "v1", "pods").unwrap();
        assert_eq!(
            pods.key(Some("default"), "a"),
            "/registry/core/pods/default/a"
        );
        assert_eq!(pods.list_prefix(None), "/registry/core/pods/");
        let ns = find("", "v1", "namespaces").unwrap();
        assert_eq!(
            ns.key(Some("ignored"), "kube-system"),
            "/registry/core/namespaces/kube-system"
        );
        let deploy = find_by_kind("apps/v1", "Deployment").unwrap();
        assert_eq!(deploy.group_resource(), "deployments.apps");
        assert!(pods.supports_field_selector("spec.nodeName"));
        assert!(!ns.supports_field_selector("metadata.namespace"));
    }

    #[test]
    fn alternate_shapes_share_their_storage() {
        let v1 = find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let v2 = find("autoscaling", "v2", "horizontalpodautoscalers").unwrap();
        assert!(std::ptr::eq(storage_of(v1), v2));
        assert!(std::ptr::eq(storage_of(v2), v2));
        let events = find("events.k8s.io", "v1", "events").unwrap();
        let core = find("", "v1", "events").unwrap();
        assert!(std::ptr::eq(storage_of(events), core));
        assert_eq!(events.key_prefix(), "/registry/core/events/");
        assert_eq!(v1.key_prefix(), v2.key_prefix());
    }

    #[test]
    fn group_versions_start_with_core() {
        let gvs = group_versions();
        assert_eq!(gvs[0], ("", "v1"));
        assert!(gvs.contains(&("apps", "v1")));
    }
}
