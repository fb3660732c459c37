//! Persistent volumes end to end with the real agent, containerd and cairn-control's
//! scheduler and binder (root only): a claim of the default `local-path` class binds once
//! its pod is scheduled, the pod writes a file, a new pod of the same claim reads it; the
//! claim grows; a StatefulSet's claim templates get one volume per ordinal; reclaim Delete
//! removes the directory; an unwritable provisioner path leaves the claim Pending with a
//! `ProvisioningFailed` event.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn claim(name: &str, size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}))
    .unwrap()
}

fn pod(name: &str, image: &str, claim: &str, script: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": image, "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
}

async fn wait<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn bound_volume(claims: &Api<PersistentVolumeClaim>, name: &str) -> String {
    wait(&format!("claim {name} bound"), 60, async || {
        let c = claims.get(name).await.ok()?;
        let bound = c.status.as_ref()?.phase.as_deref() == Some("Bound");
        bound.then(|| c.spec?.volume_name).flatten()
    })
    .await
}

fn local_path(pv: &PersistentVolume) -> PathBuf {
    PathBuf::from(&pv.spec.as_ref().unwrap().local.as_ref().unwrap().path)
}

#[tokio::test]
async fn claims_provision_bind_persist_grow_and_delete() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    claims
        .create(&PostParams::default(), &claim("data", "64Mi"))
        .await
        .unwrap();

    // The writer is scheduled, the claim provisioned on its node and bound, the file written.
    cluster
        .create(pod("writer", &img, "data", "echo persisted > /data/file"))
        .await;
    let done = |p: &k8s_openapi::api::core::v1::Pod| phase(p) == "Succeeded";
    cluster.wait_for("writer", "Succeeded", 90, done).await;
    let pv_name = bound_volume(&claims, "data").await;
    let pv = volumes.get(&pv_name).await.unwrap();
    let dir = local_path(&pv);
    assert!(
        dir.starts_with(cluster.path("root/local-path")),
        "{}",
        dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("file")).unwrap(),
        "persisted\n"
    );
    let affinity = serde_json::to_string(&pv.spec.as_ref().unwrap().node_affinity).unwrap();
    assert!(affinity.contains(NODE), "{affinity}");

    // A new pod of the same claim reads what the first wrote.
    cluster
        .pods()
        .delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    cluster
        .create(pod("reader", &img, "data", "cat /data/file"))
        .await;
    cluster.wait_for("reader", "Succeeded", 60, done).await;
    let logs = cluster.kubectl(&["logs", "reader"]);
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "persisted\n");

    // The claim grows: the volume's recorded size follows, then the claim's capacity.
    let grow = json!({"spec": {"resources": {"requests": {"storage": "128Mi"}}}});
    claims
        .patch("data", &PatchParams::default(), &Patch::Merge(&grow))
        .await
        .unwrap();
    wait("the claim's capacity at 128Mi", 30, async || {
        let c = claims.get("data").await.ok()?;
        let cap = c.status?.capacity?.get("storage")?.0.clone();
        (cap == "128Mi").then_some(())
    })
    .await;

    // Reclaim Delete: once the claim is gone, so are the volume and its directory.
    cluster
        .pods()
        .delete("reader", &DeleteParams::default())
        .await
        .unwrap();
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    wait("the released volume deleted", 60, async || {
        volumes
            .get_opt(&pv_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(!dir.exists(), "{} still there", dir.display());

    stateful_set_claims(&cluster, &claims).await;
    unwritable_root(&cluster, &claims).await;
}

/// One claim, and one volume, per ordinal.
async fn stateful_set_claims(cluster: &Cluster, claims: &Api<PersistentVolumeClaim>) {
    let set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": cluster.image, "command": ["sh", "-c", "hostname > /data/who; sleep 3600"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}]}});
    let file = cluster.path("web.json");
    std::fs::write(&file, set.to_string()).unwrap();
    let out = cluster.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v0 = bound_volume(claims, "data-web-0").await;
    let v1 = bound_volume(claims, "data-web-1").await;
    assert_ne!(v0, v1);
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    for (v, who) in [(v0, "web-0"), (v1, "web-1")] {
        let dir = local_path(&volumes.get(&v).await.unwrap());
        wait(&format!("{who} writing its hostname"), 60, async || {
            let got = std::fs::read_to_string(dir.join("who")).ok()?;
            (got.trim() == who).then_some(())
        })
        .await;
    }
    let out = cluster.kubectl(&["delete", "statefulset", "web"]);
    assert!(out.status.success());
}

/// A provisioner root that is a file: the claim stays Pending, with a clear event.
async fn unwritable_root(cluster: &Cluster, claims: &Api<PersistentVolumeClaim>) {
    let root = cluster.path("root/local-path");
    std::fs::rename(&root, cluster.path("root/local-path.moved")).unwrap();
    std::fs::write(&root, b"not a directory").unwrap();
    claims
        .create(&PostParams::default(), &claim("stuck", "8Mi"))
        .await
        .unwrap();
    cluster
        .create(pod("stuck", &cluster.image, "stuck", "true"))
        .await;
    let api: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client.clone(), "default");
    let msg = wait("a ProvisioningFailed event", 60, async || {
        let events = api.list(&Default::default()).await.ok()?;
        events.items.into_iter().find_map(|e| {
            let about_claim = e.involved_object.name.as_deref() == Some("stuck")
                && e.involved_object.kind.as_deref() == Some("PersistentVolumeClaim");
            (about_claim && e.reason.as_deref() == Some("ProvisioningFailed"))
                .then(|| e.message.unwrap_or_default())
        })
    })
    .await;
    assert!(msg.contains("is not writable"), "{msg}");
    let c = claims.get("stuck").await.unwrap();
    assert_eq!(c.status.unwrap().phase.as_deref(), Some("Pending"));
}
