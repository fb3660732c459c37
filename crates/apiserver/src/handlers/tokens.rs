//! The TokenRequest API (`POST .../serviceaccounts/<name>/token`, `kubectl create token`)
//! and TokenReview (`POST /apis/authentication.k8s.io/v1/tokenreviews`): tokens are
//! made and judged by the authenticator the connection carries, never stored.

use std::sync::Arc;

use super::*;
use crate::authn::serviceaccount::{
    BoundObject, TokenSpec, DEFAULT_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS,
};
use crate::authn::Authenticator;
use cairn_api::registry;

/// `/api/v1/namespaces/<ns>/serviceaccounts/<name>/token`.
pub(super) fn match_token_request(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, rest) = rest.split_once("/serviceaccounts/")?;
    let name = rest.strip_suffix("/token")?;
    (!ns.contains('/') && !name.is_empty() && !name.contains('/')).then_some((ns, name))
}

fn authenticator(parts: &http::request::Parts) -> Result<Arc<Authenticator>, Status> {
    parts
        .extensions
        .get::<Arc<Authenticator>>()
        .cloned()
        .ok_or_else(|| Status::internal("no authenticator on this connection"))
}

fn body_value(parts: &http::request::Parts, body: Result<Bytes, Status>) -> Result<Value, Status> {
    let body = body?;
    let format = request::body_format(header_str(&parts.headers, header::CONTENT_TYPE))?;
    request::decode_as(format, &body)
}

fn invalid_token_request(name: &str, field: &str, value: &Value, detail: &str) -> Status {
    Status::invalid(
        "TokenRequest",
        "authentication.k8s.io",
        name,
        vec![cairn_api::status::Cause::invalid_value(
            field, value, detail,
        )],
    )
}

pub(super) fn token_request(
    state: &AppState,
    (ns, name): (&str, &str),
    parts: &http::request::Parts,
    body: Result<Bytes, Status>,
) -> Result<Response, Status> {
    let authn = authenticator(parts)?;
    let tokens = authn
        .service_accounts
        .as_ref()
        .ok_or_else(|| Status::internal("no ServiceAccount token signer"))?;
    let sa = registry::find("", "v1", "serviceaccounts")
        .ok_or_else(|| Status::internal("serviceaccounts is not registered"))?;
    let (account, _) = state.get_value(sa, Some(ns), name)?;
    let req = body_value(parts, body)?;
    let write = crate::state::NodeWrite {
        resource: sa,
        subresource: "token",
        operation: cairn_auth::node::restriction::Operation::Create,
        namespace: ns,
        name,
        object: Some(&req),
        old_object: None,
    };
    state.check_node_restriction(&write, super::requester(&parts.extensions).as_ref())?;
    let spec = token_spec(state, ns, name, &account, &req, &tokens.api_audiences)?;
    let now = cairn_pki::inspect::now();
    let (token, exp) = tokens
        .issue(&spec, now)
        .map_err(|e| Status::internal(format!("signing a token for {ns}/{name}: {e}")))?;
    let mut out = req.clone();
    out["kind"] = json!("TokenRequest");
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": null});
    out["spec"]["audiences"] = json!(spec.audiences);
    out["spec"]["expirationSeconds"] = json!(spec.expiration_seconds);
    out["status"] = json!({"token": token, "expirationTimestamp": rfc3339(exp)});
    let bytes = render::to_bytes(&out)?;
    Ok(json_response(
        StatusCode::CREATED,
        bytes,
        "application/json",
        &[],
    ))
}

