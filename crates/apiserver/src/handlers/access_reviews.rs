//! `authorization.k8s.io/v1` reviews, answered from the authorizer and never stored:
//! SelfSubjectAccessReview (`kubectl auth can-i`), SubjectAccessReview and
//! LocalSubjectAccessReview (for another user), SelfSubjectRulesReview
//! (`kubectl auth can-i --list`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::authn::RequestUser;
use crate::authz::{self, Authorizer, RequestInfo};
use cairn_auth::{Decision, UserInfo};

const GROUP_VERSION: &str = "/apis/authorization.k8s.io/v1/";

enum Review<'a> {
    SelfAccess,
    Access,
    LocalAccess(&'a str),
    SelfRules,
}

fn match_review(path: &str) -> Option<Review<'_>> {
    let rest = path.strip_prefix(GROUP_VERSION)?;
    match rest {
        "selfsubjectaccessreviews" => Some(Review::SelfAccess),
        "subjectaccessreviews" => Some(Review::Access),
        "selfsubjectrulesreviews" => Some(Review::SelfRules),
        _ => {
            let (ns, kind) = rest.strip_prefix("namespaces/")?.split_once('/')?;
            (kind == "localsubjectaccessreviews").then_some(Review::LocalAccess(ns))
        }
    }
}

/// Answers a `POST` of one of the reviews; None for any other request.
pub(super) fn access_review(
    path: &str,
    parts: &http::request::Parts,
    body: &Result<Bytes, Status>,
) -> Option<Response> {
    if parts.method != Method::POST {
        return None;
    }
    let review = match_review(path)?;
    Some(answer(review, parts, body).unwrap_or_else(|s| status_response(&s)))
}

fn answer(
    review: Review<'_>,
    parts: &http::request::Parts,
    body: &Result<Bytes, Status>,
) -> Result<Response, Status> {
    let body = body.clone()?;
    let format = request::body_format(header_str(&parts.headers, header::CONTENT_TYPE))?;
    let mut obj = request::decode_as(format, &body)?;
    let authorizer = parts
        .extensions
        .get::<Arc<Authorizer>>()
        .cloned()
        .ok_or_else(|| Status::internal("no authorizer on this connection"))?;
    let me = parts
        .extensions
        .get::<RequestUser>()
        .map(|u| u.0.clone())
        .unwrap_or_default();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let (kind, status) = match review {
        Review::SelfAccess => (
            "SelfSubjectAccessReview",
            access(&authorizer, &me, &spec, None)?,
        ),
        Review::Access => (
            "SubjectAccessReview",
            access(&authorizer, &spec_user(&spec), &spec, None)?,
        ),
        Review::LocalAccess(ns) => (
            "LocalSubjectAccessReview",
            access(&authorizer, &spec_user(&spec), &spec, Some(ns))?,
        ),
        Review::SelfRules => ("SelfSubjectRulesReview", rules(&authorizer, &me, &spec)),
    };
    obj["kind"] = json!(kind);
    obj["apiVersion"] = json!("authorization.k8s.io/v1");
    if obj.get("metadata").is_none() {
        obj["metadata"] = json!({"creationTimestamp": null});
    }
    obj["status"] = status;
    let bytes = render::to_bytes(&obj)?;
    Ok(json_response(
        StatusCode::CREATED,
        bytes,
        "application/json",
        &[],
    ))
}

/// The user a SubjectAccessReview asks about.
fn spec_user(spec: &Value) -> UserInfo {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), strings(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        username: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        uid: spec
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        groups: strings(spec.get("groups")),
        extra,
    }
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn access(
    authorizer: &Authorizer,
    user: &UserInfo,
    spec: &Value,
    local_namespace: Option<&str>,
) -> Result<Value, Status> {
    let info = if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        let namespace = field(r, "namespace");
        if let Some(ns) = local_namespace {
            if !namespace.is_empty() && namespace != ns {
                return Err(Status::bad_request(format!(
                    "spec.resourceAttributes.namespace must match metadata.namespace: {namespace:?} != {ns:?}"
                )));
            }
        }
        RequestInfo {
            resource_request: true,
            verb: field(r, "verb").to_string(),
            api_group: field(r, "group").to_string(),
            api_version: field(r, "version").to_string(),
            namespace: local_namespace.unwrap_or(namespace).to_string(),
            resource: field(r, "resource").to_string(),
            subresource: field(r, "subresource").to_string(),
            name: field(r, "name").to_string(),
            ..RequestInfo::default()
        }
    } else if let Some(n) = spec.get("nonResourceAttributes").filter(|n| n.is_object()) {
        RequestInfo {
            verb: field(n, "verb").to_string(),
            path: field(n, "path").to_string(),
            ..RequestInfo::default()
        }
    } else {
        return Err(Status::bad_request(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let decision = authorizer.decide(&authz::attributes(user, &info));
    Ok(match decision {
        Decision::Allow(reason) => json!({"allowed": true, "reason": reason}),
        Decision::Deny(reason) => json!({"allowed": false, "denied": true, "reason": reason}),
        Decision::NoOpinion(reason) => json!({"allowed": false, "reason": reason}),
    })
}

fn rules(authorizer: &Authorizer, user: &UserInfo, spec: &Value) -> Value {
    let namespace = field(spec, "namespace");
    let review = authorizer.rules_for(user, namespace);
    let mut status = json!({
        "resourceRules": review.resource_rules,
        "nonResourceRules": review.non_resource_rules,
        "incomplete": review.incomplete,
    });
    if !review.evaluation_error.is_empty() {
        status["evaluationError"] = json!(review.evaluation_error);
    }
    status
}
