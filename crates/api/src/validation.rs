//! Validation of objects as Kubernetes validates them (pkg/apis/core/validation, apps
//! validation, apimachinery's ObjectMeta and name checks), with Kubernetes' field paths and
//! messages, so a 422 reads the same: `spec.containers[0].image: Required value`.
//!
//! Objects are expected to be normalized ([`crate::schema`]) and defaulted
//! ([`crate::defaults`]) first, as Kubernetes validates the decoded, defaulted object; but any
//! JSON shape is accepted without panicking (wrong types read as absent).
//!
//! Not covered here (the server's): `metadata.resourceVersion` on update, generateName
//! expansion, and copying server-owned values (`uid`, `creationTimestamp`, a service's
//! allocated `clusterIP`/`nodePort`s) from the old object before an update is validated, as
//! Kubernetes' `BeforeUpdate`/`PrepareForUpdate` do. An empty new `uid`, `creationTimestamp` or
//! `clusterIP` is treated as unchanged.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::registry::ResourceInfo;
use crate::schema::quantity_nanos;
use crate::status::{go_repr, Cause};

const IS_NEGATIVE: &str = "must be greater than or equal to 0";
const IMMUTABLE: &str = "field is immutable";
const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// A required enum field: `Required value` when empty, `Unsupported value` when not one of
/// `supported` (listed in the order Kubernetes prints them).
fn require_one_of(errs: &mut Vec<Cause>, path: String, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(Cause::required(path));
    } else if !supported.contains(&value) {
        errs.push(Cause::not_supported(path, value, supported));
    }
}

/// Validate a new object of `resource`.
pub fn validate_create(resource: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    validate_object_meta(resource, obj, &mut errs);
    let o = obj.as_object();
    let empty = Map::new();
    let o = o.unwrap_or(&empty);
    match (resource.group, resource.kind) {
        ("", "Pod") => validate_pod(o, &mut errs),
        ("", "Service") => validate_service(o, &mut errs),
        ("", "ConfigMap") => validate_config_map(o, &mut errs),
        ("", "Secret") => validate_secret(o, &mut errs),
        ("", "Endpoints") => validate_endpoints(o, &mut errs),
        ("", "Event") => validate_event(o, &mut errs),
        ("", "Node") => validate_node(o, &mut errs),
        ("", "Namespace") => validate_namespace(o, &mut errs),
        ("apps", "Deployment") => validate_deployment(o, &mut errs),
        ("apps", "ReplicaSet") => validate_replica_set(o, &mut errs),
        ("apps", "DaemonSet") => validate_daemon_set(o, &mut errs),
        ("discovery.k8s.io", "EndpointSlice") => validate_endpoint_slice(o, &mut errs),
        ("coordination.k8s.io", "Lease") => validate_lease(o, &mut errs),
        ("scheduling.k8s.io", "PriorityClass") => {
            crate::scheduling_validation::validate_priority_class(o, &mut errs)
        }
        _ => {}
    }
    errs
}

/// Validate an update: everything [`validate_create`] checks, plus the fields that may not change.
pub fn validate_update(resource: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    let mut errs = validate_meta_update(old, new);
    errs.extend(validate_create(resource, new));
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    match (resource.group, resource.kind) {
        ("", "Pod") => validate_pod_update(o, n, &mut errs),
        ("", "Service") => validate_service_update(o, n, &mut errs),
        ("", "ConfigMap") => validate_immutable_data(o, n, &["data", "binaryData"], &mut errs),
        ("", "Secret") => {
            if field(n, "type") != field(o, "type") {
                errs.push(Cause::invalid_value(
                    "type",
                    field(n, "type").unwrap_or(&Value::Null),
                    IMMUTABLE,
                ));
            }
            validate_immutable_data(o, n, &["data"], &mut errs);
        }
        ("", "Node") => validate_node_update(o, n, &mut errs),
        ("scheduling.k8s.io", "PriorityClass") => {
            crate::scheduling_validation::validate_priority_class_update(o, n, &mut errs)
        }
        ("apps", "Deployment") | ("apps", "ReplicaSet") | ("apps", "DaemonSet") => {
            let old_sel = path(o, &["spec", "selector"]);
            let new_sel = path(n, &["spec", "selector"]);
            if strip(old_sel) != strip(new_sel) {
                errs.push(Cause::invalid_repr(
                    "spec.selector",
                    &go_selector(new_sel),
                    IMMUTABLE,
                ));
            }
        }
        _ => {}
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Name and label checks (apimachinery/pkg/util/validation)

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let ex: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        ex.join(" or ")
    )
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn is_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_subdomain_chars(s: &str) -> bool {
    s.split('.').all(is_label_chars)
}

/// Errors of `value` as an RFC 1123 label (`my-name`): empty when valid.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_label_chars(value) {
        if is_subdomain_chars(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Errors of `value` as an RFC 1123 subdomain (`example.com`): empty when valid.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !is_subdomain_chars(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Errors of `value` as an RFC 1035 label (`my-name`, starting with a letter): empty when valid.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_label_chars(value) || !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Errors of `value` as a qualified name (a label or annotation key: `[prefix/]name`).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for msg in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Errors of `value` as a label value (empty, or a qualified name part of at most 63 characters).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Errors of `value` as a ConfigMap or Secret key.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// Errors of `value` as an IANA service (port) name.
pub fn is_valid_port_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 15 {
        errs.push(max_len_error(15));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !value.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if value.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

fn port_range_error() -> String {
    "must be between 1 and 65535, inclusive".to_string()
}

fn is_valid_ip(value: &str) -> bool {
    value.parse::<IpAddr>().is_ok()
}

const INVALID_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

// ---------------------------------------------------------------------------------------------
// JSON access helpers: wrong types read as absent

fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn path<'a>(o: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    let mut cur = field(o, keys.first()?)?;
    for k in &keys[1..] {
        cur = cur.as_object().and_then(|m| field(m, k))?;
    }
    Some(cur)
}

fn obj<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    field(o, key).and_then(Value::as_object)
}

fn arr<'a>(o: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    field(o, key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn objs<'a>(
    o: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Map<String, Value>)> {
    arr(o, key)
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_object().map(|m| (i, m)))
}

fn s<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    field(o, key).and_then(Value::as_str).unwrap_or("")
}

fn int(o: &Map<String, Value>, key: &str) -> Option<i64> {
    field(o, key).and_then(Value::as_i64)
}

fn str_map(o: &Map<String, Value>, key: &str) -> BTreeMap<String, String> {
    obj(o, key)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A value with nulls, empty lists and empty objects removed: Kubernetes compares specs
/// semantically, where nil and empty are equal.
fn strip(v: Option<&Value>) -> Value {
    fn go(v: &Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Array(a) if a.is_empty() => None,
            Value::Array(a) => Some(Value::Array(
                a.iter().map(|x| go(x).unwrap_or(Value::Null)).collect(),
            )),
            Value::Object(m) => {
                let out: Map<String, Value> = m
                    .iter()
                    .filter_map(|(k, v)| go(v).map(|v| (k.clone(), v)))
                    .collect();
                if out.is_empty() {
                    None
                } else {
                    Some(Value::Object(out))
                }
            }
            other => Some(other.clone()),
        }
    }
    v.and_then(go).unwrap_or(Value::Null)
}

