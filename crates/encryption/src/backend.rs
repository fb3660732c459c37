//! A [`Backend`] that keeps the resources an [`EncryptionConfig`] names encrypted in the
//! backend it wraps: values are encrypted on create and update, and decrypted from gets,
//! lists, deletes, the event log and watches, so the watch cache above it and everything
//! else in the API server only ever see plaintext. A value that cannot be decrypted is a
//! backend error naming its key (as upstream answers an internal error for it).

use std::sync::Arc;

use bytes::Bytes;
use cairn_store::{Backend, Event, KeyValue, Revision, StoreError};
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::config::EncryptionConfig;

pub struct EncryptingBackend {
    inner: Arc<dyn Backend>,
    config: Arc<EncryptionConfig>,
}

impl EncryptingBackend {
    pub fn new(inner: Arc<dyn Backend>, config: EncryptionConfig) -> EncryptingBackend {
        EncryptingBackend {
            inner,
            config: Arc::new(config),
        }
    }
}

fn encrypt(config: &EncryptionConfig, key: &str, value: Bytes) -> Result<Bytes, StoreError> {
    match config.transformer_for(key) {
        None => Ok(value),
        Some(t) => t
            .write(key, &value)
            .map(Bytes::from)
            .map_err(|e| StoreError::Backend(format!("encrypting {key}: {e}"))),
    }
}

fn decrypt(config: &EncryptionConfig, key: &str, value: Bytes) -> Result<Bytes, StoreError> {
    match config.transformer_for(key) {
        None => Ok(value),
        Some(t) => t
            .read(key, &value)
            .map(Bytes::from)
            .map_err(|e| StoreError::Backend(format!("decrypting {key}: {e}"))),
    }
}

fn decrypt_kv(config: &EncryptionConfig, mut kv: KeyValue) -> Result<KeyValue, StoreError> {
    kv.value = decrypt(config, &kv.key, kv.value)?;
    Ok(kv)
}

fn decrypt_event(config: &EncryptionConfig, mut ev: Event) -> Result<Event, StoreError> {
    ev.value = decrypt(config, &ev.key, ev.value)?;
    Ok(ev)
}

#[async_trait::async_trait]
impl Backend for EncryptingBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        match self.inner.get(key).await? {
            Some(kv) => Ok(Some(decrypt_kv(&self.config, kv)?)),
            None => Ok(None),
        }
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let (kvs, revision) = self.inner.list(prefix).await?;
        let kvs = kvs
            .into_iter()
            .map(|kv| decrypt_kv(&self.config, kv))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((kvs, revision))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        let value = encrypt(&self.config, key, value)?;
        self.inner.create(key, value).await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError> {
        let value = encrypt(&self.config, key, value)?;
        self.inner.update(key, value, expected_mod_revision).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        let (revision, kv) = self.inner.delete(key, expected_mod_revision).await?;
        Ok((revision, decrypt_kv(&self.config, kv)?))
    }

    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        self.inner
            .events_since(prefix, after)
            .await?
            .into_iter()
            .map(|ev| decrypt_event(&self.config, ev))
            .collect()
    }

    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        let config = Arc::clone(&self.config);
        self.inner
            .watch(prefix, after)
            .map(move |ev| ev.and_then(|ev| decrypt_event(&config, ev)))
            .boxed()
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.inner.compact(revision).await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        self.inner.compacted_revision().await
    }
}

#[cfg(test)]
mod tests;
