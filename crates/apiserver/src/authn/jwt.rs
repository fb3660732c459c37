//! Compact JWS with ES256 (ECDSA P-256, SHA-256), the one algorithm cairn's ServiceAccount
//! tokens use. Hand-written over ring rather than a JWT crate: ring is already every
//! rustls user's provider here, and a signed token is a header, claims and a signature —
//! the JWT crates bring a second crypto stack for that.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED,
    ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::Value;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("signing key: {0}")]
    Key(String),
    #[error("not a JWT")]
    Malformed,
    #[error("unsupported algorithm {0}")]
    Algorithm(String),
    #[error("invalid signature")]
    Signature,
    #[error("signing failed")]
    Sign,
}

/// The token signing key and its id (`kid`: the SHA-256 of the public key, as upstream
/// derives it from the key's DER).
pub struct SigningKey {
    pair: EcdsaKeyPair,
    pub kid: String,
}

impl SigningKey {
    /// From a PKCS#8 PEM (`sa.key`).
    pub fn from_pkcs8_pem(pem: &str) -> Result<SigningKey, JwtError> {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| JwtError::Key(e.to_string()))?;
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &SystemRandom::new(),
        )
        .map_err(|e| JwtError::Key(e.to_string()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref());
        Ok(SigningKey {
            kid: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            pair,
        })
    }

    pub fn sign(&self, claims: &Value) -> Result<String, JwtError> {
        let header = serde_json::json!({"alg": "ES256", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| JwtError::Sign)?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(sig.as_ref())
        ))
    }

    /// The claims of `token` if this key signed it.
    pub fn verify(&self, token: &str) -> Result<Value, JwtError> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let decode = |p: &str| URL_SAFE_NO_PAD.decode(p).map_err(|_| JwtError::Malformed);
        let header: Value = serde_json::from_slice(&decode(h)?).map_err(|_| JwtError::Malformed)?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg != "ES256" {
            return Err(JwtError::Algorithm(alg.to_string()));
        }
        let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.pair.public_key().as_ref());
        key.verify(format!("{h}.{c}").as_bytes(), &decode(s)?)
            .map_err(|_| JwtError::Signature)?;
        serde_json::from_slice(&decode(c)?).map_err(|_| JwtError::Malformed)
    }
}

/// Whether `token` has the shape of a JWT (three base64url parts): tokens that do not
/// are left to the other token authenticators.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("eyJ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> SigningKey {
        let pair = rcgen_key_pem();
        SigningKey::from_pkcs8_pem(&pair).unwrap()
    }

    fn rcgen_key_pem() -> String {
        let dir = tempfile::tempdir().unwrap();
        let pki = cairn_pki::ClusterPki::ensure(
            dir.path(),
            &cairn_pki::ServingNames(vec!["a".into()]),
            cairn_pki::Lifetimes::default(),
        )
        .unwrap();
        std::fs::read_to_string(pki.sa_key_paths().0).unwrap()
    }

    #[test]
    fn signed_tokens_verify_and_tampered_ones_do_not() {
        let k = key();
        let t = k.sign(&json!({"sub": "x"})).unwrap();
        assert!(looks_like_jwt(&t));
        assert_eq!(k.verify(&t).unwrap()["sub"], "x");
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"sub": "admin"}).to_string());
        parts[1] = &forged;
        assert_eq!(k.verify(&parts.join(".")), Err(JwtError::Signature));
        let other = key();
        assert_eq!(other.verify(&t), Err(JwtError::Signature));
    }

    #[test]
    fn garbage_and_other_algorithms_are_errors_not_panics() {
        let k = key();
        for bad in ["", "a.b", "a.b.c.d", "eyJ.eyJ.x", "%%%.%%%.%%%"] {
            assert!(k.verify(bad).is_err(), "{bad}");
        }
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode("{}")
        );
        assert_eq!(k.verify(&none), Err(JwtError::Algorithm("none".into())));
    }
}
