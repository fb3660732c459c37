//! Reviews answered from the request itself, never stored: `SelfSubjectReview`
//! (`kubectl auth whoami`), which echoes the authenticated user.

use super::*;
use crate::authn::RequestUser;

const SELF_SUBJECT_REVIEW: &[&str] = &[
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews",
];

/// Answers a `POST` of a SelfSubjectReview; None for any other request.
pub(super) fn self_subject_review(
    method: &Method,
    path: &str,
    extensions: &http::Extensions,
) -> Option<Response> {
    if method != Method::POST || !SELF_SUBJECT_REVIEW.contains(&path) {
        return None;
    }
    let version = path.split('/').nth(3).unwrap_or("v1");
    let user = extensions
        .get::<RequestUser>()
        .map(|u| u.0.clone())
        .unwrap_or_default();
    let review = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": format!("authentication.k8s.io/{version}"),
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": user},
    });
    Some(match render::to_bytes(&review) {
        Ok(b) => json_response(StatusCode::CREATED, b, "application/json", &[]),
        Err(s) => status_response(&s),
    })
}
