//! Join tokens: k3s's secure format, `K10<sha256 of the CA bundle>::<id>.<secret>`. The
//! hash pins the cluster CA (the PEM bytes served at `/cacerts`), so a joining node
//! never trusts a server on first use; `<id>.<secret>` is an upstream bootstrap token
//! (`bootstrap.kubernetes.io/token` Secret `bootstrap-token-<id>` in `kube-system`).

use std::fmt;

use sha2::{Digest, Sha256};

const PREFIX: &str = "K10";

/// A parsed join token.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// Lower-case hex SHA-256 of the CA bundle's PEM bytes.
    pub ca_hash: String,
    pub id: String,
    pub secret: String,
}

/// Why a join token was refused (it is never echoed: it is a credential).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinTokenError {
    #[error("join token must look like K10<sha256 of the CA>::<6 characters>.<16 characters>")]
    Format,
    #[error("the server's CA does not match the join token: its sha256 is {actual}, the token pins {pinned}")]
    CaMismatch { pinned: String, actual: String },
}

/// Lower-case hex SHA-256 of `pem`, as the token carries it.
pub fn ca_hash(pem: &[u8]) -> String {
    hex::encode(Sha256::digest(pem))
}

fn token_part(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl JoinToken {
    pub fn new(ca_pem: &[u8], id: &str, secret: &str) -> JoinToken {
        JoinToken {
            ca_hash: ca_hash(ca_pem),
            id: id.to_string(),
            secret: secret.to_string(),
        }
    }

    pub fn parse(text: &str) -> Result<JoinToken, JoinTokenError> {
        let rest = text
            .trim()
            .strip_prefix(PREFIX)
            .ok_or(JoinTokenError::Format)?;
        let (hash, bootstrap) = rest.split_once("::").ok_or(JoinTokenError::Format)?;
        let (id, secret) = bootstrap.split_once('.').ok_or(JoinTokenError::Format)?;
        let hex_hash = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex_hash || !token_part(id, 6) || !token_part(secret, 16) {
            return Err(JoinTokenError::Format);
        }
        Ok(JoinToken {
            ca_hash: hash.to_ascii_lowercase(),
            id: id.to_string(),
            secret: secret.to_string(),
        })
    }

    /// The bearer token the API server authenticates (`<id>.<secret>`).
    pub fn bootstrap_token(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// Checks a CA bundle fetched without trust against the pinned hash.
    pub fn verify_ca(&self, pem: &[u8]) -> Result<(), JoinTokenError> {
        let actual = ca_hash(pem);
        if actual != self.ca_hash {
            return Err(JoinTokenError::CaMismatch {
                pinned: self.ca_hash.clone(),
                actual,
            });
        }
        Ok(())
    }
}

impl fmt::Display for JoinToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}::{}.{}", self.ca_hash, self.id, self.secret)
    }
}

/// Never prints the secret.
impl fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JoinToken({PREFIX}{}::{}.<secret>)",
            self.ca_hash, self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_pinning() {
        let t = JoinToken::new(b"ca pem", "abcdef", "0123456789abcdef");
        let parsed = JoinToken::parse(&t.to_string()).unwrap();
        assert_eq!(parsed, t);
        assert_eq!(parsed.bootstrap_token(), "abcdef.0123456789abcdef");
        assert!(parsed.verify_ca(b"ca pem").is_ok());
        let err = parsed.verify_ca(b"another ca").unwrap_err();
        assert!(
            err.to_string().contains("does not match the join token"),
            "{err}"
        );
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let hash = "a".repeat(64);
        for bad in [
            "",
            "abcdef.0123456789abcdef",
            &format!("K10{hash}abcdef.0123456789abcdef"),
            &format!("K10{}::abcdef.0123456789abcdef", "a".repeat(63)),
            &format!("K10{hash}::ABCDEF.0123456789abcdef"),
            &format!("K10{hash}::abcdef.short"),
        ] {
            assert_eq!(JoinToken::parse(bad), Err(JoinTokenError::Format), "{bad}");
        }
    }
}
