//! CertificateSigningRequest (certificates.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_csr),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>,
    ..Strategy::NONE
};

const KEY_USAGES: &[&str] = &[
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

fn validate_csr(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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
fn validate_csr_request(request: &str, errs: &mut Vec<Cause>) {
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

fn validate_csr_conditions(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    immutable_fields(o, n, &[&["spec"]], errs)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        AGE,
        col(
            "SignerName",
            "string",
            "signerName indicates the requested signer, and is a qualified name.",
        ),
        col(
            "Requestor",
            "string",
            "Name of the user who requested the certificate",
        ),
        col(
            "RequestedDuration",
            "string",
            "expirationSeconds is the requested duration of validity of the issued certificate.",
        ),
        col(
            "Condition",
            "string",
            "Current condition of the certificate signing request",
        ),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    csr_row(obj, name, created)
}

fn csr_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let mut conditions: Vec<&str> = get_arr(obj, &["status", "conditions"])
        .iter()
        .map(|c| get_str(c, &["type"]))
        .filter(|t| !t.is_empty())
        .collect();
    if !get_str(obj, &["status", "certificate"]).is_empty() {
        conditions.push("Issued");
    }
    let condition = if conditions.is_empty() {
        "Pending".to_string()
    } else {
        conditions.join(",")
    };
    let duration = match get(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
        Some(s) => human_duration(chrono::Duration::seconds(s)),
        None => "<none>".to_string(),
    };
    vec![
        name,
        json!(created),
        json!(get_str(obj, &["spec", "signerName"])),
        json!(get_str(obj, &["spec", "username"])),
        json!(duration),
        json!(condition),
    ]
}
