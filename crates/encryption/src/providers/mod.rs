//! The providers of an `EncryptionConfiguration` and the transformer their ordered list
//! makes: the first provider (its first key) encrypts, every provider decrypts what
//! carries its prefix, `identity` reads what carries none.

mod aescbc;
mod aesgcm;
mod secretbox;

pub use aescbc::AesCbc;
pub use aesgcm::AesGcm;
pub use secretbox::Secretbox;

/// The prefix every encrypted value starts with.
/// How every value an encrypting provider wrote begins.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    #[error("no matching prefix found")]
    NoMatchingKey,
    #[error("identity transformer tried to read encrypted data")]
    IdentityReadEncrypted,
    #[error("{provider} key {key}: {message}")]
    Cipher {
        provider: &'static str,
        key: String,
        message: String,
    },
}

/// One key's cipher: seals a value (with the storage key as additional data where the
/// provider authenticates it) into nonce-or-IV followed by ciphertext, and opens it.
pub trait Cipher: Send + Sync {
    fn seal(&self, plaintext: &[u8], storage_key: &[u8]) -> Result<Vec<u8>, String>;
    fn open(&self, sealed: &[u8], storage_key: &[u8]) -> Result<Vec<u8>, String>;
}

pub struct NamedKey {
    pub name: String,
    pub cipher: Box<dyn Cipher>,
}

pub enum Provider {
    Identity,
    /// `kind` is the provider's name in the configuration and in the stored prefix.
    Keys {
        kind: &'static str,
        keys: Vec<NamedKey>,
    },
}

fn prefix(kind: &str, key: &str) -> Vec<u8> {
    format!("k8s:enc:{kind}:v1:{key}:").into_bytes()
}

impl Provider {
    fn write(&self, storage_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, TransformError> {
        let Provider::Keys { kind, keys } = self else {
            return Ok(plaintext.to_vec());
        };
        let Some(key) = keys.first() else {
            return Err(TransformError::NoMatchingKey);
        };
        let sealed = key
            .cipher
            .seal(plaintext, storage_key.as_bytes())
            .map_err(|message| TransformError::Cipher {
                provider: kind,
                key: key.name.clone(),
                message,
            })?;
        let mut out = prefix(kind, &key.name);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// `None` when `stored` is not this provider's.
    fn read(&self, storage_key: &str, stored: &[u8]) -> Option<Result<Vec<u8>, TransformError>> {
        let Provider::Keys { kind, keys } = self else {
            if stored.starts_with(ENCRYPTED_PREFIX) {
                return Some(Err(TransformError::IdentityReadEncrypted));
            }
            return Some(Ok(stored.to_vec()));
        };
        keys.iter().find_map(|key| {
            let sealed = stored.strip_prefix(prefix(kind, &key.name).as_slice())?;
            Some(
                key.cipher
                    .open(sealed, storage_key.as_bytes())
                    .map_err(|message| TransformError::Cipher {
                        provider: kind,
                        key: key.name.clone(),
                        message,
                    }),
            )
        })
    }
}

/// A resource's ordered providers.
pub struct Transformer {
    providers: Vec<Provider>,
}

impl Transformer {
    pub fn new(providers: Vec<Provider>) -> Transformer {
        Transformer { providers }
    }

    /// The stored form of `plaintext`: the first provider's.
    pub fn write(&self, storage_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, TransformError> {
        match self.providers.first() {
            Some(p) => p.write(storage_key, plaintext),
            None => Ok(plaintext.to_vec()),
        }
    }

    /// The plaintext of `stored`, by whichever provider's prefix it carries. Encrypted
    /// providers are tried first, so `identity` anywhere in the list reads old data.
    pub fn read(&self, storage_key: &str, stored: &[u8]) -> Result<Vec<u8>, TransformError> {
        let keyed = self
            .providers
            .iter()
            .filter(|p| matches!(p, Provider::Keys { .. }));
        let identity = self
            .providers
            .iter()
            .filter(|p| matches!(p, Provider::Identity));
        keyed
            .chain(identity)
            .find_map(|p| p.read(storage_key, stored))
            .unwrap_or(Err(TransformError::NoMatchingKey))
    }
}

/// Random bytes for a nonce or an IV.
fn random<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    rand::fill(&mut out);
    out
}

#[cfg(test)]
mod tests;
