//! Strategic merge patch: the patch strategies of the built-in kinds.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    /// No strategy: maps merge, lists are replaced.
    Default,
    /// `patchStrategy:"merge"`: lists merge (by `merge_key` for lists of objects,
    /// as a set union for lists of scalars).
    Merge,
    /// `patchStrategy:"replace"`: maps are replaced.
    #[allow(dead_code)]
    Replace,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct FieldMeta {
    pub(super) strategy: Strategy,
    pub(super) merge_key: &'static str,
    /// The struct of the field (for a list: of its elements).
    pub(super) schema: Schema,
}

#[derive(Debug)]
pub(super) struct StructSchema {
    pub(super) name: &'static str,
    pub(super) fields: &'static [(&'static str, FieldMeta)],
}

pub(super) type Schema = Option<&'static StructSchema>;

pub(super) const NO_META: FieldMeta = FieldMeta {
    strategy: Strategy::Default,
    merge_key: "",
    schema: None,
};

pub(super) const fn object(schema: &'static StructSchema) -> FieldMeta {
    FieldMeta {
        strategy: Strategy::Default,
        merge_key: "",
        schema: Some(schema),
    }
}

pub(super) const fn merge_by(key: &'static str, schema: Schema) -> FieldMeta {
    FieldMeta {
        strategy: Strategy::Merge,
        merge_key: key,
        schema,
    }
}

pub(super) const MERGE_SCALARS: FieldMeta = FieldMeta {
    strategy: Strategy::Merge,
    merge_key: "",
    schema: None,
};

// The tables below mirror the `patchStrategy`/`patchMergeKey` struct tags of
// k8s.io/api (core/v1, apps/v1) and k8s.io/apimachinery (meta/v1), v1.33.
// Fields without tags are omitted: they merge (maps) or are replaced (lists).

pub(super) static OBJECT_META: StructSchema = StructSchema {
    name: "ObjectMeta",
    fields: &[
        ("ownerReferences", merge_by("uid", None)),
        ("finalizers", MERGE_SCALARS),
    ],
};

/// Container and EphemeralContainer (via EphemeralContainerCommon) share these tags.
pub(super) static CONTAINER: StructSchema = StructSchema {
    name: "Container",
    fields: &[
        ("ports", merge_by("containerPort", None)),
        ("env", merge_by("name", None)),
        ("volumeMounts", merge_by("mountPath", None)),
        ("volumeDevices", merge_by("devicePath", None)),
    ],
};

pub(super) static POD_SPEC: StructSchema = StructSchema {
    name: "PodSpec",
    fields: &[
        // patchStrategy:"merge,retainKeys"
        ("volumes", merge_by("name", None)),
        ("initContainers", merge_by("name", Some(&CONTAINER))),
        ("containers", merge_by("name", Some(&CONTAINER))),
        ("ephemeralContainers", merge_by("name", Some(&CONTAINER))),
        ("imagePullSecrets", merge_by("name", None)),
        ("hostAliases", merge_by("ip", None)),
        ("topologySpreadConstraints", merge_by("topologyKey", None)),
        ("schedulingGates", merge_by("name", None)),
        // patchStrategy:"merge,retainKeys"
        ("resourceClaims", merge_by("name", None)),
    ],
};

pub(super) static CONTAINER_STATUS: StructSchema = StructSchema {
    name: "ContainerStatus",
    fields: &[
        ("volumeMounts", merge_by("mountPath", None)),
        ("allocatedResourcesStatus", merge_by("name", None)),
    ],
};

pub(super) static POD_STATUS: StructSchema = StructSchema {
    name: "PodStatus",
    fields: &[
        ("conditions", merge_by("type", None)),
        ("hostIPs", merge_by("ip", None)),
        ("podIPs", merge_by("ip", None)),
        // patchStrategy:"merge,retainKeys"
        ("resourceClaimStatuses", merge_by("name", None)),
        // The status lists themselves are atomic; kept for completeness.
        ("containerStatuses", object(&CONTAINER_STATUS)),
    ],
};

pub(super) static POD: StructSchema = StructSchema {
    name: "Pod",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&POD_SPEC)),
        ("status", object(&POD_STATUS)),
    ],
};

