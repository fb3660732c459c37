//! The store's Backend conformance suite on a real etcd (one private server per case).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cairn_store::Backend;
use cairn_store_etcd::testing::EtcdServer;
use cairn_store_etcd::EtcdBackend;

async fn etcd_backend() -> (Arc<dyn Backend>, EtcdServer) {
    let server = tokio::task::spawn_blocking(EtcdServer::start)
        .await
        .unwrap()
        .unwrap();
    let backend = EtcdBackend::connect(&server.config("/cairn-test"))
        .await
        .unwrap();
    (Arc::new(backend), server)
}

cairn_store::backend_conformance_tests!(etcd_backend);

/// A fresh etcd's revision 1 has no event: the window since 0 is empty at once (it once
/// waited for an event at revision 1 until its 30 s timeout, delaying every first start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_since_zero_on_a_fresh_etcd_is_empty() {
    let (backend, _server) = etcd_backend().await;
    let window = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        backend.events_since("", 0),
    )
    .await
    .expect("events_since on a fresh etcd did not return");
    assert_eq!(window.unwrap(), Vec::new());
}

/// The same cases on a three-member cluster, one after another, each under its own
/// prefix (the revision is cluster-wide, so cases may not interleave), compaction last (it
/// is cluster-wide too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_a_three_member_cluster() {
    use cairn_store::conformance as case;
    let cluster = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3))
        .await
        .unwrap()
        .unwrap();
    let mut n = 0;
    let mut backend = || {
        n += 1;
        let config = cluster.config(&format!("/case-{n}"));
        async move { Arc::new(EtcdBackend::connect(&config).await.unwrap()) as Arc<dyn Backend> }
    };
    case::create_get_update(backend().await).await;
    case::delete_with_precondition(backend().await).await;
    case::list_by_prefix(backend().await).await;
    case::revisions_strictly_increase(backend().await).await;
    case::events_since_order_and_content(backend().await).await;
    case::watch_filters_prefix_and_sees_deletes(backend().await).await;
    case::watch_replays_then_goes_live_without_gap(backend().await).await;
    case::compaction(backend().await).await;
}

/// A store migrated from another (here the memory backend, moved on to revision ~600):
/// every key copied with its bytes and a revision above the source's, the source's
/// revisions compacted, preconditions and watches working across the offset, and a second
/// migration into the same prefix refused. Then the cases that hold for any store with
/// history behind it, each on its own migrated prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migrated_store_stays_above_its_source() {
    use cairn_store::conformance as case;
    use cairn_store_etcd::migrate::{migrate, MigrateError};
    use futures::StreamExt;
    let server = tokio::task::spawn_blocking(EtcdServer::start)
        .await
        .unwrap()
        .unwrap();
    let source = cairn_store::memory::MemoryBackend::new();
    let mut rev = source.create("/m/a", "0".into()).await.unwrap();
    for i in 1..600 {
        rev = source
            .update("/m/a", i.to_string().into(), rev)
            .await
            .unwrap();
    }
    source.create("/m/b", "b".into()).await.unwrap();
    let source_revision = source.current_revision().await.unwrap();
    let config = server.config("/migrated");
    let done = migrate(source.as_ref(), &config).await.unwrap();
    assert_eq!((done.keys, done.source_revision), (2, source_revision));
    assert!(done.revision > source_revision);

    let store = EtcdBackend::connect(&config).await.unwrap();
    let a = store.get("/m/a").await.unwrap().unwrap();
    assert_eq!(a.value, "599");
    assert!(a.mod_revision > source_revision, "{a:?}");
    assert!(store.compacted_revision().await.unwrap() >= source_revision);
    assert!(matches!(
        store.events_since("", source_revision).await,
        Err(cairn_store::StoreError::Compacted { .. })
    ));
    let now = store.current_revision().await.unwrap();
    let mut watch = store.watch("/m/", now);
    let r = store
        .update("/m/a", "600".into(), a.mod_revision)
        .await
        .unwrap();
    assert!(matches!(
        store.update("/m/a", "x".into(), a.mod_revision).await,
        Err(cairn_store::StoreError::Conflict { actual, .. }) if actual == r
    ));
    let event = tokio::time::timeout(case::TIMEOUT, watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((event.key.as_str(), event.revision), ("/m/a", r));
    assert_eq!(store.events_since("/m/", now).await.unwrap().len(), 1);
    store.compact(r).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), r);
    assert!(matches!(
        migrate(source.as_ref(), &config).await,
        Err(MigrateError::NotEmpty { .. })
    ));

    let mut n = 0;
    let mut backend = || {
        n += 1;
        let config = server.config(&format!("/migrated-{n}"));
        let source = source.clone();
        async move {
            migrate(source.as_ref(), &config).await.unwrap();
            let store = EtcdBackend::connect(&config).await.unwrap();
            for key in ["/m/a", "/m/b"] {
                let kv = store.get(key).await.unwrap().unwrap();
                store.delete(key, Some(kv.mod_revision)).await.unwrap();
            }
            Arc::new(store) as Arc<dyn Backend>
        }
    };
    case::create_get_update(backend().await).await;
    case::delete_with_precondition(backend().await).await;
    case::list_by_prefix(backend().await).await;
    case::revisions_strictly_increase(backend().await).await;
    case::watch_replays_then_goes_live_without_gap(backend().await).await;
}

/// A list or a watch response past gRPC's default 4 MiB limit (a cluster's objects, a
/// burst of large events) is read whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_watches_past_grpcs_default_limit() {
    use futures::StreamExt;
    let (backend, _server) = etcd_backend().await;
    let value = bytes::Bytes::from(vec![b'x'; 1024 * 1024]);
    let start = backend.current_revision().await.unwrap();
    for i in 0..6 {
        backend
            .create(&format!("/big/{i}"), value.clone())
            .await
            .unwrap();
    }
    let (items, _) = backend.list("/big/").await.unwrap();
    assert_eq!(items.len(), 6);
    let mut watch = backend.watch("/big/", start);
    for i in 0..6 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(event.key, format!("/big/{i}"));
    }
    assert_eq!(backend.events_since("/big/", start).await.unwrap().len(), 6);
}
