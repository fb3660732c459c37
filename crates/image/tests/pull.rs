//! Pulls and imports against a real containerd 1.6 and docker-registry (testsupport).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use cairn_image::{
    get, import_archive, list, pull, remove, Credentials, ErrorKind, ImageError, PullOptions,
};
use cairn_testsupport::{
    busybox_image, images::host_arch, remove_cgroup, write_docker_archive_tar,
    write_oci_layout_tar, Containerd, ImageSpec, ManifestFormat, Registry,
};

const NS: &str = "cairn-image-test";

fn opts() -> PullOptions {
    PullOptions {
        hosts_dir: None,
        ..PullOptions::default()
    }
}

/// Runs `script` in a container of `image` and returns what it printed. The output goes
/// to a file in a bind-mounted host directory, not through ctr's stdout: ctr can exit
/// before its FIFO copy of a short-lived task's output is done (seen once in CI as an
/// empty string from `echo`).
fn ctr_run(c: &Containerd, image: &str, script: &str) -> String {
    let id = format!("run-{}", uuid_like());
    let cgroup = format!("cairn-image-test-{id}");
    let out_dir = tempfile::tempdir().unwrap();
    // Writable by the image's user too (one test image runs as 65534).
    std::fs::set_permissions(
        out_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mount = format!(
        "type=bind,src={},dst=/cairn-out,options=rbind:rw",
        out_dir.path().display()
    );
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&c.socket)
        .args(["-n", NS, "run", "--rm", "--cgroup", &cgroup, "--runc-root"])
        .arg(c.runc_root())
        .args(["--mount", &mount])
        .args([image, &id, "/bin/sh", "-c"])
        .arg(format!("( {script} ) > /cairn-out/stdout"))
        .output()
        .unwrap();
    remove_cgroup(&cgroup);
    assert!(
        out.status.success(),
        "ctr run {image} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.log_tail()
    );
    std::fs::read_to_string(out_dir.path().join("stdout")).unwrap()
}

fn ctr(c: &Containerd, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&c.socket)
        .args(["-n", NS])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctr {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn snapshot_exists(c: &Containerd, key: &str) -> bool {
    ctr(c, &["snapshots", "--snapshotter", "overlayfs", "ls"]).contains(key)
}

#[tokio::test]
async fn pull_busybox_get_list_run_remove() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, image) = registry.push_busybox().await.unwrap();
    let ch = containerd.channel().await.unwrap();

    assert_eq!(get(ch.clone(), NS, &reference).await.unwrap(), None);
    let started = std::time::Instant::now();
    let info = pull(ch.clone(), NS, &reference, &opts()).await.unwrap();
    eprintln!("cold pull of busybox took {:?}", started.elapsed());
    assert_eq!(info.name, reference);
    assert_eq!(info.id, image.config_digest());
    assert_eq!(info.manifest_digest, image.manifest_digest());
    assert_eq!(
        info.repo_digest,
        format!(
            "{}/cairn/busybox@{}",
            registry.addr(),
            image.manifest_digest()
        )
    );
    assert_eq!(info.config.cmd, ["sh"]);
    assert!(info.config.env[0].starts_with("PATH="));
    assert!(info.size > 500_000, "size {}", info.size);
    assert!(snapshot_exists(&containerd, &info.chain_id));
    // The image is registered the way ctr expects and runs.
    assert!(ctr(&containerd, &["images", "ls", "-q"]).contains(&reference));
    let out = ctr_run(
        &containerd,
        &reference,
        "cat /etc/cairn-image; id -u nobody",
    );
    assert_eq!(out, format!("arch={}\n65534\n", host_arch()));

    // Looked up again: same answer; pulling again is a no-op that succeeds.
    assert_eq!(
        get(ch.clone(), NS, &reference).await.unwrap(),
        Some(info.clone())
    );
    assert_eq!(list(ch.clone(), NS).await.unwrap(), vec![info.clone()]);
    let again = pull(ch.clone(), NS, &reference, &opts()).await.unwrap();
    assert_eq!(again, info);

    assert!(remove(ch.clone(), NS, &reference).await.unwrap());
    assert!(!remove(ch.clone(), NS, &reference).await.unwrap());
    assert_eq!(get(ch.clone(), NS, &reference).await.unwrap(), None);
}

