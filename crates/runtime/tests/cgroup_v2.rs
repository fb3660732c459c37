//! The runtime on a pure cgroup v2 host. This machine is hybrid v1, so the host-side test
//! boots Debian's kernel in a qemu guest (cairn_testsupport::qemu) and runs this very test
//! binary inside it, selecting this same test, which in the guest takes its guest side: it starts a
//! private containerd on tmpfs and drives ContainerdRuntime + CgroupManager through a pod's
//! life, ending with a `RESULT ok` / `RESULT fail: ...` line the host asserts on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "cgroup_v2/stats.rs"]
mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use cairn_runtime::cgroups::CgroupVersion;
use cairn_runtime::{
    CgroupManager, ContainerConfig, ContainerState, ContainerdRuntime, PodResources, PodSandbox,
    PodSandboxConfig, Resources, Runtime,
};
use cairn_testsupport::qemu::{in_guest, Guest};
use cairn_testsupport::{busybox_image, write_oci_layout_tar, Containerd};

const NAMESPACE: &str = "cairn-cgv2";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const IMAGE: &str = "example.com/cairn/busybox:cgv2";
/// The pod's memory limit: room for the 64 MiB holder (awk peaks near 100 MB while it
/// builds the string) beside the limited container.
const POD_MEMORY_LIMIT: i64 = 256 << 20;
/// What the holder container keeps: a 64 MiB string in a sleeping awk.
const HELD_BYTES: u64 = 64 << 20;
/// Path of the image tar in the dir shared with the guest.
const IMAGE_TAR_ENV: &str = "CAIRN_CGV2_IMAGE_TAR";

/// Boot budget plus containerd, image import and two containers under TCG; a guard
/// against a hung guest, not a speed assertion.
const GUEST_TIMEOUT: Duration = Duration::from_secs(600);

#[test]
fn pod_cgroups_on_pure_cgroup_v2_in_a_guest() {
    if in_guest() {
        guest_side();
        return;
    }
    // The image is built here: sha256 and tar in a debug build under TCG take ~15 s.
    let share = tempfile::tempdir().unwrap();
    let tar = share.path().join("busybox.tar");
    let image = busybox_image(&cairn_testsupport::ImageSpec {
        gzip: false,
        ..Default::default()
    })
    .unwrap();
    write_oci_layout_tar(&tar, IMAGE, &image).unwrap();
    let guest = Guest::new()
        .unwrap()
        .share(share.path())
        .env(IMAGE_TAR_ENV, tar.display().to_string());
    let out = guest
        .run_test("pod_cgroups_on_pure_cgroup_v2_in_a_guest", GUEST_TIMEOUT)
        .unwrap();
    eprintln!(
        "guest ({}) took {:.1?}",
        guest.kernel_release(),
        out.elapsed
    );
    let result = out.last_line_starting_with("RESULT ");
    assert_eq!(result, Some("RESULT ok"), "{out}");
    assert!(out.success(), "{out}");
    eprintln!("{}", out.output);
}

/// The part that runs inside the guest (pure cgroup v2).
fn guest_side() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match rt.block_on(pod_lifecycle_on_v2()) {
        Ok(()) => println!("RESULT ok"),
        Err(e) => {
            println!("RESULT fail: {e:#}");
            panic!("{e:#}");
        }
    }
}

fn cgroup_dir(path: &str) -> PathBuf {
    Path::new(CGROUP_ROOT).join(path.trim_start_matches('/'))
}

fn read(dir: &Path, file: &str) -> Result<String> {
    let path = dir.join(file);
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_owned())
}

fn sub_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

