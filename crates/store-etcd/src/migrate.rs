//! Moving a store (the embedded SQLite) into an empty etcd: every key with its bytes as
//! they are, in transactions that never overwrite, behind a revision offset so that every
//! resourceVersion clients see afterwards is above every one they saw before. The revisions
//! up to the end of the copy are compacted: a watch or list from before the migration gets
//! 410 Gone and relists, as after `etcdutl snapshot restore --mark-compacted`.

use cairn_store::{Backend, KeyValue, Revision, StoreError};
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};

use crate::keys::Keys;
use crate::{EtcdBackend, EtcdConfig, EtcdError};

/// Puts per transaction: under etcd's default `--max-txn-ops` (128).
const BATCH_KEYS: usize = 64;
/// Bytes per transaction: under etcd's default `--max-request-bytes` (1.5 MiB).
const BATCH_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(transparent)]
    Connect(#[from] EtcdError),
    #[error("reading the source store: {0}")]
    Source(StoreError),
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd already holds {count} keys under {prefix:?}: migrate into an empty etcd or another --etcd-prefix")]
    NotEmpty { count: i64, prefix: String },
    #[error(
        "etcd already holds a migrated store ({key} is set): migrate into another --etcd-prefix"
    )]
    Migrated { key: String },
    #[error("{key} appeared in etcd while it was being copied: another writer is using this etcd")]
    Raced { key: String },
    #[error("{key}: copied to etcd but reads back {what}")]
    Mismatch { key: String, what: &'static str },
}

/// What a migration did.
#[derive(Debug)]
pub struct Migrated {
    pub keys: usize,
    /// The source's revision: every revision at or below it is compacted in etcd.
    pub source_revision: Revision,
    /// The store's revision in etcd after the copy (above `source_revision`).
    pub revision: Revision,
}

/// Copies every key of `source` into the empty etcd of `config`, then reads them back.
pub async fn migrate(source: &dyn Backend, config: &EtcdConfig) -> Result<Migrated, MigrateError> {
    let bare = EtcdBackend::connect(config).await?;
    let client = bare.client();
    let keys = Keys::new(&config.prefix);
    ensure_empty(&client, &keys).await?;
    let (kvs, source_revision) = source.list("").await.map_err(MigrateError::Source)?;
    set_offset(&client, &keys, source_revision).await?;
    let mut last = 0;
    for batch in batches(&kvs) {
        last = put_new(&client, &keys, batch).await?;
    }
    if last > 0 {
        client.clone().compact(last, None).await?;
    }
    let migrated = EtcdBackend::connect(config).await?;
    verify(&migrated, &kvs).await?;
    let revision = migrated
        .current_revision()
        .await
        .map_err(MigrateError::Source)?;
    Ok(Migrated {
        keys: kvs.len(),
        source_revision,
        revision,
    })
}

async fn ensure_empty(client: &Client, keys: &Keys) -> Result<(), MigrateError> {
    let prefix = keys.prefix_to_etcd("");
    let response = client
        .clone()
        .get(
            prefix.as_str(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await?;
    match response.count() {
        0 => Ok(()),
        count => Err(MigrateError::NotEmpty { count, prefix }),
    }
}

/// Writes the offset once: a second migration racing this one finds it there.
async fn set_offset(client: &Client, keys: &Keys, offset: Revision) -> Result<(), MigrateError> {
    let key = keys.offset_key();
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key.clone(), offset.to_string(), None)]);
    if client.clone().txn(txn).await?.succeeded() {
        Ok(())
    } else {
        Err(MigrateError::Migrated { key })
    }
}

/// The keys in transactions small enough for etcd's default limits (a key larger than a
/// batch goes alone).
fn batches(kvs: &[KeyValue]) -> Vec<&[KeyValue]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, kv) in kvs.iter().enumerate() {
        let size = kv.key.len() + kv.value.len();
        if i > start && (i - start == BATCH_KEYS || bytes + size > BATCH_BYTES) {
            out.push(&kvs[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < kvs.len() {
        out.push(&kvs[start..]);
    }
    out
}

/// Puts a batch whose keys must all be new; returns etcd's revision after it.
async fn put_new(client: &Client, keys: &Keys, batch: &[KeyValue]) -> Result<i64, MigrateError> {
    let compares = batch
        .iter()
        .map(|kv| Compare::create_revision(keys.to_etcd(&kv.key), CompareOp::Equal, 0));
    let puts = batch
        .iter()
        .map(|kv| TxnOp::put(keys.to_etcd(&kv.key), kv.value.to_vec(), None));
    let txn = Txn::new()
        .when(compares.collect::<Vec<_>>())
        .and_then(puts.collect::<Vec<_>>());
    let response = client.clone().txn(txn).await?;
    if !response.succeeded() {
        let key = batch.first().map(|kv| kv.key.clone()).unwrap_or_default();
        return Err(MigrateError::Raced { key });
    }
    Ok(response.header().map(|h| h.revision()).unwrap_or(0))
}

/// Every source key reads back from etcd with the same bytes and a newer revision.
async fn verify(migrated: &EtcdBackend, source: &[KeyValue]) -> Result<(), MigrateError> {
    let (copied, _) = migrated.list("").await.map_err(MigrateError::Source)?;
    let copied: std::collections::HashMap<&str, &KeyValue> =
        copied.iter().map(|kv| (kv.key.as_str(), kv)).collect();
    for kv in source {
        let mismatch = |what| MigrateError::Mismatch {
            key: kv.key.clone(),
            what,
        };
        let Some(copy) = copied.get(kv.key.as_str()) else {
            return Err(mismatch("nothing"));
        };
        if copy.value != kv.value {
            return Err(mismatch("other bytes"));
        }
        if copy.mod_revision <= kv.mod_revision {
            return Err(mismatch("an older revision"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{batches, BATCH_BYTES, BATCH_KEYS};
    use cairn_store::KeyValue;

    fn kv(i: usize, size: usize) -> KeyValue {
        KeyValue {
            key: format!("/k/{i}"),
            value: bytes::Bytes::from(vec![b'x'; size]),
            create_revision: 1,
            mod_revision: 1,
        }
    }

    #[test]
    fn batches_keep_every_key_once_within_etcds_limits() {
        let mut kvs: Vec<KeyValue> = (0..200).map(|i| kv(i, 10)).collect();
        kvs.push(kv(200, 2 * BATCH_BYTES));
        kvs.extend((201..230).map(|i| kv(i, BATCH_BYTES / 8)));
        let out = batches(&kvs);
        assert_eq!(out.iter().map(|b| b.len()).sum::<usize>(), kvs.len());
        let flat: Vec<&str> = out
            .iter()
            .flat_map(|b| b.iter().map(|kv| kv.key.as_str()))
            .collect();
        let expected: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(flat, expected);
        for batch in out {
            assert!(batch.len() <= BATCH_KEYS);
            let bytes: usize = batch.iter().map(|kv| kv.key.len() + kv.value.len()).sum();
            assert!(batch.len() == 1 || bytes <= BATCH_BYTES, "{bytes}");
        }
        assert!(batches(&[]).is_empty());
    }
}
