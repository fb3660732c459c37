//! Pod specs, shared by pods and pod templates: volumes, containers, resources,
//! tolerations. A pod's own rules are its kind's (`kinds/core/pod/validation.rs`).

use super::*;

pub(crate) fn validate_pod_spec(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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
pub(crate) fn validate_volumes(
    spec: &Map<String, Value>,
    p: &str,
    errs: &mut Vec<Cause>,
) -> HashSet<String> {
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

pub(crate) fn validate_mode(src: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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

pub(crate) fn validate_container(
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

    validate_container_ports(c, p, errs);
    validate_env_names(c, p, errs);
    validate_volume_mounts(c, p, volumes, errs);
    validate_resources(c, p, errs);
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = obj(c, key) {
            validate_probe(probe, key, &format!("{p}.{key}"), errs);
        }
    }
}

fn validate_container_ports(c: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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
}

fn validate_env_names(c: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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
}

fn validate_volume_mounts(
    c: &Map<String, Value>,
    p: &str,
    volumes: &HashSet<String>,
    errs: &mut Vec<Cause>,
) {
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
}

/// One probe: a single handler, non-negative timings, `successThreshold` 1 but for
/// readiness, and valid ports.
fn validate_probe(probe: &Map<String, Value>, key: &str, pp: &str, errs: &mut Vec<Cause>) {
    let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
        .iter()
        .filter(|h| field(probe, h).is_some())
        .count();
    if handlers == 0 {
        errs.push(Cause::required_detail(pp, "must specify a handler type"));
    } else if handlers > 1 {
        errs.push(Cause::forbidden(
            pp,
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
        nonnegative(probe, k, pp, errs);
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

pub(crate) fn validate_port_num_or_name(port: &Value, p: &str, errs: &mut Vec<Cause>) {
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

pub(crate) fn validate_resources(c: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let Some(res) = obj(c, "resources") else {
        return;
    };
    let limits = obj(res, "limits");
    for (kind, list) in [("limits", limits), ("requests", obj(res, "requests"))] {
        let Some(list) = list else { continue };
        for (name, q) in list {
            let q = q.as_str().unwrap_or("");
            let key_path = format!("{p}.resources.{kind}[{name}]");
            match quantity::nanos(q) {
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
        let (Some(r), Some(l)) = (quantity::nanos(req_s), quantity::nanos(limit_s)) else {
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

pub(crate) fn validate_tolerations(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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

// ---------------------------------------------------------------------------------------------
// Label selectors and workloads