async fn pod_lifecycle_on_v2() -> Result<()> {
    let started = std::time::Instant::now();
    let phase = |what: &str| println!("{:>6.1?} {what}", started.elapsed());
    ensure!(
        Path::new(CGROUP_ROOT).join("cgroup.controllers").exists()
            && !Path::new(CGROUP_ROOT).join("memory").exists(),
        "{CGROUP_ROOT} is not a pure cgroup v2 mount"
    );
    let containerd = Containerd::start().context("starting containerd")?;
    let work = tempfile::tempdir()?;
    write_cni_config(work.path())?;
    phase("containerd started");

    let infos = import_busybox_image(&containerd).await?;
    let info = infos.first().context("import returned no image")?;
    phase("image imported");
    let image = common::image_spec(info);

    let runtime = common::connect(&containerd, NAMESPACE, work.path(), CGROUP_ROOT).await?;
    let cgroups = runtime.cgroups().clone();
    ensure!(
        cgroups.version() == CgroupVersion::V2,
        "detected {:?}",
        cgroups.version()
    );

    // The pod cgroup under its QoS parent, as the agent makes it for a Burstable pod.
    let uid = "5b3c0d2e-cg2";
    let pod_cgroup = format!("/cairn/kubepods/burstable/pod{uid}");
    let pod_dir = make_burstable_pod_cgroup(&cgroups, &pod_cgroup)?;

    let sandbox = bridged_sandbox(&runtime, uid, &pod_cgroup).await?;

    let container = |name: &str, command: &[&str], resources: Resources| ContainerConfig {
        name: name.into(),
        image: image.clone(),
        command: command.iter().map(|s| s.to_string()).collect(),
        resources,
        spec_hash: format!("hash-{name}"),
        ..Default::default()
    };

    let limited = start_limited_container(&runtime, &sandbox, &container).await?;
    limited_container_cgroup_files_and_stats(
        &runtime,
        &limited,
        &cgroups,
        &pod_cgroup,
        &pod_dir,
        &phase,
    )
    .await?;
    limited_container_sees_its_own_cgroup(&runtime, &limited).await?;
    let measured =
        stats::burner_holder_and_traffic(&runtime, &sandbox, &container, &pod_cgroup).await?;
    phase("stats of the burner, the holder and the pod's traffic checked");
    let hog = hog_container_is_oom_killed(
        &runtime,
        &sandbox,
        &container,
        &cgroups,
        &pod_cgroup,
        &phase,
    )
    .await?;

    // Removal: nothing left under the QoS parent.
    runtime.remove_container(&limited).await?;
    runtime.remove_container(&hog).await?;
    for id in &measured {
        runtime.remove_container(id).await?;
    }
    runtime.remove_pod_sandbox(&sandbox.id).await?;
    cgroups.remove(&pod_cgroup);
    ensure!(
        !pod_dir.exists(),
        "pod cgroup left behind with {:?}",
        sub_dirs(&pod_dir)
    );
    let left = sub_dirs(&cgroup_dir("/cairn/kubepods/burstable"));
    ensure!(
        left.is_empty(),
        "cgroups left under the QoS parent: {left:?}"
    );
    phase("pod removed");
    ensure!(
        runtime.list_containers().await?.is_empty(),
        "containers left in containerd"
    );
    Ok(())
}

async fn bridged_sandbox(
    runtime: &ContainerdRuntime,
    uid: &str,
    pod_cgroup: &str,
) -> Result<PodSandbox> {
    // The guest's own network: the stock bridge plugin (containernetworking-plugins from
    // the host's root) gives the pod an eth0 the stats read and the guest pings.
    let sandbox = runtime
        .run_pod_sandbox(&PodSandboxConfig {
            uid: uid.into(),
            namespace: "default".into(),
            name: "cgv2".into(),
            attempt: 0,
            hostname: "cgv2".into(),
            host_network: false,
            cgroup_parent: pod_cgroup.to_owned(),
        })
        .await
        .context("creating the sandbox")?;
    Ok(sandbox)
}

/// The bridge network the guest's pods get, IPAM state under `work`.
fn write_cni_config(work: &Path) -> Result<()> {
    let dir = work.join("net.d");
    std::fs::create_dir_all(&dir)?;
    let config = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "cgv2",
        "plugins": [{
            "type": "bridge",
            "bridge": "cgv2br0",
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": "10.244.7.0/24"}]],
                "dataDir": work.join("ipam"),
            },
        }],
    });
    std::fs::write(dir.join("10-cgv2.conflist"), config.to_string())?;
    Ok(())
}