#[tokio::test]
async fn pull_by_digest_and_docker_schema2() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let spec = ImageSpec {
        format: ManifestFormat::Docker,
        entrypoint: Some(vec!["/bin/echo".into()]),
        cmd: Some(vec!["hello".into()]),
        working_dir: Some("/tmp".into()),
        user: Some("65534".into()),
        exposed_ports: vec!["8080/tcp".into()],
        ..ImageSpec::default()
    };
    let image = busybox_image(&spec).unwrap();
    registry
        .push_image("cairn/docker", "v1", &image)
        .await
        .unwrap();
    let by_digest = format!(
        "{}/cairn/docker@{}",
        registry.addr(),
        image.manifest_digest()
    );
    let ch = containerd.channel().await.unwrap();
    let info = pull(ch.clone(), NS, &by_digest, &opts()).await.unwrap();
    assert_eq!(info.name, by_digest);
    assert_eq!(info.id, image.config_digest());
    assert_eq!(info.repo_digest, by_digest);
    assert_eq!(info.config.entrypoint, ["/bin/echo"]);
    assert_eq!(info.config.working_dir, "/tmp");
    assert_eq!(info.config.user, "65534");
    assert_eq!(info.config.exposed_ports, ["8080/tcp"]);
    // ctr applies the image's WorkingDir and User.
    let out = ctr_run(&containerd, &by_digest, "pwd; id -u");
    assert_eq!(out, "/tmp\n65534\n");

    // A digest the registry does not have.
    let missing = format!("{}/cairn/docker@sha256:{}", registry.addr(), "0".repeat(64));
    let err = pull(ch, NS, &missing, &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn index_platform_selection() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, index) = registry.push_busybox_index().await.unwrap();
    let ch = containerd.channel().await.unwrap();

    let info = pull(ch.clone(), NS, &reference, &opts()).await.unwrap();
    let amd64 = index.image_for("amd64").unwrap();
    assert_eq!(info.id, amd64.config_digest());
    assert_eq!(info.manifest_digest, amd64.manifest_digest());
    // kubelet's repo digest names what the tag points at: the index.
    assert!(
        info.repo_digest.ends_with(&index.index.digest),
        "{}",
        info.repo_digest
    );
    assert_eq!(
        ctr_run(&containerd, &reference, "cat /etc/cairn-image"),
        "arch=amd64\n"
    );

    let arm = PullOptions {
        platform: "linux/arm64".parse().unwrap(),
        ..opts()
    };
    let arm_info = pull(ch.clone(), "cairn-arm", &reference, &arm)
        .await
        .unwrap();
    assert_eq!(
        arm_info.id,
        index.image_for("arm64").unwrap().config_digest()
    );

    let s390 = PullOptions {
        platform: "linux/s390x".parse().unwrap(),
        ..opts()
    };
    let err = pull(ch.clone(), "cairn-s390", &reference, &s390)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ImageError::NoMatchingPlatform { .. }),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn private_registry_basic_auth() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start_with_htpasswd("alice", "s3cret").unwrap();
    let (reference, image) = registry.push_busybox().await.unwrap();
    let ch = containerd.channel().await.unwrap();

    let err = pull(ch.clone(), NS, &reference, &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");
    assert_eq!(get(ch.clone(), NS, &reference).await.unwrap(), None);

    let wrong = PullOptions {
        credentials: vec![Credentials::basic("alice", "nope")],
        ..opts()
    };
    let err = pull(ch.clone(), NS, &reference, &wrong).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");

    // Credentials as they come from an imagePullSecret; the wrong ones are tried first.
    let secret = format!(
        r#"{{"auths":{{"{}":{{"username":"alice","password":"s3cret"}}}}}}"#,
        registry.addr()
    );
    let mut creds = vec![Credentials::basic("alice", "nope")];
    creds.extend(cairn_image::docker_config_credentials(secret.as_bytes(), &reference).unwrap());
    let good = PullOptions {
        credentials: creds,
        ..opts()
    };
    let info = pull(ch.clone(), NS, &reference, &good).await.unwrap();
    assert_eq!(info.id, image.config_digest());
}

