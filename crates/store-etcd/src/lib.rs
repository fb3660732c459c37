//! The store's [`Backend`] on etcd v3, the store Kubernetes runs on.
//!
//! Keys are the store's own (`/registry/<group>/<resource>/<namespace>/<name>`), behind an
//! optional prefix (`--etcd-prefix`, empty by default) for clusters sharing one etcd.
//! Revisions are etcd's own (a fresh etcd is at revision 1, not 0). Every conditional
//! write is one transaction: create compares the key's create revision with 0, update and
//! delete compare its mod revision, and a failed compare reads the key in the same
//! transaction to tell "not found" from "conflict". Watches and `events_since` are etcd
//! watches from a revision with the previous value (a delete carries what was removed);
//! compaction is etcd's, and the compacted revision is what etcd reports (HashKV), so
//! every replica on the same etcd sees the same.
//!
//! A store migrated from SQLite (`migrate`) keeps its clients' resourceVersions moving
//! forward: its revisions are etcd's plus the SQLite store's last revision, an offset kept
//! in etcd at the prefix plus [`REVISION_OFFSET_SUFFIX`] (outside the store's keys) and read
//! at connect, and every revision from
//! before the migration counts as compacted.

mod keys;
pub mod migrate;
mod retry;
pub mod snapshot;
mod watch;
mod write;

#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

use bytes::Bytes;
use cairn_store::{Backend, Event, KeyValue, Revision, StoreError};
use etcd_client::{
    Client, ConnectOptions, GetOptions, Identity, KvClient, TlsOptions, WatchClient,
};
use futures::stream::BoxStream;

use keys::Keys;
pub use keys::REVISION_OFFSET_SUFFIX;
use retry::unsent_retried;

/// How to reach etcd.
#[derive(Clone, Debug, Default)]
pub struct EtcdConfig {
    /// Client URLs (`https://10.0.0.1:2379`); the client moves to the next when one fails.
    pub endpoints: Vec<String>,
    /// Put before every key (empty: the store's keys as they are).
    pub prefix: String,
    pub tls: Option<EtcdTls>,
}

/// PEM files for a TLS connection: the CA that signed etcd's serving certificate, and the
/// client certificate and key etcd's `--client-cert-auth` asks for.
#[derive(Clone, Debug)]
pub struct EtcdTls {
    pub ca: std::path::PathBuf,
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("reading {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("connecting to etcd at {endpoints}: {source}")]
    Connect {
        endpoints: String,
        source: etcd_client::Error,
    },
    #[error("--etcd-servers is empty")]
    NoEndpoints,
    #[error("reading the revision offset {key} from etcd: {detail}")]
    Offset { key: String, detail: String },
}

/// The largest response read from etcd: upstream's `MaxCallRecvMsgSize` (gRPC's default
/// of 4 MiB would fail a list of a cluster's objects, or a watch response of several
/// large events, once it grew past that).
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// The backend: clients (cheap to clone, one per call) and the key prefix.
#[derive(Clone)]
pub struct EtcdBackend {
    client: Client,
    /// KV and watch clients without gRPC's 4 MiB response limit.
    kv: KvClient,
    watcher: WatchClient,
    keys: Arc<Keys>,
}

impl EtcdBackend {
    pub async fn connect(config: &EtcdConfig) -> Result<EtcdBackend, EtcdError> {
        if config.endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(std::time::Duration::from_secs(5))
            .with_keep_alive(
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(5),
            );
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls_options(tls)?);
        }
        let client = Client::connect(config.endpoints.clone(), Some(options))
            .await
            .map_err(|source| EtcdError::Connect {
                endpoints: config.endpoints.join(","),
                source,
            })?;
        let keys = Keys::new(&config.prefix);
        let offset = read_offset(&client, &keys).await?;
        Ok(EtcdBackend {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            watcher: client
                .watch_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            client,
            keys: Arc::new(keys.with_offset(offset)),
        })
    }

    fn client(&self) -> Client {
        self.client.clone()
    }

    fn kv(&self) -> KvClient {
        self.kv.clone()
    }

    pub(crate) fn watcher(&self) -> WatchClient {
        self.watcher.clone()
    }
}