async fn import_busybox_image(containerd: &Containerd) -> Result<Vec<cairn_image::ImageInfo>> {
    // The busybox test image, imported from the OCI layout tar the host side wrote into
    // the shared dir (no registry in the guest).
    let tar = PathBuf::from(
        std::env::var_os(IMAGE_TAR_ENV).with_context(|| format!("{IMAGE_TAR_ENV} unset"))?,
    );
    let infos = cairn_image::import_archive(
        containerd.channel().await?,
        NAMESPACE,
        &tar,
        &cairn_image::PullOptions::default(),
    )
    .await
    .context("importing the busybox image")?;
    Ok(infos)
}

fn make_burstable_pod_cgroup(cgroups: &CgroupManager, pod_cgroup: &str) -> Result<PathBuf> {
    cgroups.ensure(
        pod_cgroup,
        &PodResources {
            cpu_shares: Some(512),
            cpu_quota: Some(100_000),
            cpu_period: Some(100_000),
            memory_limit: Some(POD_MEMORY_LIMIT),
        },
    )?;
    let pod_dir = cgroup_dir(pod_cgroup);
    ensure!(read(&pod_dir, "memory.max")? == POD_MEMORY_LIMIT.to_string());
    ensure!(read(&pod_dir, "cpu.max")? == "100000 100000");
    ensure!(read(&pod_dir, "cpu.weight")? == "20");
    let parent_controllers = read(
        &cgroup_dir("/cairn/kubepods/burstable"),
        "cgroup.subtree_control",
    )?;
    for c in ["cpu", "memory", "pids"] {
        ensure!(
            parent_controllers.split_whitespace().any(|x| x == c),
            "{c} not enabled for the pod cgroups: {parent_controllers:?}"
        );
    }
    Ok(pod_dir)
}

async fn start_limited_container(
    runtime: &ContainerdRuntime,
    sandbox: &PodSandbox,
    container: &impl Fn(&str, &[&str], Resources) -> ContainerConfig,
) -> Result<String> {
    // A container with cpu and memory limits: v2 files, membership, stats.
    let limited = runtime
        .create_container(
            sandbox,
            &container(
                "limited",
                &[
                    "sh",
                    "-c",
                    "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; exec sleep 3600",
                ],
                Resources {
                    cpu_shares: Some(256),
                    cpu_quota: Some(20_000),
                    cpu_period: Some(100_000),
                    memory_limit: Some(32 << 20),
                    oom_score_adj: Some(-997),
                },
            ),
        )
        .await
        .context("creating the limited container")?;
    runtime
        .start_container(&limited)
        .await
        .context("starting the limited container")?;
    Ok(limited)
}

async fn limited_container_cgroup_files_and_stats(
    runtime: &ContainerdRuntime,
    limited: &str,
    cgroups: &CgroupManager,
    pod_cgroup: &str,
    pod_dir: &Path,
    phase: &impl Fn(&str),
) -> Result<()> {
    let status = runtime.container_status(limited).await?;
    ensure!(
        status.state == ContainerState::Running,
        "limited container is {:?} ({:?} {:?})",
        status.state,
        status.reason,
        status.exit_code
    );
    let pid = status.pid.context("running container without a pid")?;
    phase("limited container running");
    let dir = cgroup_dir(&status.cgroup);
    ensure!(
        dir.parent() == Some(pod_dir),
        "container cgroup {} is not directly below the pod's",
        dir.display()
    );
    ensure!(read(&dir, "memory.max")? == (32u64 << 20).to_string());
    ensure!(read(&dir, "cpu.max")? == "20000 100000");
    ensure!(read(&dir, "cpu.weight")? == "10");
    // As the kubelet asks on v2: no swap beyond the memory limit (its default NoSwap),
    // and an OOM kill takes the whole container.
    ensure!(cgroups.v2_has_file(pod_cgroup, "memory.swap.max"));
    ensure!(read(&dir, "memory.swap.max")? == "0");
    ensure!(read(&dir, "memory.oom.group")? == "1");
    let procs = read(&dir, "cgroup.procs")?;
    ensure!(
        procs.lines().any(|p| p == pid.to_string()),
        "pid {pid} not in {}/cgroup.procs: {procs:?}",
        dir.display()
    );
    let stats = cgroups
        .stats(&status.cgroup)
        .context("no stats for the limited container")?;
    println!("limited container stats: {stats:?}");
    ensure!(
        stats.cpu.usage_ns.is_some_and(|n| n > 0),
        "cpu usage: {stats:?}"
    );
    ensure!(
        stats.memory.working_set_bytes.is_some_and(|n| n > 0),
        "working set: {stats:?}"
    );
    ensure!(
        stats.processes.processes.is_some_and(|n| n >= 1),
        "pids: {stats:?}"
    );
    ensure!(stats.memory.oom_events == Some(0), "oom kills: {stats:?}");
    // Read right after the container's: cpu usage only grows and the pod's includes it.
    let pod_stats = cgroups.stats(pod_cgroup).context("no stats for the pod")?;
    ensure!(
        pod_stats.cpu.usage_ns >= stats.cpu.usage_ns
            && pod_stats.memory.working_set_bytes.is_some_and(|n| n > 0),
        "pod stats {pod_stats:?} do not cover the container's {stats:?}"
    );
    Ok(())
}

