//! What a request asks, in a SubjectAccessReview's terms: an action on a resource (the
//! agent's `nodes/<subresource>`) or on a non-resource path (a component's `/metrics`),
//! and the text upstream refuses it with.

use cairn_auth::UserInfo;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Access {
    /// `verb` on `resource/subresource` named `name` in the core group, cluster scope.
    Resource {
        verb: &'static str,
        resource: &'static str,
        subresource: &'static str,
        name: String,
    },
    /// `verb` on a path outside the API (`/metrics`).
    NonResource { verb: &'static str, path: String },
}

impl Access {
    /// The attributes as the kubelet prints them in its refusals.
    fn attributes_text(&self) -> String {
        match self {
            Access::Resource {
                verb,
                resource,
                subresource,
                ..
            } => format!("verb={verb}, resource={resource}, subresource(s)=[{subresource}]"),
            Access::NonResource { verb, path } => format!("verb={verb}, path={path}"),
        }
    }

    /// Upstream's refusal: the kubelet's text for its node subresources, the generic
    /// API server filter's for paths.
    pub fn forbidden(&self, user: &UserInfo) -> String {
        match self {
            Access::Resource { .. } => format!(
                "Forbidden (user={}, {})",
                user.username,
                self.attributes_text()
            ),
            Access::NonResource { verb, path } => format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                user.username
            ),
        }
    }

    /// The text when the review itself could not be made.
    pub fn review_failed(&self, user: &UserInfo) -> String {
        format!(
            "Authorization error (user={}, {})",
            user.username,
            self.attributes_text()
        )
    }
}

/// The verb of an HTTP method, as upstream maps it for non-API requests.
pub fn verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::POST => "create",
        // Upstream maps nothing else, not even HEAD: other methods review an empty verb.
        http::Method::GET => "get",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    }
}
