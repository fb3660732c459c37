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

mod workloads;

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

/// `printPod`: READY, STATUS (kubectl's status reason), RESTARTS and the wide cells.
fn pod_row(pod: &Value, now: DateTime<Utc>) -> (Vec<Value>, Vec<Value>) {
    let mut restarts: i64 = 0;
    let mut restartable_init_restarts: i64 = 0;
    let mut total = get_arr(pod, &["spec", "containers"]).len();
    let mut ready = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut last_restartable_init_restart: Option<DateTime<Utc>> = None;

    let phase = get_str(pod, &["status", "phase"]);
    let mut reason = phase.to_string();
    let status_reason = get_str(pod, &["status", "reason"]);
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    let conditions = get_arr(pod, &["status", "conditions"]);
    for c in conditions {
        if get_str(c, &["type"]) == "PodScheduled" && get_str(c, &["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }
    let row_conditions = match phase {
        "Succeeded" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}),
        ],
        "Failed" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}),
        ],
        _ => Vec::new(),
    };

    let init_specs = get_arr(pod, &["spec", "initContainers"]);
    let restartable: BTreeSet<&str> = init_specs
        .iter()
        .filter(|c| get_str(c, &["restartPolicy"]) == "Always")
        .map(|c| get_str(c, &["name"]))
        .collect();
    total += restartable.len();

    let later = |acc: &mut Option<DateTime<Utc>>, t: Option<DateTime<Utc>>| {
        if let Some(t) = t {
            if acc.is_none_or(|a| a < t) {
                *acc = Some(t);
            }
        }
    };

    let mut initializing = false;
    for (i, cs) in get_arr(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = get_int(cs, &["restartCount"]);
        restarts += count;
        let finished = parse_time(get(cs, &["lastState", "terminated", "finishedAt"]));
        if get(cs, &["lastState", "terminated"]).is_some() {
            later(&mut last_restart, finished);
        }
        let is_restartable = restartable.contains(get_str(cs, &["name"]));
        if is_restartable {
            restartable_init_restarts += count;
            if get(cs, &["lastState", "terminated"]).is_some() {
                later(&mut last_restartable_init_restart, finished);
            }
        }
        let terminated = get(cs, &["state", "terminated"]);
        let waiting_reason = get_str(cs, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| get_int(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_restartable && get(cs, &["started"]) == Some(&Value::Bool(true)) {
            if get(cs, &["ready"]) == Some(&Value::Bool(true)) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let t_reason = get_str(t, &["reason"]);
            reason = if t_reason.is_empty() {
                let signal = get_int(t, &["signal"]);
                if signal != 0 {
                    format!("Init:Signal:{signal}")
                } else {
                    format!("Init:ExitCode:{}", get_int(t, &["exitCode"]))
                }
            } else {
                format!("Init:{t_reason}")
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions
        .iter()
        .any(|c| get_str(c, &["type"]) == "Initialized" && get_str(c, &["status"]) == "True");
    if !initializing || initialized {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for cs in get_arr(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += get_int(cs, &["restartCount"]);
            if get(cs, &["lastState", "terminated"]).is_some() {
                later(
                    &mut last_restart,
                    parse_time(get(cs, &["lastState", "terminated", "finishedAt"])),
                );
            }
            let waiting_reason = get_str(cs, &["state", "waiting", "reason"]);
            let terminated = get(cs, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let t_reason = get_str(t, &["reason"]);
                reason = if !t_reason.is_empty() {
                    t_reason.to_string()
                } else if get_int(t, &["signal"]) != 0 {
                    format!("Signal:{}", get_int(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", get_int(t, &["exitCode"]))
                };
            } else if get(cs, &["ready"]) == Some(&Value::Bool(true))
                && get(cs, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| get_str(c, &["type"]) == "Ready" && get_str(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some();
    if deleting && status_reason == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
        _ => restarts.to_string(),
    };

    let pod_ip = get_arr(pod, &["status", "podIPs"])
        .first()
        .map(|p| get_str(p, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| get_str(pod, &["status", "podIP"]));
    let gates = get_arr(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| {
                let t = get_str(g, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| get_str(c, &["type"]) == t)
                    .is_some_and(|c| get_str(c, &["status"]) == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    let cells = vec![
        json!(get_str(pod, &["metadata", "name"])),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        json!(age(get(pod, &["metadata", "creationTimestamp"]), now)),
        json!(or_none(pod_ip)),
        json!(or_none(get_str(pod, &["spec", "nodeName"]))),
        json!(or_none(get_str(pod, &["status", "nominatedNodeName"]))),
        json!(readiness_gates),
    ];
    (cells, row_conditions)
}

fn node_row(node: &Value, name: Value, created: String) -> Vec<Value> {
    let mut status = Vec::new();
    if let Some(c) = get_arr(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| get_str(c, &["type"]) == "Ready")
    {
        status.push(if get_str(c, &["status"]) == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if get(node, &["spec", "unschedulable"]) == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role" {
                if let Some(v) = v.as_str().filter(|v| !v.is_empty()) {
                    roles.insert(v.to_string());
                }
            }
        }
    }
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    let address = |ty: &str| {
        get_arr(node, &["status", "addresses"])
            .iter()
            .find(|a| get_str(a, &["type"]) == ty)
            .map_or("<none>".to_string(), |a| {
                get_str(a, &["address"]).to_string()
            })
    };
    let info = |k: &str| {
        let v = get_str(node, &["status", "nodeInfo", k]);
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        name,
        json!(status.join(",")),
        json!(or_none(&roles)),
        json!(created),
        json!(get_str(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn service_row(svc: &Value, name: Value, created: String) -> Vec<Value> {
    let svc_type = get_str(svc, &["spec", "type"]);
    let cluster_ip = get_arr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| get_str(svc, &["spec", "clusterIP"]));
    let external_ips: Vec<&str> = get_arr(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match svc_type {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let lb: BTreeSet<&str> = get_arr(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| {
                    let ip = get_str(i, &["ip"]);
                    let host = get_str(i, &["hostname"]);
                    if !ip.is_empty() {
                        Some(ip)
                    } else if !host.is_empty() {
                        Some(host)
                    } else {
                        None
                    }
                })
                .collect();
            let mut all: Vec<&str> = lb.into_iter().collect();
            if all.is_empty() && external_ips.is_empty() {
                "<pending>".to_string()
            } else {
                all.extend(external_ips);
                all.join(",")
            }
        }
        "ExternalName" => get_str(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = get_arr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = get_int(p, &["port"]);
            let proto = get_str(p, &["protocol"]);
            let node_port = get_int(p, &["nodePort"]);
            if node_port > 0 {
                format!("{port}:{node_port}/{proto}")
            } else {
                format!("{port}/{proto}")
            }
        })
        .collect();
    vec![
        name,
        json!(svc_type),
        json!(or_none(cluster_ip)),
        json!(external),
        json!(or_none(&ports.join(","))),
        json!(created),
        json!(format_labels(get(svc, &["spec", "selector"]))),
    ]
}

fn event_row(ev: &Value, name: Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = match parse_time(get(ev, &["firstTimestamp"])) {
        Some(t) => human_duration(now - t),
        None => age(get(ev, &["eventTime"]), now),
    };
    let mut last = match parse_time(get(ev, &["lastTimestamp"])) {
        Some(t) => human_duration(now - t),
        None => first.clone(),
    };
    let mut count = get_int(ev, &["count"]);
    if let Some(series) = get(ev, &["series"]) {
        last = age(get(series, &["lastObservedTime"]), now);
        count = get_int(series, &["count"]);
    } else if count == 0 {
        // Events of the new API leave count unset for singletons.
        count = 1;
    }
    let kind = get_str(ev, &["involvedObject", "kind"]).to_lowercase();
    let involved_name = get_str(ev, &["involvedObject", "name"]);
    let target = if involved_name.is_empty() {
        kind
    } else {
        format!("{kind}/{involved_name}")
    };
    let first_non_empty = |a: &'static [&str], b: &'static [&str]| {
        let x = get_str(ev, a);
        if x.is_empty() {
            get_str(ev, b)
        } else {
            x
        }
    };
    let component = first_non_empty(&["source", "component"], &["reportingComponent"]);
    let instance = first_non_empty(&["source", "host"], &["reportingInstance"]);
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(get_str(ev, &["type"])),
        json!(get_str(ev, &["reason"])),
        json!(target),
        json!(get_str(ev, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(get_str(ev, &["message"]).trim()),
        json!(first),
        json!(count),
        name,
    ]
}

/// `printPersistentVolumeClaim`: capacity and modes only once bound.
fn claim_row(pvc: &Value, name: Value, created: String) -> Vec<Value> {
    let phase = get_str(pvc, &["status", "phase"]);
    let bound = !get_str(pvc, &["spec", "volumeName"]).is_empty();
    let (capacity, modes) = if bound {
        let modes: Vec<&str> = get_arr(pvc, &["status", "accessModes"])
            .iter()
            .filter_map(Value::as_str)
            .map(|m| match m {
                "ReadWriteOnce" => "RWO",
                "ReadOnlyMany" => "ROX",
                "ReadWriteMany" => "RWX",
                "ReadWriteOncePod" => "RWOP",
                other => other,
            })
            .collect();
        (
            get_str(pvc, &["status", "capacity", "storage"]).to_string(),
            modes.join(","),
        )
    } else {
        (String::new(), String::new())
    };
    let phase = if get(pvc, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        phase
    };
    vec![
        name,
        json!(phase),
        json!(get_str(pvc, &["spec", "volumeName"])),
        json!(capacity),
        json!(modes),
        json!(get_str(pvc, &["spec", "storageClassName"])),
        json!(or_unset(get_str(
            pvc,
            &["spec", "volumeAttributesClassName"]
        ))),
        json!(created),
        json!(or_unset(get_str(pvc, &["spec", "volumeMode"]))),
    ]
}

fn or_unset(s: &str) -> &str {
    if s.is_empty() {
        "<unset>"
    } else {
        s
    }
}

/// `layoutContainerCells`: container names and images of the pod template, comma-joined.
fn container_cells(obj: &Value) -> (String, String) {
    let containers = get_arr(obj, &["spec", "template", "spec", "containers"]);
    let names: Vec<&str> = containers.iter().map(|c| get_str(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| get_str(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> String {
    let map: BTreeMap<&str, &str> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if map.is_empty() {
        return "<none>".to_string();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `LabelSelectorAsSelector(...).String()`: requirements sorted by key; `None` when invalid.
fn selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(sel) = selector else {
        return Some(String::new());
    };
    let sel = sel.as_object()?;
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").filter(|v| !v.is_null()) {
        for (k, v) in labels.as_object()? {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").filter(|v| !v.is_null()) {
        for e in exprs.as_array()? {
            let key = e.get("key").and_then(Value::as_str)?;
            let mut values: Vec<&str> = match e.get("values") {
                Some(Value::Array(vs)) => vs.iter().map(Value::as_str).collect::<Option<_>>()?,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => return None,
            };
            values.sort_unstable();
            let text = match e.get("operator").and_then(Value::as_str)? {
                "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
                "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
                "Exists" if values.is_empty() => key.to_string(),
                "DoesNotExist" if values.is_empty() => format!("!{key}"),
                _ => return None,
            };
            reqs.push((key.to_string(), text));
        }
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` when empty, `<error>` when invalid.
fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Some(s) if s.is_empty() => "<none>".to_string(),
        Some(s) => s,
        None => "<error>".to_string(),
    }
}

/// `formatEndpoints`: up to three `ip:port`, then ` + N more...`.
fn format_endpoints(ep: &Value) -> String {
    let subsets = get_arr(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = get_arr(ss, &["addresses"]);
        let ports = get_arr(ss, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(get_str(a, &["ip"]).to_string());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = get_str(a, &["ip"]);
                let p = get_int(port, &["port"]);
                // net.JoinHostPort brackets IPv6 addresses.
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{p}")
                } else {
                    format!("{ip}:{p}")
                });
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count.saturating_sub(MAX))
    } else {
        ret
    }
}

fn list_with_more(list: Vec<String>, more: bool, count: usize, max: usize) -> String {
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count.saturating_sub(max));
    }
    if ret.is_empty() {
        return "<unset>".to_string();
    }
    ret
}

fn format_discovery_ports(slice: &Value) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let ports = get_arr(slice, &["ports"]);
    for p in ports {
        if list.len() < MAX {
            let text = match get(p, &["port"]).and_then(Value::as_i64) {
                Some(n) => n.to_string(),
                None => match get(p, &["name"]).and_then(Value::as_str) {
                    Some(name) => name.to_string(),
                    None => "*".to_string(),
                },
            };
            list.push(text);
        } else if list.len() == MAX {
            more = true;
        }
    }
    list_with_more(list, more, ports.len(), MAX)
}

fn format_discovery_endpoints(slice: &Value) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ep in get_arr(slice, &["endpoints"]) {
        for a in get_arr(ep, &["addresses"]) {
            if list.len() < MAX {
                list.push(a.as_str().unwrap_or("").to_string());
            } else if list.len() == MAX {
                more = true;
            }
            count += 1;
        }
    }
    list_with_more(list, more, count, MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find_by_kind;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 10, 12, 0, 0).unwrap()
    }

    fn ago(secs: i64) -> String {
        (now() - chrono::Duration::seconds(secs))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    fn cells(api_version: &str, kind: &str, obj: Value) -> Vec<Value> {
        let t = table(find_by_kind(api_version, kind).unwrap(), &[obj], now());
        t["rows"][0]["cells"].as_array().unwrap().clone()
    }

    #[test]
    fn human_durations() {
        let d = |s: i64| human_duration(chrono::Duration::seconds(s));
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (599, "9m59s"),
            (600, "10m"),
            (65 * 60, "65m"),
            (179 * 60 + 59, "179m"),
            (180 * 60, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (8 * 3600 + 1, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (51 * 3600, "2d3h"),
            (8 * 86400, "8d"),
            (400 * 86400, "400d"),
            (730 * 86400, "2y"),
            (1097 * 86400, "3y2d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(d(secs), want, "{secs}s");
        }
        assert_eq!(human_duration(chrono::Duration::milliseconds(-1500)), "0s");
        assert_eq!(age(Some(&json!("garbage")), now()), "<unknown>");
        assert_eq!(age(None, now()), "<unknown>");
        assert_eq!(age(Some(&json!(ago(302))), now()), "5m2s");
    }

    #[test]
    fn table_envelope() {
        let pods = find_by_kind("v1", "Pod").unwrap();
        let pod = json!({"metadata": {"name": "a", "namespace": "default", "resourceVersion": "5"}, "spec": {}});
        let t = table(pods, &[pod], now());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({}));
        let cols = t["columnDefinitions"].as_array().unwrap();
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(cols[0]["format"], "name");
        assert_eq!(cols[5]["priority"], 1);
        assert_eq!(cols[1]["format"], "");
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "namespace": "default", "resourceVersion": "5"}})
        );
        let t = table_with_options(
            pods,
            &[],
            now(),
            TableOptions {
                no_headers: true,
                include_object: IncludeObject::None,
            },
        );
        assert!(t.get("columnDefinitions").is_none());
        assert_eq!(t["rows"], json!([]));

        let events = find_by_kind("v1", "Event").unwrap();
        let names: Vec<String> = column_definitions(events)
            .iter()
            .map(|c| format!("{}:{}", c["name"], c["priority"]))
            .collect();
        assert_eq!(
            names,
            [
                "\"Last Seen\":0",
                "\"Type\":0",
                "\"Reason\":0",
                "\"Object\":0",
                "\"Subobject\":1",
                "\"Source\":1",
                "\"Message\":0",
                "\"First Seen\":1",
                "\"Count\":1",
                "\"Name\":1"
            ]
        );
    }

    fn pod_with(status: Value) -> Value {
        json!({"metadata": {"name": "web-1", "creationTimestamp": ago(3600 * 5 + 60)},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]}, "status": status})
    }

    #[test]
    fn pod_statuses() {
        let running = json!({"phase": "Running", "podIP": "10.0.0.7",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 3, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(300)}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}, "lastState": {}}]});
        assert_eq!(
            cells("v1", "Pod", pod_with(running)),
            json!([
                "web-1",
                "2/2",
                "Running",
                "3 (5m ago)",
                "5h1m",
                "10.0.0.7",
                "node-1",
                "<none>",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );

        let creating = json!({"phase": "Pending", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]});
        let c = cells("v1", "Pod", pod_with(creating));
        assert_eq!(
            (c[1].as_str(), c[2].as_str(), c[3].as_str(), c[5].as_str()),
            (
                Some("0/2"),
                Some("ContainerCreating"),
                Some("0"),
                Some("<none>")
            )
        );

        let crash = json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 2, "finishedAt": ago(40)}}}]});
        let c = cells("v1", "Pod", pod_with(crash));
        assert_eq!(
            (c[1].as_str(), c[2].as_str(), c[3].as_str()),
            (Some("1/2"), Some("CrashLoopBackOff"), Some("7 (40s ago)"))
        );

        let done = json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]});
        let t = table(find_by_kind("v1", "Pod").unwrap(), &[pod_with(done)], now());
        assert_eq!(t["rows"][0]["cells"][2], "Completed");
        assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Succeeded");

        let mut terminating = pod_with(json!({"phase": "Running"}));
        terminating["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(cells("v1", "Pod", terminating)[2], "Terminating");

        let mut init = pod_with(json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "setup", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}));
        init["spec"]["initContainers"] = json!([{"name": "setup"}]);
        assert_eq!(cells("v1", "Pod", init.clone())[2], "Init:0/1");
        init["status"]["initContainerStatuses"][0]["state"] =
            json!({"waiting": {"reason": "ErrImagePull"}});
        assert_eq!(cells("v1", "Pod", init.clone())[2], "Init:ErrImagePull");
        init["status"]["initContainerStatuses"][0]["state"] =
            json!({"terminated": {"exitCode": 3}});
        assert_eq!(cells("v1", "Pod", init)[2], "Init:ExitCode:3");

        let mut sidecar = pod_with(
            json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1, "state": {"running": {}}}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
        );
        sidecar["spec"]["initContainers"] = json!([{"name": "proxy", "restartPolicy": "Always"}]);
        sidecar["spec"]["readinessGates"] = json!([{"conditionType": "example.com/gate"}]);
        let c = cells("v1", "Pod", sidecar);
        assert_eq!(
            (c[1].as_str(), c[2].as_str(), c[3].as_str(), c[8].as_str()),
            (Some("3/3"), Some("Running"), Some("1"), Some("0/1"))
        );

        let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        assert_eq!(
            cells("v1", "Pod", pending),
            json!([
                "p",
                "0/1",
                "Pending",
                "0",
                "<unknown>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn node_and_namespace_rows() {
        let node = json!({"metadata": {"name": "node-1", "creationTimestamp": ago(86400 * 3),
                "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "node-1"}],
                "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0"}}});
        assert_eq!(
            cells("v1", "Node", node),
            json!([
                "node-1",
                "Ready,SchedulingDisabled",
                "control-plane,edge,worker",
                "3d",
                "v1.33.0",
                "192.168.1.10",
                "<none>",
                "Debian GNU/Linux 12 (bookworm)",
                "6.1.0",
                "containerd://1.7.0"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let bare = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        let c = cells("v1", "Node", bare);
        assert_eq!(
            (c[1].as_str(), c[2].as_str(), c[7].as_str()),
            (Some("NotReady"), Some("<none>"), Some("<unknown>"))
        );
        assert_eq!(
            cells("v1", "Node", json!({"metadata": {"name": "n"}}))[1],
            "Unknown"
        );
        assert_eq!(
            cells(
                "v1",
                "Namespace",
                json!({"metadata": {"name": "dev", "creationTimestamp": ago(65 * 60)}, "status": {"phase": "Active"}})
            ),
            json!(["dev", "Active", "65m"]).as_array().unwrap().clone()
        );
    }

    #[test]
    fn workload_rows() {
        let d = json!({"metadata": {"name": "web", "creationTimestamp": ago(120)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            cells("apps/v1", "Deployment", d.clone()),
            json!([
                "web",
                "2/3",
                3,
                2,
                "2m",
                "nginx,log",
                "nginx:1.25,busybox",
                "app=web,tier in (a,b)"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let mut rs = d.clone();
        rs["status"] = json!({"replicas": 3, "readyReplicas": 1});
        assert_eq!(
            cells("apps/v1", "ReplicaSet", rs),
            json!([
                "web",
                3,
                3,
                1,
                "2m",
                "nginx,log",
                "nginx:1.25,busybox",
                "app=web,tier in (a,b)"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let mut ds = d;
        ds["spec"]["selector"] = json!({});
        ds["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
        ds["status"] = json!({"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1});
        assert_eq!(
            cells("apps/v1", "DaemonSet", ds),
            json!([
                "web",
                2,
                2,
                1,
                2,
                1,
                "kubernetes.io/os=linux",
                "2m",
                "nginx,log",
                "nginx:1.25,busybox",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let bad = json!({"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}});
        assert_eq!(cells("apps/v1", "Deployment", bad.clone())[7], "<invalid>");
        assert_eq!(cells("apps/v1", "ReplicaSet", bad)[7], "<error>");
    }

    #[test]
    fn service_and_endpoint_rows() {
        let svc = json!({"metadata": {"name": "web", "creationTimestamp": ago(10)},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"], "selector": {"app": "web"},
                "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(
            cells("v1", "Service", svc),
            json!([
                "web",
                "NodePort",
                "10.96.0.20",
                "<none>",
                "80:30080/TCP,53/UDP",
                "10s",
                "app=web"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.21", "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}});
        assert_eq!(cells("v1", "Service", lb.clone())[3], "<pending>");
        let mut lb2 = lb;
        lb2["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}});
        assert_eq!(cells("v1", "Service", lb2)[3], "203.0.113.9,lb.example.com");
        let headless =
            json!({"metadata": {"name": "h"}, "spec": {"type": "ClusterIP", "clusterIP": "None"}});
        assert_eq!(
            cells("v1", "Service", headless),
            json!([
                "h",
                "ClusterIP",
                "None",
                "<none>",
                "<none>",
                "<unknown>",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let ext = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(cells("v1", "Service", ext)[3], "db.example.com");

        let ep = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
            "ports": [{"port": 80}]}]});
        assert_eq!(
            cells("v1", "Endpoints", ep)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
        );
        assert_eq!(
            cells("v1", "Endpoints", json!({"metadata": {"name": "x"}}))[1],
            "<none>"
        );

        let slice = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "metrics"}, {}, {"port": 9}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]});
        assert_eq!(
            cells("discovery.k8s.io/v1", "EndpointSlice", slice),
            json!([
                "web-abc",
                "IPv4",
                "80,metrics,* + 1 more...",
                "10.0.0.1,10.0.0.2",
                "<unknown>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let empty = json!({"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": []});
        assert_eq!(
            cells("discovery.k8s.io/v1", "EndpointSlice", empty)[2..4],
            [json!("<unset>"), json!("<unset>")]
        );
    }

    #[test]
    fn event_and_small_rows() {
        let ev = json!({"metadata": {"name": "web-1.17a", "creationTimestamp": ago(600)},
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{web}"},
            "reason": "Pulled", "message": "Successfully pulled image \"nginx\"\n", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 4, "eventTime": null});
        assert_eq!(
            cells("v1", "Event", ev),
            json!([
                "30s",
                "Normal",
                "Pulled",
                "pod/web-1",
                "spec.containers{web}",
                "kubelet, node-1",
                "Successfully pulled image \"nginx\"",
                "10m",
                4,
                "web-1.17a"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let new_style = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"}, "reason": "Started",
            "eventTime": "2024-01-10T11:59:00.000000Z", "reportingComponent": "cairn-agent", "firstTimestamp": null});
        let c = cells("v1", "Event", new_style);
        assert_eq!(
            (
                c[0].as_str(),
                c[3].as_str(),
                c[5].as_str(),
                c[7].as_str(),
                c[8].as_i64()
            ),
            (
                Some("60s"),
                Some("node"),
                Some("cairn-agent"),
                Some("60s"),
                Some(1)
            )
        );

        assert_eq!(
            cells(
                "v1",
                "ConfigMap",
                json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}})
            )[1],
            3
        );
        assert_eq!(
            cells(
                "v1",
                "Secret",
                json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "YQ=="}})
            ),
            json!(["s", "Opaque", 1, "<unknown>"])
                .as_array()
                .unwrap()
                .clone()
        );
        assert_eq!(
            cells(
                "v1",
                "ServiceAccount",
                json!({"metadata": {"name": "default"}})
            )[1],
            0
        );
        assert_eq!(
            cells(
                "coordination.k8s.io/v1",
                "Lease",
                json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "node-1"}})
            )[1],
            "node-1"
        );
    }

    #[test]
    fn any_shape_is_handled() {
        let shapes = [
            json!(null),
            json!(1),
            json!("x"),
            json!([]),
            json!({"metadata": 1, "spec": [], "status": "x"}),
            json!({"metadata": {"name": 5, "labels": [1]}, "spec": {"containers": 1, "selector": {"matchLabels": [1]}, "ports": [1, {"port": "x"}]},
                "status": {"containerStatuses": [1, {"state": 3}], "conditions": {"a": 1}}, "subsets": [{"ports": 1, "addresses": [1]}],
                "endpoints": [{"addresses": [1, null]}], "series": 3}),
        ];
        for r in crate::registry::RESOURCES {
            let t = table(r, &shapes, now());
            assert_eq!(t["rows"].as_array().unwrap().len(), shapes.len());
            let cols = t["columnDefinitions"].as_array().unwrap().len();
            for row in t["rows"].as_array().unwrap() {
                assert_eq!(row["cells"].as_array().unwrap().len(), cols, "{}", r.kind);
            }
        }
    }
}
