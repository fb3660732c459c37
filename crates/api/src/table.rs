//! `meta.k8s.io/v1` Tables, as Kubernetes' printers (pkg/printers/internalversion) build them
//! for `kubectl get`: the same columns, in the same order, with the same cell values.
//!
//! Like the API server, rows always carry the `-o wide` cells (priority 1 columns); kubectl
//! hides them unless asked. AGE and the other "… ago" cells are computed here from `now`
//! with Kubernetes' `duration.HumanDuration`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::registry::ResourceInfo;

mod breadth;
mod custom;
mod format;
mod rows;
mod storage_quota;
mod workloads;

pub use custom::custom_table;
use format::*;
use rows::*;

/// What a row's `object` holds (`includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    /// `PartialObjectMetadata` with the object's metadata: the default.
    #[default]
    Metadata,
    Object,
}

/// Table options of a request (`meta.k8s.io/v1` `TableOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// Leave out `columnDefinitions` (watch events after the first).
    pub no_headers: bool,
    pub include_object: IncludeObject,
}

/// The Table of `objects` (all of `resource`'s kind), with headers and metadata-only objects.
/// The server fills `metadata.resourceVersion`/`continue`.
pub fn table(resource: &ResourceInfo, objects: &[Value], now: DateTime<Utc>) -> Value {
    table_with_options(resource, objects, now, TableOptions::default())
}

/// [`table`] with explicit options.
pub fn table_with_options(
    resource: &ResourceInfo,
    objects: &[Value],
    now: DateTime<Utc>,
    options: TableOptions,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = row_cells(resource, obj, now);
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if !conditions.is_empty() {
                row.insert("conditions".into(), Value::Array(conditions));
            }
            match options.include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    let metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
                    row.insert(
                        "object".into(),
                        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    let mut out = Map::new();
    out.insert("kind".into(), json!("Table"));
    out.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    out.insert("metadata".into(), json!({}));
    if !options.no_headers {
        out.insert(
            "columnDefinitions".into(),
            Value::Array(column_definitions(resource)),
        );
    }
    out.insert("rows".into(), Value::Array(rows));
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Column definitions

struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    description: &'static str,
    priority: i32,
}

const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        description,
        priority: 0,
    }
}

const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        description,
        priority: 1,
    }
}

const NAME: Col = Col {
    name: "Name",
    ty: "string",
    format: "name",
    description: DESC_NAME,
    priority: 0,
};
const AGE: Col = col("Age", "string", DESC_CREATION);

const DESC_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const DESC_CREATION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const DESC_CONTAINERS: &str = "Names of each container in the template.";
const DESC_IMAGES: &str = "Images referenced by each container in the template.";

