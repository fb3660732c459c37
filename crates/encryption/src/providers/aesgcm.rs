//! `aesgcm`: AES-GCM with a 16, 24 or 32 byte key, a random 12-byte nonce, and the
//! storage key as additional authenticated data (upstream's `aes.NewGCMTransformer`).

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, Nonce};

use super::{random, Cipher};

type Aes192Gcm = aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>;

pub enum AesGcm {
    Aes128(Box<Aes128Gcm>),
    Aes192(Box<Aes192Gcm>),
    Aes256(Box<Aes256Gcm>),
}

const NONCE: usize = 12;

impl AesGcm {
    pub fn new(key: &[u8]) -> Result<AesGcm, String> {
        let bad = |_| format!("key must be 16, 24 or 32 bytes, not {}", key.len());
        Ok(match key.len() {
            16 => AesGcm::Aes128(Box::new(Aes128Gcm::new_from_slice(key).map_err(bad)?)),
            24 => AesGcm::Aes192(Box::new(Aes192Gcm::new_from_slice(key).map_err(bad)?)),
            32 => AesGcm::Aes256(Box::new(Aes256Gcm::new_from_slice(key).map_err(bad)?)),
            n => return Err(format!("key must be 16, 24 or 32 bytes, not {n}")),
        })
    }
}

impl Cipher for AesGcm {
    fn seal(&self, plaintext: &[u8], storage_key: &[u8]) -> Result<Vec<u8>, String> {
        let nonce: [u8; NONCE] = random();
        let payload = Payload {
            msg: plaintext,
            aad: storage_key,
        };
        let n = Nonce::from_slice(&nonce);
        let sealed = match self {
            AesGcm::Aes128(c) => c.encrypt(n, payload),
            AesGcm::Aes192(c) => c.encrypt(n, payload),
            AesGcm::Aes256(c) => c.encrypt(n, payload),
        }
        .map_err(|e| e.to_string())?;
        Ok([nonce.as_slice(), &sealed].concat())
    }

    fn open(&self, sealed: &[u8], storage_key: &[u8]) -> Result<Vec<u8>, String> {
        if sealed.len() < NONCE {
            return Err("the data is shorter than a nonce".into());
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE);
        let payload = Payload {
            msg: ciphertext,
            aad: storage_key,
        };
        let n = Nonce::from_slice(nonce);
        match self {
            AesGcm::Aes128(c) => c.decrypt(n, payload),
            AesGcm::Aes192(c) => c.decrypt(n, payload),
            AesGcm::Aes256(c) => c.decrypt(n, payload),
        }
        .map_err(|_| "cipher: message authentication failed".to_string())
    }
}
