#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use cairn_store::memory::MemoryBackend;

use super::*;

const EVERYTHING: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: ['*.*']\n  providers:\n  - aesgcm:\n      keys: [{name: k, secret: c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbywgMzI=}]\n";

fn encrypting(inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
    let config = EncryptionConfig::parse(EVERYTHING, "test").unwrap();
    Arc::new(EncryptingBackend::new(inner, config))
}

// The conformance suite's keys are not under /registry/: they pass through.
cairn_store::backend_conformance_tests!(|| async { (encrypting(MemoryBackend::new()), ()) });

#[tokio::test]
async fn values_are_encrypted_below_and_plain_above() {
    let inner: Arc<dyn Backend> = MemoryBackend::new();
    let store = encrypting(Arc::clone(&inner));
    let key = "/registry/core/secrets/ns/s";
    store
        .create(key, Bytes::from_static(b"{\"data\":1}"))
        .await
        .unwrap();
    let below = inner.get(key).await.unwrap().unwrap();
    assert!(below.value.starts_with(b"k8s:enc:aesgcm:v1:k:"));
    assert_eq!(
        &store.get(key).await.unwrap().unwrap().value[..],
        b"{\"data\":1}"
    );
    let rev = below.mod_revision;
    store
        .update(key, Bytes::from_static(b"two"), rev)
        .await
        .unwrap();
    let (listed, _) = store.list("/registry/").await.unwrap();
    assert_eq!(&listed[0].value[..], b"two");
    let events = store.events_since("/registry/", 0).await.unwrap();
    let values: Vec<&[u8]> = events.iter().map(|e| &e.value[..]).collect();
    assert_eq!(values, [&b"{\"data\":1}"[..], b"two"]);
    let (_, deleted) = store.delete(key, None).await.unwrap();
    assert_eq!(&deleted.value[..], b"two");
    let mut watch = store.watch("/registry/", 0);
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(&first.value[..], b"{\"data\":1}");
    // A value stored under another key does not open (the key is authenticated).
    let moved = "/registry/core/secrets/ns/t";
    inner.create(moved, below.value.clone()).await.unwrap();
    let err = store.get(moved).await.unwrap_err().to_string();
    assert!(
        err.contains("decrypting /registry/core/secrets/ns/t"),
        "{err}"
    );
}
