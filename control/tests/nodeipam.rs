//! Node IPAM: every Node gets its own pod CIDR from the cluster CIDR, blocks come back when
//! Nodes go, allocations survive restarts, exhaustion is reported instead of crashing,
//! and kubectl shows the result.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Kubectl, Server};
use serde_json::{json, Value};

fn client(server: &Server) -> reqwest::Client {
    server
        .http_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn create_node(c: &reqwest::Client, url: &str, name: &str, pod_cidr: Option<&str>) {
    let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    if let Some(cidr) = pod_cidr {
        node["spec"] = json!({"podCIDR": cidr, "podCIDRs": [cidr]});
    }
    let resp = c
        .post(format!("{url}/api/v1/nodes"))
        .json(&node)
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    assert_eq!(
        code,
        201,
        "creating node {name}: {}",
        resp.text().await.unwrap()
    );
}

async fn delete_node(c: &reqwest::Client, url: &str, name: &str) {
    let resp = c
        .delete(format!("{url}/api/v1/nodes/{name}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "deleting node {name}");
}

async fn get_node(c: &reqwest::Client, url: &str, name: &str) -> Value {
    c.get(format!("{url}/api/v1/nodes/{name}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn pod_cidr(node: &Value) -> Option<String> {
    node.pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Polls until `check` returns Some; the deadline only guards against a hang.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for the Node's pod CIDR and checks podCIDRs agrees with podCIDR.
async fn wait_cidr(c: &reqwest::Client, url: &str, name: &str) -> String {
    let node = eventually(&format!("a pod CIDR on node {name}"), || async {
        let n = get_node(c, url, name).await;
        pod_cidr(&n).map(|_| n)
    })
    .await;
    let cidr = pod_cidr(&node).unwrap();
    assert_eq!(
        node.pointer("/spec/podCIDRs"),
        Some(&json!([cidr])),
        "podCIDRs of {name}"
    );
    cidr
}

fn in_cluster(cidr: &str, cluster_prefix: &str, mask: &str) -> bool {
    cidr.starts_with(cluster_prefix) && cidr.ends_with(mask)
}

#[tokio::test]
async fn many_nodes_get_distinct_cidrs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    let names: Vec<String> = (0..60).map(|i| format!("node-{i:02}")).collect();
    futures::future::join_all(names.iter().map(|n| create_node(&c, &server.url, n, None))).await;
    let mut seen = BTreeSet::new();
    for n in &names {
        let cidr = wait_cidr(&c, &server.url, n).await;
        assert!(in_cluster(&cidr, "10.244.", ".0/24"), "{n} got {cidr}");
        assert!(seen.insert(cidr.clone()), "{cidr} handed out twice");
    }
    assert_eq!(seen.len(), 60);
}

#[tokio::test]
async fn preset_cidr_is_kept_and_marked_used() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server);
    // The first two blocks are taken by hand; a CIDR outside the cluster CIDR is left alone.
    create_node(&c, &server.url, "manual-0", Some("10.244.0.0/24")).await;
    create_node(&c, &server.url, "manual-1", Some("10.244.1.0/24")).await;
    create_node(&c, &server.url, "outside", Some("192.168.7.0/24")).await;
    create_node(&c, &server.url, "auto", None).await;
    assert_eq!(wait_cidr(&c, &server.url, "auto").await, "10.244.2.0/24");
    assert_eq!(
        wait_cidr(&c, &server.url, "manual-0").await,
        "10.244.0.0/24"
    );
    assert_eq!(
        wait_cidr(&c, &server.url, "outside").await,
        "192.168.7.0/24"
    );
    // podCIDR is immutable once set, as in Kubernetes.
    let resp = c
        .patch(format!("{}/api/v1/nodes/auto", server.url))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"podCIDR":"10.244.9.0/24","podCIDRs":["10.244.9.0/24"]}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
}

#[tokio::test]
async fn exhaustion_is_reported_and_released_blocks_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--cluster-cidr",
            "10.244.0.0/22",
            "--node-cidr-mask-size",
            "24",
        ],
    );
    let c = client(&server);
    let mut cidrs = BTreeSet::new();
    for i in 0..4 {
        let name = format!("n{i}");
        create_node(&c, &server.url, &name, None).await;
        cidrs.insert(wait_cidr(&c, &server.url, &name).await);
    }
    assert_eq!(
        cidrs,
        [
            "10.244.0.0/24",
            "10.244.1.0/24",
            "10.244.2.0/24",
            "10.244.3.0/24"
        ]
        .map(String::from)
        .into()
    );
    create_node(&c, &server.url, "late", None).await;
    // No block left: an Event says so, the node stays without a CIDR, the server lives on.
    let event = eventually("a CIDRNotAvailable event", || async {
        let list: Value = c
            .get(format!(
                "{}/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=late",
                server.url
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        list["items"].as_array().and_then(|items| {
            items
                .iter()
                .find(|e| e["reason"] == "CIDRNotAvailable")
                .cloned()
        })
    })
    .await;
    assert_eq!(event["involvedObject"]["kind"], "Node");
    assert_eq!(event["source"]["component"], "cidrAllocator");
    assert_eq!(pod_cidr(&get_node(&c, &server.url, "late").await), None);
    assert!(server.log().contains("no /24 left in the cluster CIDR"));
    // Releasing a block lets the waiting node have it.
    let freed = pod_cidr(&get_node(&c, &server.url, "n2").await).unwrap();
    delete_node(&c, &server.url, "n2").await;
    assert_eq!(wait_cidr(&c, &server.url, "late").await, freed);
    let health = c
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

#[tokio::test]
async fn allocations_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c;
    let mut before = BTreeSet::new();
    {
        let mut server = Server::start(dir.path());
        c = client(&server);
        for i in 0..5 {
            create_node(&c, &server.url, &format!("a{i}"), None).await;
        }
        for i in 0..5 {
            before.insert(wait_cidr(&c, &server.url, &format!("a{i}")).await);
        }
        // Free one block in the middle, then crash.
        delete_node(&c, &server.url, "a1").await;
        server.kill();
    }
    let server = Server::start(dir.path());
    // A fresh allocator would start at block 0 again: new nodes must avoid every block
    // the stored nodes hold.
    let mut held = BTreeSet::new();
    for i in [0, 2, 3, 4] {
        let cidr = wait_cidr(&c, &server.url, &format!("a{i}")).await;
        assert!(before.contains(&cidr));
        held.insert(cidr);
    }
    for i in 0..4 {
        let name = format!("b{i}");
        create_node(&c, &server.url, &name, None).await;
        let cidr = wait_cidr(&c, &server.url, &name).await;
        assert!(in_cluster(&cidr, "10.244.", ".0/24"));
        assert!(
            held.insert(cidr.clone()),
            "{cidr} given to {name} is still held"
        );
    }
}

#[tokio::test]
async fn kubectl_shows_pod_cidr() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(33, &server);
    k.ok_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n",
    );
    let c = client(&server);
    let cidr = wait_cidr(&c, &server.url, "worker-1").await;
    assert_eq!(
        k.ok(&["get", "node", "worker-1", "-o", "jsonpath={.spec.podCIDR}"]),
        cidr
    );
    let custom = k.ok(&[
        "get",
        "nodes",
        "-o",
        "custom-columns=NAME:.metadata.name,CIDRS:.spec.podCIDRs[*]",
        "--no-headers",
    ]);
    assert_eq!(
        custom.split_whitespace().collect::<Vec<_>>(),
        ["worker-1", cidr.as_str()]
    );
    let describe = k.ok(&["describe", "node", "worker-1"]);
    assert!(
        describe
            .lines()
            .any(|l| l.starts_with("PodCIDR:") && l.trim_end().ends_with(&cidr)),
        "{describe}"
    );
}

#[tokio::test]
async fn allocation_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--allocate-node-cidrs=false"]);
    let c = client(&server);
    create_node(&c, &server.url, "plain", None).await;
    assert_eq!(pod_cidr(&get_node(&c, &server.url, "plain").await), None);
    assert!(!server.log().contains("node IPAM started"));
    assert!(server.log().contains("cairn-control serving"));
}
