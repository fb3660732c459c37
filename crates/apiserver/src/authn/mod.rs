//! Authentication: who a request is, in upstream's order: the connection's client
//! certificate, then a bearer token (ServiceAccount JWTs, bootstrap tokens, the static
//! token file, and the tokens of the components running inside cairn-control), else
//! anonymous. Credentials that are
//! present but wrong are a 401 even where anonymous requests are allowed (upstream's
//! fail-on-error union before the anonymous authenticator).
//!
//! Anonymous requests are `system:anonymous` in `system:unauthenticated` and may only
//! `GET` what upstream's `system:public-info-viewer` grants; everything else is a 401,
//! as with kube-apiserver's anonymous authenticator limited to those paths
//! (`AuthenticationConfiguration.anonymous.conditions`).

pub mod bootstrap;
pub mod jwt;
pub mod serviceaccount;
pub mod token_file;
pub use cairn_auth::x509;

use std::collections::HashMap;

use cairn_auth::UserInfo;
use http::{header, HeaderMap, Method};
use parking_lot::RwLock;

pub use serviceaccount::{ObjectLookup, ServiceAccountTokens};
pub use x509::{ClientCertAuthenticator, PeerCert};

/// The non-resource paths anonymous requests may read (`system:public-info-viewer`).
pub const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// Why a request is a 401; logged, never sent (upstream answers "Unauthorized" only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthorized(pub String);

/// The authenticated user of a request, in its extensions for the handlers after.
#[derive(Debug, Clone)]
pub struct RequestUser(pub UserInfo);

pub struct Authenticator {
    pub x509: ClientCertAuthenticator,
    tokens: RwLock<HashMap<String, UserInfo>>,
    pub service_accounts: Option<ServiceAccountTokens>,
}

impl Authenticator {
    pub fn new(
        x509: ClientCertAuthenticator,
        tokens: HashMap<String, UserInfo>,
        service_accounts: Option<ServiceAccountTokens>,
    ) -> Authenticator {
        Authenticator {
            x509,
            tokens: RwLock::new(tokens),
            service_accounts,
        }
    }

    /// Adds a bearer token (the in-process components' own, made at start).
    pub fn add_token(&self, token: String, user: UserInfo) {
        self.tokens.write().insert(token, user);
    }

    /// The request's user; anonymous only where anonymous requests are allowed.
    pub fn authenticate(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        peer: Option<&PeerCert>,
        objects: &dyn ObjectLookup,
    ) -> Result<UserInfo, Unauthorized> {
        match self.credentials(headers, peer, objects)? {
            Some(user) => Ok(user.authenticated()),
            None if anonymous_allowed(method, path) => Ok(UserInfo::anonymous()),
            None => Err(Unauthorized("no credentials".into())),
        }
    }

    /// The user the credentials name, None without credentials.
    fn credentials(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCert>,
        objects: &dyn ObjectLookup,
    ) -> Result<Option<UserInfo>, Unauthorized> {
        let mut failure = None;
        match peer {
            Some(PeerCert::Valid { user, not_after }) => {
                if cairn_pki::inspect::now() <= *not_after {
                    return Ok(Some(user.clone()));
                }
                failure = Some(Unauthorized("client certificate expired".into()));
            }
            Some(PeerCert::Invalid(reason)) => failure = Some(Unauthorized(reason.clone())),
            Some(PeerCert::Absent) | None => {}
        }
        if let Some(token) = bearer_token(headers)? {
            return self.token_user(token, objects).map(Some);
        }
        failure.map_or(Ok(None), Err)
    }

    /// A bearer token's user: a ServiceAccount token for this API's audiences, else a
    /// static or loopback token.
    pub fn token_user(
        &self,
        token: &str,
        objects: &dyn ObjectLookup,
    ) -> Result<UserInfo, Unauthorized> {
        let now = cairn_pki::inspect::now();
        if let Some(sa) = &self.service_accounts {
            if let Some((user, _)) = sa.authenticate(token, &sa.api_audiences, objects, now)? {
                return Ok(user);
            }
        }
        if let Some(user) = bootstrap::authenticate(token, objects, now)? {
            return Ok(user);
        }
        self.tokens
            .read()
            .get(token)
            .cloned()
            .ok_or_else(|| Unauthorized("invalid bearer token".into()))
    }
}

fn anonymous_allowed(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD) && PUBLIC_PATHS.contains(&path)
}

/// The token of an `Authorization: Bearer` header; any other scheme is no token.
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, Unauthorized> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| Unauthorized("authorization header is not text".into()))?;
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(Unauthorized("empty bearer token".into()));
    }
    Ok(Some(token))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn authenticator() -> Authenticator {
        let ca = cairn_pki::Authority::generate("client-ca", std::time::Duration::from_secs(600))
            .unwrap();
        let check = crate::tls::client_chain_verifier(ca.cert_pem()).unwrap();
        let tokens = token_file::parse("good,alice,1,dev\n").unwrap();
        Authenticator::new(ClientCertAuthenticator::new(check), tokens, None)
    }

    struct NoObjects;

    impl ObjectLookup for NoObjects {
        fn live(&self, _: &str, _: Option<&str>, _: &str) -> Option<serviceaccount::LiveObject> {
            None
        }
    }

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {t}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn anonymous_reads_only_the_public_paths() {
        let a = authenticator();
        let none = HeaderMap::new();
        let u = a
            .authenticate(&Method::GET, "/healthz", &none, None, &NoObjects)
            .unwrap();
        assert_eq!(u.username, "system:anonymous");
        assert!(a
            .authenticate(&Method::GET, "/api", &none, None, &NoObjects)
            .is_err());
        assert!(a
            .authenticate(&Method::POST, "/healthz", &none, None, &NoObjects)
            .is_err());
    }

    #[test]
    fn tokens_name_users_and_wrong_credentials_fail_even_on_public_paths() {
        let a = authenticator();
        let u = a
            .authenticate(&Method::GET, "/api", &bearer("good"), None, &NoObjects)
            .unwrap();
        assert_eq!(u.username, "alice");
        assert_eq!(u.groups, vec!["dev", "system:authenticated"]);
        assert!(a
            .authenticate(&Method::GET, "/healthz", &bearer("bad"), None, &NoObjects)
            .is_err());
        let bad_cert = PeerCert::Invalid("unknown CA".into());
        let none = HeaderMap::new();
        assert!(a
            .authenticate(&Method::GET, "/healthz", &none, Some(&bad_cert), &NoObjects)
            .is_err());
        // A good token wins over a bad certificate, as upstream's union tries both.
        assert!(a
            .authenticate(
                &Method::GET,
                "/api",
                &bearer("good"),
                Some(&bad_cert),
                &NoObjects
            )
            .is_ok());
    }

    #[test]
    fn expired_certificates_are_refused() {
        let a = authenticator();
        let expired = PeerCert::Valid {
            user: UserInfo::new("bob", vec![]),
            not_after: 1,
        };
        let none = HeaderMap::new();
        assert!(a
            .authenticate(&Method::GET, "/api", &none, Some(&expired), &NoObjects)
            .is_err());
    }
}
