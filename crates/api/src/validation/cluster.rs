//! Cluster-level kinds (upstream node, certificates, apiregistration and autoscaling
//! validation): RuntimeClass, CertificateSigningRequest, APIService and
//! HorizontalPodAutoscaler.

use super::*;

pub(crate) fn validate_runtime_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let handler = s(o, "handler");
    for msg in is_dns1123_label(handler) {
        errs.push(Cause::invalid("handler", handler, &msg));
    }
}

pub(crate) const KEY_USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

pub(crate) fn validate_csr(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_csr_request(s(spec, "request"), errs);
    let signer = s(spec, "signerName");
    if signer.is_empty() {
        errs.push(Cause::required("spec.signerName"));
    } else if let Some(msg) = domain_prefixed_path_error(signer) {
        errs.push(Cause::invalid("spec.signerName", signer, &msg));
    }
    let usages = arr(spec, "usages");
    if usages.is_empty() {
        errs.push(Cause::required("spec.usages"));
    }
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or("");
        if !KEY_USAGES.contains(&u) {
            errs.push(Cause::not_supported(
                format!("spec.usages[{i}]"),
                u,
                KEY_USAGES,
            ));
        }
    }
    if let Some(seconds) = int(spec, "expirationSeconds") {
        if seconds < 600 {
            errs.push(Cause::invalid_value(
                "spec.expirationSeconds",
                &Value::from(seconds),
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    validate_csr_conditions(o, errs);
}

/// `spec.request` is base64 of a PEM `CERTIFICATE REQUEST` block. (The DER inside is not
/// parsed: signing is not done here.)
pub(crate) fn validate_csr_request(request: &str, errs: &mut Vec<Cause>) {
    use base64::Engine;
    if request.is_empty() {
        errs.push(Cause::required("spec.request"));
        return;
    }
    let pem = base64::engine::general_purpose::STANDARD
        .decode(request)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    if !pem.contains("-----BEGIN CERTIFICATE REQUEST-----") {
        errs.push(Cause::invalid_repr(
            "spec.request",
            "[]byte{...}",
            "PEM block type must be CERTIFICATE REQUEST",
        ));
    }
}

pub(crate) fn validate_csr_conditions(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let Some(status) = obj(o, "status") else {
        return;
    };
    let types: Vec<&str> = objs(status, "conditions")
        .map(|(_, c)| s(c, "type"))
        .collect();
    if types.contains(&"Approved") && types.contains(&"Denied") {
        errs.push(Cause::invalid_repr(
            "status.conditions",
            "\"Approved\"",
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
    for (i, c) in objs(status, "conditions") {
        if s(c, "type").is_empty() {
            errs.push(Cause::required(format!("status.conditions[{i}].type")));
        }
        let st = s(c, "status");
        if !matches!(st, "True" | "False" | "Unknown") {
            errs.push(Cause::not_supported(
                format!("status.conditions[{i}].status"),
                st,
                &["False", "True", "Unknown"],
            ));
        }
    }
}

pub(crate) fn validate_api_service(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let name = obj(o, "metadata").map_or("", |m| s(m, "name"));
    let (group, version) = (s(spec, "group"), s(spec, "version"));
    let required = format!("{version}.{group}");
    if name != required {
        errs.push(Cause::invalid(
            "metadata.name",
            name,
            &format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    for msg in is_dns1123_label(version) {
        errs.push(Cause::invalid("spec.version", version, &msg));
    }
    let priorities = [("groupPriorityMinimum", 20000), ("versionPriority", 1000)];
    for (key, max) in priorities {
        let v = int(spec, key).unwrap_or(0);
        if v <= 0 || v > max {
            errs.push(Cause::invalid_value(
                format!("spec.{key}"),
                &Value::from(v),
                &format!("must be positive and less than {max}"),
            ));
        }
    }
    let ca_bundle = !s(spec, "caBundle").is_empty();
    let insecure = field(spec, "insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
    match obj(spec, "service") {
        None => {
            if ca_bundle {
                errs.push(Cause::invalid_repr(
                    "spec.caBundle",
                    "[]byte{...}",
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(Cause::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &Value::Bool(true),
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
        }
        Some(service) => {
            for key in ["namespace", "name"] {
                if s(service, key).is_empty() {
                    errs.push(Cause::required(format!("spec.service.{key}")));
                }
            }
            if insecure && ca_bundle {
                errs.push(Cause::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &Value::Bool(true),
                    "may not be true if caBundle is present",
                ));
            }
        }
    }
}

pub(crate) const METRIC_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// HorizontalPodAutoscaler, in its stored autoscaling/v2 shape.
pub(crate) fn validate_hpa(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let min = int(spec, "minReplicas");
    let max = int(spec, "maxReplicas").unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        errs.push(Cause::invalid_value(
            "spec.minReplicas",
            &Value::from(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(Cause::invalid_value(
            "spec.maxReplicas",
            &Value::from(max),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|min| max < min) {
        errs.push(Cause::invalid_value(
            "spec.maxReplicas",
            &Value::from(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = obj(spec, "scaleTargetRef").unwrap_or(&empty);
    for key in ["kind", "name"] {
        let v = s(target, key);
        if v.is_empty() {
            errs.push(Cause::required(format!("spec.scaleTargetRef.{key}")));
        }
        for msg in is_path_segment_name(v) {
            errs.push(Cause::invalid(
                format!("spec.scaleTargetRef.{key}"),
                v,
                &msg,
            ));
        }
    }
    for (i, m) in objs(spec, "metrics") {
        validate_metric(m, &format!("spec.metrics[{i}]"), errs);
    }
}

pub(crate) fn validate_metric(m: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let kind = s(m, "type");
    if kind.is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.type"),
            "must specify a metric source type",
        ));
        return;
    }
    if !METRIC_TYPES.contains(&kind) {
        errs.push(Cause::not_supported(
            format!("{p}.type"),
            kind,
            METRIC_TYPES,
        ));
        return;
    }
    let source_key = {
        let mut k = kind.to_string();
        k[..1].make_ascii_lowercase();
        k
    };
    let Some(source) = obj(m, &source_key) else {
        errs.push(Cause::required_detail(
            format!("{p}.{source_key}"),
            &format!("must populate information for the given metric source (only allowed when type is {kind})"),
        ));
        return;
    };
    let sp = format!("{p}.{source_key}");
    if matches!(kind, "Resource" | "ContainerResource") && s(source, "name").is_empty() {
        errs.push(Cause::required(format!("{sp}.name")));
    }
    match obj(source, "target") {
        Some(t) => validate_metric_target(t, &format!("{sp}.target"), errs),
        None => errs.push(Cause::required(format!("{sp}.target"))),
    }
}

pub(crate) fn validate_metric_target(t: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let (kind, key) = match s(t, "type") {
        "Utilization" => ("Utilization", "averageUtilization"),
        "Value" => ("Value", "value"),
        "AverageValue" => ("AverageValue", "averageValue"),
        "" => {
            return errs.push(Cause::required_detail(
                format!("{p}.type"),
                "must specify a metric target type",
            ))
        }
        other => {
            return errs.push(Cause::not_supported(
                format!("{p}.type"),
                other,
                &["AverageValue", "Utilization", "Value"],
            ))
        }
    };
    if field(t, key).is_none() {
        errs.push(Cause::required_detail(
            format!("{p}.{key}"),
            &format!("must set {key} when the target type is {kind}"),
        ));
    }
    if let Some(u) = int(t, "averageUtilization").filter(|u| *u <= 0) {
        errs.push(Cause::invalid_value(
            format!("{p}.averageUtilization"),
            &Value::from(u),
            "must be greater than 0",
        ));
    }
}
