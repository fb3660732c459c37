//! Secret (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_secret),
    validate: Some(validate_secret),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Secret>,
    ..Strategy::NONE
};

fn default_secret(o: &mut Map<String, Value>) {
    set_default_str(o, "type", "Opaque");
    // The v1 conversion folds `stringData` into `data`, the string winning; it is never stored.
    if let Some(string_data) = o.remove("stringData") {
        let Value::Object(entries) = string_data else {
            return;
        };
        if entries.is_empty() {
            return;
        }
        let Some(data) = child_obj(o, "data") else {
            return;
        };
        for (k, v) in entries {
            if let Value::String(s) = v {
                let encoded = serde_json::to_value(k8s_openapi::ByteString(s.into_bytes()))
                    .unwrap_or(Value::Null);
                data.insert(k, encoded);
            }
        }
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

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    if field(n, "type") != field(o, "type") {
        errs.push(Cause::invalid_value(
            "type",
            field(n, "type").unwrap_or(&Value::Null),
            IMMUTABLE,
        ));
    }
    validate_immutable_data(o, n, &["data"], errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Type", "string", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
        col("Data", "string", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(get_str(obj, &["type"])),
        json!(obj_len(obj, &["data"])),
        json!(created),
    ]
}