fn nonnegative(o: &Map<String, Value>, key: &str, p: &str, errs: &mut Vec<Cause>) {
    if let Some(v) = int(o, key) {
        if v < 0 {
            errs.push(Cause::invalid_value(
                format!("{p}.{key}"),
                &Value::from(v),
                IS_NEGATIVE,
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ObjectMeta

#[derive(Clone, Copy)]
enum NameRule {
    Subdomain,
    Label,
    Dns1035,
}

fn name_rule(resource: &ResourceInfo) -> NameRule {
    match (resource.group, resource.kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035,
        _ => NameRule::Subdomain,
    }
}

fn check_name(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    // A generateName prefix may end in '-': the random suffix follows.
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 1]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => is_dns1123_subdomain(name),
        NameRule::Label => is_dns1123_label(name),
        NameRule::Dns1035 => is_dns1035_label(name),
    }
}

fn validate_object_meta(resource: &ResourceInfo, obj: &Value, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let meta = obj
        .as_object()
        .and_then(|o| obj_of(o, "metadata"))
        .unwrap_or(&empty);
    let rule = name_rule(resource);
    let generate_name = s(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in check_name(rule, generate_name, true) {
            errs.push(Cause::invalid("metadata.generateName", generate_name, &msg));
        }
    }
    let name = s(meta, "name");
    if name.is_empty() {
        errs.push(Cause::required_detail(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in check_name(rule, name, false) {
            errs.push(Cause::invalid("metadata.name", name, &msg));
        }
    }
    let namespace = s(meta, "namespace");
    if resource.namespaced {
        if namespace.is_empty() {
            errs.push(Cause::required("metadata.namespace"));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(Cause::invalid("metadata.namespace", namespace, &msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(Cause::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    nonnegative(meta, "generation", "metadata", errs);
    validate_labels(meta, "labels", "metadata.labels", errs);
    validate_annotations(meta, errs);
    for (i, owner) in objs(meta, "ownerReferences") {
        let p = format!("metadata.ownerReferences[{i}]");
        let api_version = s(owner, "apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.apiVersion"),
                version,
                "version must not be empty",
            ));
        }
        if s(owner, "kind").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.kind"),
                "",
                "kind must not be empty",
            ));
        }
        if s(owner, "name").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.name"),
                "",
                "name must not be empty",
            ));
        }
        if s(owner, "uid").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.uid"),
                "",
                "uid must not be empty",
            ));
        }
    }
    let controllers: Vec<String> = objs(meta, "ownerReferences")
        .filter(|(_, o)| field(o, "controller") == Some(&Value::Bool(true)))
        .map(|(_, o)| format!("{}/{}", s(o, "kind"), s(o, "name")))
        .collect();
    if controllers.len() > 1 {
        errs.push(Cause::invalid(
            "metadata.ownerReferences",
            "",
            &format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
    for (i, f) in arr(meta, "finalizers").iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        for msg in is_qualified_name(f) {
            errs.push(Cause::invalid(format!("metadata.finalizers[{i}]"), f, &msg));
        }
    }
}

fn obj_of<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    obj(o, key)
}

fn validate_labels(o: &Map<String, Value>, key: &str, p: &str, errs: &mut Vec<Cause>) {
    let Some(labels) = obj(o, key) else {
        return;
    };
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(Cause::invalid(p, k, &msg));
        }
        let v = v.as_str().unwrap_or("");
        for msg in is_valid_label_value(v) {
            errs.push(Cause::invalid(p, v, &msg));
        }
    }
}

