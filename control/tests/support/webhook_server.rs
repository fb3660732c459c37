//! A test admission webhook over HTTPS with a throwaway CA (rcgen), served by hyper on
//! tokio-rustls in a background runtime. Each path is one behaviour:
//! - `/validate`: denies ConfigMaps whose data has a `forbidden` key (403 with a message),
//!   denies deleting ConfigMaps labelled `protect=true`, allows the rest with a warning;
//! - `/mutate`: labels the object `mutated-by=test-webhook` and adds `data.injected`;
//! - `/allow`: allows everything (the benchmark's no-op webhook);
//! - `/slow`: answers after 5 s (longer than the webhooks' timeouts);
//! - `/convert`: a CRD conversion webhook between `v1` (`spec.size`) and `v2`
//!   (`spec.replicas`).
//!
//! Every request body is recorded per path so tests can check what the API server sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

/// The DNS names the serving certificate holds (besides 127.0.0.1).
pub const SERVICE_DNS_NAME: &str = "hook.webhooks.svc";

pub struct WebhookServer {
    pub addr: SocketAddr,
    /// The CA's certificate, PEM, base64 (a `caBundle` value).
    pub ca_bundle: String,
    requests: Arc<Mutex<HashMap<String, Vec<Value>>>>,
    _runtime: tokio::runtime::Runtime,
}

impl WebhookServer {
    pub fn start() -> WebhookServer {
        let (ca_pem, cert_der, key_der) = certificates();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert_der], key_der)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let requests: Arc<Mutex<HashMap<String, Vec<Value>>>> = Arc::default();
        let recorded = requests.clone();
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        hyper::service::service_fn(move |req| handle(recorded.clone(), req));
                    // A client going away mid-request is not the test's concern.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        WebhookServer {
            addr,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_pem),
            requests,
            _runtime: runtime,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The AdmissionReview requests received on `path`, oldest first.
    pub fn requests(&self, path: &str) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
}

/// A CA, and a serving certificate it signed for 127.0.0.1, localhost and the service name.
fn certificates() -> (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "cairn webhook test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        SERVICE_DNS_NAME.to_string(),
    ])
    .unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    (ca.pem(), cert.der().clone(), key_der)
}

async fn handle(
    recorded: Arc<Mutex<HashMap<String, Vec<Value>>>>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = review["request"].clone();
    recorded
        .lock()
        .unwrap()
        .entry(path.clone())
        .or_default()
        .push(request.clone());
    if path == "/convert" {
        return Ok(json_response(&convert(&request)));
    }
    let mut response = match path.as_str() {
        "/validate" => validate(&request),
        "/mutate" => mutate(&request),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            json!({"allowed": true})
        }
        _ => json!({"allowed": true}),
    };
    response["uid"] = request["uid"].clone();
    let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    Ok(json_response(&out))
}

fn json_response(body: &Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())));
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    resp
}

/// A ConversionReview answer: `spec.size` (v1) and `spec.replicas` (v2) are one field.
fn convert(request: &Value) -> Value {
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let to_v2 = desired.ends_with("/v2");
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let converted: Vec<Value> = objects
        .into_iter()
        .map(|mut o| {
            let (from, to) = if to_v2 {
                ("size", "replicas")
            } else {
                ("replicas", "size")
            };
            if let Some(spec) = o["spec"].as_object_mut() {
                if let Some(v) = spec.remove(from) {
                    spec.insert(to.to_string(), v);
                }
            }
            o["apiVersion"] = json!(desired);
            o
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": converted}})
}

fn validate(request: &Value) -> Value {
    if request["operation"] == "DELETE" {
        if request["oldObject"]["metadata"]["labels"]["protect"] == "true" {
            return json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "this object is protected"}});
        }
        return json!({"allowed": true});
    }
    if request["object"]["data"].get("forbidden").is_some() {
        return json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "the key \"forbidden\" is not allowed in data"}});
    }
    json!({"allowed": true, "warnings": ["checked by the test webhook"]})
}

fn mutate(request: &Value) -> Value {
    let object = &request["object"];
    let mut ops = Vec::new();
    if object["metadata"]["labels"].is_null() {
        ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
    }
    ops.push(json!({"op": "add", "path": "/metadata/labels/mutated-by", "value": "test-webhook"}));
    if object["data"].is_null() {
        ops.push(json!({"op": "add", "path": "/data", "value": {}}));
    }
    ops.push(json!({"op": "add", "path": "/data/injected", "value": "yes"}));
    let patch = base64::engine::general_purpose::STANDARD.encode(Value::Array(ops).to_string());
    json!({"allowed": true, "patchType": "JSONPatch", "patch": patch})
}
