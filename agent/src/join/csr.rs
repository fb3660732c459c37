//! Asking the cluster for a certificate: a fresh key, a CertificateSigningRequest, and
//! the wait (on the request's watch events) until it is issued, denied or failed.

use std::time::Duration;

use cairn_pki::csr::{generate_request, RequestSubject};
use cairn_pki::IssuedCert;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::ByteString;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
const NODES_GROUP: &str = "system:nodes";
/// The proxy's user, which upstream's bootstrap policy binds to `system:node-proxier`.
pub const KUBE_PROXY_USER: &str = "system:kube-proxy";

#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("making a key and request for {subject}: {message}")]
    Generate { subject: String, message: String },
    #[error("creating a CertificateSigningRequest: {0}")]
    Create(#[source] kube::Error),
    #[error("waiting for CertificateSigningRequest {name}: {message}")]
    Wait { name: String, message: String },
    #[error("CertificateSigningRequest {name} was {condition}: {message}")]
    Refused {
        name: String,
        condition: String,
        message: String,
    },
}

/// What to ask for.
#[derive(Clone)]
pub struct CertificateRequest {
    pub subject: RequestSubject,
    pub signer: &'static str,
    pub usages: &'static [&'static str],
}

impl CertificateRequest {
    /// The node's client certificate, `system:node:<node>` in `system:nodes`.
    pub fn kubelet_client(node: &str) -> CertificateRequest {
        CertificateRequest {
            subject: RequestSubject {
                common_name: format!("system:node:{node}"),
                organizations: vec![NODES_GROUP.to_string()],
                dns_names: Vec::new(),
                ip_addresses: Vec::new(),
            },
            signer: KUBELET_CLIENT_SIGNER,
            usages: &["digital signature", "client auth"],
        }
    }

    /// The node's proxy's client certificate, `system:kube-proxy` with no group, which
    /// the server approves for a node (`certificatesigningrequests/kubeproxyclient`).
    pub fn kube_proxy_client() -> CertificateRequest {
        CertificateRequest {
            subject: RequestSubject {
                common_name: KUBE_PROXY_USER.to_string(),
                organizations: Vec::new(),
                dns_names: Vec::new(),
                ip_addresses: Vec::new(),
            },
            signer: CLIENT_SIGNER,
            usages: &["digital signature", "client auth"],
        }
    }

    /// The agent port's serving certificate for the node's names and addresses.
    pub fn kubelet_serving(
        node: &str,
        dns_names: Vec<String>,
        ip_addresses: Vec<std::net::IpAddr>,
    ) -> CertificateRequest {
        CertificateRequest {
            subject: RequestSubject {
                common_name: format!("system:node:{node}"),
                organizations: vec![NODES_GROUP.to_string()],
                dns_names,
                ip_addresses,
            },
            signer: KUBELET_SERVING_SIGNER,
            usages: &["digital signature", "server auth"],
        }
    }
}

fn condition(csr: &CertificateSigningRequest, kinds: &[&str]) -> Option<(String, String)> {
    let conditions = csr.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| kinds.contains(&c.type_.as_str()))
        .map(|c| (c.type_.clone(), c.message.clone().unwrap_or_default()))
}

fn issued(csr: &CertificateSigningRequest) -> Option<&ByteString> {
    csr.status
        .as_ref()?
        .certificate
        .as_ref()
        .filter(|c| !c.0.is_empty())
}

/// Creates the request and waits for its certificate.
pub async fn request_certificate(
    client: &kube::Client,
    request: &CertificateRequest,
    timeout: Duration,
) -> Result<IssuedCert, CsrError> {
    let (key_pem, csr_pem) =
        generate_request(&request.subject).map_err(|e| CsrError::Generate {
            subject: request.subject.common_name.clone(),
            message: e.to_string(),
        })?;
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let object = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("node-csr-".into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.into_bytes()),
            signer_name: request.signer.to_string(),
            usages: Some(request.usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .map_err(CsrError::Create)?;
    let name = created.metadata.name.unwrap_or_default();
    let done = |c: Option<&CertificateSigningRequest>| {
        c.is_some_and(|c| issued(c).is_some() || condition(c, &["Denied", "Failed"]).is_some())
    };
    let wait = kube::runtime::wait::await_condition(api, &name, done);
    let waited = tokio::time::timeout(timeout, wait).await;
    let wait_error = |message: String| CsrError::Wait {
        name: name.clone(),
        message,
    };
    let csr = waited
        .map_err(|_| wait_error(format!("not issued within {} s", timeout.as_secs())))?
        .map_err(|e| wait_error(e.to_string()))?
        .ok_or_else(|| wait_error("deleted before it was issued".into()))?;
    if let Some((condition, message)) = condition(&csr, &["Denied", "Failed"]) {
        return Err(CsrError::Refused {
            name,
            condition,
            message,
        });
    }
    let cert = issued(&csr).map(|c| c.0.clone()).unwrap_or_default();
    let cert_pem =
        String::from_utf8(cert).map_err(|_| wait_error("certificate is not PEM".into()))?;
    Ok(IssuedCert { cert_pem, key_pem })
}
