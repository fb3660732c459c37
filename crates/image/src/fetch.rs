//! The registry side of a pull (distribution v2 API over [`crate::http`]): resolve a tag or digest
//! on the hosts allowed to resolve, fetch manifests and blobs from the hosts allowed to pull,
//! and answer auth challenges (anonymous or credentialed Bearer tokens, Basic).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use url::Url;

use crate::credentials::Credentials;
use crate::hosts::{registry_hosts, RegistryHost};
use crate::http::{HttpClient, HttpResponse};
use crate::media::{self, Desc, MANIFEST_ACCEPT, MAX_MANIFEST_BYTES};
use crate::reference::ImageRef;
use crate::{ImageError, PullOptions};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(120);

struct HostClient {
    host: RegistryHost,
    http: HttpClient,
}

/// One image's registry endpoints and authorization state.
pub struct Remote {
    reference: ImageRef,
    display: String,
    hosts: Vec<HostClient>,
    credentials: Vec<Credentials>,
    /// Authorization header that worked, per host origin.
    auth: Mutex<HashMap<String, HeaderValue>>,
}

impl Remote {
    pub fn new(reference: &ImageRef, opts: &PullOptions) -> Result<Self, ImageError> {
        let hosts = registry_hosts(&reference.registry, opts.hosts_dir.as_deref())?;
        let hosts = hosts
            .into_iter()
            .map(|host| {
                let http = http_client(&host)?;
                Ok(HostClient { host, http })
            })
            .collect::<Result<Vec<_>, ImageError>>()?;
        Ok(Self {
            reference: reference.clone(),
            display: reference.to_string(),
            hosts,
            credentials: opts.credentials.clone(),
            auth: Mutex::new(HashMap::new()),
        })
    }

    fn url(&self, hc: &HostClient, kind: &str, object: &str) -> Result<Url, ImageError> {
        let text = format!(
            "{}/{}/{kind}/{object}",
            hc.host.base.as_str().trim_end_matches('/'),
            self.reference.repository
        );
        Url::parse(&text).map_err(|e| ImageError::Unreachable {
            reference: self.display.clone(),
            host: hc.host.origin(),
            detail: format!("bad URL {text}: {e}"),
        })
    }

    /// Resolves the reference's tag or digest to the target descriptor and its body.
    pub async fn resolve(&self) -> Result<(Desc, Vec<u8>), ImageError> {
        let object = self.reference.object().to_owned();
        let mut first_err = None;
        for hc in self.hosts.iter().filter(|h| h.host.resolve) {
            match self.get_manifest(hc, &object).await {
                Ok(Some((body, content_type, header_digest))) => {
                    let digest = media::sha256_digest(&body);
                    let expected = match &self.reference.digest {
                        Some(d) => Some(d.clone()),
                        None => header_digest.filter(|d| d.starts_with("sha256:")),
                    };
                    if let Some(expected) = expected {
                        if expected != digest {
                            return Err(ImageError::DigestMismatch {
                                reference: self.display.clone(),
                                expected,
                                actual: digest,
                            });
                        }
                    }
                    let media_type = media::manifest_media_type(content_type.as_deref(), &body);
                    let size = i64::try_from(body.len()).unwrap_or(i64::MAX);
                    return Ok((
                        Desc {
                            media_type,
                            digest,
                            size,
                        },
                        body,
                    ));
                }
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(host = %hc.host.origin(), error = %e, "resolve failed on host");
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| ImageError::NotFound {
            reference: self.display.clone(),
        }))
    }

    /// A manifest or index by digest, verified.
    pub async fn fetch_manifest(&self, desc: &Desc) -> Result<Vec<u8>, ImageError> {
        let mut first_err = None;
        for hc in self.hosts.iter().filter(|h| h.host.pull) {
            match self.get_manifest(hc, &desc.digest).await {
                Ok(Some((body, _, _))) => {
                    self.verify(desc, &body)?;
                    return Ok(body);
                }
                Ok(None) => continue,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| ImageError::NotFound {
            reference: format!("{}@{}", self.reference.name(), desc.digest),
        }))
    }

    /// A small blob (config) read whole and verified.
    pub async fn fetch_small_blob(&self, desc: &Desc) -> Result<Vec<u8>, ImageError> {
        if usize::try_from(desc.size).unwrap_or(usize::MAX) > MAX_MANIFEST_BYTES {
            return Err(ImageError::BadManifest {
                reference: self.display.clone(),
                digest: desc.digest.clone(),
                detail: format!("config blob of {} bytes is too large", desc.size),
            });
        }
        let (resp, origin) = self.blob_response(desc).await?;
        let body = read_limited(resp, MAX_MANIFEST_BYTES, &self.display, &origin).await?;
        self.verify(desc, &body)?;
        Ok(body)
    }

