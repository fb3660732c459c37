//! Disk-pressure eviction on the test node, which shares this machine's disk: the
//! threshold is set 500 MiB below what is free when the test starts, and a pod writes
//! 1500 MiB into its emptyDir once `/stats/summary` has shown its first writes (its
//! writable layer, its emptyDir, the pod's ephemeral storage). Unused images are reclaimed first (there are none to
//! spare), then the pod using the most ephemeral storage over its request is evicted
//! (Failed, `Evicted`, upstream's message), its emptyDir is torn down, and a pod within
//! its ephemeral-storage request keeps running.
//!
//! The same node first shows LocalStorageCapacityIsolation, with the threshold far away:
//! pods over their emptyDir `sizeLimit`, their pod-wide or their container's own
//! ephemeral-storage limit are evicted with upstream's messages; a pod within its limits
//! stays.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::json;

use super::logs_and_access::{container, pod_stats, summary_until};
use super::{busybox_pod, phase, CgroupCleanup, Cluster, ClusterOptions, NODE};

const MIB: u64 = 1 << 20;
/// How far below the free space at the start the threshold sits: what others may write
/// to the shared disk while the test runs without deciding it.
const MARGIN_MIB: u64 = 500;
/// What the filler writes: three times the margin, so others may free as much.
const FILL_MIB: u64 = 1500;

fn free_mib() -> u64 {
    let st = nix::sys::statvfs::statvfs(&std::env::temp_dir()).unwrap();
    st.blocks_available() * st.fragment_size() / MIB
}

fn disk_pressure(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "DiskPressure")?;
    Some(c.status.clone())
}

