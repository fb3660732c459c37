#!/usr/bin/env python3
"""Generate crates/proto/src/generated.rs: protobuf (k8s-pb) -> Kubernetes JSON converters.

Run from anywhere:  python3 crates/proto/codegen/gen.py && cargo fmt -p cairn-proto
To support another kind, add it to ROOTS, re-run, and classify the scalar fields of the newly
reachable messages (POINTER / ALWAYS) from k8s.io/api types.go; the generator refuses stale
table entries, unknown JSON names, unflagged `json:",inline"` fields and types with a custom Go
JSON form (CUSTOM_JSON).

Inputs (all local, nothing is downloaded):
  * the prost structs of k8s-pb 0.9.0 (Kubernetes 1.35 protos) from ~/.cargo/registry
    -> message and field names, protobuf tags and types;
  * the k8s-openapi 0.29.0 `v1_35` sources from ~/.cargo/registry
    -> the JSON name of every field (from the Kubernetes OpenAPI spec, i.e. the json tags of
       k8s.io/api types.go) and which fields the spec marks as required;
  * the tables below (POINTER, ALWAYS, INLINE) -> Go field shapes that neither of the above
    records.  They were checked against k8s.io/api types.go (core/v1, apps/v1, meta/v1,
    coordination/v1, discovery/v1, autoscaling/v1).

How a field is rendered (mirrors what client-go's JSON encoder writes for the same Go object):
  * scalar, Go pointer (POINTER)            : written when present, even if zero;
  * scalar, Go value with `omitempty`       : written when present and non-zero;
  * scalar, Go value without omitempty      : always written (zero when absent) -- these are
    the OpenAPI "required" fields plus ALWAYS;
  * message                                 : written when present (an empty message -> {}),
    except metav1.Time/MicroTime, whose empty message is Go's zero time (JSON null -> omitted);
  * repeated / map                          : written when non-empty;
  * `json:",inline"` message (INLINE)       : its fields are merged into the parent object.
The generated code destructures every prost struct without `..`, so a k8s-pb upgrade that adds
a field fails to compile until this generator is re-run: no field is ever dropped silently.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oaparse  # noqa: E402
import pbparse  # noqa: E402

OUT = os.path.join(HERE, "..", "src", "generated.rs")
# The field tables live apart from the converters so that the unknown-field scan
# (unknown.rs) reads them without importing the converters, which import it.
SCHEMA_OUT = os.path.join(HERE, "..", "src", "generated_schema.rs")

CORE = "api::core::v1::"
APPS = "api::apps::v1::"
META = "apimachinery::pkg::apis::meta::v1::"

# (apiVersion, kind, message). apiVersion None = any (DeleteOptions is registered in every
# group version and may be sent with any of them).
ROOTS = [
    ("v1", "Namespace", CORE + "Namespace"),
    ("v1", "Service", CORE + "Service"),
    ("v1", "ConfigMap", CORE + "ConfigMap"),
    ("v1", "Secret", CORE + "Secret"),
    ("v1", "ServiceAccount", CORE + "ServiceAccount"),
    ("v1", "Pod", CORE + "Pod"),
    ("v1", "Node", CORE + "Node"),
    ("v1", "Endpoints", CORE + "Endpoints"),
    ("v1", "Event", CORE + "Event"),
    ("v1", "ReplicationController", CORE + "ReplicationController"),
    ("apps/v1", "Deployment", APPS + "Deployment"),
    ("apps/v1", "ReplicaSet", APPS + "ReplicaSet"),
    ("apps/v1", "DaemonSet", APPS + "DaemonSet"),
    ("coordination.k8s.io/v1", "Lease", "api::coordination::v1::Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api::discovery::v1::EndpointSlice"),
    ("autoscaling/v1", "Scale", "api::autoscaling::v1::Scale"),
    (None, "DeleteOptions", META + "DeleteOptions"),
    # the other `kubectl create` subcommands (typed clients, hence protobuf bodies)
    ("v1", "ResourceQuota", CORE + "ResourceQuota"),
    ("v1", "PersistentVolumeClaim", CORE + "PersistentVolumeClaim"),
    ("apps/v1", "StatefulSet", APPS + "StatefulSet"),
    ("batch/v1", "Job", "api::batch::v1::Job"),
    ("batch/v1", "CronJob", "api::batch::v1::CronJob"),
    ("rbac.authorization.k8s.io/v1", "Role", "api::rbac::v1::Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api::rbac::v1::ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api::rbac::v1::RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api::rbac::v1::ClusterRoleBinding"),
    ("networking.k8s.io/v1", "Ingress", "api::networking::v1::Ingress"),
    ("policy/v1", "PodDisruptionBudget", "api::policy::v1::PodDisruptionBudget"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api::scheduling::v1::PriorityClass"),
    ("authentication.k8s.io/v1", "TokenRequest", "api::authentication::v1::TokenRequest"),
    # `kubectl auth can-i|whoami` and other reviewers (typed clients)
    ("authentication.k8s.io/v1", "TokenReview", "api::authentication::v1::TokenReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api::authentication::v1::SelfSubjectReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview",
     "api::authorization::v1::SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview",
     "api::authorization::v1::SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "api::authorization::v1::SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview",
     "api::authorization::v1::LocalSubjectAccessReview"),
    # `kubectl autoscale` and `kubectl certificate approve|deny` (typed clients)
    ("autoscaling/v1", "HorizontalPodAutoscaler", "api::autoscaling::v1::HorizontalPodAutoscaler"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api::autoscaling::v2::HorizontalPodAutoscaler"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest",
     "api::certificates::v1::CertificateSigningRequest"),
]

# Messages with a hand-written converter in src/convert.rs.
SPECIAL = {
    META + "Time": "special_time",
    META + "MicroTime": "special_micro_time",
    "apimachinery::pkg::api::resource::Quantity": "special_quantity",
    "apimachinery::pkg::util::intstr::IntOrString": "special_int_or_string",
    META + "FieldsV1": "special_fields_v1",
    "api::certificates::v1::ExtraValue": "special_extra_value",
    "api::authentication::v1::ExtraValue": "special_authentication_extra_value",
    "api::authorization::v1::ExtraValue": "special_authorization_extra_value",
}

# Go `json:",inline"` embeddings (types.go): the protobuf message has a field holding the
# embedded struct, the JSON object has its fields at the parent level.
INLINE = {
    CORE + "Volume.volume_source",  # VolumeSource `json:",inline"`
    CORE + "Probe.handler",  # ProbeHandler `json:",inline" protobuf:"...name=handler"`
    CORE + "EphemeralContainer.ephemeral_container_common",
    CORE + "ConfigMapVolumeSource.local_object_reference",
    CORE + "ConfigMapProjection.local_object_reference",
    CORE + "SecretProjection.local_object_reference",
    CORE + "ConfigMapKeySelector.local_object_reference",
    CORE + "SecretKeySelector.local_object_reference",
    CORE + "ConfigMapEnvSource.local_object_reference",
    CORE + "SecretEnvSource.local_object_reference",
    "api::networking::v1::IngressRule.ingress_rule_value",  # `json:",inline,omitempty"`
}

# Messages that only exist inlined: take their JSON names from the embedding type's definition.
DEF_OVERRIDE = {
    CORE + "VolumeSource": "io.k8s.api.core.v1.Volume",
    CORE + "ProbeHandler": "io.k8s.api.core.v1.Probe",
    CORE + "EphemeralContainerCommon": "io.k8s.api.core.v1.EphemeralContainer",
    "api::networking::v1::IngressRuleValue": "io.k8s.api.networking.v1.IngressRule",
}

# Scalar fields that are Go pointers (`*int32`, `*bool`, `*string`, `*SomeStringType`): an
# explicit zero value is meaningful and must be kept.
POINTER = {
    CORE + "HostPathVolumeSource": "type",
    CORE + "PersistentVolumeClaimSpec": "storage_class_name volume_mode volume_attributes_class_name",
    CORE + "TypedObjectReference": "api_group namespace",
    CORE + "TypedLocalObjectReference": "api_group",
    CORE + "IscsiVolumeSource": "initiator_name",
    CORE + "FcVolumeSource": "lun",
    CORE + "AzureDiskVolumeSource": "caching_mode fs_type read_only kind",
    CORE + "SecretVolumeSource": "default_mode optional",
    CORE + "SecretProjection": "optional",
    CORE + "ConfigMapVolumeSource": "default_mode optional",
    CORE + "ConfigMapProjection": "optional",
    CORE + "ServiceAccountTokenProjection": "expiration_seconds",
    CORE + "ClusterTrustBundleProjection": "name signer_name optional",
    CORE + "PodCertificateProjection": "max_expiration_seconds",
    CORE + "ProjectedVolumeSource": "default_mode",
    CORE + "DownwardAPIVolumeSource": "default_mode",
    CORE + "DownwardAPIVolumeFile": "mode",
    CORE + "KeyToPath": "mode",
    CORE + "CSIVolumeSource": "read_only fs_type",
    CORE + "VolumeMount": "recursive_read_only mount_propagation",
    CORE + "ConfigMapKeySelector": "optional",
    CORE + "SecretKeySelector": "optional",
    CORE + "FileKeySelector": "optional",
    CORE + "ConfigMapEnvSource": "optional",
    CORE + "SecretEnvSource": "optional",
    CORE + "GrpcAction": "service",
    CORE + "Probe": "termination_grace_period_seconds",
    CORE + "Lifecycle": "stop_signal",
    CORE + "Container": "restart_policy",
    CORE + "EphemeralContainerCommon": "restart_policy",
    CORE + "ContainerStatus": "started stop_signal",
    CORE + "VolumeMountStatus": "recursive_read_only",
    CORE + "Toleration": "toleration_seconds",
    CORE + "PodSpec": (
        "termination_grace_period_seconds active_deadline_seconds automount_service_account_token "
        "share_process_namespace priority runtime_class_name enable_service_links preemption_policy "
        "set_hostname_as_fqdn host_users hostname_override"
    ),
    CORE + "PodResourceClaim": "resource_claim_name resource_claim_template_name",
    CORE + "PodResourceClaimStatus": "resource_claim_name",
    CORE + "TopologySpreadConstraint": "min_domains node_affinity_policy node_taints_policy",
    CORE + "PodSecurityContext": (
        "run_as_user run_as_group run_as_non_root fs_group fs_group_change_policy "
        "supplemental_groups_policy se_linux_change_policy"
    ),
    CORE + "SecurityContext": (
        "privileged run_as_user run_as_group run_as_non_root read_only_root_filesystem "
        "allow_privilege_escalation proc_mount"
    ),
    CORE + "WindowsSecurityContextOptions": "gmsa_credential_spec_name gmsa_credential_spec run_as_user_name host_process",
    CORE + "SeccompProfile": "localhost_profile",
    CORE + "AppArmorProfile": "localhost_profile",
    CORE + "PodDnsConfigOption": "value",
    CORE + "ClientIpConfig": "timeout_seconds",
    CORE + "LoadBalancerIngress": "ip_mode",
    CORE + "PortStatus": "error",
    CORE + "ServiceSpec": (
        "ip_family_policy allocate_load_balancer_node_ports load_balancer_class "
        "internal_traffic_policy traffic_distribution"
    ),
    CORE + "ServicePort": "app_protocol",
    CORE + "ServiceAccount": "automount_service_account_token",
    CORE + "EndpointAddress": "node_name",
    CORE + "EndpointPort": "app_protocol",
    CORE + "NodeRuntimeHandlerFeatures": "recursive_read_only_mounts user_namespaces",
    CORE + "NodeFeatures": "supplemental_groups_policy",
    CORE + "NodeSwapStatus": "capacity",
    CORE + "Secret": "immutable",
    CORE + "ReplicationControllerSpec": "replicas",
    CORE + "ConfigMap": "immutable",
    APPS + "DeploymentSpec": "replicas revision_history_limit progress_deadline_seconds",
    APPS + "DeploymentStatus": "terminating_replicas collision_count",
    APPS + "ReplicaSetSpec": "replicas",
    APPS + "ReplicaSetStatus": "terminating_replicas",
    APPS + "DaemonSetSpec": "revision_history_limit",
    APPS + "DaemonSetStatus": "collision_count",
    META + "ObjectMeta": "deletion_grace_period_seconds",
    META + "OwnerReference": "controller block_owner_deletion",
    META + "DeleteOptions": (
        "grace_period_seconds orphan_dependents propagation_policy "
        "ignore_store_read_error_with_cluster_breaking_potential"
    ),
    META + "Preconditions": "uid resource_version",
    "api::coordination::v1::LeaseSpec": (
        "holder_identity lease_duration_seconds lease_transitions strategy preferred_holder"
    ),
    "api::discovery::v1::Endpoint": "hostname node_name zone",
    "api::discovery::v1::EndpointConditions": "ready serving terminating",
    "api::discovery::v1::EndpointPort": "name protocol port app_protocol",
    CORE + "PersistentVolumeClaimStatus": "current_volume_attributes_class_name",
    APPS + "StatefulSetSpec": "replicas revision_history_limit",
    APPS + "StatefulSetStatus": "collision_count",
    APPS + "RollingUpdateStatefulSetStrategy": "partition",
    "api::batch::v1::JobSpec": (
        "parallelism completions active_deadline_seconds backoff_limit backoff_limit_per_index "
        "max_failed_indexes manual_selector ttl_seconds_after_finished completion_mode suspend "
        "pod_replacement_policy managed_by"
    ),
    "api::batch::v1::JobStatus": "terminating failed_indexes ready",
    "api::batch::v1::CronJobSpec": (
        "time_zone starting_deadline_seconds suspend successful_jobs_history_limit "
        "failed_jobs_history_limit"
    ),
    "api::batch::v1::PodFailurePolicyOnExitCodesRequirement": "container_name",
    "api::batch::v1::SuccessPolicyRule": "succeeded_indexes succeeded_count",
    "api::networking::v1::IngressSpec": "ingress_class_name",
    "api::networking::v1::HttpIngressPath": "path_type",  # `*PathType json:"pathType"`
    "api::networking::v1::IngressPortStatus": "error",
    "api::policy::v1::PodDisruptionBudgetSpec": "unhealthy_pod_eviction_policy",
    "api::scheduling::v1::PriorityClass": "preemption_policy",
    "api::authentication::v1::TokenRequestSpec": "expiration_seconds",
    # k8s.io/api autoscaling/v1, autoscaling/v2 and certificates/v1 types.go
    "api::autoscaling::v1::HorizontalPodAutoscalerSpec": "min_replicas target_cpu_utilization_percentage",
    "api::autoscaling::v1::HorizontalPodAutoscalerStatus": (
        "observed_generation current_cpu_utilization_percentage"
    ),
    "api::autoscaling::v2::HorizontalPodAutoscalerSpec": "min_replicas",
    "api::autoscaling::v2::HorizontalPodAutoscalerStatus": "observed_generation",
    "api::autoscaling::v2::HpaScalingRules": "stabilization_window_seconds select_policy",
    "api::autoscaling::v2::MetricTarget": "average_utilization",
    "api::autoscaling::v2::MetricValueStatus": "average_utilization",
    "api::certificates::v1::CertificateSigningRequestSpec": "expiration_seconds",
}

# Go value fields written even when zero although the OpenAPI spec calls them optional
# (`json:"x"` without omitempty), plus ScaleSpec.replicas, whose zero must survive
# (`kubectl scale --replicas=0`) because a JSON consumer may treat an absent value as "unset".
ALWAYS = {
    CORE + "Event": "reporting_component reporting_instance",
    CORE + "NodeRuntimeHandler": "name",
    "api::autoscaling::v1::ScaleSpec": "replicas",
    "api::autoscaling::v1::HorizontalPodAutoscalerStatus": "current_replicas desired_replicas",
    "api::autoscaling::v2::HorizontalPodAutoscalerStatus": "desired_replicas",
    "api::batch::v1::PodFailurePolicyOnPodConditionsPattern": "status",
    APPS + "StatefulSetOrdinals": "start",
}

# Types whose Go JSON form is not "an object of its protobuf fields". Reaching one of them
# without an entry in SPECIAL would produce wrong JSON, so the generator refuses.
CUSTOM_JSON = {
    META + "Duration",  # Go duration string "1h0m0s"
    "api::certificates::v1::ExtraValue",  # Go []string
    META + "Timestamp",
    "apimachinery::pkg::runtime::RawExtension",  # embedded JSON
    "apimachinery::pkg::runtime::Unknown",
    "apimachinery::pkg::api::resource::QuantityValue",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::Json",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray",
}

SCALARS = {"string", "bool", "int32", "int64", "double", "bytes"}


def split_table(t):
    out = set()
    for msg, fields in t.items():
        for f in fields.split():
            out.add(msg + "." + f)
    return out


def rust_path(msg):
    return "k8s_pb::" + msg


def fn_name(msg):
    s = msg.replace("apimachinery::pkg::", "").replace("api::", "")
    s = s.replace("::", "_")
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s)
    return "conv_" + s.lower()


def rust_ident(f):
    return ("r#" if f["raw"] else "") + f["name"]


def main():
    model = pbparse.load()
    defs = oaparse.load()
    defs_lower = {k.lower(): k for k in defs}
    pointer = split_table(POINTER)
    always = split_table(ALWAYS)

    roots = [r[2] for r in ROOTS]
    msgs = pbparse.reachable(model, roots)
    used_tables = set()

    def definition(msg):
        if msg in DEF_OVERRIDE:
            return defs[DEF_OVERRIDE[msg]]
        mod, name = msg.rsplit("::", 1)
        key = ("io.k8s." + mod.replace("::", ".") + "." + name).lower()
        if key not in defs_lower:
            raise SystemExit(f"no OpenAPI definition for {msg}")
        return defs[defs_lower[key]]

    for m in CUSTOM_JSON:
        if m not in model:
            raise SystemExit(f"CUSTOM_JSON entry {m} is not a k8s-pb message")
    for m in msgs:
        if m in CUSTOM_JSON and m not in SPECIAL:
            raise SystemExit(f"{m} has a custom Go JSON form: write a special converter first")

    index = {m: i for i, m in enumerate(msgs)}
    out = []
    w = out.append
    w("// @generated by crates/proto/codegen/gen.py -- do not edit by hand.")
    w("// Kubernetes 1.35 (k8s-pb 0.9.0 messages, JSON names from k8s-openapi 0.29.0 v1_35).")
    w("#![allow(clippy::too_many_lines, clippy::unnecessary_wraps)]")
    w("")
    w("use serde_json::{Map, Value};")
    w("")
    w("use crate::convert::*;")
    w("use crate::error::ProtoError;")
    w("use crate::path::Path;")
    w("")

    schema_rows = []
    stats = {"fields": 0, "messages": 0}
    for msg in msgs:
        fields = model[msg]
        sch = []
        for f in fields:
            if f["kind"] == "message":
                shape = f"FieldShape::Message({index[f['msg']]})"
            elif f["kind"] == "map" and f["map_v"] == "message":
                shape = f"FieldShape::MapOfMessages({index[f['msg']]})"
            else:
                shape = "FieldShape::Scalar"
            sch.append((f, shape))
        schema_rows.append((msg, sch))
        if msg in SPECIAL:
            continue
        d = definition(msg)
        jnames = {j.lower(): j for j in d["fields"]}
        name = msg.rsplit("::", 1)[1]
        stats["messages"] += 1
        w(f"/// `{msg}`")
        w(f"pub(crate) fn {fn_name(msg)}(m: {rust_path(msg)}, path: &Path<'_>) -> Result<Option<Value>, ProtoError> {{")
        w(f"    let {rust_path(msg)} {{ {', '.join(rust_ident(f) + ': f_' + f['name'] for f in fields)} }} = m;")
        w("    let mut out = Map::new();")
        for f in fields:
            stats["fields"] += 1
            key = msg + "." + f["name"]
            var = "f_" + f["name"]
            if key in INLINE:
                used_tables.add(("inline", key))
                w(f"    inline(&mut out, {var}, path, {fn_name(f['msg'])})?;")
                continue
            k = f["name"].replace("_", "").lower()
            if k not in jnames:
                raise SystemExit(f"no JSON name for {key}")
            j = jnames[k]
            is_req = (j in d["required"] and key not in pointer) or key in always
            if key in always:
                used_tables.add(("always", key))
            kind = f["kind"]
            if kind == "map":
                if f["map_v"] == "string":
                    w(f'    string_map(&mut out, "{j}", {var});')
                elif f["map_v"] == "bytes":
                    w(f'    bytes_map(&mut out, "{j}", {var});')
                elif f["map_v"] == "message":
                    conv = SPECIAL.get(f["msg"], fn_name(f["msg"]))
                    w(f'    message_map(&mut out, "{j}", {var}, path, {conv})?;')
                else:
                    raise SystemExit(f"map value {f['map_v']} unsupported: {key}")
            elif kind == "message":
                conv = SPECIAL.get(f["msg"], fn_name(f["msg"]))
                if f["label"] == "repeated":
                    w(f'    messages(&mut out, "{j}", {var}, path, {conv})?;')
                elif f.get("boxed"):
                    w(f'    message(&mut out, "{j}", {var}.map(|b| *b), path, {conv})?;')
                else:
                    w(f'    message(&mut out, "{j}", {var}, path, {conv})?;')
            elif kind in SCALARS:
                if f["label"] == "repeated":
                    w(f'    scalars(&mut out, "{j}", {var}, path)?;')
                elif key in pointer:
                    used_tables.add(("pointer", key))
                    if is_req:
                        raise SystemExit(f"{key} is both pointer and required")
                    w(f'    pointer(&mut out, "{j}", {var}, path)?;')
                elif is_req:
                    w(f'    required(&mut out, "{j}", {var}, path)?;')
                else:
                    w(f'    omitempty(&mut out, "{j}", {var}, path)?;')
            else:
                raise SystemExit(f"field kind {kind} unsupported: {key}")
        w("    Ok(Some(Value::Object(out)))")
        w("}")
        w("")

    # every table entry must have been used (catches typos and stale entries)
    for key in pointer:
        if ("pointer", key) not in used_tables:
            raise SystemExit(f"POINTER entry {key} matches no reachable scalar field")
    for key in always:
        if ("always", key) not in used_tables:
            raise SystemExit(f"ALWAYS entry {key} matches no reachable scalar field")
    for key in INLINE:
        if ("inline", key) not in used_tables:
            raise SystemExit(f"INLINE entry {key} matches no reachable field")

    # schema for the unknown-field scan, in its own file
    converters_out = out
    out = []
    w = out.append
    w("// @generated by crates/proto/codegen/gen.py -- do not edit by hand.")
    w("// Kubernetes 1.35 (k8s-pb 0.9.0 messages, JSON names from k8s-openapi 0.29.0 v1_35).")
    w("")
    w("use crate::schema::{FieldShape, MsgSchema, SchemaField};")
    w("")
    w("/// Protobuf field tables of every reachable message, indexed as the converters in generated.rs index them.")
    w("pub(crate) static SCHEMA: &[MsgSchema] = &[")
    for msg, sch in schema_rows:
        d = None if msg in SPECIAL else definition(msg)
        jn = {} if d is None else {j.lower(): j for j in d["fields"]}
        items = []
        for f, shape in sch:
            key = msg + "." + f["name"]
            if key in INLINE:
                jname = ""
            else:
                jname = jn.get(f["name"].replace("_", "").lower(), f["name"])
            rep = "true" if f.get("label") == "repeated" else "false"
            items.append(f'SchemaField {{ tag: {f["tag"]}, json: "{jname}", shape: {shape}, repeated: {rep} }}')
        w(f'    MsgSchema {{ name: "{msg.rsplit("::", 1)[1]}", fields: &[{", ".join(items)}] }},')
    w("];")
    with open(SCHEMA_OUT, "w") as fh:
        fh.write("\n".join(out) + "\n")
    out = converters_out
    w = out.append

    # root dispatch
    w("/// The (apiVersion, kind) pairs `decode_object` accepts; `*` = any apiVersion.")
    w("pub const SUPPORTED_KINDS: &[(&str, &str)] = &[")
    for av, kind, _ in ROOTS:
        w(f'    ("{av or "*"}", "{kind}"),')
    w("];")
    w("")
    w("/// Decodes `raw` as the message registered for (apiVersion, kind) and converts it.")
    w("/// `None` when the pair is not supported.")
    w("pub(crate) fn decode_kind(api_version: &str, kind: &str, raw: &[u8]) -> Option<Result<Map<String, Value>, ProtoError>> {")
    w("    Some(match (api_version, kind) {")
    for av, kind, msg in ROOTS:
        pat = f'("{av}", "{kind}")' if av else f'(_, "{kind}")'
        w(f"        {pat} => root::<{rust_path(msg)}>(raw, \"{kind}\", {index[msg]}, {fn_name(msg)}),")
    w("        _ => return None,")
    w("    })")
    w("}")
    with open(OUT, "w") as fh:
        fh.write("\n".join(out) + "\n")
    print(f"wrote {OUT}: {stats['messages']} messages, {stats['fields']} fields, {len(msgs)} schema entries",
          file=sys.stderr)


if __name__ == "__main__":
    main()
