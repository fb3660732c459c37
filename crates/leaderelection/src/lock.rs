//! Where the record lives: a `LeaseLock` reads, creates and updates one Lease with
//! optimistic concurrency. `KubeLeaseLock` is a Lease in the API; `FakeLeaseLock` (feature
//! `testing`) an in-memory one with a switch that makes every call fail.

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use crate::record::LeaseRecord;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("lease {lease}: {source}")]
    Api {
        lease: String,
        #[source]
        source: kube::Error,
    },
    /// Another writer changed the lease since `version` was read.
    #[error("lease {lease}: changed since resourceVersion {version}")]
    Conflict { lease: String, version: String },
    #[error("lease {lease}: unreachable")]
    Unreachable { lease: String },
}

/// The record and the version to update it from.
#[derive(Clone, Debug)]
pub struct Observed {
    pub record: LeaseRecord,
    pub version: String,
}

#[async_trait]
pub trait LeaseLock: Send + Sync {
    /// `namespace/name`, for logs and errors.
    fn describe(&self) -> String;
    /// The current record; `None` when the lease does not exist.
    async fn get(&self) -> Result<Option<Observed>, LockError>;
    /// Creates the lease holding `record`; fails if it exists.
    async fn create(&self, record: &LeaseRecord) -> Result<String, LockError>;
    /// Replaces the record if the lease is still at `version`; returns the new version.
    async fn update(&self, record: &LeaseRecord, version: &str) -> Result<String, LockError>;
    /// The Lease, for the Events about it (the fake: none).
    fn reference(&self) -> Option<Lease>;
}

/// A `coordination.k8s.io/v1` Lease in the API.
pub struct KubeLeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl KubeLeaseLock {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> KubeLeaseLock {
        KubeLeaseLock {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn lease(&self, record: &LeaseRecord, version: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: version.map(str::to_string),
                ..Default::default()
            },
            spec: Some(record.to_spec()),
        }
    }

    fn error(&self, source: kube::Error, version: &str) -> LockError {
        match &source {
            kube::Error::Api(status) if status.code == 409 => LockError::Conflict {
                lease: self.describe(),
                version: version.to_string(),
            },
            _ => LockError::Api {
                lease: self.describe(),
                source,
            },
        }
    }
}

fn version_of(lease: &Lease) -> String {
    lease.metadata.resource_version.clone().unwrap_or_default()
}

#[async_trait]
impl LeaseLock for KubeLeaseLock {
    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    async fn get(&self) -> Result<Option<Observed>, LockError> {
        match self.api.get_opt(&self.name).await {
            Ok(lease) => Ok(lease.map(|l| Observed {
                record: LeaseRecord::of_lease(&l),
                version: version_of(&l),
            })),
            Err(e) => Err(self.error(e, "")),
        }
    }

    async fn create(&self, record: &LeaseRecord) -> Result<String, LockError> {
        let lease = self.lease(record, None);
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => Ok(version_of(&created)),
            Err(e) => Err(self.error(e, "")),
        }
    }

    async fn update(&self, record: &LeaseRecord, version: &str) -> Result<String, LockError> {
        let lease = self.lease(record, Some(version));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => Ok(version_of(&updated)),
            Err(e) => Err(self.error(e, version)),
        }
    }

    fn reference(&self) -> Option<Lease> {
        Some(self.lease(&LeaseRecord::of_lease(&Lease::default()), None))
    }
}
