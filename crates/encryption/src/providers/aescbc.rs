//! `aescbc`: AES-CBC with PKCS#7 padding and a random 16-byte IV before the ciphertext
//! (upstream's `aes.NewCBCTransformer`; no authentication, as upstream).

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};

use super::{random, Cipher};

const IV: usize = 16;

pub struct AesCbc {
    key: Vec<u8>,
}

impl AesCbc {
    pub fn new(key: &[u8]) -> Result<AesCbc, String> {
        match key.len() {
            16 | 24 | 32 => Ok(AesCbc { key: key.to_vec() }),
            n => Err(format!("key must be 16, 24 or 32 bytes, not {n}")),
        }
    }
}

fn encrypt<C>(key: &[u8], iv: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, String>
where
    cbc::Encryptor<C>: KeyIvInit + BlockEncryptMut,
    C: aes::cipher::BlockCipher + aes::cipher::BlockEncryptMut,
{
    let e = cbc::Encryptor::<C>::new_from_slices(key, iv).map_err(|e| e.to_string())?;
    Ok(e.encrypt_padded_vec_mut::<Pkcs7>(plaintext))
}

fn decrypt<C>(key: &[u8], iv: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>, String>
where
    cbc::Decryptor<C>: KeyIvInit + BlockDecryptMut,
    C: aes::cipher::BlockCipher + aes::cipher::BlockDecryptMut,
{
    let d = cbc::Decryptor::<C>::new_from_slices(key, iv).map_err(|e| e.to_string())?;
    d.decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
        .map_err(|_| "invalid PKCS7 data (empty or not padded)".to_string())
}

impl Cipher for AesCbc {
    fn seal(&self, plaintext: &[u8], _storage_key: &[u8]) -> Result<Vec<u8>, String> {
        let iv: [u8; IV] = random();
        let ciphertext = match self.key.len() {
            16 => encrypt::<aes::Aes128>(&self.key, &iv, plaintext),
            24 => encrypt::<aes::Aes192>(&self.key, &iv, plaintext),
            _ => encrypt::<aes::Aes256>(&self.key, &iv, plaintext),
        }?;
        Ok([iv.as_slice(), &ciphertext].concat())
    }

    fn open(&self, sealed: &[u8], _storage_key: &[u8]) -> Result<Vec<u8>, String> {
        if sealed.len() < IV || !(sealed.len() - IV).is_multiple_of(IV) {
            return Err("the data is not a whole number of blocks after the IV".into());
        }
        let (iv, ciphertext) = sealed.split_at(IV);
        match self.key.len() {
            16 => decrypt::<aes::Aes128>(&self.key, iv, ciphertext),
            24 => decrypt::<aes::Aes192>(&self.key, iv, ciphertext),
            _ => decrypt::<aes::Aes256>(&self.key, iv, ciphertext),
        }
    }
}
