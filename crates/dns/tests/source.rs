//! The zone follows the API: an in-process cairn API server, `cairn_dns::run` keeping a
//! server's zone current, and DNS queries seeing Services and EndpointSlices come, change
//! and go.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn_dns::{ClusterZone, ZoneConfig};
use common::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

async fn api_client(api: &cairn_apiserver::RunningServer) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&api.admin_kubeconfig().unwrap()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Asks until `check` holds for the answer to (`name`, `qtype`), for up to 20 s.
async fn eventually(
    addr: SocketAddr,
    name: &str,
    qtype: RecordType,
    check: impl Fn(ResponseCode, &[String]) -> bool,
) {
    let mut last = (ResponseCode::NoError, Vec::new());
    for _ in 0..200 {
        let r = udp(addr, &query(name, qtype, false)).await;
        last = (r.metadata.response_code, show(&r.answers));
        if check(last.0, &last.1) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} {qtype}: still {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zone_follows_services_and_endpoint_slices() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = cairn_apiserver::ServerConfig::new(dir.path().join("control"));
    config.bind = "127.0.0.1:0".parse().unwrap();
    let api = cairn_apiserver::start(config).await.unwrap();
    let client = api_client(&api).await;
    let dns = Arc::new(
        start(
            ClusterZone::pending(&ZoneConfig::default()).unwrap(),
            vec![],
        )
        .await,
    );
    let addr = dns.local_addr();
    let source = tokio::spawn(cairn_dns::run(
        client.clone(),
        dns.clone(),
        "cluster.local".into(),
    ));

    let pp = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "apps"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &ns)
        .await
        .unwrap();
    let services = Api::<Service>::namespaced(client.clone(), "apps");
    let web: Service = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80}]}}))
    .unwrap();
    let web = services.create(&pp, &web).await.unwrap();
    let ip = web.spec.unwrap().cluster_ip.unwrap();
    let want = format!("web.apps.svc.cluster.local. A {ip}");
    eventually(
        addr,
        "web.apps.svc.cluster.local.",
        RecordType::A,
        |_, a| a == [want.clone()],
    )
    .await;

    let db: Service = serde_json::from_value(json!({"metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}}))
    .unwrap();
    services.create(&pp, &db).await.unwrap();
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "apps");
    let slice = slice(
        "apps",
        "db-1",
        "db",
        json!([{"name": "pg", "port": 5432}]),
        json!([{"addresses": ["10.244.1.10"], "hostname": "db-0"}]),
    );
    slices.create(&pp, &slice).await.unwrap();
    eventually(
        addr,
        "db-0.db.apps.svc.cluster.local.",
        RecordType::A,
        |_, a| a == ["db-0.db.apps.svc.cluster.local. A 10.244.1.10"],
    )
    .await;

    let moved = json!({"endpoints": [{"addresses": ["10.244.2.20"], "hostname": "db-0"}]});
    slices
        .patch("db-1", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap();
    eventually(addr, "db.apps.svc.cluster.local.", RecordType::A, |_, a| {
        a == ["db.apps.svc.cluster.local. A 10.244.2.20"]
    })
    .await;

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        addr,
        "web.apps.svc.cluster.local.",
        RecordType::A,
        |rcode, _| rcode == ResponseCode::NXDomain,
    )
    .await;
    source.abort();
}