#[tokio::test]
async fn unknown_image_and_unreachable_registry() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    registry.push_busybox().await.unwrap();
    let ch = containerd.channel().await.unwrap();

    for missing in ["cairn/nothing:latest", "cairn/busybox:no-such-tag"] {
        let reference = format!("{}/{missing}", registry.addr());
        let err = pull(ch.clone(), NS, &reference, &opts()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        let msg = cairn_image::pull_error_message(&reference, &err);
        assert!(msg.ends_with(&format!("{reference}: not found")), "{msg}");
    }

    let port = cairn_testsupport::registry::free_port().unwrap();
    let err = pull(ch.clone(), NS, &format!("127.0.0.1:{port}/x/y:z"), &opts())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unreachable, "{err}");

    let err = pull(ch, NS, "UPPER/case", &opts()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidReference, "{err}");
}

#[tokio::test]
async fn hosts_toml_mirror_serves_docker_hub_names() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let image = busybox_image(&ImageSpec::default()).unwrap();
    registry
        .push_image("library/busybox", "latest", &image)
        .await
        .unwrap();
    let hosts = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(hosts.path().join("docker.io")).unwrap();
    std::fs::write(
        hosts.path().join("docker.io/hosts.toml"),
        format!(
            "server = \"https://registry-1.docker.io\"\n\n[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            registry.addr()
        ),
    )
    .unwrap();
    let ch = containerd.channel().await.unwrap();
    let with_mirror = PullOptions {
        hosts_dir: Some(hosts.path().to_path_buf()),
        ..opts()
    };
    let info = pull(ch.clone(), NS, "busybox", &with_mirror).await.unwrap();
    assert_eq!(info.name, "docker.io/library/busybox:latest");
    assert_eq!(info.id, image.config_digest());
    assert_eq!(
        info.repo_digest,
        format!("docker.io/library/busybox@{}", image.manifest_digest())
    );
    assert_eq!(
        get(ch, NS, "docker.io/library/busybox").await.unwrap(),
        Some(info)
    );
}

#[tokio::test]
async fn corrupted_blob_is_rejected_and_nothing_registered() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, image) = registry.push_busybox().await.unwrap();
    // Flip bytes of the small top layer in the registry's storage, keeping its size.
    let top = &image.layers[1];
    let path = registry.blob_path(&top.digest);
    let mut data = std::fs::read(&path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&path, &data).unwrap();

    let ch = containerd.channel().await.unwrap();
    let err = pull(ch.clone(), NS, &reference, &opts()).await.unwrap_err();
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::BadContent);
    assert_eq!(get(ch.clone(), NS, &reference).await.unwrap(), None);
    assert!(list(ch, NS).await.unwrap().is_empty());
    assert!(!ctr(&containerd, &["images", "ls", "-q"]).contains(&reference));
    let content = ctr(&containerd, &["content", "ls", "-q"]);
    assert!(
        !content.contains(&top.digest),
        "corrupt blob stored: {content}"
    );
    assert!(
        ctr(&containerd, &["content", "active"]).lines().count() <= 1,
        "ingest left behind"
    );
}

#[tokio::test]
async fn import_oci_layout_and_docker_archive() {
    let containerd = Containerd::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let oci_image = busybox_image(&ImageSpec {
        cmd: Some(vec!["echo".into(), "oci".into()]),
        ..ImageSpec::default()
    })
    .unwrap();
    let docker_image = busybox_image(&ImageSpec {
        format: ManifestFormat::Docker,
        cmd: Some(vec!["echo".into(), "docker".into()]),
        ..ImageSpec::default()
    })
    .unwrap();
    let oci_tar = dir.path().join("oci.tar");
    let docker_tar = dir.path().join("docker.tar");
    write_oci_layout_tar(&oci_tar, "example.com/cairn/oci:v1", &oci_image).unwrap();
    write_docker_archive_tar(&docker_tar, "cairn/docker:v2", &docker_image).unwrap();

    let ch = containerd.channel().await.unwrap();
    let infos = import_archive(ch.clone(), NS, &oci_tar, &opts())
        .await
        .unwrap();
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].name, "example.com/cairn/oci:v1");
    assert_eq!(infos[0].id, oci_image.config_digest());
    assert_eq!(infos[0].config.cmd, ["echo", "oci"]);

    let infos = import_archive(ch.clone(), NS, &docker_tar, &opts())
        .await
        .unwrap();
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].name, "docker.io/cairn/docker:v2");
    assert_eq!(infos[0].id, docker_image.config_digest());
    assert_eq!(
        infos[0].chain_id,
        *cairn_chain(&docker_image.diff_ids).last().unwrap()
    );

    for name in ["example.com/cairn/oci:v1", "cairn/docker:v2"] {
        assert!(get(ch.clone(), NS, name).await.unwrap().is_some(), "{name}");
    }
    assert_eq!(
        ctr_run(&containerd, "docker.io/cairn/docker:v2", "echo ok"),
        "ok\n"
    );

    // Gzip-compressed archives import too; garbage does not.
    let gz = dir.path().join("docker.tar.gz");
    gzip_file(&docker_tar, &gz);
    let infos = import_archive(ch.clone(), "cairn-gz", &gz, &opts())
        .await
        .unwrap();
    assert_eq!(infos[0].id, docker_image.config_digest());
    let junk = dir.path().join("junk.tar");
    std::fs::write(&junk, b"this is not a tar").unwrap();
    let err = import_archive(ch, NS, &junk, &opts()).await.unwrap_err();
    assert!(matches!(err, ImageError::Archive { .. }), "{err}");
}

