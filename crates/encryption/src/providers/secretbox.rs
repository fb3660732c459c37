//! `secretbox`: NaCl's secretbox (XSalsa20-Poly1305) with a 32-byte key and a random
//! 24-byte nonce before the box (upstream's `secretbox.NewSecretboxTransformer`). Random
//! 24-byte nonces never collide in practice, which is why cairn's default uses it.

use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};

use super::{random, Cipher};

const NONCE: usize = 24;

pub struct Secretbox(Box<XSalsa20Poly1305>);

impl Secretbox {
    pub fn new(key: &[u8]) -> Result<Secretbox, String> {
        if key.len() != 32 {
            return Err(format!("key must be 32 bytes, not {}", key.len()));
        }
        let cipher = XSalsa20Poly1305::new_from_slice(key).map_err(|e| e.to_string())?;
        Ok(Secretbox(Box::new(cipher)))
    }
}

impl Cipher for Secretbox {
    fn seal(&self, plaintext: &[u8], _storage_key: &[u8]) -> Result<Vec<u8>, String> {
        let nonce: [u8; NONCE] = random();
        let sealed = self
            .0
            .encrypt(Nonce::from_slice(&nonce), plaintext)
            .map_err(|e| e.to_string())?;
        Ok([nonce.as_slice(), &sealed].concat())
    }

    fn open(&self, sealed: &[u8], _storage_key: &[u8]) -> Result<Vec<u8>, String> {
        if sealed.len() < NONCE {
            return Err("the data is shorter than a nonce".into());
        }
        let (nonce, boxed) = sealed.split_at(NONCE);
        self.0
            .decrypt(Nonce::from_slice(nonce), boxed)
            .map_err(|_| "output array too small or failed to decrypt".to_string())
    }
}
