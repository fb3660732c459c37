//! Conditional writes, each one etcd transaction, and compaction.

use bytes::Bytes;
use cairn_store::{KeyValue, Revision, StoreError};
use etcd_client::{
    Client, CompactionOptions, Compare, CompareOp, DeleteOptions, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};

use crate::backend_error;
use crate::keys::Keys;
use crate::retry::unsent_retried;

/// Puts `key` only if it does not exist.
pub(crate) async fn create(
    client: &Client,
    keys: &Keys,
    key: &str,
    value: Bytes,
) -> Result<Revision, StoreError> {
    let etcd_key = keys.to_etcd(key);
    let txn = Txn::new()
        .when([Compare::create_revision(
            etcd_key.clone(),
            CompareOp::Equal,
            0,
        )])
        .and_then([TxnOp::put(etcd_key, value.to_vec(), None)]);
    let response = run(client, &format!("create {key}"), txn).await?;
    if response.succeeded() {
        Ok(keys.revision_of(response.header()))
    } else {
        Err(StoreError::AlreadyExists {
            key: key.to_string(),
        })
    }
}

/// Puts `key` only if its mod revision is `expected`; otherwise reads it in the same
/// transaction to say why not.
pub(crate) async fn update(
    client: &Client,
    keys: &Keys,
    key: &str,
    value: Bytes,
    expected: Revision,
) -> Result<Revision, StoreError> {
    let etcd_key = keys.to_etcd(key);
    let txn = Txn::new()
        .when([Compare::mod_revision(
            etcd_key.clone(),
            CompareOp::Equal,
            keys.etcd_rev(expected),
        )])
        .and_then([TxnOp::put(etcd_key.clone(), value.to_vec(), None)])
        .or_else([TxnOp::get(etcd_key, None)]);
    let response = run(client, &format!("update {key}"), txn).await?;
    if response.succeeded() {
        return Ok(keys.revision_of(response.header()));
    }
    Err(why_not(keys, &response, key, expected))
}

/// Deletes `key` (only at mod revision `expected`, when given), returning the value it had.
pub(crate) async fn delete(
    client: &Client,
    keys: &Keys,
    key: &str,
    expected: Option<Revision>,
) -> Result<(Revision, KeyValue), StoreError> {
    let etcd_key = keys.to_etcd(key);
    let compare = match expected {
        Some(rev) => Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, keys.etcd_rev(rev)),
        None => Compare::create_revision(etcd_key.clone(), CompareOp::Greater, 0),
    };
    let txn = Txn::new()
        .when([compare])
        .and_then([TxnOp::delete(
            etcd_key.clone(),
            Some(DeleteOptions::new().with_prev_key()),
        )])
        .or_else([TxnOp::get(etcd_key, None)]);
    let response = run(client, &format!("delete {key}"), txn).await?;
    if !response.succeeded() {
        return Err(why_not(keys, &response, key, expected.unwrap_or(0)));
    }
    let removed = response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Delete(d) => d.prev_kvs().first().map(|kv| keys.key_value(kv)),
        _ => None,
    });
    match removed {
        Some(kv) => Ok((keys.revision_of(response.header()), kv)),
        // The key went between the compare and the delete: impossible in one transaction.
        None => Err(StoreError::NotFound {
            key: key.to_string(),
        }),
    }
}

/// Compacts etcd's history up to the store's `revision` (never past the current revision;
/// an older one than already compacted, or one from before a migration, is no change).
pub(crate) async fn compact(
    client: &Client,
    keys: &Keys,
    revision: Revision,
) -> Result<(), StoreError> {
    let current = unsent_retried("compact: current revision", || {
        let mut client = client.clone();
        async move { client.get("\0", None).await }
    })
    .await?
    .header()
    .map(|h| h.revision())
    .unwrap_or(0);
    let target = keys.etcd_rev(revision).min(current);
    if target < 1 {
        return Ok(());
    }
    match client
        .clone()
        .compact(target, Some(CompactionOptions::new().with_physical()))
        .await
    {
        Ok(_) => Ok(()),
        Err(e)
            if e.to_string()
                .contains("required revision has been compacted") =>
        {
            Ok(())
        }
        Err(e) => Err(backend_error(&format!("compact to {target}"), e)),
    }
}

async fn run(client: &Client, what: &str, txn: Txn) -> Result<TxnResponse, StoreError> {
    unsent_retried(what, || {
        let (mut client, txn) = (client.clone(), txn.clone());
        async move { client.txn(txn).await }
    })
    .await
}

/// A failed compare: the key is gone, or at another revision.
fn why_not(keys: &Keys, response: &TxnResponse, key: &str, expected: Revision) -> StoreError {
    let actual = response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(g) => g.kvs().first().map(|kv| keys.store_rev(kv.mod_revision())),
        _ => None,
    });
    match actual {
        None => StoreError::NotFound {
            key: key.to_string(),
        },
        Some(actual) => StoreError::Conflict {
            key: key.to_string(),
            expected,
            actual,
        },
    }
}