fn cairn_chain(diff_ids: &[String]) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let mut out: Vec<String> = Vec::new();
    for d in diff_ids {
        let next = match out.last() {
            None => d.clone(),
            Some(p) => format!("sha256:{}", hex::encode(Sha256::digest(format!("{p} {d}")))),
        };
        out.push(next);
    }
    out
}

fn gzip_file(from: &Path, to: &Path) {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(from).unwrap()).unwrap();
    std::fs::write(to, enc.finish().unwrap()).unwrap();
}

#[tokio::test]
async fn concurrent_pulls_of_one_image_both_succeed() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, image) = registry.push_busybox().await.unwrap();
    let ch = containerd.channel().await.unwrap();
    let o = opts();
    let started = std::time::Instant::now();
    let (a, b, c) = tokio::join!(
        pull(ch.clone(), NS, &reference, &o),
        pull(ch.clone(), NS, &reference, &o),
        pull(ch.clone(), NS, &reference, &o),
    );
    let elapsed = started.elapsed();
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(a, b);
    assert_eq!(b, c);
    assert_eq!(a.id, image.config_digest());
    assert!(snapshot_exists(&containerd, &a.chain_id));
    // No half-finished extraction snapshots or ingests are left behind.
    let snapshots = ctr(
        &containerd,
        &["snapshots", "--snapshotter", "overlayfs", "ls"],
    );
    assert!(!snapshots.contains("extract-"), "{snapshots}");
    assert!(ctr(&containerd, &["content", "active"]).lines().count() <= 1);
    eprintln!("3 concurrent pulls of busybox (2 layers, ~1 MB) took {elapsed:?}");
    let started = std::time::Instant::now();
    pull(ch.clone(), NS, &reference, &o).await.unwrap();
    eprintln!("re-pull of a present image took {:?}", started.elapsed());
}

#[tokio::test]
async fn https_registry_with_hosts_toml_ca_or_skip_verify() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (_, image) = registry.push_busybox().await.unwrap();
    let tls = registry.start_tls_view().unwrap();
    let cert = tls.tls_ca.clone().unwrap();
    // A loopback registry is plain HTTP by default; hosts.toml makes it HTTPS.
    let reference = format!("{}/cairn/busybox:latest", tls.addr());
    let hosts = tempfile::tempdir().unwrap();
    let host_dir = hosts.path().join(tls.addr());
    std::fs::create_dir_all(&host_dir).unwrap();
    let write_hosts = |extra: &str| {
        std::fs::write(
            host_dir.join("hosts.toml"),
            format!("server = \"https://{}\"\n{extra}", tls.addr()),
        )
        .unwrap();
    };
    let ch = containerd.channel().await.unwrap();
    let with_hosts = PullOptions {
        hosts_dir: Some(hosts.path().to_path_buf()),
        ..opts()
    };

    // Unknown CA: the TLS handshake fails, reported as unreachable.
    write_hosts("");
    let err = pull(ch.clone(), "tls-a", &reference, &with_hosts)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unreachable, "{err}");

    write_hosts(&format!("ca = \"{}\"\n", cert.display()));
    let info = pull(ch.clone(), "tls-b", &reference, &with_hosts)
        .await
        .unwrap();
    assert_eq!(info.id, image.config_digest());

    write_hosts("skip_verify = true\n");
    let info = pull(ch, "tls-c", &reference, &with_hosts).await.unwrap();
    assert_eq!(info.id, image.config_digest());
}
