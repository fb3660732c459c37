//! The store with each operation's latency recorded as upstream's
//! `etcd_request_duration_seconds{operation, type}` (see [`crate::server_metrics`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cairn_store::{Backend, Event, KeyValue, Revision, StoreError};
use futures::stream::BoxStream;

use crate::server_metrics::{key_resource, ServerMetrics};

pub struct MeteredBackend {
    inner: Arc<dyn Backend>,
    metrics: Arc<ServerMetrics>,
}

impl MeteredBackend {
    pub fn new(inner: Arc<dyn Backend>, metrics: Arc<ServerMetrics>) -> MeteredBackend {
        MeteredBackend { inner, metrics }
    }

    fn took(&self, operation: &str, key: &str, started: Instant) {
        self.metrics
            .store_request(operation, &key_resource(key), started.elapsed());
    }
}

#[async_trait::async_trait]
impl Backend for MeteredBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let started = Instant::now();
        let r = self.inner.get(key).await;
        self.took("get", key, started);
        r
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let started = Instant::now();
        let r = self.inner.list(prefix).await;
        self.took("list", prefix, started);
        r
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        let started = Instant::now();
        let r = self.inner.create(key, value).await;
        self.took("create", key, started);
        r
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError> {
        let started = Instant::now();
        let r = self.inner.update(key, value, expected_mod_revision).await;
        self.took("update", key, started);
        r
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        let started = Instant::now();
        let r = self.inner.delete(key, expected_mod_revision).await;
        self.took("delete", key, started);
        r
    }

    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        self.inner.events_since(prefix, after).await
    }

    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        self.inner.watch(prefix, after)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let started = Instant::now();
        let r = self.inner.compact(revision).await;
        self.took("compact", "", started);
        r
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        self.inner.compacted_revision().await
    }
}