/// `spec.audiences` of a TokenRequest or TokenReview.
fn audiences_of(spec: &Value) -> Vec<String> {
    spec.get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// The token's spec from the request, checked as upstream's TokenRequest strategy does.
fn token_spec(
    state: &AppState,
    ns: &str,
    name: &str,
    account: &Value,
    req: &Value,
    api_audiences: &[String],
) -> Result<TokenSpec, Status> {
    let spec = req.get("spec").cloned().unwrap_or(Value::Null);
    let mut audiences = audiences_of(&spec);
    if audiences.is_empty() {
        audiences = api_audiences.to_vec();
    }
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid_token_request(
            name,
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    let (bound, node) = bound_object(state, ns, name, spec.get("boundObjectRef"))?;
    Ok(TokenSpec {
        namespace: ns.to_string(),
        service_account: name.to_string(),
        service_account_uid: account
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        audiences,
        expiration_seconds: match state.settings.max_token_seconds {
            cap if cap > 0 => expiration.min(cap),
            _ => expiration,
        },
        bound,
        node,
    })
}

type Bound = (Option<BoundObject>, Option<(String, String)>);

/// A `boundObjectRef` (Pod, Secret or Node) checked to exist with the uid given.
fn bound_object(
    state: &AppState,
    ns: &str,
    name: &str,
    r: Option<&Value>,
) -> Result<Bound, Status> {
    let Some(r) = r.filter(|r| !r.is_null()) else {
        return Ok((None, None));
    };
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let obj_name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let (plural, namespaced) = match kind {
        "Pod" => ("pods", true),
        "Secret" => ("secrets", true),
        "Node" => ("nodes", false),
        _ => {
            return Err(invalid_token_request(
                name,
                "spec.boundObjectRef.kind",
                &json!(kind),
                "supported values: \"Pod\", \"Secret\", \"Node\"",
            ))
        }
    };
    let res = registry::find("", "v1", plural)
        .ok_or_else(|| Status::internal(format!("{plural} is not registered")))?;
    let (obj, _) = state.get_value(res, namespaced.then_some(ns), obj_name)?;
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(want) = r
        .get("uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    {
        if want != uid {
            return Err(Status::conflict(
                plural,
                obj_name,
                &format!("the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"),
            ));
        }
    }
    let node = match kind {
        "Pod" => pod_node(state, &obj),
        _ => None,
    };
    let bound = BoundObject {
        kind: kind.to_string(),
        name: obj_name.to_string(),
        uid: uid.to_string(),
    };
    Ok((Some(bound), node))
}

/// The node a pod runs on, for the token's node claim.
fn pod_node(state: &AppState, pod: &Value) -> Option<(String, String)> {
    let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str)?;
    let nodes = registry::find("", "v1", "nodes")?;
    let (node, _) = state.get_value(nodes, None, node_name).ok()?;
    let uid = node.pointer("/metadata/uid").and_then(Value::as_str)?;
    Some((node_name.to_string(), uid.to_string()))
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`.
pub(super) fn token_review(
    state: &AppState,
    parts: &http::request::Parts,
    body: Result<Bytes, Status>,
) -> Result<Response, Status> {
    let authn = authenticator(parts)?;
    let req = body_value(parts, body)?;
    let token = req
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    let wanted = audiences_of(req.get("spec").unwrap_or(&Value::Null));
    let status = match review(&authn, state, token, &wanted) {
        Ok((user, audiences)) => {
            json!({"authenticated": true, "user": user, "audiences": audiences})
        }
        Err(why) => json!({"authenticated": false, "error": why.0}),
    };
    let mut out = req.clone();
    out["kind"] = json!("TokenReview");
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["metadata"] = json!({"creationTimestamp": null});
    out["status"] = status;
    let bytes = render::to_bytes(&out)?;
    Ok(json_response(
        StatusCode::CREATED,
        bytes,
        "application/json",
        &[],
    ))
}

/// A token's user and the audiences it was good for (the API's when none were asked).
fn review(
    authn: &Authenticator,
    state: &AppState,
    token: &str,
    wanted: &[String],
) -> Result<(cairn_auth::UserInfo, Vec<String>), crate::authn::Unauthorized> {
    let unauthorized = || crate::authn::Unauthorized("invalid bearer token".into());
    if token.is_empty() {
        return Err(unauthorized());
    }
    if let Some(sa) = &authn.service_accounts {
        let audiences = if wanted.is_empty() {
            sa.api_audiences.clone()
        } else {
            wanted.to_vec()
        };
        let now = cairn_pki::inspect::now();
        if let Some((user, matched)) = sa.authenticate(token, &audiences, &**state, now)? {
            let matched = if wanted.is_empty() {
                Vec::new()
            } else {
                matched
            };
            return Ok((user.authenticated(), matched));
        }
    }
    // Static tokens are for this API only: a review asking for other audiences fails.
    if !wanted.is_empty() {
        return Err(unauthorized());
    }
    Ok((
        authn.token_user(token, &**state)?.authenticated(),
        Vec::new(),
    ))
}
