//! The HTTPS side of webhook calls: one pooled HTTP/1.1 client per trust bundle and
//! server name (rustls with the ring provider; the `caBundle` as the only roots, or the
//! public webpki roots when it is empty), service references resolved to an endpoint
//! by a [`ServiceResolver`] and verified against `<service>.<namespace>.svc`, as
//! kube-apiserver names them. Each call is bounded by the webhook's `timeoutSeconds`,
//! which is also sent as `?timeout=<n>s`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

use super::{CallError, Caller, Destination, Hook};

/// Resolves a webhook's `service` reference to an address to connect to.
pub trait ServiceResolver: Send + Sync {
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<SocketAddr, String>;
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client is shared by webhooks with the same trust bundle and TLS server name.
type ClientKey = (Arc<Vec<u8>>, Option<String>);

/// The real [`Caller`].
pub struct HttpsCaller {
    services: Arc<dyn ServiceResolver>,
    clients: parking_lot::Mutex<HashMap<ClientKey, HttpsClient>>,
}

/// Where one call goes: the URI dialled, the URL errors name, the TLS name to verify.
struct Route {
    uri: String,
    shown: String,
    server_name: Option<String>,
}

impl HttpsCaller {
    pub fn new(services: Arc<dyn ServiceResolver>) -> HttpsCaller {
        HttpsCaller {
            services,
            clients: Default::default(),
        }
    }

    fn route(&self, hook: &Hook) -> Result<Route, CallError> {
        let timeout = format!("timeout={}s", hook.timeout.as_secs());
        match &hook.destination {
            Destination::Url(url) => {
                let sep = if url.contains('?') { '&' } else { '?' };
                let uri = format!("{url}{sep}{timeout}");
                Ok(Route {
                    shown: uri.clone(),
                    uri,
                    server_name: None,
                })
            }
            Destination::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let host = format!("{name}.{namespace}.svc");
                let shown = format!("https://{host}:{port}{path}?{timeout}");
                let addr = self
                    .services
                    .resolve(namespace, name, *port)
                    .map_err(|e| CallError::Resolve(format!("Post \"{shown}\": {e}")))?;
                Ok(Route {
                    uri: format!("https://{addr}{path}?{timeout}"),
                    shown,
                    server_name: Some(host),
                })
            }
        }
    }

    fn client(&self, ca: &Arc<Vec<u8>>, server_name: Option<&str>) -> Result<HttpsClient, String> {
        let key = (ca.clone(), server_name.map(str::to_string));
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let client = build_client(ca, server_name)?;
        let mut clients = self.clients.lock();
        if clients.len() > 256 {
            // Bundles rotate: start over rather than keep every old one.
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// A pooled client trusting `ca` (PEM) or the public roots, verifying `server_name`
/// instead of the URI's host when given.
fn build_client(ca: &[u8], server_name: Option<&str>) -> Result<HttpsClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    if ca.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    } else {
        for cert in CertificateDer::pem_slice_iter(ca) {
            let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        if roots.is_empty() {
            return Err("unable to load root certificates: no certificates in caBundle".into());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only();
    let builder = match server_name {
        Some(name) => {
            let name = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
            builder.with_server_name_resolver(FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let https = builder.enable_http1().wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

#[async_trait]
impl Caller for HttpsCaller {
    async fn call(&self, hook: &Hook, review: Bytes) -> Result<Bytes, CallError> {
        let route = self.route(hook)?;
        let fail = |detail: String| CallError::Call(format!("Post \"{}\": {detail}", route.shown));
        let client = self
            .client(&hook.ca_bundle, route.server_name.as_deref())
            .map_err(fail)?;
        let request = Request::post(&route.uri)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, */*")
            .header(USER_AGENT, "cairn-control-admission")
            .body(Full::new(review))
            .map_err(|e| fail(e.to_string()))?;
        let exchange = async {
            let response = client.request(request).await.map_err(|e| error_chain(&e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), hook.response_limit)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, body))
        };
        let (status, body) = tokio::time::timeout(hook.timeout, exchange)
            .await
            .map_err(|_| fail("context deadline exceeded".into()))?
            .map_err(fail)?;
        if status != StatusCode::OK {
            let text = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
            return Err(CallError::Call(format!(
                "the server responded with the status code {} but did not return an AdmissionReview ({})",
                status.as_u16(),
                text.trim()
            )));
        }
        Ok(body)
    }
}

/// An error with its sources, as Go's wrapped errors print (`a: b: c`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct NoServices;
    impl ServiceResolver for NoServices {
        fn resolve(&self, ns: &str, name: &str, _: u16) -> Result<SocketAddr, String> {
            Err(format!(
                "no endpoints available for service \"{ns}/{name}\""
            ))
        }
    }

    fn hook(destination: Destination, ca: &[u8]) -> Hook {
        Hook {
            configuration: "c".into(),
            name: "w.example.com".into(),
            destination,
            ca_bundle: Arc::new(ca.to_vec()),
            rules: Vec::new(),
            exact_version: false,
            fail_closed: true,
            namespace_selector: serde_json::Value::Null,
            object_selector: serde_json::Value::Null,
            timeout: Duration::from_secs(2),
            mutating: false,
            reinvoke: false,
            dry_run_safe: true,
            review_version: Some(crate::admission::webhook::review::ReviewVersion::V1),
            response_limit: 1024,
            match_conditions: Vec::new(),
        }
    }

    #[tokio::test]
    async fn refused_connections_and_unresolved_services_name_the_url() {
        let caller = HttpsCaller::new(Arc::new(NoServices));
        // Port 1 on loopback: nothing listens there.
        let h = hook(Destination::Url("https://127.0.0.1:1/v".into()), b"");
        let err = caller.call(&h, Bytes::new()).await.unwrap_err().to_string();
        assert!(
            err.starts_with("failed to call webhook: Post \"https://127.0.0.1:1/v?timeout=2s\": "),
            "{err}"
        );
        let svc = hook(
            Destination::Service {
                namespace: "ns".into(),
                name: "hook".into(),
                path: "/check".into(),
                port: 443,
            },
            b"",
        );
        let err = caller
            .call(&svc, Bytes::new())
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "failed to call webhook: Post \"https://hook.ns.svc:443/check?timeout=2s\": no endpoints available for service \"ns/hook\""
        );
    }

    #[tokio::test]
    async fn a_bundle_without_certificates_is_an_error_not_a_panic() {
        let caller = HttpsCaller::new(Arc::new(NoServices));
        let h = hook(
            Destination::Url("https://127.0.0.1:1/v".into()),
            b"not a pem",
        );
        let err = caller.call(&h, Bytes::new()).await.unwrap_err().to_string();
        assert!(err.contains("unable to load root certificates"), "{err}");
    }
}
