//! AdmissionReview v1 (`admission.k8s.io/v1`): the request a webhook gets and the checks
//! on the response it sends back, as kube-apiserver's webhook dispatchers make them.

use base64::Engine as _;
use cairn_api::status::Status;
use serde_json::{json, Value};

use crate::admission::matching::Target;

/// What the API server says about the write, besides the objects.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    pub target: Target<'a>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub dry_run: bool,
    /// The field manager of a create or update, if any.
    pub field_manager: Option<&'a str>,
}

/// The user every request is made as: cairn-control does not authenticate clients yet
/// and treats each as a cluster administrator, so webhooks see that user.
pub const USER: &str = "system:admin";
pub const USER_GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// The AdmissionReview version a webhook is sent: the first of its
/// `admissionReviewVersions` the server knows, as upstream picks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1Beta1,
}

impl ReviewVersion {
    pub fn pick(listed: &[&str]) -> Option<ReviewVersion> {
        listed.iter().find_map(|v| match *v {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1Beta1),
            _ => None,
        })
    }

    fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// The AdmissionReview sent to a webhook (its v1beta1 form has the same fields).
pub fn request(
    uid: &str,
    a: &Attributes<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    version: ReviewVersion,
) -> Value {
    let r = a.target.resource;
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let resource = json!({"group": r.group, "version": r.version, "resource": r.plural});
    let options_kind = match a.target.operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": options_kind});
    if let Some(m) = a.field_manager.filter(|_| a.target.operation != "DELETE") {
        options["fieldManager"] = json!(m);
    }
    if a.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "operation": a.target.operation,
        "userInfo": {"username": USER, "groups": USER_GROUPS},
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": options,
    });
    if let Some(sub) = a.target.subresource {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if let Some(ns) = a.namespace.filter(|ns| !ns.is_empty()) {
        req["namespace"] = json!(ns);
    }
    json!({"apiVersion": version.api_version(), "kind": "AdmissionReview", "request": req})
}

/// A webhook's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    /// `response.status` of a denial.
    pub status: Value,
    /// The decoded JSON patch of a mutating webhook.
    pub patch: Option<Value>,
    pub warnings: Vec<String>,
}

/// Parses and checks a webhook's response body. The errors read as upstream's and follow
/// `received invalid webhook response: ` (see [`INVALID_RESPONSE`]). As upstream, a
/// v1beta1 answer is not checked for its uid, type or patch type (JSONPatch is assumed).
pub fn verdict(
    body: &[u8],
    uid: &str,
    mutating: bool,
    version: ReviewVersion,
) -> Result<Verdict, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if version == ReviewVersion::V1Beta1 {
        return verdict_v1beta1(&review, mutating);
    }
    let (api_version, kind) = (review["apiVersion"].as_str(), review["kind"].as_str());
    if api_version != Some("admission.k8s.io/v1") || kind != Some("AdmissionReview") {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            api_version.unwrap_or(""),
            kind.unwrap_or("")
        ));
    }
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let got_uid = response["uid"].as_str().unwrap_or("");
    if got_uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{got_uid}\""
        ));
    }
    let encoded = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch_type = response["patchType"].as_str();
    if !mutating {
        if encoded.is_some() {
            return Err("validating webhook may not return response.patch".into());
        }
        if patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    let patch = match (encoded, patch_type) {
        (None, None) => None,
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".into())
        }
        (None, Some(_)) => {
            return Err("webhook returned response.patchType but not response.patch".into())
        }
        (Some(encoded), Some(t)) => Some(decode_patch(encoded, t)?),
    };
    Ok(verdict_of(response, patch))
}

fn verdict_v1beta1(review: &Value, mutating: bool) -> Result<Verdict, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let encoded = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch = match encoded.filter(|_| mutating) {
        Some(encoded) => Some(decode_patch(encoded, "JSONPatch")?),
        None => None,
    };
    Ok(verdict_of(response, patch))
}

