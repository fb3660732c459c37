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
