//! The body type of every response the data plane sends and every request it forwards.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

pub type ProxyBody = BoxBody<Bytes, hyper::Error>;