fn columns(resource: &ResourceInfo) -> Vec<Col> {
    if let Some(cols) = workloads::columns(resource) {
        return cols;
    }
    if let Some(cols) = storage_quota::columns(resource) {
        return cols;
    }
    if let Some(cols) = breadth::columns(resource) {
        return cols;
    }
    match (resource.group, resource.kind) {
        ("", "Pod") => vec![
            NAME,
            col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
            col("Status", "string", "The aggregate status of the containers in this pod."),
            col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            AGE,
            wide("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
            wide("Node", "string", "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
            wide("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
            wide("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
        ],
        ("", "Node") => vec![
            NAME,
            col("Status", "string", "The status of the node"),
            col("Roles", "string", "The roles of the node"),
            AGE,
            col("Version", "string", "Kubelet Version reported by the node."),
            wide("Internal-IP", "string", DESC_NODE_ADDRESSES),
            wide("External-IP", "string", DESC_NODE_ADDRESSES),
            wide("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
            wide("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
            wide("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
        ],
        ("", "Namespace") => vec![NAME, col("Status", "string", "The status of the namespace"), AGE],
        ("", "Service") => vec![
            NAME,
            col("Type", "string", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"),
            col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
            col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system."),
            col("Port(s)", "string", "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
            AGE,
            wide("Selector", "string", "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"),
        ],
        ("", "PersistentVolumeClaim") => vec![
            NAME,
            col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
            col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
            col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
            col("Access Modes", "string", "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
            col("StorageClass", "string", "storageClassName is the name of the StorageClass required by the claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#class-1"),
            col("VolumeAttributesClass", "string", "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
            AGE,
            wide("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."),
        ],
        ("", "Endpoints") => vec![
            NAME,
            col("Endpoints", "string", "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."),
            AGE,
        ],
        ("", "Event") => vec![
            col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
            col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
            col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            col("Object", "string", "The object that this event is about."),
            wide("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object."),
            wide("Source", "string", "The component reporting this event. Should be a short machine understandable string."),
            col("Message", "string", "A human-readable description of the status of this operation."),
            wide("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
            wide("Count", "string", "The number of times this event has occurred."),
            Col { priority: 1, ..NAME },
        ],
        ("", "ConfigMap") => vec![
            NAME,
            col("Data", "string", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."),
            AGE,
        ],
        ("", "Secret") => vec![
            NAME,
            col("Type", "string", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
            col("Data", "string", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"),
            AGE,
        ],
        ("", "ServiceAccount") => vec![
            NAME,
            col("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret"),
            AGE,
        ],
        ("discovery.k8s.io", "EndpointSlice") => vec![
            NAME,
            col("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name."),
            col("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports."),
            col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints."),
            AGE,
        ],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            NAME,
            col("Value", "integer", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
            col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."),
            AGE,
            col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            NAME,
            col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."),
            AGE,
        ],
        // The API server's default convertor for kinds without a printer.
        _ => vec![NAME, Col { name: "Created At", ty: "date", ..AGE }],
    }
}

const DESC_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// The `columnDefinitions` of `resource`'s Table.
pub fn column_definitions(resource: &ResourceInfo) -> Vec<Value> {
    columns(resource)
        .into_iter()
        .map(|c| {
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Durations and timestamps

/// Kubernetes' `duration.HumanDuration`: `45s`, `3m2s`, `65m`, `3h10m`, `2d3h`, `400d`, `3y2d`.
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{h}h", hours / 24)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{dy}d", hours / 24 / 365)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

fn parse_time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    let t = DateTime::parse_from_rfc3339(v?.as_str()?)
        .ok()?
        .with_timezone(&Utc);
    // Go's zero time prints as unknown too.
    (t.timestamp() != ZERO_TIME).then_some(t)
}

/// `0001-01-01T00:00:00Z`, Go's zero `time.Time`.
const ZERO_TIME: i64 = -62_135_596_800;

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when missing or invalid.
pub fn age(timestamp: Option<&Value>, now: DateTime<Utc>) -> String {
    match parse_time(timestamp) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Accessors: wrong types read as absent

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn get_str<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn get_int(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn get_arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn obj_len(v: &Value, path: &[&str]) -> i64 {
    get(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Rows

fn row_cells(resource: &ResourceInfo, obj: &Value, now: DateTime<Utc>) -> (Vec<Value>, Vec<Value>) {
    let name = json!(get_str(obj, &["metadata", "name"]));
    let created = age(get(obj, &["metadata", "creationTimestamp"]), now);
    if let Some(cells) = workloads::row(resource, obj, name.clone(), &created, now) {
        return (cells, Vec::new());
    }
    if let Some(cells) = storage_quota::row(resource, obj, name.clone(), &created) {
        return (cells, Vec::new());
    }
    if let Some(cells) = breadth::row(resource, obj, name.clone(), &created) {
        return (cells, Vec::new());
    }
    match (resource.group, resource.kind) {
        ("", "Pod") => pod_row(obj, now),
        ("", "Node") => (node_row(obj, name, created), Vec::new()),
        ("", "Namespace") => (
            vec![
                name,
                json!(get_str(obj, &["status", "phase"])),
                json!(created),
            ],
            Vec::new(),
        ),
        ("", "Service") => (service_row(obj, name, created), Vec::new()),
        ("", "PersistentVolumeClaim") => (claim_row(obj, name, created), Vec::new()),
        ("", "Endpoints") => (
            vec![name, json!(format_endpoints(obj)), json!(created)],
            Vec::new(),
        ),
        ("", "Event") => (event_row(obj, name, now), Vec::new()),
        ("", "ConfigMap") => (
            vec![
                name,
                json!(obj_len(obj, &["data"]) + obj_len(obj, &["binaryData"])),
                json!(created),
            ],
            Vec::new(),
        ),
        ("", "Secret") => (
            vec![
                name,
                json!(get_str(obj, &["type"])),
                json!(obj_len(obj, &["data"])),
                json!(created),
            ],
            Vec::new(),
        ),
        ("", "ServiceAccount") => (
            vec![
                name,
                json!(get_arr(obj, &["secrets"]).len()),
                json!(created),
            ],
            Vec::new(),
        ),
        ("discovery.k8s.io", "EndpointSlice") => (
            vec![
                name,
                json!(get_str(obj, &["addressType"])),
                json!(format_discovery_ports(obj)),
                json!(format_discovery_endpoints(obj)),
                json!(created),
            ],
            Vec::new(),
        ),
        ("scheduling.k8s.io", "PriorityClass") => (
            vec![
                name,
                get(obj, &["value"]).cloned().unwrap_or(json!(0)),
                json!(get(obj, &["globalDefault"])
                    .and_then(Value::as_bool)
                    .unwrap_or(false)),
                json!(created),
                json!(get_str(obj, &["preemptionPolicy"])),
            ],
            Vec::new(),
        ),
        ("coordination.k8s.io", "Lease") => (
            vec![
                name,
                json!(get_str(obj, &["spec", "holderIdentity"])),
                json!(created),
            ],
            Vec::new(),
        ),
        _ => {
            let created_at = parse_time(get(obj, &["metadata", "creationTimestamp"]))
                .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
            (vec![name, json!(created_at)], Vec::new())
        }
    }
}

#[cfg(test)]
mod tests;