    /// The response streaming a blob from the first pull host that has it.
    pub async fn blob_response(&self, desc: &Desc) -> Result<(HttpResponse, String), ImageError> {
        let mut first_err = None;
        for hc in self.hosts.iter().filter(|h| h.host.pull) {
            let url = self.url(hc, "blobs", &desc.digest)?;
            match self.send(hc, url.clone(), None).await {
                Ok(resp) if resp.status() == StatusCode::NOT_FOUND => continue,
                Ok(resp) if resp.status().is_success() => return Ok((resp, hc.host.origin())),
                Ok(resp) => {
                    first_err.get_or_insert(self.status_error(url.as_str(), resp).await);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| ImageError::NotFound {
            reference: format!("{}@{}", self.reference.name(), desc.digest),
        }))
    }

    pub fn display(&self) -> &str {
        &self.display
    }

    fn verify(&self, desc: &Desc, body: &[u8]) -> Result<(), ImageError> {
        let actual = media::sha256_digest(body);
        if actual != desc.digest || i64::try_from(body.len()).ok() != Some(desc.size) {
            return Err(ImageError::DigestMismatch {
                reference: self.display.clone(),
                expected: format!("{} ({} bytes)", desc.digest, desc.size),
                actual: format!("{actual} ({} bytes)", body.len()),
            });
        }
        Ok(())
    }

    /// `Ok(None)` for 404 on this host.
    async fn get_manifest(
        &self,
        hc: &HostClient,
        object: &str,
    ) -> Result<Option<(Vec<u8>, Option<String>, Option<String>)>, ImageError> {
        let url = self.url(hc, "manifests", object)?;
        let resp = self.send(hc, url.clone(), Some(MANIFEST_ACCEPT)).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(self.status_error(url.as_str(), resp).await);
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header(CONTENT_TYPE.as_str());
        let digest = header("docker-content-digest");
        let body = read_limited(resp, MAX_MANIFEST_BYTES, &self.display, &hc.host.origin()).await?;
        Ok(Some((body, content_type, digest)))
    }

    async fn status_error(&self, url: &str, resp: HttpResponse) -> ImageError {
        let status = resp.status().as_u16();
        let body = resp.text().await;
        ImageError::Registry {
            reference: self.display.clone(),
            url: url.to_owned(),
            status,
            detail: registry_error_detail(&body),
        }
    }

    /// Sends a GET, answering a 401 challenge with each applicable credential in turn.
    async fn send(
        &self,
        hc: &HostClient,
        url: Url,
        accept: Option<&str>,
    ) -> Result<HttpResponse, ImageError> {
        let origin = hc.host.origin();
        let cached = self.auth.lock().ok().and_then(|m| m.get(&origin).cloned());
        let resp = self.get(hc, url.clone(), accept, cached.as_ref()).await?;
        if resp.status() == StatusCode::FORBIDDEN {
            return Err(self.unauthorized(&origin, resp).await);
        }
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(parse_challenge);
        let Some(challenge) = challenge else {
            return Err(self.unauthorized(&origin, resp).await);
        };
        let mut last = resp;
        let candidates: Vec<Option<&Credentials>> = if self.credentials.is_empty() {
            vec![None]
        } else {
            self.credentials.iter().map(Some).collect()
        };
        let mut token_error = None;
        for cred in candidates {
            let header = match self.authorization(hc, &challenge, cred).await {
                Ok(Some(h)) => h,
                Ok(None) => continue,
                Err(e) => {
                    token_error = Some(e);
                    continue;
                }
            };
            let resp = self.get(hc, url.clone(), accept, Some(&header)).await?;
            if resp.status() != StatusCode::UNAUTHORIZED && resp.status() != StatusCode::FORBIDDEN {
                if let Ok(mut m) = self.auth.lock() {
                    m.insert(origin.clone(), header);
                }
                return Ok(resp);
            }
            last = resp;
        }
        if let Some(e) = token_error {
            return Err(e);
        }
        Err(self.unauthorized(&origin, last).await)
    }

    async fn get(
        &self,
        hc: &HostClient,
        url: Url,
        accept: Option<&str>,
        auth: Option<&HeaderValue>,
    ) -> Result<HttpResponse, ImageError> {
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        if let Some(a) = accept.and_then(|a| HeaderValue::from_str(a).ok()) {
            headers.push((ACCEPT, a));
        }
        if let Some(a) = auth {
            headers.push((AUTHORIZATION, a.clone()));
        }
        hc.http
            .get(&url, &headers)
            .await
            .map_err(|e| ImageError::Unreachable {
                reference: self.display.clone(),
                host: hc.host.origin(),
                detail: format!("GET {url}: {e}"),
            })
    }

    async fn unauthorized(&self, origin: &str, resp: HttpResponse) -> ImageError {
        let status = resp.status();
        let body = resp.text().await;
        ImageError::Unauthorized {
            reference: self.display.clone(),
            host: origin.to_owned(),
            detail: format!("{status}: {}", registry_error_detail(&body)),
        }
    }

    /// The Authorization header for `challenge` with `cred` (`None`: anonymous).
    /// `Ok(None)` when this credential cannot answer this kind of challenge.
    async fn authorization(
        &self,
        hc: &HostClient,
        challenge: &Challenge,
        cred: Option<&Credentials>,
    ) -> Result<Option<HeaderValue>, ImageError> {
        let header = |v: String| {
            HeaderValue::from_str(&v).map_err(|_| ImageError::Unauthorized {
                reference: self.display.clone(),
                host: hc.host.origin(),
                detail: "credentials are not a valid header value".to_owned(),
            })
        };
        match challenge.scheme.as_str() {
            "basic" => match cred {
                Some(Credentials::Basic { username, password }) => {
                    Ok(Some(basic_header(username, password)?))
                }
                Some(Credentials::RegistryToken(t)) => Ok(Some(header(format!("Bearer {t}"))?)),
                _ => Ok(None),
            },
            "bearer" => {
                if let Some(Credentials::RegistryToken(t)) = cred {
                    return Ok(Some(header(format!("Bearer {t}"))?));
                }
                let token = self.fetch_token(hc, challenge, cred).await?;
                Ok(token.map(|t| header(format!("Bearer {t}"))).transpose()?)
            }
            _ => Ok(None),
        }
    }

    /// Gets a token from the challenge's realm. `Ok(None)` when the token server refuses
    /// these credentials (so the next ones are tried).
    async fn fetch_token(
        &self,
        hc: &HostClient,
        challenge: &Challenge,
        cred: Option<&Credentials>,
    ) -> Result<Option<String>, ImageError> {
        let origin = hc.host.origin();
        let token_err = |detail: String| ImageError::Unauthorized {
            reference: self.display.clone(),
            host: origin.clone(),
            detail,
        };
        let realm = challenge
            .params
            .get("realm")
            .ok_or_else(|| token_err("Bearer challenge without realm".to_owned()))?;
        let mut realm_url =
            Url::parse(realm).map_err(|e| token_err(format!("bad realm {realm:?}: {e}")))?;
        let own_scope = format!("repository:{}:pull", self.reference.repository);
        let mut scopes = vec![own_scope.clone()];
        if let Some(s) = challenge.params.get("scope") {
            if *s != own_scope {
                scopes.push(s.clone());
            }
        }
        let service = challenge.params.get("service").cloned().unwrap_or_default();
        let resp = match cred {
            Some(Credentials::IdentityToken(refresh)) => {
                let body = url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "refresh_token")
                    .append_pair("refresh_token", refresh)
                    .append_pair("service", &service)
                    .append_pair("scope", &scopes.join(" "))
                    .append_pair("client_id", "cairn")
                    .finish();
                let headers = [(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                )];
                hc.http
                    .send(Method::POST, &realm_url, &headers, Bytes::from(body))
                    .await
            }
            _ => {
                {
                    let mut q = realm_url.query_pairs_mut();
                    if !service.is_empty() {
                        q.append_pair("service", &service);
                    }
                    for s in &scopes {
                        q.append_pair("scope", s);
                    }
                }
                let mut headers = Vec::new();
                if let Some(Credentials::Basic { username, password }) = cred {
                    headers.push((AUTHORIZATION, basic_header(username, password)?));
                }
                hc.http.get(&realm_url, &headers).await
            }
        };
        let resp = resp.map_err(|e| ImageError::Unreachable {
            reference: self.display.clone(),
            host: realm_url.origin().ascii_serialization(),
            detail: format!("fetching token: {e}"),
        })?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let what = if cred.is_some() {
                "token"
            } else {
                "anonymous token"
            };
            return Err(token_err(format!(
                "failed to fetch {what}: unexpected status: {status}"
            )));
        }
        if !status.is_success() {
            return Err(token_err(format!(
                "failed to fetch token: unexpected status: {status}"
            )));
        }
        let raw = resp
            .bytes_limited(1 << 20)
            .await
            .map_err(|e| token_err(format!("reading token response: {e}")))?;
        let body: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| token_err(format!("token response is not JSON: {e}")))?;
        let token = body
            .get("token")
            .or_else(|| body.get("access_token"))
            .and_then(|v| v.as_str())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| token_err("token response without token".to_owned()))?;
        Ok(Some(token.to_owned()))
    }
}

