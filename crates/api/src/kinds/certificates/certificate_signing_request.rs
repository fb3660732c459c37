//! CertificateSigningRequest (certificates.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::cluster::validate_csr),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>,
    ..Strategy::NONE
};

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
