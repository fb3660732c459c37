//! `meta.k8s.io/v1` Status objects: the body of every error answer.

use serde_json::{json, Value};

/// One field-level cause of an `Invalid` (422) or `BadRequest` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueDuplicate`,
    /// `FieldValueForbidden`, `FieldValueTooLong`, `FieldValueTypeInvalid`.
    pub reason: &'static str,
    /// JSON path of the field, e.g. `spec.containers[0].image`.
    pub field: String,
    pub message: String,
}

impl Cause {
    pub fn required(field: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".to_string(),
        }
    }

    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {}: {detail}", json!(value)),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }

    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| json!(s).to_string()).collect();
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                json!(value),
                list.join(", ")
            ),
        }
    }

    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Cause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {}", json!(value)),
        }
    }

    /// `Required value: detail` (Kubernetes' `field.Required` with a detail).
    pub fn required_detail(field: impl Into<String>, detail: &str) -> Self {
        let mut c = Cause::required(field);
        if !detail.is_empty() {
            c.message = format!("Required value: {detail}");
        }
        c
    }

    /// `Invalid value: <repr>: detail`, with the value already rendered as Go prints it
    /// (`70000`, `map[string]string{"app":"web"}`, `v1.LabelSelector{...}`).
    pub fn invalid_repr(field: impl Into<String>, repr: &str, detail: &str) -> Self {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {repr}: {detail}"),
        }
    }

    /// `Invalid value: <value>: detail` for any JSON value, rendered as Go's `field.Invalid` does:
    /// strings quoted, numbers and booleans bare, string maps as `map[string]string{...}`.
    pub fn invalid_value(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        Cause::invalid_repr(field, &go_repr(value), detail)
    }

    /// `Not found: "name"` (`FieldValueNotFound`).
    pub fn not_found(field: impl Into<String>, value: &str) -> Self {
        Cause {
            reason: "FieldValueNotFound",
            field: field.into(),
            message: format!("Not found: {}", json!(value)),
        }
    }

    /// `Too long: may not be more than N bytes` (`FieldValueTooLong`).
    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        Cause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {max_bytes} bytes"),
        }
    }

    /// `Too many: N: must have at most M items` (`FieldValueTooMany`).
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooMany",
            field: field.into(),
            message: format!("Too many: {actual}: must have at most {max} items"),
        }
    }

    /// A cause from a field error's full text (`Invalid value: ...`, `Required value: ...`,
    /// `Forbidden: ...`, `Unsupported value: ...`, `Duplicate value: ...`), its reason
    /// taken from that prefix.
    pub fn from_message(field: impl Into<String>, message: impl Into<String>) -> Self {
        let message = message.into();
        let reason = [
            ("Required value", "FieldValueRequired"),
            ("Forbidden", "FieldValueForbidden"),
            ("Unsupported value", "FieldValueNotSupported"),
            ("Duplicate value", "FieldValueDuplicate"),
            ("Too long", "FieldValueTooLong"),
            ("Too many", "FieldValueTooMany"),
        ]
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason);
        Cause {
            reason,
            field: field.into(),
            message,
        }
    }

    /// `field: message` as Kubernetes joins causes into the Status message.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// A JSON value printed the way Go's `field.Error` prints a bad value.
pub fn go_repr(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => json!(s).to_string(),
        Value::Object(m) if m.values().all(Value::is_string) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", json!(k), m[k.as_str()]))
                .collect();
            format!("map[string]string{{{}}}", body.join(", "))
        }
        other => other.to_string(),
    }
}

/// What a Status says about the object and the cause, boxed to keep `Status` (the error
/// type of every handler) small.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusDetails {
    /// `details.group`, `details.kind` (the resource plural, as Kubernetes does), `details.name`.
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
}

/// A Status error: HTTP code, reason and message, with optional details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Box<StatusDetails>,
}

impl Status {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Status {
            code,
            reason,
            message: message.into(),
            details: Box::default(),
        }
    }

    /// Attach `details` naming the object: `group`, resource plural and name.
    pub fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        self.details.group = Some(group.to_string());
        self.details.kind = Some(resource.to_string());
        self.details.name = Some(name.to_string());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(400, "BadRequest", message)
    }

    pub fn not_found(group_resource: &str, name: &str) -> Self {
        Status::new(
            404,
            "NotFound",
            format!("{group_resource} \"{name}\" not found"),
        )
    }

    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        Status::new(
            409,
            "AlreadyExists",
            format!("{group_resource} \"{name}\" already exists"),
        )
    }

    pub fn conflict(group_resource: &str, name: &str, detail: &str) -> Self {
        Status::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {detail}"),
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Status::new(410, "Expired", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Status::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Status::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Status::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"),
        )
    }

    /// 415 with a message of the caller's (upstream words it per endpoint).
    pub fn unsupported_media_type_with(message: impl Into<String>) -> Self {
        Status::new(415, "UnsupportedMediaType", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Status::new(406, "NotAcceptable", message)
    }

    pub fn too_large(limit: usize) -> Self {
        Status::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Status::new(500, "InternalError", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut s = Status::new(503, "ServiceUnavailable", message);
        s.details.retry_after_seconds = Some(1);
        s
    }

    /// 422 Invalid: `Kind "name" is invalid: [cause, cause]`, as Kubernetes words it.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let joined = causes.iter().map(Cause::describe).collect::<Vec<_>>();
        let message = if joined.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", joined[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", joined.join(", "))
        };
        let mut s = Status::new(422, "Invalid", message);
        s.details.group = Some(group.to_string());
        s.details.kind = Some(kind.to_string());
        s.details.name = Some(name.to_string());
        s.details.causes = causes;
        s
    }

    /// The Status object as JSON, members in metav1.Status's order (kind, apiVersion,
    /// metadata, status, message, reason, details, code; details: name, group, kind,
    /// causes, retryAfterSeconds), as kube-apiserver writes them.
    pub fn to_json(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.details.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(group) = self.details.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(group));
        }
        if let Some(kind) = &self.details.kind {
            details.insert("kind".into(), json!(kind));
        }
        if !self.details.causes.is_empty() {
            let causes: Vec<Value> = self
                .details
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(secs) = self.details.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), json!("Status"));
        out.insert("apiVersion".into(), json!("v1"));
        out.insert("metadata".into(), json!({}));
        out.insert("status".into(), json!("Failure"));
        out.insert("message".into(), json!(self.message));
        out.insert("reason".into(), json!(self.reason));
        if !details.is_empty() {
            out.insert("details".into(), Value::Object(details));
        }
        out.insert("code".into(), json!(self.code));
        Value::Object(out)
    }

    /// A `Success` Status (as returned by some deletes).
    pub fn success_json(group: &str, resource: &str, name: &str, uid: &str) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": group, "kind": resource, "uid": uid},
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_status_shape() {
        let s = Status::invalid(
            "Pod",
            "",
            "Bad_Name",
            vec![Cause::invalid(
                "metadata.name",
                "Bad_Name",
                "must be lowercase",
            )],
        );
        let v = s.to_json();
        assert_eq!(v["code"], 422);
        assert_eq!(v["reason"], "Invalid");
        assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
        assert!(v["message"]
            .as_str()
            .unwrap()
            .starts_with("Pod \"Bad_Name\" is invalid: metadata.name: Invalid value"));
    }
}