async fn read_limited(
    resp: HttpResponse,
    limit: usize,
    reference: &str,
    origin: &str,
) -> Result<Vec<u8>, ImageError> {
    resp.bytes_limited(limit)
        .await
        .map_err(|e| ImageError::Unreachable {
            reference: reference.to_owned(),
            host: origin.to_owned(),
            detail: format!("reading body: {e}"),
        })
}

fn basic_header(username: &str, password: &str) -> Result<HeaderValue, ImageError> {
    use base64::Engine as _;
    let enc = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    HeaderValue::from_str(&format!("Basic {enc}")).map_err(|_| ImageError::Unauthorized {
        reference: String::new(),
        host: String::new(),
        detail: "credentials are not a valid header value".to_owned(),
    })
}

/// The first `errors[].code: message` of a distribution error body, else the body.
fn registry_error_detail(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    if let Some(first) = parsed
        .as_ref()
        .and_then(|v| v.get("errors"))
        .and_then(|e| e.as_array())
        .and_then(|a| a.first())
    {
        let code = first
            .get("code")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let message = first
            .get("message")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        return format!("{code}: {message}");
    }
    body.chars().take(200).collect::<String>().trim().to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Challenge {
    /// Lower-cased scheme.
    scheme: String,
    params: HashMap<String, String>,
}

/// Parses `Bearer realm="...",service="...",scope="..."` (quoted values may hold commas).
fn parse_challenge(header: &str) -> Challenge {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = HashMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    _ => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek() {
                if *c == ',' {
                    break;
                }
                value.push(*c);
                chars.next();
            }
        }
        params.insert(key.trim().to_lowercase(), value.trim().to_owned());
    }
    Challenge {
        scheme: scheme.to_lowercase(),
        params,
    }
}