fn validate_annotations(meta: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let Some(annotations) = obj(meta, "annotations") else {
        return;
    };
    let mut total = 0;
    for (k, v) in annotations {
        // Keys are qualified names, case aside.
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(Cause::invalid("metadata.annotations", k, &msg));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE {
        errs.push(Cause::too_long(
            "metadata.annotations",
            TOTAL_ANNOTATION_SIZE,
        ));
    }
}

fn validate_meta_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let om = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let nm = new
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for key in ["name", "namespace"] {
        if s(om, key) != s(nm, key) {
            errs.push(Cause::invalid(
                format!("metadata.{key}"),
                s(nm, key),
                IMMUTABLE,
            ));
        }
    }
    for key in ["uid", "creationTimestamp"] {
        let (o, n) = (s(om, key), s(nm, key));
        if !n.is_empty() && !o.is_empty() && o != n {
            errs.push(Cause::invalid(format!("metadata.{key}"), n, IMMUTABLE));
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Pods

fn validate_pod(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_pod_spec(spec, "spec", errs);
}

fn validate_pod_spec(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let volumes = validate_volumes(spec, p, errs);

    let mut names = HashSet::new();
    for (i, c) in objs(spec, "initContainers") {
        let cp = format!("{p}.initContainers[{i}]");
        validate_container(c, &cp, &volumes, &mut names, errs);
        let rp = s(c, "restartPolicy");
        if !rp.is_empty() && rp != "Always" {
            errs.push(Cause::not_supported(
                format!("{cp}.restartPolicy"),
                rp,
                &["Always"],
            ));
        }
    }
    if arr(spec, "containers").is_empty() {
        errs.push(Cause::required(format!("{p}.containers")));
    }
    for (i, c) in objs(spec, "containers") {
        let cp = format!("{p}.containers[{i}]");
        validate_container(c, &cp, &volumes, &mut names, errs);
        if field(c, "restartPolicy").is_some() {
            errs.push(Cause::forbidden(
                format!("{cp}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    for (i, c) in objs(spec, "ephemeralContainers") {
        let cp = format!("{p}.ephemeralContainers[{i}]");
        validate_container(c, &cp, &volumes, &mut names, errs);
    }

    require_one_of(
        errs,
        format!("{p}.restartPolicy"),
        s(spec, "restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    match s(spec, "dnsPolicy") {
        "" => errs.push(Cause::required(format!("{p}.dnsPolicy"))),
        "ClusterFirst" | "ClusterFirstWithHostNet" | "Default" => {}
        "None" => {
            let has_ns = path(spec, &["dnsConfig", "nameservers"])
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if !has_ns {
                errs.push(Cause::required_detail(
                    format!("{p}.dnsConfig"),
                    "must provide `dnsConfig` when `dnsPolicy` is None",
                ));
            }
        }
        other => errs.push(Cause::not_supported(
            format!("{p}.dnsPolicy"),
            other,
            &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        )),
    }
    validate_labels(spec, "nodeSelector", &format!("{p}.nodeSelector"), errs);
    crate::scheduling_validation::validate_scheduling(spec, p, errs);
    for key in ["serviceAccountName", "nodeName", "schedulerName"] {
        let v = s(spec, key);
        if !v.is_empty() {
            for msg in is_dns1123_subdomain(v) {
                errs.push(Cause::invalid(format!("{p}.{key}"), v, &msg));
            }
        }
    }
    for key in ["hostname", "subdomain"] {
        let v = s(spec, key);
        if !v.is_empty() {
            for msg in is_dns1123_label(v) {
                errs.push(Cause::invalid(format!("{p}.{key}"), v, &msg));
            }
        }
    }
    if let Some(ads) = int(spec, "activeDeadlineSeconds") {
        if !(1..=i64::from(i32::MAX)).contains(&ads) {
            errs.push(Cause::invalid_value(
                format!("{p}.activeDeadlineSeconds"),
                &Value::from(ads),
                &format!("must be between 1 and {}, inclusive", i32::MAX),
            ));
        }
    }
    validate_tolerations(spec, &format!("{p}.tolerations"), errs);
}

/// Validates `volumes` and returns their names.
fn validate_volumes(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in objs(spec, "volumes") {
        let vp = format!("{p}.volumes[{i}]");
        let name = s(v, "name");
        if name.is_empty() {
            errs.push(Cause::required(format!("{vp}.name")));
        } else {
            for msg in is_dns1123_label(name) {
                errs.push(Cause::invalid(format!("{vp}.name"), name, &msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(Cause::duplicate(format!("{vp}.name"), name));
            }
        }
        let sources: Vec<&String> = v
            .iter()
            .filter(|(k, val)| *k != "name" && !val.is_null())
            .map(|(k, _)| k)
            .collect();
        match sources.as_slice() {
            [] => errs.push(Cause::required_detail(
                vp.clone(),
                "must specify a volume type",
            )),
            [_] => {}
            [_, rest @ ..] => {
                for k in rest {
                    errs.push(Cause::forbidden(
                        format!("{vp}.{k}"),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
        if let Some(src) = obj(v, "secret") {
            if s(src, "secretName").is_empty() {
                errs.push(Cause::required(format!("{vp}.secret.secretName")));
            }
            validate_mode(src, &format!("{vp}.secret"), errs);
        }
        if let Some(src) = obj(v, "configMap") {
            if s(src, "name").is_empty() {
                errs.push(Cause::required(format!("{vp}.configMap.name")));
            }
            validate_mode(src, &format!("{vp}.configMap"), errs);
        }
        if let Some(src) = obj(v, "hostPath") {
            if s(src, "path").is_empty() {
                errs.push(Cause::required(format!("{vp}.hostPath.path")));
            }
        }
        if let Some(src) = obj(v, "persistentVolumeClaim") {
            if s(src, "claimName").is_empty() {
                errs.push(Cause::required(format!(
                    "{vp}.persistentVolumeClaim.claimName"
                )));
            }
        }
    }
    names
}

fn validate_mode(src: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    if let Some(mode) = int(src, "defaultMode") {
        if !(0..=0o777).contains(&mode) {
            errs.push(Cause::invalid_value(
                format!("{p}.defaultMode"),
                &Value::from(mode),
                "must be a number between 0 and 0777 (octal), both inclusive",
            ));
        }
    }
}

fn validate_container(
    c: &Map<String, Value>,
    p: &str,
    volumes: &HashSet<String>,
    names: &mut HashSet<String>,
    errs: &mut Vec<Cause>,
) {
    let name = s(c, "name");
    if name.is_empty() {
        errs.push(Cause::required(format!("{p}.name")));
    } else {
        for msg in is_dns1123_label(name) {
            errs.push(Cause::invalid(format!("{p}.name"), name, &msg));
        }
        if !names.insert(name.to_string()) {
            errs.push(Cause::duplicate(format!("{p}.name"), name));
        }
    }
    let image = s(c, "image");
    if image.is_empty() {
        errs.push(Cause::required(format!("{p}.image")));
    } else if image.trim() != image {
        errs.push(Cause::invalid(
            format!("{p}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    require_one_of(
        errs,
        format!("{p}.imagePullPolicy"),
        s(c, "imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    );
    require_one_of(
        errs,
        format!("{p}.terminationMessagePolicy"),
        s(c, "terminationMessagePolicy"),
        &["FallbackToLogsOnError", "File"],
    );

    let mut port_names = HashSet::new();
    for (i, port) in objs(c, "ports") {
        let pp = format!("{p}.ports[{i}]");
        let pname = s(port, "name");
        if !pname.is_empty() {
            for msg in is_valid_port_name(pname) {
                errs.push(Cause::invalid(format!("{pp}.name"), pname, &msg));
            }
            if !port_names.insert(pname.to_string()) {
                errs.push(Cause::duplicate(format!("{pp}.name"), pname));
            }
        }
        match int(port, "containerPort") {
            None | Some(0) => errs.push(Cause::required(format!("{pp}.containerPort"))),
            Some(n) if !(1..=65535).contains(&n) => errs.push(Cause::invalid_value(
                format!("{pp}.containerPort"),
                &Value::from(n),
                &port_range_error(),
            )),
            _ => {}
        }
        if let Some(n) = int(port, "hostPort") {
            if n != 0 && !(1..=65535).contains(&n) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.hostPort"),
                    &Value::from(n),
                    &port_range_error(),
                ));
            }
        }
        validate_protocol(port, &pp, errs);
    }

    for (i, env) in objs(c, "env") {
        let ep = format!("{p}.env[{i}]");
        let name = s(env, "name");
        if name.is_empty() {
            errs.push(Cause::required(format!("{ep}.name")));
        } else if name
            .chars()
            .any(|ch| !ch.is_ascii() || ch.is_ascii_control() || ch == '=')
        {
            errs.push(Cause::invalid(
                format!("{ep}.name"),
                name,
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
    }

    let mut mount_paths = HashSet::new();
    for (i, m) in objs(c, "volumeMounts") {
        let mp = format!("{p}.volumeMounts[{i}]");
        let name = s(m, "name");
        if name.is_empty() {
            errs.push(Cause::required(format!("{mp}.name")));
        } else if !volumes.contains(name) {
            errs.push(Cause::not_found(format!("{mp}.name"), name));
        }
        let mount_path = s(m, "mountPath");
        if mount_path.is_empty() {
            errs.push(Cause::required(format!("{mp}.mountPath")));
        } else if !mount_paths.insert(mount_path.to_string()) {
            errs.push(Cause::invalid(
                format!("{mp}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        let sub_path = s(m, "subPath");
        if sub_path.starts_with('/') {
            errs.push(Cause::invalid(
                format!("{mp}.subPath"),
                sub_path,
                "must be a relative path",
            ));
        } else if sub_path.split('/').any(|seg| seg == "..") {
            errs.push(Cause::invalid(
                format!("{mp}.subPath"),
                sub_path,
                "must not contain '..'",
            ));
        }
    }

    validate_resources(c, p, errs);

    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = obj(c, key) {
            let pp = format!("{p}.{key}");
            let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
                .iter()
                .filter(|h| field(probe, h).is_some())
                .count();
            if handlers == 0 {
                errs.push(Cause::required_detail(
                    pp.clone(),
                    "must specify a handler type",
                ));
            } else if handlers > 1 {
                errs.push(Cause::forbidden(
                    pp.clone(),
                    "may not specify more than 1 handler type",
                ));
            }
            for k in [
                "initialDelaySeconds",
                "timeoutSeconds",
                "periodSeconds",
                "successThreshold",
                "failureThreshold",
            ] {
                nonnegative(probe, k, &pp, errs);
            }
            if key != "readinessProbe" {
                if let Some(st) = int(probe, "successThreshold") {
                    if st != 1 {
                        errs.push(Cause::invalid_value(
                            format!("{pp}.successThreshold"),
                            &Value::from(st),
                            "must be 1",
                        ));
                    }
                }
            }
            for h in ["httpGet", "tcpSocket"] {
                if let Some(port) = path(probe, &[h, "port"]) {
                    validate_port_num_or_name(port, &format!("{pp}.{h}.port"), errs);
                }
            }
        }
    }
}

fn validate_protocol(port: &Map<String, Value>, pp: &str, errs: &mut Vec<Cause>) {
    require_one_of(
        errs,
        format!("{pp}.protocol"),
        s(port, "protocol"),
        &["SCTP", "TCP", "UDP"],
    );
}

fn validate_port_num_or_name(port: &Value, p: &str, errs: &mut Vec<Cause>) {
    match port {
        Value::Number(n) => {
            let v = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&v) {
                errs.push(Cause::invalid_value(p, port, &port_range_error()));
            }
        }
        Value::String(name) => {
            for msg in is_valid_port_name(name) {
                errs.push(Cause::invalid(p, name, &msg));
            }
        }
        _ => {}
    }
}

fn validate_resources(c: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let Some(res) = obj(c, "resources") else {
        return;
    };
    let limits = obj(res, "limits");
    for (kind, list) in [("limits", limits), ("requests", obj(res, "requests"))] {
        let Some(list) = list else { continue };
        for (name, q) in list {
            let q = q.as_str().unwrap_or("");
            let key_path = format!("{p}.resources.{kind}[{name}]");
            match quantity_nanos(q) {
                Some(n) if n < 0 => errs.push(Cause::invalid(key_path, q, IS_NEGATIVE)),
                Some(_) => {}
                None => errs.push(Cause::invalid(key_path, q, "must be a valid quantity")),
            }
        }
    }
    let (Some(limits), Some(requests)) = (limits, obj(res, "requests")) else {
        return;
    };
    for (name, req) in requests {
        let Some(limit) = limits.get(name) else {
            continue;
        };
        let (req_s, limit_s) = (req.as_str().unwrap_or(""), limit.as_str().unwrap_or(""));
        let (Some(r), Some(l)) = (quantity_nanos(req_s), quantity_nanos(limit_s)) else {
            continue;
        };
        let native = !name.contains('/') || name.contains("kubernetes.io/");
        let overcommit = native && !name.starts_with("hugepages-");
        if r != l && !overcommit {
            errs.push(Cause::invalid(
                format!("{p}.resources.requests"),
                req_s,
                &format!("must be equal to {name} limit of {limit_s}"),
            ));
        } else if r > l {
            errs.push(Cause::invalid(
                format!("{p}.resources.requests"),
                req_s,
                &format!("must be less than or equal to {name} limit of {limit_s}"),
            ));
        }
    }
}

fn validate_tolerations(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    for (i, t) in objs(spec, "tolerations") {
        let tp = format!("{p}[{i}]");
        let key = s(t, "key");
        if !key.is_empty() {
            for msg in is_qualified_name(key) {
                errs.push(Cause::invalid(format!("{tp}.key"), key, &msg));
            }
        }
        let operator = s(t, "operator");
        if key.is_empty() && operator != "Exists" {
            errs.push(Cause::invalid(
                format!("{tp}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        match operator {
            "" | "Equal" => {
                let value = s(t, "value");
                for msg in is_valid_label_value(value) {
                    errs.push(Cause::invalid(format!("{tp}.operator"), value, &msg));
                }
            }
            "Exists" => {
                if !s(t, "value").is_empty() {
                    errs.push(Cause::invalid_value(
                        format!("{tp}.operator"),
                        &Value::Object(t.clone()),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(Cause::not_supported(
                format!("{tp}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        let effect = s(t, "effect");
        if field(t, "tolerationSeconds").is_some() && effect != "NoExecute" {
            errs.push(Cause::invalid(
                format!("{tp}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        if !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            errs.push(Cause::not_supported(
                format!("{tp}.effect"),
                effect,
                &["NoExecute", "NoSchedule", "PreferNoSchedule"],
            ));
        }
    }
}

const POD_UPDATE_MESSAGE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn validate_pod_update(old: &Map<String, Value>, new: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let os = obj(old, "spec").unwrap_or(&empty);
    let ns = obj(new, "spec").unwrap_or(&empty);

    for key in ["containers", "initContainers"] {
        if arr(os, key).len() != arr(ns, key).len() {
            errs.push(Cause::forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }

    match (
        int(os, "activeDeadlineSeconds"),
        int(ns, "activeDeadlineSeconds"),
    ) {
        (Some(o), Some(n)) if n < o => {}
        (Some(o), Some(n)) if n > o => {
            errs.push(Cause::invalid_value(
                "spec.activeDeadlineSeconds",
                &Value::from(n),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (Some(_), None) => errs.push(Cause::invalid_value(
            "spec.activeDeadlineSeconds",
            &Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // Tolerations may only be added (and NoExecute ones shortened).
    let new_tols = arr(ns, "tolerations");
    for old_t in arr(os, "tolerations") {
        let found = new_tols.iter().any(|new_t| {
            let mut a = strip(Some(old_t));
            let b = strip(Some(new_t));
            if let (Some(a), Some(secs)) = (a.as_object_mut(), b.get("tolerationSeconds")) {
                a.insert("tolerationSeconds".into(), secs.clone());
            } else if let Some(a) = a.as_object_mut() {
                a.remove("tolerationSeconds");
            }
            a == b
        });
        if !found {
            errs.push(Cause::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return;
        }
    }

    // Everything else must be unchanged: compare with the mutable fields carried over.
    let mut munged = ns.clone();
    for key in ["containers", "initContainers"] {
        if let (Some(new_list), Some(old_list)) = (
            munged.get_mut(key).and_then(Value::as_array_mut),
            os.get(key).and_then(Value::as_array),
        ) {
            for (n, o) in new_list.iter_mut().zip(old_list) {
                if let (Some(n), Some(img)) = (n.as_object_mut(), o.get("image")) {
                    n.insert("image".into(), img.clone());
                }
            }
        }
    }
    crate::scheduling_validation::validate_gates_update(os, ns, errs);
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match os.get(key) {
            Some(v) => munged.insert(key.into(), v.clone()),
            None => munged.remove(key),
        };
    }
    if int(os, "terminationGracePeriodSeconds").is_some_and(|g| g < 0)
        && int(ns, "terminationGracePeriodSeconds") == Some(1)
    {
        if let Some(v) = os.get("terminationGracePeriodSeconds") {
            munged.insert("terminationGracePeriodSeconds".into(), v.clone());
        }
    }
    if strip(Some(&Value::Object(munged))) != strip(Some(&Value::Object(os.clone()))) {
        errs.push(Cause::forbidden("spec", POD_UPDATE_MESSAGE));
    }
}

// ---------------------------------------------------------------------------------------------
// Label selectors and workloads

/// A label selector printed as Go's `%#v` of `v1.LabelSelector` (what Kubernetes shows for an
/// invalid or changed selector).
fn go_selector(sel: Option<&Value>) -> String {
    let empty = Map::new();
    let sel = sel.and_then(Value::as_object).unwrap_or(&empty);
    let labels = match obj(sel, "matchLabels") {
        Some(m) if !m.is_empty() => go_repr(&Value::Object(m.clone())),
        Some(_) => "map[string]string{}".to_string(),
        None => "map[string]string(nil)".to_string(),
    };
    let exprs: Vec<String> = objs(sel, "matchExpressions")
        .map(|(_, e)| {
            let values = match field(e, "values").and_then(Value::as_array) {
                Some(vs) => format!(
                    "[]string{{{}}}",
                    vs.iter().map(go_repr).collect::<Vec<_>>().join(", ")
                ),
                None => "[]string(nil)".to_string(),
            };
            format!(
                "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                go_repr(&Value::from(s(e, "key"))),
                go_repr(&Value::from(s(e, "operator")))
            )
        })
        .collect();
    let exprs = if field(sel, "matchExpressions").is_none() {
        "[]v1.LabelSelectorRequirement(nil)".to_string()
    } else {
        format!("[]v1.LabelSelectorRequirement{{{}}}", exprs.join(", "))
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

pub(crate) fn validate_label_selector(sel: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    validate_labels(sel, "matchLabels", &format!("{p}.matchLabels"), errs);
    for (i, e) in objs(sel, "matchExpressions") {
        let ep = format!("{p}.matchExpressions[{i}]");
        let values = arr(e, "values");
        match s(e, "operator") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(Cause::required_detail(
                        format!("{ep}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(Cause::forbidden(
                        format!("{ep}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(Cause::invalid(
                format!("{ep}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = s(e, "key");
        for msg in is_qualified_name(key) {
            errs.push(Cause::invalid(format!("{ep}.key"), key, &msg));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for msg in is_valid_label_value(v) {
                errs.push(Cause::invalid(format!("{ep}.values[{j}]"), v, &msg));
            }
        }
    }
}

/// Whether `labels` satisfy the label selector `sel` (`matchLabels` and `matchExpressions`).
pub fn selector_matches(sel: &Map<String, Value>, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = obj(sel, "matchLabels").is_none_or(|m| {
        m.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v.as_str().unwrap_or("")))
    });
    labels_ok
        && objs(sel, "matchExpressions").all(|(_, e)| {
            let key = s(e, "key");
            let values: Vec<&str> = arr(e, "values").iter().filter_map(Value::as_str).collect();
            let have = labels.get(key);
            match s(e, "operator") {
                "In" => have.is_some_and(|v| values.contains(&v.as_str())),
                "NotIn" => have.is_none_or(|v| !values.contains(&v.as_str())),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

fn selector_is_empty(sel: &Map<String, Value>) -> bool {
    obj(sel, "matchLabels").is_none_or(Map::is_empty) && arr(sel, "matchExpressions").is_empty()
}

/// Selector and template checks shared by Deployments, ReplicaSets and DaemonSets.
fn validate_workload(spec: &Map<String, Value>, kind_word: &str, errs: &mut Vec<Cause>) {
    let selector = obj(spec, "selector");
    match selector {
        None => errs.push(Cause::required("spec.selector")),
        Some(sel) => {
            validate_label_selector(sel, "spec.selector", errs);
            if selector_is_empty(sel) {
                errs.push(Cause::invalid_repr(
                    "spec.selector",
                    &go_selector(field(spec, "selector")),
                    &format!("empty selector is invalid for {kind_word}"),
                ));
            }
        }
    }
    let Some(template) = obj(spec, "template") else {
        errs.push(Cause::required("spec.template"));
        return;
    };
    let empty = Map::new();
    let tmeta = obj(template, "metadata").unwrap_or(&empty);
    if let Some(sel) = selector {
        if !selector_is_empty(sel) && !selector_matches(sel, &str_map(tmeta, "labels")) {
            errs.push(Cause::invalid_value(
                "spec.template.metadata.labels",
                field(tmeta, "labels").unwrap_or(&Value::Object(Map::new())),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_labels(tmeta, "labels", "spec.template.metadata.labels", errs);
    let tspec = obj(template, "spec").unwrap_or(&empty);
    validate_pod_spec(tspec, "spec.template.spec", errs);
    let rp = s(tspec, "restartPolicy");
    if !rp.is_empty() && rp != "Always" {
        errs.push(Cause::not_supported(
            "spec.template.spec.restartPolicy",
            rp,
            &["Always"],
        ));
    }
    if field(tspec, "activeDeadlineSeconds").is_some() {
        errs.push(Cause::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
}

fn validate_deployment(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    nonnegative(spec, "replicas", "spec", errs);
    validate_workload(spec, "deployment", errs);
    if let Some(strategy) = obj(spec, "strategy") {
        let t = s(strategy, "type");
        match t {
            "Recreate" => {
                if field(strategy, "rollingUpdate").is_some() {
                    errs.push(Cause::forbidden(
                        "spec.strategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'Recreate'",
                    ));
                }
            }
            "RollingUpdate" => {
                if let Some(ru) = obj(strategy, "rollingUpdate") {
                    validate_rolling_update(ru, "spec.strategy.rollingUpdate", true, errs);
                }
            }
            "" => errs.push(Cause::required("spec.strategy.type")),
            other => errs.push(Cause::not_supported(
                "spec.strategy.type",
                other,
                &["Recreate", "RollingUpdate"],
            )),
        }
    }
    for key in [
        "minReadySeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ] {
        nonnegative(spec, key, "spec", errs);
    }
    if let Some(pds) = int(spec, "progressDeadlineSeconds") {
        if pds <= int(spec, "minReadySeconds").unwrap_or(0) {
            errs.push(Cause::invalid_value(
                "spec.progressDeadlineSeconds",
                &Value::from(pds),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

/// `maxUnavailable`/`maxSurge`: non-negative ints or percentages, not both zero.
fn validate_rolling_update(
    ru: &Map<String, Value>,
    p: &str,
    unavailable_max_100: bool,
    errs: &mut Vec<Cause>,
) {
    let mut zero = [false, false];
    for (i, key) in ["maxUnavailable", "maxSurge"].iter().enumerate() {
        let Some(v) = field(ru, key) else {
            zero[i] = true;
            continue;
        };
        let kp = format!("{p}.{key}");
        match v {
            Value::Number(n) => {
                let n = n.as_i64().unwrap_or(-1);
                zero[i] = n == 0;
                if n < 0 {
                    errs.push(Cause::invalid_value(&kp, v, IS_NEGATIVE));
                }
            }
            Value::String(pct) => {
                let digits = pct
                    .strip_suffix('%')
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
                match digits.and_then(|d| d.parse::<u64>().ok()) {
                    None => errs.push(Cause::invalid(
                        &kp,
                        pct,
                        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    )),
                    Some(n) => {
                        zero[i] = n == 0;
                        if unavailable_max_100 && i == 0 && n > 100 {
                            errs.push(Cause::invalid(&kp, pct, "must not be greater than 100%"));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if zero[0] && zero[1] {
        errs.push(Cause::invalid_value(
            format!("{p}.maxUnavailable"),
            field(ru, "maxUnavailable").unwrap_or(&Value::from(0)),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

fn validate_replica_set(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    nonnegative(spec, "replicas", "spec", errs);
    nonnegative(spec, "minReadySeconds", "spec", errs);
    // Kubernetes says "deployment" here too.
    validate_workload(spec, "deployment", errs);
}

fn validate_daemon_set(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_workload(spec, "daemonset", errs);
    nonnegative(spec, "minReadySeconds", "spec", errs);
    nonnegative(spec, "revisionHistoryLimit", "spec", errs);
    if let Some(strategy) = obj(spec, "updateStrategy") {
        match s(strategy, "type") {
            "OnDelete" => {}
            "RollingUpdate" => {
                if let Some(ru) = obj(strategy, "rollingUpdate") {
                    validate_rolling_update(ru, "spec.updateStrategy.rollingUpdate", true, errs);
                }
            }
            "" => errs.push(Cause::required("spec.updateStrategy.type")),
            other => errs.push(Cause::not_supported(
                "spec.updateStrategy.type",
                other,
                &["OnDelete", "RollingUpdate"],
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Services

fn validate_service(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let svc_type = s(spec, "type");
    let cluster_ip = s(spec, "clusterIP");
    let headless = cluster_ip == "None";
    match svc_type {
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName" => {}
        "" => errs.push(Cause::required("spec.type")),
        other => errs.push(Cause::not_supported(
            "spec.type",
            other,
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        )),
    }
    let ports = arr(spec, "ports");
    if svc_type == "ExternalName" {
        if !cluster_ip.is_empty() {
            errs.push(Cause::forbidden(
                "spec.clusterIP",
                "may not be set for ExternalName services",
            ));
        }
        let name = s(spec, "externalName");
        if name.is_empty() {
            errs.push(Cause::required("spec.externalName"));
        } else {
            let trimmed = name.strip_suffix('.').unwrap_or(name);
            let mut msgs = is_dns1123_subdomain(trimmed);
            if msgs.is_empty() && !trimmed.contains('.') {
                msgs.push(
                    "should be a domain with at least two segments separated by dots".to_string(),
                );
            }
            for msg in msgs {
                errs.push(Cause::invalid("spec.externalName", trimmed, &msg));
            }
        }
    } else if ports.is_empty() && !headless {
        errs.push(Cause::required("spec.ports"));
    }

    let require_name = ports.len() > 1;
    let mut names = HashSet::new();
    let mut node_ports = HashSet::new();
    for (i, port) in objs(spec, "ports") {
        let pp = format!("spec.ports[{i}]");
        let name = s(port, "name");
        if require_name && name.is_empty() {
            errs.push(Cause::required(format!("{pp}.name")));
        } else if !name.is_empty() {
            for msg in is_dns1123_label(name) {
                errs.push(Cause::invalid(format!("{pp}.name"), name, &msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(Cause::duplicate(format!("{pp}.name"), name));
            }
        }
        let num = int(port, "port").unwrap_or(0);
        if !(1..=65535).contains(&num) {
            errs.push(Cause::invalid_value(
                format!("{pp}.port"),
                &Value::from(num),
                &port_range_error(),
            ));
        }
        validate_protocol(port, &pp, errs);
        if let Some(tp) = field(port, "targetPort") {
            validate_port_num_or_name(tp, &format!("{pp}.targetPort"), errs);
        }
        if let Some(np) = int(port, "nodePort").filter(|n| *n != 0) {
            if svc_type == "ClusterIP" {
                errs.push(Cause::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if svc_type == "ExternalName" {
                errs.push(Cause::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ExternalName'",
                ));
            } else if !(30000..=32767).contains(&np) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.nodePort"),
                    &Value::from(np),
                    "provided port is not in the valid range. The range of valid ports is 30000-32767",
                ));
            } else if !node_ports.insert((np, s(port, "protocol").to_string())) {
                errs.push(Cause::duplicate(format!("{pp}.nodePort"), &np.to_string()));
            }
        }
    }

    if svc_type != "ExternalName" {
        let mut ips: Vec<String> = arr(spec, "clusterIPs")
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect();
        if ips.is_empty() && !cluster_ip.is_empty() {
            ips.push(cluster_ip.to_string());
        }
        if !cluster_ip.is_empty() && ips.first().is_some_and(|f| f != cluster_ip) {
            errs.push(Cause::invalid_value(
                "spec.clusterIPs",
                field(spec, "clusterIPs").unwrap_or(&Value::Null),
                "first value must match `clusterIP`",
            ));
        }
        for (i, ip) in ips.iter().enumerate() {
            if i == 0 && ip == "None" {
                if ips.len() > 1 {
                    errs.push(Cause::invalid_value(
                        "spec.clusterIPs",
                        field(spec, "clusterIPs").unwrap_or(&Value::Null),
                        "'None' must be the first and only value",
                    ));
                }
                continue;
            }
            if !is_valid_ip(ip) {
                errs.push(Cause::invalid(
                    format!("spec.clusterIPs[{i}]"),
                    ip,
                    INVALID_IP,
                ));
            }
        }
        if ips.len() > 2 {
            errs.push(Cause::invalid_value(
                "spec.clusterIPs",
                field(spec, "clusterIPs").unwrap_or(&Value::Null),
                "may only hold up to 2 values",
            ));
        }
        for (i, fam) in arr(spec, "ipFamilies").iter().enumerate() {
            let fam = fam.as_str().unwrap_or("");
            if fam != "IPv4" && fam != "IPv6" {
                errs.push(Cause::not_supported(
                    format!("spec.ipFamilies[{i}]"),
                    fam,
                    &["IPv4", "IPv6"],
                ));
            }
        }
        let policy = s(spec, "ipFamilyPolicy");
        if !policy.is_empty()
            && !matches!(
                policy,
                "SingleStack" | "PreferDualStack" | "RequireDualStack"
            )
        {
            errs.push(Cause::not_supported(
                "spec.ipFamilyPolicy",
                policy,
                &["PreferDualStack", "RequireDualStack", "SingleStack"],
            ));
        }
    }

    for (i, ip) in arr(spec, "externalIPs").iter().enumerate() {
        let ip = ip.as_str().unwrap_or("");
        if !is_valid_ip(ip) {
            errs.push(Cause::invalid(
                format!("spec.externalIPs[{i}]"),
                ip,
                INVALID_IP,
            ));
        }
    }
    match s(spec, "sessionAffinity") {
        "" => errs.push(Cause::required("spec.sessionAffinity")),
        "None" | "ClientIP" => {}
        other => errs.push(Cause::not_supported(
            "spec.sessionAffinity",
            other,
            &["ClientIP", "None"],
        )),
    }
    if let Some(t) = path(
        spec,
        &["sessionAffinityConfig", "clientIP", "timeoutSeconds"],
    )
    .and_then(Value::as_i64)
    {
        if !(1..=86400).contains(&t) {
            errs.push(Cause::invalid_value(
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                &Value::from(t),
                "must be greater than 0 and less than 86400",
            ));
        }
    }
    validate_labels(spec, "selector", "spec.selector", errs);
    let etp = s(spec, "externalTrafficPolicy");
    let externally_accessible = matches!(svc_type, "NodePort" | "LoadBalancer")
        || (svc_type == "ClusterIP" && !arr(spec, "externalIPs").is_empty());
    if !etp.is_empty() {
        if !externally_accessible {
            errs.push(Cause::invalid(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            ));
        } else if etp != "Cluster" && etp != "Local" {
            errs.push(Cause::not_supported(
                "spec.externalTrafficPolicy",
                etp,
                &["Cluster", "Local"],
            ));
        }
    }
    let itp = s(spec, "internalTrafficPolicy");
    if !itp.is_empty() && itp != "Cluster" && itp != "Local" {
        errs.push(Cause::not_supported(
            "spec.internalTrafficPolicy",
            itp,
            &["Cluster", "Local"],
        ));
    }
}

fn validate_service_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let empty = Map::new();
    let os = obj(old, "spec").unwrap_or(&empty);
    let ns = obj(new, "spec").unwrap_or(&empty);
    // Changing to or from ExternalName may drop or allocate the cluster IP.
    if s(os, "type") == "ExternalName" || s(ns, "type") == "ExternalName" {
        return;
    }
    let first_ip = |spec: &Map<String, Value>| -> String {
        arr(spec, "clusterIPs")
            .first()
            .and_then(Value::as_str)
            .unwrap_or_else(|| s(spec, "clusterIP"))
            .to_string()
    };
    let (old_ip, new_ip) = (first_ip(os), first_ip(ns));
    if !old_ip.is_empty() && !new_ip.is_empty() && old_ip != new_ip {
        errs.push(Cause::invalid(
            "spec.clusterIPs[0]",
            &new_ip,
            "may not change once set",
        ));
    }
    let first_family = |spec: &Map<String, Value>| {
        arr(spec, "ipFamilies")
            .first()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (old_fam, new_fam) = (first_family(os), first_family(ns));
    if !old_fam.is_empty() && !new_fam.is_empty() && old_fam != new_fam {
        errs.push(Cause::invalid(
            "spec.ipFamilies[0]",
            &new_fam,
            "may not change once set",
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// ConfigMaps, Secrets and the rest

fn validate_data_keys(o: &Map<String, Value>, key: &str, errs: &mut Vec<Cause>) -> usize {
    let mut total = 0;
    if let Some(data) = obj(o, key) {
        for (k, v) in data {
            for msg in is_config_map_key(k) {
                errs.push(Cause::invalid(format!("{key}[{k}]"), k, &msg));
            }
            total += v.as_str().map_or(0, str::len);
        }
    }
    total
}

fn validate_config_map(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let mut total = validate_data_keys(o, "data", errs);
    total += validate_data_keys(o, "binaryData", errs);
    if let (Some(data), Some(binary)) = (obj(o, "data"), obj(o, "binaryData")) {
        for k in data.keys().filter(|k| binary.contains_key(*k)) {
            errs.push(Cause::invalid(
                format!("data[{k}]"),
                k,
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > MAX_SECRET_SIZE {
        errs.push(Cause::too_long("", MAX_SECRET_SIZE));
    }
}

fn validate_secret(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let mut total = 0;
    let empty = Map::new();
    let data = obj(o, "data").unwrap_or(&empty);
    for (k, v) in data {
        for msg in is_config_map_key(k) {
            errs.push(Cause::invalid(format!("data[{k}]"), k, &msg));
        }
        let encoded = v.as_str().unwrap_or("");
        match decoded_len(encoded) {
            Some(n) => total += n,
            None => errs.push(Cause::invalid(
                format!("data[{k}]"),
                "<secret contents redacted>",
                "must be valid base64",
            )),
        }
    }
    if total > MAX_SECRET_SIZE {
        errs.push(Cause::too_long("data", MAX_SECRET_SIZE));
    }
    let has = |k: &str| {
        data.get(k)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
    };
    match s(o, "type") {
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !data.contains_key(k) {
                    errs.push(Cause::required(format!("data[{k}]")));
                }
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(Cause::required("data[username]"));
            errs.push(Cause::required("data[password]"));
        }
        "kubernetes.io/ssh-auth" if !has("ssh-privatekey") => {
            errs.push(Cause::required("data[ssh-privatekey]"));
        }
        "kubernetes.io/dockerconfigjson" if !data.contains_key(".dockerconfigjson") => {
            errs.push(Cause::required("data[.dockerconfigjson]"));
        }
        "kubernetes.io/dockercfg" if !data.contains_key(".dockercfg") => {
            errs.push(Cause::required("data[.dockercfg]"));
        }
        "kubernetes.io/service-account-token" => {
            let name = path(
                o,
                &[
                    "metadata",
                    "annotations",
                    "kubernetes.io/service-account.name",
                ],
            )
            .and_then(Value::as_str)
            .unwrap_or("");
            if name.is_empty() {
                errs.push(Cause::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        _ => {}
    }
}

/// Length of standard, padded base64 once decoded; `None` if it is not valid base64.
fn decoded_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    // Padded base64 comes in blocks of four.
    if b.len() & 3 != 0 {
        return None;
    }
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    if pad > 2 {
        return None;
    }
    let body = &b[..b.len() - pad];
    if !body
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
    {
        return None;
    }
    Some(b.len() / 4 * 3 - pad)
}

fn validate_immutable_data(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    keys: &[&str],
    errs: &mut Vec<Cause>,
) {
    if field(old, "immutable") != Some(&Value::Bool(true)) {
        return;
    }
    if field(new, "immutable") != Some(&Value::Bool(true)) {
        errs.push(Cause::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    for key in keys {
        if strip(field(old, key)) != strip(field(new, key)) {
            errs.push(Cause::forbidden(*key, IMMUTABLE_WHEN_SET));
        }
    }
}

fn validate_namespace(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for (i, f) in arr(
        path(o, &["spec"])
            .and_then(Value::as_object)
            .unwrap_or(&Map::new()),
        "finalizers",
    )
    .iter()
    .enumerate()
    {
        let f = f.as_str().unwrap_or("");
        for msg in is_qualified_name(f) {
            errs.push(Cause::invalid(format!("spec.finalizers[{i}]"), f, &msg));
        }
    }
}

fn validate_node(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    for (i, t) in objs(spec, "taints") {
        let tp = format!("spec.taints[{i}]");
        let key = s(t, "key");
        if key.is_empty() {
            errs.push(Cause::required(format!("{tp}.key")));
        }
        for msg in is_qualified_name(key)
            .into_iter()
            .filter(|_| !key.is_empty())
        {
            errs.push(Cause::invalid(format!("{tp}.key"), key, &msg));
        }
        match s(t, "effect") {
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
            "" => errs.push(Cause::required(format!("{tp}.effect"))),
            other => errs.push(Cause::not_supported(
                format!("{tp}.effect"),
                other,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            )),
        }
    }
    for (i, cidr) in arr(spec, "podCIDRs").iter().enumerate() {
        let c = cidr.as_str().unwrap_or("");
        if c.parse::<ipnetwork::IpNetwork>().is_err() {
            errs.push(Cause::invalid(
                format!("spec.podCIDRs[{i}]"),
                c,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
    }
}

fn validate_node_update(old: &Map<String, Value>, new: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let old_cidrs = path(old, &["spec", "podCIDRs"])
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    let new_cidrs = path(new, &["spec", "podCIDRs"]);
    if let Some(o) = old_cidrs {
        if new_cidrs.and_then(Value::as_array) != Some(o) {
            errs.push(Cause::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
    }
}

/// `legacyValidateEvent` for core/v1 Events: namespaces must agree; events with `eventTime`
/// (the new style) must also say who reported them, which action and why.
fn validate_event(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let ns = path(o, &["metadata", "namespace"])
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved_ns = path(o, &["involvedObject", "namespace"])
        .and_then(Value::as_str)
        .unwrap_or("");
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if field(o, "eventTime").is_none() {
        let ok = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved_ns
        };
        if !ok {
            errs.push(mismatch());
        }
        return;
    }
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        errs.push(mismatch());
    }
    let controller = s(o, "reportingComponent");
    if controller.is_empty() {
        errs.push(Cause::required("reportingComponent"));
    }
    for msg in is_qualified_name(controller) {
        errs.push(Cause::invalid("reportingComponent", controller, &msg));
    }
    let limits = [("reportingInstance", 128), ("action", 128), ("reason", 128)];
    for (key, max) in limits {
        let v = s(o, key);
        if v.is_empty() {
            errs.push(Cause::required(key));
        } else if v.len() > max {
            errs.push(Cause::invalid(
                key,
                "",
                &format!("can have at most {max} characters"),
            ));
        }
    }
    if s(o, "message").len() > 1024 {
        errs.push(Cause::invalid(
            "message",
            "",
            "can have at most 1024 characters",
        ));
    }
}

fn validate_endpoints(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for (i, subset) in objs(o, "subsets") {
        let sp = format!("subsets[{i}]");
        for key in ["addresses", "notReadyAddresses"] {
            for (j, addr) in objs(subset, key) {
                let ip = s(addr, "ip");
                if !is_valid_ip(ip) {
                    errs.push(Cause::invalid(
                        format!("{sp}.{key}[{j}].ip"),
                        ip,
                        "must be a valid IP address",
                    ));
                }
            }
        }
        for (j, port) in objs(subset, "ports") {
            let pp = format!("{sp}.ports[{j}]");
            let name = s(port, "name");
            if !name.is_empty() {
                for msg in is_dns1123_label(name) {
                    errs.push(Cause::invalid(format!("{pp}.name"), name, &msg));
                }
            }
            let num = int(port, "port").unwrap_or(0);
            if !(1..=65535).contains(&num) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.port"),
                    &Value::from(num),
                    &port_range_error(),
                ));
            }
            validate_protocol(port, &pp, errs);
        }
    }
}

fn validate_endpoint_slice(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let address_type = s(o, "addressType");
    match address_type {
        "IPv4" | "IPv6" | "FQDN" => {}
        "" => errs.push(Cause::required("addressType")),
        other => errs.push(Cause::not_supported(
            "addressType",
            other,
            &["FQDN", "IPv4", "IPv6"],
        )),
    }
    for (i, ep) in objs(o, "endpoints") {
        let addrs = arr(ep, "addresses");
        if addrs.is_empty() {
            errs.push(Cause::required(format!("endpoints[{i}].addresses")));
        } else if addrs.len() > 100 {
            errs.push(Cause::invalid(
                format!("endpoints[{i}].addresses"),
                "",
                "must have at most 100 items",
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            let a = a.as_str().unwrap_or("");
            let ok = match address_type {
                "IPv4" => a.parse::<std::net::Ipv4Addr>().is_ok(),
                "IPv6" => a.parse::<std::net::Ipv6Addr>().is_ok(),
                _ => is_dns1123_subdomain(a).is_empty(),
            };
            if !ok {
                let msg = match address_type {
                    "IPv4" => "must be a valid IPv4 address",
                    "IPv6" => "must be a valid IPv6 address",
                    _ => "must be a valid DNS subdomain",
                };
                errs.push(Cause::invalid(
                    format!("endpoints[{i}].addresses[{j}]"),
                    a,
                    msg,
                ));
            }
        }
    }
    for (i, port) in objs(o, "ports") {
        let pp = format!("ports[{i}]");
        if let Some(num) = int(port, "port") {
            if !(1..=65535).contains(&num) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.port"),
                    &Value::from(num),
                    &port_range_error(),
                ));
            }
        }
        let proto = s(port, "protocol");
        if !proto.is_empty() && !matches!(proto, "TCP" | "UDP" | "SCTP") {
            errs.push(Cause::not_supported(
                format!("{pp}.protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
}

fn validate_lease(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if let Some(d) = int(spec, "leaseDurationSeconds") {
        if d <= 0 {
            errs.push(Cause::invalid_value(
                "spec.leaseDurationSeconds",
                &Value::from(d),
                "must be greater than 0",
            ));
        }
    }
    nonnegative(spec, "leaseTransitions", "spec", errs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::apply_defaults;
    use crate::registry::find_by_kind;
    use serde_json::json;

    fn res(api_version: &str, kind: &str) -> &'static ResourceInfo {
        find_by_kind(api_version, kind).unwrap()
    }

    /// Default then validate, as the server does.
    fn create(api_version: &str, kind: &str, mut obj: Value) -> Vec<Cause> {
        apply_defaults(res(api_version, kind), &mut obj);
        validate_create(res(api_version, kind), &obj)
    }

    fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
        causes
            .iter()
            .map(|c| (c.reason, c.field.as_str()))
            .collect()
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    }

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    }

    #[test]
    fn name_checks() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert_eq!(
            is_dns1123_subdomain("Bad_Name"),
            vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(
            is_dns1123_label("my_name"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(is_dns1035_label("web").is_empty());
        assert_eq!(is_dns1035_label("1web").len(), 1);
        assert!(is_qualified_name("app.kubernetes.io/name").is_empty());
        assert!(is_qualified_name("Name_1").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert_eq!(is_qualified_name("-x"), vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]);
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_3").is_empty());
        assert_eq!(is_valid_label_value("bad value").len(), 1);
        assert!(is_config_map_key("key.name").is_empty());
        assert_eq!(is_config_map_key("..a"), vec!["must not start with '..'"]);
        assert_eq!(is_config_map_key("a b").len(), 1);
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(
            is_valid_port_name("8080"),
            vec!["must contain at least one letter (a-z)"]
        );
    }

    #[test]
    fn metadata_causes() {
        let causes = create(
            "v1",
            "Pod",
            json!({"metadata": {"name": "Bad_Name", "namespace": "default",
            "labels": {"ok": "yes", "bad key": "x", "k": "bad value"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        assert_eq!(
            fields(&causes),
            vec![
                ("FieldValueInvalid", "metadata.name"),
                ("FieldValueInvalid", "metadata.labels"),
                ("FieldValueInvalid", "metadata.labels")
            ]
        );
        assert!(causes[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));

        let causes = create("v1", "ConfigMap", json!({"metadata": {}}));
        assert_eq!(
            causes[0].describe(),
            "metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(causes[1].describe(), "metadata.namespace: Required value");

        let causes = create(
            "v1",
            "Namespace",
            json!({"metadata": {"name": "a.b", "namespace": "x"}}),
        );
        assert_eq!(
            causes[0].describe(),
            "metadata.name: Invalid value: \"a.b\": must not contain dots"
        );
        assert_eq!(
            causes[1].describe(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );

        let causes = create(
            "v1",
            "Service",
            json!({"metadata": {"name": "1svc", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]}}),
        );
        assert_eq!(
            fields(&causes),
            vec![("FieldValueInvalid", "metadata.name")]
        );
        assert!(causes[0].message.contains("a DNS-1035 label"));

        // generateName prefixes may end in '-'.
        assert!(create(
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "cfg-x1", "generateName": "cfg-", "namespace": "d"}})
        )
        .is_empty());

        let big = "x".repeat(TOTAL_ANNOTATION_SIZE);
        let causes = create(
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c", "namespace": "d", "annotations": {"a": big}}}),
        );
        assert_eq!(
            causes[0].describe(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn pod_causes() {
        assert!(create(
            "v1",
            "Pod",
            pod(json!({"containers": [{"name": "web", "image": "nginx"}]}))
        )
        .is_empty());

        let causes = create("v1", "Pod", pod(json!({"containers": []})));
        assert_eq!(causes[0].describe(), "spec.containers: Required value");

        let causes = create(
            "v1",
            "Pod",
            pod(json!({
            "restartPolicy": "Sometimes",
            "dnsPolicy": "Bogus",
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "web"},
                {"name": "web", "image": "nginx", "imagePullPolicy": "Maybe",
                 "ports": [{"containerPort": 70000, "protocol": "HTTP"}],
                 "volumeMounts": [{"name": "missing", "mountPath": "/x"}],
                 "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}
            ]})),
        );
        let got: Vec<String> = causes.iter().map(Cause::describe).collect();
        assert_eq!(
            got,
            vec![
                "spec.volumes[1].name: Duplicate value: \"data\"",
                "spec.containers[0].image: Required value",
                "spec.containers[1].name: Duplicate value: \"web\"",
                "spec.containers[1].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
                "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[1].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.containers[1].volumeMounts[0].name: Not found: \"missing\"",
                "spec.containers[1].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.dnsPolicy: Unsupported value: \"Bogus\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"",
            ]
        );
        assert_eq!(causes[6].reason, "FieldValueNotFound");
    }

    #[test]
    fn workload_causes() {
        assert!(create(
            "apps/v1",
            "Deployment",
            deployment(
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "web"})
            )
        )
        .is_empty());

        let causes = create(
            "apps/v1",
            "Deployment",
            deployment(
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "api"}),
            ),
        );
        assert_eq!(
            causes.iter().map(Cause::describe).collect::<Vec<_>>(),
            vec!["spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"]
        );

        let mut d = deployment(json!(null), json!({"app": "web"}));
        d["spec"]["replicas"] = json!(-1);
        d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
        let got: Vec<String> = create("apps/v1", "Deployment", d)
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.selector: Required value",
                "spec.template.spec.containers[0].image: Required value",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ]
        );

        let causes = create(
            "apps/v1",
            "Deployment",
            deployment(json!({}), json!({"app": "web"})),
        );
        assert_eq!(
            causes[0].describe(),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        );

        let exprs = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                                 {"key": "legacy", "operator": "DoesNotExist"}]});
        assert!(create(
            "apps/v1",
            "Deployment",
            deployment(exprs.clone(), json!({"tier": "b"}))
        )
        .is_empty());
        assert_eq!(
            create(
                "apps/v1",
                "Deployment",
                deployment(exprs, json!({"tier": "b", "legacy": "1"}))
            )
            .len(),
            1
        );

        let mut ds = deployment(
            json!({"matchLabels": {"app": "agent"}}),
            json!({"app": "agent"}),
        );
        ds["kind"] = json!("DaemonSet");
        assert!(create("apps/v1", "DaemonSet", ds).is_empty());
        let mut rs = deployment(
            json!({"matchLabels": {"app": "agent"}}),
            json!({"app": "other"}),
        );
        rs["kind"] = json!("ReplicaSet");
        assert_eq!(create("apps/v1", "ReplicaSet", rs).len(), 1);
    }

    #[test]
    fn service_causes() {
        let svc = |spec: Value| json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec});
        assert!(create(
            "v1",
            "Service",
            svc(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}))
        )
        .is_empty());
        assert!(create("v1", "Service", svc(json!({"clusterIP": "None"}))).is_empty());
        let got: Vec<String> = create("v1", "Service", svc(json!({})))
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(got, vec!["spec.ports: Required value"]);
        let got: Vec<String> = create("v1", "Service", svc(json!({"type": "Magic", "clusterIP": "10.0.0.300",
            "ports": [{"port": 0, "name": "a"}, {"port": 81}, {"port": 82, "name": "a", "nodePort": 30001}]})))
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                // Defaulted from the port, as Kubernetes does, and so invalid too.
                "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[1].name: Required value",
                "spec.ports[2].name: Duplicate value: \"a\"",
                "spec.clusterIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ]
        );
        let got: Vec<String> = create(
            "v1",
            "Service",
            svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]})),
        )
        .iter()
        .map(Cause::describe)
        .collect();
        assert_eq!(got, vec!["spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"]);
        let got: Vec<String> = create(
            "v1",
            "Service",
            svc(json!({"ports": [{"port": 80, "nodePort": 30080}]})),
        )
        .iter()
        .map(Cause::describe)
        .collect();
        assert_eq!(
            got,
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        assert!(create(
            "v1",
            "Service",
            svc(json!({"type": "ExternalName", "externalName": "db.example.com"}))
        )
        .is_empty());
    }

    #[test]
    fn config_and_secret_causes() {
        let causes = create(
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c", "namespace": "d"},
            "data": {"good": "1", "bad key": "2"}}),
        );
        assert_eq!(
            fields(&causes),
            vec![("FieldValueInvalid", "data[bad key]")]
        );
        let causes = create(
            "v1",
            "Secret",
            json!({"metadata": {"name": "s", "namespace": "d"},
            "data": {"k": "not base64"}}),
        );
        assert_eq!(
            causes[0].describe(),
            "data[k]: Invalid value: \"<secret contents redacted>\": must be valid base64"
        );
        let causes = create(
            "v1",
            "Secret",
            json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": "YQ=="}}),
        );
        assert_eq!(causes[0].describe(), "data[tls.key]: Required value");
    }

    #[test]
    fn event_causes() {
        let ev = |ns: &str, extra: Value| {
            let mut e = json!({"metadata": {"name": "e.1", "namespace": ns},
                "involvedObject": {"kind": "Node", "name": "node-1"}, "reason": "Ready"});
            for (k, v) in extra.as_object().unwrap() {
                e[k] = v.clone();
            }
            e
        };
        assert!(create("v1", "Event", ev("default", json!({}))).is_empty());
        assert_eq!(
            create("v1", "Event", ev("dev", json!({})))[0].describe(),
            "involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
        );
        let got: Vec<String> = create(
            "v1",
            "Event",
            ev(
                "default",
                json!({"eventTime": "2024-01-02T03:04:05.000000Z"}),
            ),
        )
        .iter()
        .map(Cause::describe)
        .collect();
        // Kubernetes also reports the empty component as an invalid qualified name.
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], "reportingComponent: Required value");
        assert_eq!(
            got[3..],
            [
                "reportingInstance: Required value",
                "action: Required value"
            ]
        );
        assert!(create(
            "v1",
            "Event",
            ev(
                "default",
                json!({"eventTime": "2024-01-02T03:04:05.000000Z",
            "reportingComponent": "cairn/agent", "reportingInstance": "node-1", "action": "Start"})
            )
        )
        .is_empty());
    }

    #[test]
    fn immutable_updates() {
        let p = res("v1", "Pod");
        let mut old = pod(json!({"containers": [{"name": "web", "image": "nginx:1"}]}));
        old["metadata"]["uid"] = json!("u1");
        apply_defaults(p, &mut old);

        // Image changes and added tolerations are fine.
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:2");
        new["spec"]["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"}));
        new["metadata"]["labels"] = json!({"x": "y"});
        assert!(
            validate_update(p, &old, &new).is_empty(),
            "{:?}",
            validate_update(p, &old, &new)
        );

        let mut new = old.clone();
        new["spec"]["restartPolicy"] = json!("Never");
        let causes = validate_update(p, &old, &new);
        assert_eq!(fields(&causes), vec![("FieldValueForbidden", "spec")]);
        assert!(causes[0].message.starts_with(
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ));

        let mut new = old.clone();
        new["spec"]["tolerations"] = json!([]);
        assert_eq!(validate_update(p, &old, &new)[0].describe(),
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds");

        let mut new = old.clone();
        new["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "b", "image": "b"}));
        apply_defaults(p, &mut new);
        assert_eq!(
            validate_update(p, &old, &new)[0].describe(),
            "spec.containers: Forbidden: pod updates may not add or remove containers"
        );

        let mut new = old.clone();
        new["metadata"]["name"] = json!("other");
        new["metadata"]["uid"] = json!("u2");
        let got: Vec<String> = validate_update(p, &old, &new)
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(
            got,
            vec![
                "metadata.name: Invalid value: \"other\": field is immutable",
                "metadata.uid: Invalid value: \"u2\": field is immutable",
            ]
        );

        let d = res("apps/v1", "Deployment");
        let mut old = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web", "v": "2"}),
        );
        apply_defaults(d, &mut old);
        let mut new = old.clone();
        new["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
        new["spec"]["replicas"] = json!(5);
        assert_eq!(
            validate_update(d, &old, &new).iter().map(Cause::describe).collect::<Vec<_>>(),
            vec!["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
        );

        let s = res("v1", "Service");
        let old = json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
            "ports": [{"port": 80, "protocol": "TCP"}], "type": "ClusterIP", "sessionAffinity": "None"}});
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.6");
        new["spec"]["clusterIPs"] = json!(["10.96.0.6"]);
        assert_eq!(
            validate_update(s, &old, &new)[0].describe(),
            "spec.clusterIPs[0]: Invalid value: \"10.96.0.6\": may not change once set"
        );
        let mut new = old.clone();
        new["spec"]["type"] = json!("ExternalName");
        new["spec"]["externalName"] = json!("a.example.com");
        new["spec"].as_object_mut().unwrap().remove("clusterIP");
        new["spec"].as_object_mut().unwrap().remove("clusterIPs");
        assert!(
            validate_update(s, &old, &new).is_empty(),
            "{:?}",
            validate_update(s, &old, &new)
        );

        let cm = res("v1", "ConfigMap");
        let old = json!({"metadata": {"name": "c", "namespace": "d"}, "immutable": true, "data": {"a": "1"}});
        let mut new = old.clone();
        new["data"]["a"] = json!("2");
        assert_eq!(
            validate_update(cm, &old, &new)[0].describe(),
            "data: Forbidden: field is immutable when `immutable` is set"
        );
        let mut new = old.clone();
        new["immutable"] = json!(false);
        assert_eq!(
            validate_update(cm, &old, &new)[0].describe(),
            "immutable: Forbidden: field is immutable when `immutable` is set"
        );
    }

    #[test]
    fn any_shape_is_handled() {
        let shapes = [
            json!(null),
            json!(1),
            json!("x"),
            json!([]),
            json!({"metadata": 5, "spec": "x", "data": [1], "subsets": {"a": 1}}),
            json!({"metadata": {"name": 3, "labels": [1], "annotations": {"a": 1}, "ownerReferences": "x"},
                "spec": {"containers": [1, {"name": 5, "ports": "x", "env": [null]}], "volumes": {"a": 1},
                    "selector": "x", "template": [], "ports": [{"port": "x", "targetPort": [1]}], "tolerations": [{"key": 1}]},
                "endpoints": [{"addresses": "x"}], "addressType": 7}),
        ];
        for r in crate::registry::RESOURCES {
            for a in &shapes {
                let _ = validate_create(r, a);
                for b in &shapes {
                    let _ = validate_update(r, a, b);
                }
            }
        }
    }
}
