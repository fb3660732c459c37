//! Credentials as the API server and the agent judge them: ServiceAccount JWTs (raw
//! tokens, and arbitrary claims under a valid signature), client certificates (DER
//! through the x509 authenticator and the certificate parser), certificate signing
//! requests, bootstrap tokens, static token files and join tokens. The first byte picks
//! which; nothing may panic, and a token that is not exactly one this issuer signed
//! must never authenticate.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use base64::Engine;
use cairn_apiserver::authn::serviceaccount::{LiveObject, SecretView};
use cairn_apiserver::authn::{bootstrap, jwt::SigningKey, ObjectLookup, ServiceAccountTokens};
use libfuzzer_sys::fuzz_target;
use rustls::pki_types::CertificateDer;

/// Every object exists and every Secret is a bootstrap token, so the fuzzer reaches the
/// checks past the lookups.
struct Everything;

impl ObjectLookup for Everything {
    fn live(&self, _: &str, _: Option<&str>, _: &str) -> Option<LiveObject> {
        Some(LiveObject {
            uid: "uid".into(),
            deletion: None,
        })
    }

    fn secret(&self, _: &str, name: &str) -> Option<SecretView> {
        let id = name.strip_prefix("bootstrap-token-")?;
        let mut data = BTreeMap::new();
        data.insert("token-id".into(), id.as_bytes().to_vec());
        data.insert("token-secret".into(), b"0123456789abcdef".to_vec());
        data.insert("usage-bootstrap-authentication".into(), b"true".to_vec());
        data.insert("expiration".into(), b"2099-01-01T00:00:00Z".to_vec());
        Some(SecretView {
            type_: bootstrap::SECRET_TYPE.into(),
            data,
            deleting: false,
        })
    }
}

/// The issuer's key, as PEM: the authenticator and the claims signer both load it.
fn key_pem() -> &'static str {
    static PEM: OnceLock<String> = OnceLock::new();
    PEM.get_or_init(|| {
        let rng = ring::rand::SystemRandom::new();
        let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("key");
        let b64 = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    })
}

fn tokens() -> &'static ServiceAccountTokens {
    static TOKENS: OnceLock<ServiceAccountTokens> = OnceLock::new();
    TOKENS.get_or_init(|| {
        ServiceAccountTokens::new(SigningKey::from_pkcs8_pem(key_pem()).expect("pem"))
    })
}

fn signer() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::from_pkcs8_pem(key_pem()).expect("pem"))
}

fn client_certs() -> &'static cairn_auth::x509::ClientCertAuthenticator {
    static X509: OnceLock<cairn_auth::x509::ClientCertAuthenticator> = OnceLock::new();
    X509.get_or_init(|| {
        let ca = cairn_pki::Authority::generate("fuzz-ca", std::time::Duration::from_secs(3600))
            .expect("ca");
        let check = cairn_pki::tls::client_chain_verifier(ca.cert_pem()).expect("verifier");
        cairn_auth::x509::ClientCertAuthenticator::new(check)
    })
}

const NOW: i64 = 1_900_000_000;

fn jwt(text: &str) {
    let audiences = tokens().api_audiences.clone();
    if let Ok(Some(_)) = tokens().authenticate(text, &audiences, &Everything, NOW) {
        panic!("an unsigned token authenticated: {text:?}");
    }
}

/// The issuer's own signature over arbitrary claims: the claim checks must hold.
fn signed_claims(body: &[u8]) {
    let Ok(claims) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let Ok(token) = signer().sign(&claims) else {
        return;
    };
    let audiences = tokens().api_audiences.clone();
    let _ = tokens().authenticate(&token, &audiences, &Everything, NOW);
}

fuzz_target!(|data: &[u8]| {
    let [which, body @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(body);
    match which % 7 {
        0 => jwt(&text),
        1 => signed_claims(body),
        2 => {
            let chain = [CertificateDer::from(body.to_vec())];
            let _ = client_certs().peer(Some(&chain));
            let _ = cairn_pki::CertInfo::from_der(&chain[0]);
        }
        3 => {
            let _ = cairn_pki::csr::parse_request(&text);
        }
        4 => {
            if let Ok(Some(user)) = bootstrap::authenticate(&text, &Everything, NOW) {
                assert!(text.ends_with(".0123456789abcdef"), "{text:?} authenticated as {user:?}");
            }
        }
        5 => {
            let _ = cairn_apiserver::authn::token_file::parse(&text);
        }
        _ => {
            let _ = cairn_pki::join::JoinToken::parse(&text);
        }
    }
});