async fn limited_container_sees_its_own_cgroup(
    runtime: &ContainerdRuntime,
    limited: &str,
) -> Result<()> {
    // Like containerd's CRI on v2: a private cgroup namespace, so the container's
    // /sys/fs/cgroup is its own cgroup (runtimes that size themselves from memory.max and
    // cpu.max read the container's limits, not the host root's).
    for (what, check) in [
        (
            "its own cgroup namespace (/proc/self/cgroup is 0::/)",
            "grep -qx 0::/ /proc/self/cgroup",
        ),
        (
            "its memory limit in /sys/fs/cgroup/memory.max",
            "test \"$(cat /sys/fs/cgroup/memory.max)\" = 33554432",
        ),
        (
            "its cpu limit in /sys/fs/cgroup/cpu.max",
            "test \"$(cat /sys/fs/cgroup/cpu.max)\" = '20000 100000'",
        ),
    ] {
        let command = ["sh".to_owned(), "-c".to_owned(), check.to_owned()];
        let result = runtime
            .exec_sync(limited, &command, Duration::from_secs(60))
            .await
            .with_context(|| format!("exec {check:?}"))?;
        ensure!(
            result.exit_code == 0,
            "the container does not see {what}: `{check}` exited {}",
            result.exit_code
        );
    }
    Ok(())
}

async fn hog_container_is_oom_killed(
    runtime: &ContainerdRuntime,
    sandbox: &PodSandbox,
    container: &impl Fn(&str, &[&str], Resources) -> ContainerConfig,
    cgroups: &CgroupManager,
    pod_cgroup: &str,
    phase: &impl Fn(&str),
) -> Result<String> {
    // A container that needs more memory than its limit: OOM-killed, reported as such.
    let mut exits = runtime.subscribe_exits();
    let hog = runtime
        .create_container(
            sandbox,
            &container(
                "hog",
                &["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"],
                Resources {
                    memory_limit: Some(16 << 20),
                    ..Default::default()
                },
            ),
        )
        .await
        .context("creating the hog container")?;
    runtime
        .start_container(&hog)
        .await
        .context("starting the hog container")?;
    tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match exits.recv().await {
                Ok(exit) if exit.id == hog => return Ok(()),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => bail!("exit channel: {e}"),
            }
        }
    })
    .await
    .context("the hog container did not exit")??;
    let status = runtime.container_status(&hog).await?;
    phase("hog container exited");
    ensure!(
        status.state == ContainerState::Exited
            && status.reason.as_deref() == Some("OOMKilled")
            && status.exit_code == Some(137),
        "hog ended {:?} reason {:?} exit code {:?}",
        status.state,
        status.reason,
        status.exit_code
    );
    ensure!(
        cgroups
            .stats(pod_cgroup)
            .and_then(|s| s.memory.oom_events)
            .is_some_and(|n| n >= 1),
        "pod memory.events has no oom_kill"
    );
    ensure!(
        !cgroup_dir(&status.cgroup).exists(),
        "the exited container's cgroup {} was left behind",
        status.cgroup
    );
    Ok(hog)
}