#[tokio::test]
async fn disk_pressure_evicts_the_pod_filling_its_empty_dir() {
    let _cgroups;
    let free = free_mib();
    assert!(
        free > 4 * FILL_MIB,
        "this test fills {FILL_MIB} MiB of the disk under {}; only {free} MiB are free",
        std::env::temp_dir().display()
    );
    let threshold_mib = free - MARGIN_MIB;
    let cluster = Cluster::start_opts(ClusterOptions {
        eviction_hard: Some(format!(
            "memory.available<100Mi,nodefs.available<{threshold_mib}Mi"
        )),
        ..ClusterOptions::default()
    })
    .await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    local_storage_limits_evict(&cluster, &img).await;
    let quiet = json!([{
        "name": "quiet", "image": img, "command": ["sleep", "3600"],
        "resources": {"requests": {"ephemeral-storage": "1Gi"}},
    }]);
    cluster
        .create(busybox_pod("quiet", &img, quiet, json!({})))
        .await;
    cluster
        .wait_for("quiet", "Running", 60, |p| phase(p) == "Running")
        .await;
    // 4 MiB into its layer and 64 MiB into its emptyDir, then the rest once told to.
    let fill = format!(
        "dd if=/dev/zero of=/tmp/layer bs=1M count=4 && \
         dd if=/dev/zero of=/scratch/first bs=1M count=64 && \
         until [ -e /tmp/go ]; do sleep 0.1; done && \
         dd if=/dev/zero of=/scratch/fill bs=1M count={FILL_MIB} && exec sleep 3600"
    );
    let filler = json!([{
        "name": "filler", "image": img, "command": ["sh", "-c", fill],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    }]);
    let volumes =
        json!({"restartPolicy": "Never", "volumes": [{"name": "scratch", "emptyDir": {}}]});
    cluster
        .create(busybox_pod("filler", &img, filler, volumes))
        .await;
    let used = |v: &serde_json::Value| v["usedBytes"].as_u64().unwrap_or(0) / MIB;
    summary_until(&cluster, "the filler's first writes", |summary| {
        let Some(pod) = pod_stats(summary, "filler") else {
            return false;
        };
        let layer = container(pod, "filler").map_or(0, |c| used(&c["rootfs"]));
        let scratch = pod["volume"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "scratch"))
            .map_or(0, used);
        layer >= 4 && scratch >= 64 && used(&pod["ephemeral-storage"]) >= 68
    })
    .await;
    let go = cluster.kubectl(&["exec", "filler", "--", "touch", "/tmp/go"]);
    assert!(go.status.success(), "{go:?}");

    let evicted = cluster
        .wait_for("filler", "Evicted", 120, |p| {
            p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
        })
        .await;
    assert_eq!(phase(&evicted), "Failed");
    let message = evicted
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    let expected = format!(
        "The node was low on resource: ephemeral-storage. Threshold quantity: {threshold_mib}Mi, available: "
    );
    // Ranked second: within its request.
    let quiet = cluster.pods().get("quiet").await.unwrap();
    assert_eq!(phase(&quiet), "Running");
    assert_eq!(quiet.status.and_then(|s| s.reason), None);
    assert!(
        message.starts_with(&expected)
            && message.contains("Container filler was using ")
            && message.contains("request is 0, has larger consumption of ephemeral-storage."),
        "{message}"
    );

    // The emptyDir goes with the evicted pod's containers.
    let uid = evicted.metadata.uid.clone().unwrap();
    let scratch = cluster.path("root").join(format!(
        "pods/{uid}/volumes/kubernetes.io~empty-dir/scratch"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    while scratch.exists() {
        assert!(Instant::now() < deadline, "{} stayed", scratch.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let node = nodes.get(NODE).await.unwrap();
        if disk_pressure(&node).as_deref() == Some("True") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no DiskPressure: {:?}",
            node.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = cluster.agent_log();
    assert!(
        log.contains("disk pressure: removed unused images"),
        "{log}"
    );
}

fn writes(path: &str, mib: u64) -> String {
    format!("dd if=/dev/zero of={path} bs=1M count={mib} && exec sleep 3600")
}

fn limited(name: &str, limit: &str, img: &str, command: String) -> serde_json::Value {
    json!({
        "name": name, "image": img, "command": ["sh", "-c", command],
        "resources": {"limits": {"ephemeral-storage": limit}},
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    })
}

fn scratch(size_limit: Option<&str>) -> serde_json::Value {
    let empty_dir = size_limit.map_or_else(|| json!({}), |l| json!({"sizeLimit": l}));
    json!({"restartPolicy": "Never", "volumes": [{"name": "scratch", "emptyDir": empty_dir}]})
}

async fn local_storage_limits_evict(cluster: &Cluster, img: &str) {
    let pods = [
        (
            "over-size-limit",
            json!([limited("w", "64Mi", img, writes("/scratch/f", 8))]),
            scratch(Some("4Mi")),
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"4Mi\". ",
        ),
        (
            // 12 MiB in the shared emptyDir (no sizeLimit) over the summed 8 MiB.
            "over-pod-limit",
            json!([
                limited("w", "4Mi", img, writes("/scratch/f", 12)),
                limited("idle", "4Mi", img, "exec sleep 3600".into()),
            ]),
            scratch(None),
            "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. ",
        ),
        (
            // 8 MiB in w's layer: over its own 4 MiB, within the pod's 68 MiB.
            "over-container-limit",
            json!([
                limited("w", "4Mi", img, writes("/tmp/f", 8)),
                limited("idle", "64Mi", img, "exec sleep 3600".into()),
            ]),
            scratch(None),
            "Container w exceeded its local ephemeral storage limit \"4Mi\". ",
        ),
    ];
    let within = json!([limited(
        "w",
        "64Mi",
        img,
        "dd if=/dev/zero of=/tmp/f bs=1M count=2 && ".to_string() + &writes("/scratch/f", 2)
    )]);
    cluster
        .create(busybox_pod("within", img, within, scratch(Some("64Mi"))))
        .await;
    for (name, containers, extra, _) in &pods {
        cluster
            .create(busybox_pod(name, img, containers.clone(), extra.clone()))
            .await;
    }
    for (name, _, _, message) in &pods {
        let evicted = cluster
            .wait_for(name, "Evicted", 60, |p| {
                p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
            })
            .await;
        let status = evicted.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Failed"), "{name}");
        assert_eq!(status.message.as_deref(), Some(*message), "{name}");
    }
    // Its writes were read (the summary shows them) and it still runs.
    summary_until(cluster, "the within pod's writes", |summary| {
        pod_stats(summary, "within").is_some_and(|pod| {
            pod["ephemeral-storage"]["usedBytes"].as_u64().unwrap_or(0) >= 4 * MIB
        })
    })
    .await;
    let within = cluster.pods().get("within").await.unwrap();
    assert_eq!(phase(&within), "Running");
    assert_eq!(within.status.and_then(|s| s.reason), None);
}