fn verdict_of(response: &Value, patch: Option<Value>) -> Verdict {
    Verdict {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        status: response["status"].clone(),
        patch,
        warnings: response["warnings"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn decode_patch(encoded: &str, patch_type: &str) -> Result<Value, String> {
    match patch_type {
        "JSONPatch" => {}
        "" => return Err("webhook returned invalid response.patchType of \"\"".into()),
        other => return Err(format!("unsupported patch type \"{other}\"")),
    }
    let undecodable = |e: String| format!("received undecodable patch in webhook response: {e}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| undecodable(e.to_string()))?;
    let patch: Value = serde_json::from_slice(&bytes).map_err(|e| undecodable(e.to_string()))?;
    if !patch.is_array() {
        return Err(undecodable("a JSON patch is a list of operations".into()));
    }
    Ok(patch)
}

/// What precedes every response error in a failed call's message.
pub const INVALID_RESPONSE: &str = "received invalid webhook response";

/// The error a denial answers, as upstream's `ToStatusErr`: the webhook's code (at least
/// 400), its reason when it is a known one, and `admission webhook "<name>" denied the
/// request: <message>`.
pub fn denial(webhook: &str, status: &Value) -> Status {
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().filter(|m| !m.is_empty());
    let text = match (message, reason) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    Status::new(code, known_reason(reason.unwrap_or("")), text)
}

/// `Status.reason` is one of metav1's StatusReasons; anything else is left empty.
fn known_reason(reason: &str) -> &'static str {
    const KNOWN: [&str; 17] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "ServiceUnavailable",
    ];
    KNOWN.into_iter().find(|k| *k == reason).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_api::registry;

    fn attrs(op: &'static str, sub: Option<&'static str>) -> Attributes<'static> {
        Attributes {
            target: Target {
                resource: registry::find("", "v1", "configmaps").unwrap(),
                subresource: sub,
                operation: op,
            },
            name: "cm",
            namespace: Some("default"),
            dry_run: true,
            field_manager: Some("kubectl-client-side-apply"),
        }
    }

    #[test]
    fn request_carries_kind_resource_user_objects_and_options() {
        let obj = json!({"metadata": {"name": "cm"}});
        let r = request(
            "u-1",
            &attrs("CREATE", None),
            Some(&obj),
            None,
            ReviewVersion::V1,
        );
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        let req = &r["request"];
        assert_eq!(req["uid"], "u-1");
        assert_eq!(
            req["kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        assert_eq!(req["resource"]["resource"], "configmaps");
        assert_eq!(req["namespace"], "default");
        assert_eq!(req["object"], obj);
        assert_eq!(req["oldObject"], Value::Null);
        assert_eq!(req["dryRun"], true);
        assert_eq!(req["options"]["kind"], "CreateOptions");
        assert_eq!(req["options"]["dryRun"], json!(["All"]));
        assert_eq!(req["options"]["fieldManager"], "kubectl-client-side-apply");
        assert!(req.get("subResource").is_none());
        let d = request(
            "u-2",
            &attrs("DELETE", Some("status")),
            None,
            Some(&obj),
            ReviewVersion::V1,
        );
        assert_eq!(d["request"]["options"]["kind"], "DeleteOptions");
        assert!(d["request"]["options"].get("fieldManager").is_none());
        assert_eq!(d["request"]["subResource"], "status");
    }

    fn review(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
    }

    #[test]
    fn verdicts_are_checked_and_patches_decoded() {
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#);
        let v = verdict(
            &review(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["careful"]})),
            "u",
            true,
            ReviewVersion::V1,
        )
        .unwrap();
        assert!(v.allowed);
        assert_eq!(v.patch.unwrap()[0]["op"], "add");
        assert_eq!(v.warnings, vec!["careful"]);
        let err = |body: Vec<u8>| verdict(&body, "u", true, ReviewVersion::V1).unwrap_err();
        assert_eq!(
            err(review(json!({"uid": "other", "allowed": true}))),
            "expected response.uid=\"u\", got \"other\""
        );
        assert!(
            err(review(json!({"uid": "u", "allowed": true, "patch": patch}))).contains("patchType")
        );
        assert!(err(review(
            json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": "!!"})
        ))
        .starts_with("received undecodable patch"));
        assert_eq!(
            err(review(
                json!({"uid": "u", "allowed": true, "patchType": "MergePatch", "patch": patch})
            )),
            "unsupported patch type \"MergePatch\""
        );
        assert_eq!(
            err(b"{\"apiVersion\": \"v1\", \"kind\": \"Status\"}".to_vec()),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status"
        );
        assert!(!err(b"not json".to_vec()).is_empty());
        let validating = verdict(
            &review(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch})),
            "u",
            false,
            ReviewVersion::V1,
        );
        assert_eq!(
            validating.unwrap_err(),
            "validating webhook may not return response.patch"
        );
    }

    #[test]
    fn v1beta1_webhooks_get_v1beta1_reviews_and_lenient_checks() {
        assert_eq!(
            ReviewVersion::pick(&["v2", "v1beta1", "v1"]),
            Some(ReviewVersion::V1Beta1)
        );
        assert_eq!(ReviewVersion::pick(&["v2"]), None);
        let obj = json!({"metadata": {"name": "cm"}});
        let r = request(
            "u",
            &attrs("CREATE", None),
            Some(&obj),
            None,
            ReviewVersion::V1Beta1,
        );
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1beta1");
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/x","value":1}]"#);
        let body = json!({"response": {"allowed": true, "patch": patch}}).to_string();
        let v = verdict(body.as_bytes(), "u", true, ReviewVersion::V1Beta1).unwrap();
        assert!(v.allowed && v.patch.is_some());
    }

    #[test]
    fn denials_read_as_upstream() {
        let s = denial(
            "deny.example.com",
            &json!({"code": 403, "reason": "Forbidden", "message": "no"}),
        );
        assert_eq!((s.code, s.reason), (403, "Forbidden"));
        assert_eq!(
            s.message,
            "admission webhook \"deny.example.com\" denied the request: no"
        );
        let bare = denial("d.example.com", &Value::Null);
        assert_eq!(bare.code, 400);
        assert_eq!(
            bare.message,
            "admission webhook \"d.example.com\" denied the request without explanation"
        );
        assert_eq!(
            denial("d", &json!({"code": 200, "reason": "Custom"})).code,
            400
        );
        assert_eq!(
            denial("d", &json!({"reason": "Custom"})).message,
            "admission webhook \"d\" denied the request: Custom"
        );
    }
}