pub(super) static POD_TEMPLATE_SPEC: StructSchema = StructSchema {
    name: "PodTemplateSpec",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&POD_SPEC)),
    ],
};

/// DeploymentSpec, ReplicaSetSpec and DaemonSetSpec: only `template` has tagged
/// fields below it (`DeploymentSpec.strategy` is `retainKeys`, which only matters
/// when computing patches).
pub(super) static WORKLOAD_SPEC: StructSchema = StructSchema {
    name: "WorkloadSpec",
    fields: &[("template", object(&POD_TEMPLATE_SPEC))],
};

/// DeploymentStatus, ReplicaSetStatus, DaemonSetStatus, ServiceStatus, NamespaceStatus.
pub(super) static CONDITIONS_STATUS: StructSchema = StructSchema {
    name: "Status",
    fields: &[("conditions", merge_by("type", None))],
};

pub(super) static WORKLOAD: StructSchema = StructSchema {
    name: "Workload",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&WORKLOAD_SPEC)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

/// CronJobSpec: the Job template's pod template is where the merge keys are.
pub(super) static JOB_TEMPLATE: StructSchema = StructSchema {
    name: "JobTemplateSpec",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&WORKLOAD_SPEC)),
    ],
};

pub(super) static CRON_JOB_SPEC: StructSchema = StructSchema {
    name: "CronJobSpec",
    fields: &[("jobTemplate", object(&JOB_TEMPLATE))],
};

pub(super) static CRON_JOB: StructSchema = StructSchema {
    name: "CronJob",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&CRON_JOB_SPEC)),
    ],
};

pub(super) static SERVICE_SPEC: StructSchema = StructSchema {
    name: "ServiceSpec",
    fields: &[("ports", merge_by("port", None))],
};

pub(super) static SERVICE: StructSchema = StructSchema {
    name: "Service",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&SERVICE_SPEC)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

pub(super) static NODE_SPEC: StructSchema = StructSchema {
    name: "NodeSpec",
    // `taints` has no patch strategy (atomic).
    fields: &[("podCIDRs", MERGE_SCALARS)],
};

pub(super) static NODE_STATUS: StructSchema = StructSchema {
    name: "NodeStatus",
    fields: &[
        ("conditions", merge_by("type", None)),
        ("addresses", merge_by("type", None)),
    ],
};

pub(super) static NODE: StructSchema = StructSchema {
    name: "Node",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&NODE_SPEC)),
        ("status", object(&NODE_STATUS)),
    ],
};

pub(super) static NAMESPACE: StructSchema = StructSchema {
    name: "Namespace",
    // `spec.finalizers` has no patch strategy (atomic).
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

pub(super) static SERVICE_ACCOUNT: StructSchema = StructSchema {
    name: "ServiceAccount",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("secrets", merge_by("name", None)),
    ],
};

/// Mutating and ValidatingWebhookConfiguration: webhooks merge by name.
pub(super) static WEBHOOK_CONFIGURATION: StructSchema = StructSchema {
    name: "WebhookConfiguration",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("webhooks", merge_by("name", None)),
    ],
};

/// ConfigMap, Secret, Endpoints, EndpointSlice, Event, Lease: only ObjectMeta has tags.
pub(super) static METADATA_ONLY: StructSchema = StructSchema {
    name: "Object",
    fields: &[("metadata", object(&OBJECT_META))],
};

pub(super) fn schema_for_kind(kind: &str) -> Schema {
    Some(match kind {
        "Pod" => &POD,
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "ReplicationController"
        | "Job" => &WORKLOAD,
        "CronJob" => &CRON_JOB,
        "Service" => &SERVICE,
        "Node" => &NODE,
        "Namespace" => &NAMESPACE,
        "ServiceAccount" => &SERVICE_ACCOUNT,
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => &WEBHOOK_CONFIGURATION,
        "ConfigMap" | "Secret" | "Endpoints" | "EndpointSlice" | "Event" | "Lease" => {
            &METADATA_ONLY
        }
        _ => return None,
    })
}

pub(super) fn lookup(schema: Schema, key: &str) -> FieldMeta {
    schema
        .and_then(|s| s.fields.iter().find(|(name, _)| *name == key))
        .map_or(NO_META, |(_, meta)| *meta)
}
