//! Asking the API server who a bearer token is (TokenReview) and whether a user may make
//! a request (SubjectAccessReview), as the kubelet's webhook authenticator and authorizer
//! and upstream's delegating options do. [`Reviewer`] is the seam: the API in the agent
//! and the components, a fake in tests.

use async_trait::async_trait;
use cairn_auth::UserInfo;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;

use crate::access::Access;

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("creating a TokenReview: {0}")]
    Token(#[source] kube::Error),
    #[error("creating a SubjectAccessReview for {user}: {source}")]
    Access {
        user: String,
        #[source]
        source: kube::Error,
    },
}

#[async_trait]
pub trait Reviewer: Send + Sync {
    /// The user `token` authenticates as; None when the API server says it does not.
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError>;
    /// Whether `user` may make `access`.
    async fn review_access(&self, user: &UserInfo, access: &Access) -> Result<bool, ReviewError>;
}

/// The reviews, made with the component's own credentials (`system:node`,
/// `system:kube-scheduler` and `system:kube-controller-manager` may create both).
pub struct ApiReviewer(pub kube::Client);

#[async_trait]
impl Reviewer for ApiReviewer {
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::Token)?;
        let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let Some(user) = status.user.filter(|u| u.username.is_some()) else {
            return Ok(None);
        };
        let mut info = UserInfo::new(
            user.username.unwrap_or_default(),
            user.groups.unwrap_or_default(),
        );
        info.uid = user.uid.unwrap_or_default();
        info.extra = user.extra.unwrap_or_default().into_iter().collect();
        Ok(Some(info))
    }

    async fn review_access(&self, user: &UserInfo, access: &Access) -> Result<bool, ReviewError> {
        let (resource_attributes, non_resource_attributes) = attributes(access);
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone().into_iter().collect())
                    .filter(|e: &std::collections::BTreeMap<String, Vec<String>>| !e.is_empty()),
                resource_attributes,
                non_resource_attributes,
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError::Access {
                user: user.username.clone(),
                source,
            })?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

fn attributes(access: &Access) -> (Option<ResourceAttributes>, Option<NonResourceAttributes>) {
    match access {
        Access::Resource {
            verb,
            resource,
            subresource,
            name,
        } => (
            Some(ResourceAttributes {
                verb: Some(verb.to_string()),
                version: Some("v1".into()),
                resource: Some(resource.to_string()),
                subresource: Some(subresource.to_string()).filter(|s| !s.is_empty()),
                name: Some(name.clone()),
                ..Default::default()
            }),
            None,
        ),
        Access::NonResource { verb, path } => (
            None,
            Some(NonResourceAttributes {
                verb: Some(verb.to_string()),
                path: Some(path.clone()),
            }),
        ),
    }
}