fn tls_options(tls: &EtcdTls) -> Result<TlsOptions, EtcdError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|source| EtcdError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut options =
        TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?));
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        options = options.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(options)
}

/// The revision offset a migration left (0 when none did).
async fn read_offset(client: &Client, keys: &Keys) -> Result<Revision, EtcdError> {
    let key = keys.offset_key();
    let offset_error = |detail: String| EtcdError::Offset {
        key: key.clone(),
        detail,
    };
    let response = client
        .clone()
        .get(key.as_str(), None)
        .await
        .map_err(|e| offset_error(e.to_string()))?;
    let Some(kv) = response.kvs().first() else {
        return Ok(0);
    };
    let text = String::from_utf8_lossy(kv.value());
    text.trim()
        .parse::<Revision>()
        .ok()
        .filter(|offset| *offset >= 0)
        .ok_or_else(|| offset_error(format!("{text:?} is not a revision")))
}

/// An etcd error as the store's: a compacted revision keeps its meaning, the rest names
/// what failed.
pub(crate) fn backend_error(what: &str, error: etcd_client::Error) -> StoreError {
    StoreError::Backend(format!("etcd {what}: {error}"))
}

#[async_trait::async_trait]
impl Backend for EtcdBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let etcd_key = self.keys.to_etcd(key);
        let response = unsent_retried(&format!("get {key}"), || {
            let (mut kv, etcd_key) = (self.kv(), etcd_key.clone());
            async move { kv.get(etcd_key, None).await }
        })
        .await?;
        Ok(response.kvs().first().map(|kv| self.keys.key_value(kv)))
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let etcd_prefix = self.keys.prefix_to_etcd(prefix);
        let response = unsent_retried(&format!("list {prefix}"), || {
            let (mut kv, etcd_prefix) = (self.kv(), etcd_prefix.clone());
            async move {
                let options = GetOptions::new().with_prefix();
                kv.get(etcd_prefix, Some(options)).await
            }
        })
        .await?;
        let kvs = response
            .kvs()
            .iter()
            .map(|kv| self.keys.key_value(kv))
            .collect();
        Ok((kvs, self.keys.revision_of(response.header())))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        write::create(&self.client(), &self.keys, key, value).await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError> {
        write::update(
            &self.client(),
            &self.keys,
            key,
            value,
            expected_mod_revision,
        )
        .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        write::delete(&self.client(), &self.keys, key, expected_mod_revision).await
    }

    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        let compacted = self.compacted_revision().await?;
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let current = self.current_revision().await?;
        // A fresh etcd is at revision 1 without any event at it: nothing to wait for.
        if after >= current || self.keys.etcd_rev(current) <= 1 {
            return Ok(Vec::new());
        }
        watch::events_until(self.watcher(), self.keys.clone(), prefix, after, current).await
    }

    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        watch::watch(self.clone(), prefix.to_string(), after)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        write::compact(&self.client(), &self.keys, revision).await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        // Any range answers with the store's revision; one key, counted, is the cheapest.
        let etcd_prefix = self.keys.prefix_to_etcd("");
        let response = unsent_retried("current revision", || {
            let (mut client, etcd_prefix) = (self.client(), etcd_prefix.clone());
            async move {
                let options = GetOptions::new().with_count_only().with_limit(1);
                client.get(etcd_prefix, Some(options)).await
            }
        })
        .await?;
        Ok(self.keys.revision_of(response.header()))
    }

    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        let response = unsent_retried("compacted revision (HashKV)", || {
            let mut client = self.client();
            async move { client.hash_kv(0).await }
        })
        .await?;
        // -1 when etcd never compacted. Revisions from before a migration count as
        // compacted: there is no history of them here.
        Ok(self.keys.store_rev(response.compact_version().max(0)))
    }
}