/// An HTTP client for one host: rustls with the ring provider and webpki roots (plus
/// the host's `ca` files), or no verification at all for `skip_verify`.
fn http_client(host: &RegistryHost) -> Result<HttpClient, ImageError> {
    let tls_err = |detail: String| ImageError::Tls {
        host: host.origin(),
        detail,
    };
    let provider = crate::http::provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?;
    let config = if host.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for path in &host.ca {
            use rustls::pki_types::pem::PemObject as _;
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| tls_err(format!("reading CA {}: {e}", path.display())))?;
            for cert in certs {
                let cert =
                    cert.map_err(|e| tls_err(format!("parsing CA {}: {e}", path.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| tls_err(format!("adding CA {}: {e}", path.display())))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(HttpClient::new(config, CONNECT_TIMEOUT, READ_TIMEOUT))
}

/// Accepts any server certificate (handshake signatures are still checked): a registry's
/// `skip_verify = true`, and the kubelet-style prober and lifecycle hooks in the agent
/// (`InsecureSkipVerify`).
#[derive(Debug)]
pub struct AnyServerCertificate(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn challenges() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull,push""#,
        );
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://auth.docker.io/token");
        assert_eq!(c.params["service"], "registry.docker.io");
        assert_eq!(c.params["scope"], "repository:library/busybox:pull,push");
        let b = parse_challenge(r#"Basic realm="cairn-test""#);
        assert_eq!(b.scheme, "basic");
        assert_eq!(b.params["realm"], "cairn-test");
        let odd = parse_challenge("Bearer realm=http://x/token, error=\"invalid_token\"");
        assert_eq!(odd.params["realm"], "http://x/token");
        assert_eq!(odd.params["error"], "invalid_token");
    }

    #[test]
    fn error_details() {
        let body =
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#;
        assert_eq!(
            registry_error_detail(body),
            "MANIFEST_UNKNOWN: manifest unknown"
        );
        assert_eq!(registry_error_detail("plain"), "plain");
    }
}
