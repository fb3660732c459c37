//! The body type of every response the data plane sends and every request it forwards,
//! and the proxy's own one-line answers.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// A body's error: hyper's, or the raw upstream's ([`crate::upstream::UpstreamError`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// A response of the proxy's own, with a one-line plain-text body.
pub fn plain(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{message}\n")))
        .map_err(|e: Infallible| match e {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let text = header::HeaderValue::from_static("text/plain; charset=utf-8");
    response.headers_mut().insert(header::CONTENT_TYPE, text);
    response
}
