//! A small HTTP/1.1 client over hyper + hyper-rustls (ring provider, our own root store):
//! GET/POST with redirects and timeouts, streaming bodies. reqwest is not used here because
//! enabling its rustls feature for the whole workspace would make every other reqwest client
//! in a binary depend on a process-wide crypto provider.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, LOCATION, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use url::Url;

const MAX_REDIRECTS: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Request(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("too many redirects")]
    Redirects,
}

#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl HttpClient {
    /// `timeout` bounds the wait for response headers and for each body chunk.
    pub fn new(tls: rustls::ClientConfig, connect_timeout: Duration, timeout: Duration) -> Self {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Self {
            inner: Client::builder(TokioExecutor::new()).build(https),
            timeout,
        }
    }

    pub async fn get(
        &self,
        url: &Url,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<HttpResponse, HttpError> {
        self.send(Method::GET, url, headers, Bytes::new()).await
    }

    /// Sends a request, following redirects (dropping credentials when the origin changes,
    /// as blob downloads are usually redirected to storage that must not see them).
    pub async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<HttpResponse, HttpError> {
        let mut url = url.clone();
        let mut method = method;
        let mut body = body;
        let mut keep_auth = true;
        for _ in 0..=MAX_REDIRECTS {
            let mut req = Request::builder().method(method.clone()).uri(url.as_str());
            if let Some(h) = req.headers_mut() {
                h.insert(
                    USER_AGENT,
                    HeaderValue::from_static(concat!("cairn/", env!("CARGO_PKG_VERSION"))),
                );
                for (name, value) in headers {
                    if *name == AUTHORIZATION && !keep_auth {
                        continue;
                    }
                    h.insert(name.clone(), value.clone());
                }
            }
            let req = req
                .body(Full::new(body.clone()))
                .map_err(|e| HttpError::Request(e.to_string()))?;
            let resp = tokio::time::timeout(self.timeout, self.inner.request(req))
                .await
                .map_err(|_| HttpError::Timeout(self.timeout))?
                .map_err(|e| HttpError::Request(error_chain(&e)))?;
            let status = resp.status();
            if status.is_redirection() {
                if let Some(next) = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                {
                    if next.origin() != url.origin() {
                        keep_auth = false;
                    }
                    if status == StatusCode::SEE_OTHER {
                        method = Method::GET;
                        body = Bytes::new();
                    }
                    url = next;
                    continue;
                }
            }
            let (parts, body) = resp.into_parts();
            return Ok(HttpResponse {
                status: parts.status,
                headers: parts.headers,
                body,
                timeout: self.timeout,
            });
        }
        Err(HttpError::Redirects)
    }
}

pub struct HttpResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
    timeout: Duration,
}

impl HttpResponse {
    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The next piece of the body, `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            let frame = tokio::time::timeout(self.timeout, self.body.frame())
                .await
                .map_err(|_| HttpError::Timeout(self.timeout))?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(HttpError::Request(error_chain(&e))),
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body, refusing more than `limit` bytes.
    pub async fn bytes_limited(mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Some(c) = self.chunk().await? {
            out.extend_from_slice(&c);
            if out.len() > limit {
                return Err(HttpError::Request(format!(
                    "body larger than {limit} bytes"
                )));
            }
        }
        Ok(out)
    }

    /// Up to 64 KiB of the body as text, for error messages.
    pub async fn text(self) -> String {
        self.bytes_limited(64 << 10)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

/// `error: source: source`, since many errors' Display hides the cause.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let next = c.to_string();
        if !s.ends_with(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = c.source();
    }
    s
}

/// The rustls provider every client of this crate uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
