//! Encryption at rest, as kube-apiserver's `--encryption-provider-config` does it:
//!
//! - [`config`]: upstream's `EncryptionConfiguration` (`apiserver.config.k8s.io/v1`):
//!   per resource, an ordered list of providers; the first encrypts every write, all of
//!   them decrypt (so a new key is added second, moved first, then the old one removed).
//! - [`providers`]: `aesgcm`, `aescbc`, `secretbox` and `identity`, with upstream's stored
//!   form `k8s:enc:<provider>:v1:<key name>:<nonce or IV><ciphertext>` (AES-GCM binds the
//!   storage key as additional data, as upstream does).
//! - [`backend`]: a store [`cairn_store::Backend`] that encrypts the values of the
//!   resources a configuration names on their way in and decrypts them on their way out
//!   (gets, lists, the event log, watches), around any other backend.

pub mod backend;
pub mod config;
pub mod providers;

pub use backend::EncryptingBackend;
pub use config::{EncryptionConfig, EncryptionConfigError};
pub use providers::{Provider, TransformError, Transformer, ENCRYPTED_PREFIX};
