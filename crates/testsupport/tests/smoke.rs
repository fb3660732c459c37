//! The harnesses work together: a private containerd, a local registry, the busybox test
//! images (checked with containerd's own `ctr` client) and network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use cairn_testsupport::{
    busybox_image, remove_cgroup, write_docker_archive_tar, write_oci_layout_tar, Containerd,
    ImageSpec, ManifestFormat, NetNs, Registry,
};
use containerd_client::services::v1::version_client::VersionClient;

fn ctr(c: &Containerd, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&c.socket)
        .args(["-n", "smoke"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctr {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.log_tail()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn containerd_registry_and_busybox_images() {
    let containerd = Containerd::start().unwrap();
    let channel = containerd.channel().await.unwrap();
    let version = VersionClient::new(channel).version(()).await.unwrap();
    assert!(version.get_ref().version.starts_with("1."), "{version:?}");

    let registry = Registry::start().unwrap();
    let (reference, image) = registry.push_busybox().await.unwrap();
    assert_eq!(
        reference,
        format!("{}/cairn/busybox:latest", registry.addr())
    );
    let (multi_ref, index) = registry.push_busybox_index().await.unwrap();

    // containerd's own client pulls and runs what we pushed.
    ctr(&containerd, &["images", "pull", "--plain-http", &reference]);
    let listed = ctr(&containerd, &["images", "ls"]);
    assert!(listed.contains(image.manifest_digest()), "{listed}");
    let runc_root = containerd.runc_root();
    let cgroup = format!("cairn-smoke-{}/smoke-id", std::process::id());
    // The output goes to a bind-mounted file, complete once the process has exited:
    // ctr's copy of a short-lived task's stdout can lose the last write (containerd's
    // FIFOs close with the task; CI saw "0\n" without the second line).
    let out_dir = tempfile::tempdir().unwrap();
    let mount = format!(
        "type=bind,src={},dst=/out,options=rbind:rw",
        out_dir.path().display()
    );
    ctr(
        &containerd,
        &[
            "run",
            "--rm",
            "--cgroup",
            &cgroup,
            "--runc-root",
            runc_root.to_str().unwrap(),
            "--mount",
            &mount,
            &reference,
            "smoke-id",
            "/bin/sh",
            "-c",
            "{ id -u; cat /etc/cairn-image; } > /out/run.txt",
        ],
    );
    let out = std::fs::read_to_string(out_dir.path().join("run.txt")).unwrap();
    assert_eq!(out, "0\narch=amd64\n");
    let left = remove_cgroup(cgroup.split('/').next().unwrap());
    assert!(left.is_empty(), "cgroups left: {left:?}");

    ctr(&containerd, &["images", "pull", "--plain-http", &multi_ref]);
    let listed = ctr(&containerd, &["images", "ls"]);
    assert!(listed.contains(index.index.digest.as_str()), "{listed}");

    // Archives import with ctr as well.
    let dir = tempfile::tempdir().unwrap();
    let oci = dir.path().join("oci.tar");
    let docker_spec = ImageSpec {
        format: ManifestFormat::Docker,
        cmd: Some(vec!["echo".into(), "docker".into()]),
        ..ImageSpec::default()
    };
    write_oci_layout_tar(&oci, "example.com/cairn/oci:v1", &image).unwrap();
    let docker = dir.path().join("docker.tar");
    write_docker_archive_tar(
        &docker,
        "cairn/docker:v2",
        &busybox_image(&docker_spec).unwrap(),
    )
    .unwrap();
    ctr(&containerd, &["images", "import", oci.to_str().unwrap()]);
    ctr(&containerd, &["images", "import", docker.to_str().unwrap()]);
    let listed = ctr(&containerd, &["images", "ls", "-q"]);
    assert!(listed.contains("example.com/cairn/oci:v1"), "{listed}");
    assert!(listed.contains("docker.io/cairn/docker:v2"), "{listed}");
}

#[tokio::test]
async fn private_registry_requires_credentials() {
    let registry = Registry::start_with_htpasswd("alice", "s3cret").unwrap();
    registry.push_busybox().await.unwrap();
    let url = format!(
        "http://{}/v2/cairn/busybox/manifests/latest",
        registry.addr()
    );
    let client = cairn_testsupport::api_client::plain_http_builder()
        .build()
        .unwrap();
    let anon = client.get(&url).send().await.unwrap();
    assert_eq!(anon.status().as_u16(), 401);
    let authed = client
        .get(&url)
        .basic_auth("alice", Some("s3cret"))
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(authed.status().as_u16(), 200);
}

#[test]
fn netns_has_loopback_up_and_goes_away() {
    let path;
    {
        let ns = NetNs::new("cairn-ts").unwrap();
        path = ns.path();
        assert!(path.exists());
        let out = ns
            .command("ip")
            .args(["-o", "link", "show", "lo"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("UP"), "{text}");
    }
    assert!(!path.exists());
}

/// On the instruction clock the guest's idle time costs no host time: a 60 s `sleep` in
/// the guest ends long before 60 s have passed on the host (on the wall clock it cannot).
#[test]
fn guest_instruction_clock_skips_idle_time() {
    let out = cairn_testsupport::qemu::Guest::new()
        .unwrap()
        .instruction_clock()
        .run(
            "sleep 60 && echo slept",
            std::time::Duration::from_secs(300),
        )
        .unwrap();
    assert!(out.success() && out.output.contains("slept"), "{out}");
    assert!(
        out.elapsed < std::time::Duration::from_secs(60),
        "a 60 s guest sleep took {:?} on the host: the instruction clock is not in effect",
        out.elapsed
    );
}
