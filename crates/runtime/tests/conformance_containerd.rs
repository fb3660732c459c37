//! The runtime conformance suite (`cairn_runtime::conformance`) against the real
//! containerd runtime: a private containerd with its own socket and state, a busybox image
//! built offline and imported, host-network sandboxes (no CNI) under a private cgroup.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use cairn_runtime::conformance::Fixture;
use cairn_runtime::{ContainerConfig, ContainerdRuntime, PodResources};
use cairn_testsupport::{busybox_image, write_oci_layout_tar, Containerd};

const NAMESPACE: &str = "cairn-conformance";
const IMAGE: &str = "example.com/cairn/busybox:conformance";

/// Keeps the daemon and its files until the case ends, then removes the cgroup.
struct Guard {
    _containerd: Containerd,
    _work: tempfile::TempDir,
    runtime: ContainerdRuntime,
    cgroup: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.runtime.cgroups().remove(&self.cgroup);
    }
}

async fn containerd() -> (Fixture, Guard) {
    let containerd = Containerd::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let tar = work.path().join("busybox.tar");
    let built = busybox_image(&cairn_testsupport::ImageSpec {
        gzip: false,
        ..Default::default()
    })
    .unwrap();
    write_oci_layout_tar(&tar, IMAGE, &built).unwrap();
    let channel = containerd.channel().await.unwrap();
    let infos = cairn_image::import_archive(channel, NAMESPACE, &tar, &Default::default())
        .await
        .unwrap();
    let info = &infos[0];
    let image = common::image_spec(info);
    let runtime = common::connect(&containerd, NAMESPACE, work.path(), "/sys/fs/cgroup")
        .await
        .unwrap();
    let cgroup = format!("/cairn-conformance-{}", std::process::id());
    runtime
        .cgroups()
        .ensure(&cgroup, &PodResources::default())
        .unwrap();
    let container = |name: &str, command: &[&str]| ContainerConfig {
        name: name.into(),
        image: image.clone(),
        command: command.iter().map(|s| s.to_string()).collect(),
        spec_hash: format!("hash-{name}"),
        log_path: work.path().join(format!("{name}.log")),
        ..Default::default()
    };
    let fixture = Fixture {
        runtime: Arc::new(runtime.clone()),
        sleeper: container("sleeper", &["sleep", "1000"]),
        exits_3: container("exits", &["sh", "-c", "exit 3"]),
        cgroup_parent: cgroup.clone(),
    };
    let guard = Guard {
        _containerd: containerd,
        _work: work,
        runtime,
        cgroup,
    };
    (fixture, guard)
}

cairn_runtime::runtime_conformance_tests!(containerd);
