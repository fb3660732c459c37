//! The resources cairn-control serves, with what discovery documents need to say of them.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
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
    pub fn key_prefix(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        format!("/registry/{group}/{}/", self.plural)
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

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

const fn status(kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        kind,
        group: "",
        version: "",
        verbs: STATUS_VERBS,
    }
}

const SCALE: Subresource = Subresource {
    name: "scale",
    kind: "Scale",
    group: "autoscaling",
    version: "v1",
    verbs: STATUS_VERBS,
};

/// Every resource cairn-control serves, in discovery order.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[
            status("Namespace"),
            // The namespace controller clears `spec.finalizers` through it.
            Subresource {
                name: "finalize",
                kind: "Namespace",
                group: "",
                version: "",
                verbs: &["update"],
            },
        ],
        field_selectors: &["status.phase"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[status("Node")],
        field_selectors: &["spec.unschedulable"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[
            status("Pod"),
            // Served by cairn-apiserver's log proxy; listed so discovery shows it.
            Subresource {
                name: "log",
                kind: "Pod",
                group: "",
                version: "",
                verbs: &["get"],
            },
            Subresource {
                name: "binding",
                kind: "Binding",
                group: "",
                version: "",
                verbs: &["create"],
            },
            Subresource {
                name: "eviction",
                kind: "Eviction",
                group: "policy",
                version: "v1",
                verbs: &["create"],
            },
            // Only spec.ephemeralContainers changes through it (`kubectl debug`).
            Subresource {
                name: "ephemeralcontainers",
                kind: "Pod",
                group: "",
                version: "",
                verbs: &["get", "patch", "update"],
            },
            // Served by the upgrade-aware proxy to the node (exec, attach, port-forward)
            // and the proxy subresource; listed so discovery shows them.
            Subresource {
                name: "exec",
                kind: "PodExecOptions",
                group: "",
                version: "",
                verbs: &["create", "get"],
            },
            Subresource {
                name: "attach",
                kind: "PodAttachOptions",
                group: "",
                version: "",
                verbs: &["create", "get"],
            },
            Subresource {
                name: "portforward",
                kind: "PodPortForwardOptions",
                group: "",
                version: "",
                verbs: &["create", "get"],
            },
            Subresource {
                name: "proxy",
                kind: "PodProxyOptions",
                group: "",
                version: "",
                verbs: &["create", "delete", "get", "patch", "update"],
            },
        ],
        field_selectors: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("Service")],
        field_selectors: &["spec.clusterIP", "spec.type"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        namespaced: true,
        short_names: &["ep"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &["type"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        namespaced: true,
        short_names: &["sa"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        namespaced: true,
        short_names: &["rc"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("ReplicationController"), SCALE],
        field_selectors: &["status.replicas"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[status("PersistentVolumeClaim")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        namespaced: false,
        short_names: &["pv"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[status("PersistentVolume")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        namespaced: false,
        short_names: &["sc"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("Deployment"), SCALE],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("ReplicaSet"), SCALE],
        field_selectors: &["status.replicas"],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        namespaced: true,
        short_names: &["ds"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("DaemonSet")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        namespaced: true,
        short_names: &["sts"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("StatefulSet"), SCALE],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        namespaced: true,
        short_names: &[],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("Job")],
        field_selectors: &["status.successful"],
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        namespaced: true,
        short_names: &["cj"],
        categories: &["all"],
        verbs: ALL_VERBS,
        subresources: &[status("CronJob")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &["addressType"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        namespaced: true,
        short_names: &["limits"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        namespaced: true,
        short_names: &["quota"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[status("ResourceQuota")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[status("PodDisruptionBudget")],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        namespaced: false,
        short_names: &["pc"],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        field_selectors: &[],
    },
];

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
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
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
    fn group_versions_start_with_core() {
        let gvs = group_versions();
        assert_eq!(gvs[0], ("", "v1"));
        assert!(gvs.contains(&("apps", "v1")));
    }
}
