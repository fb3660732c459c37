//! The README quick start, end to end: `scripts/test-quickstart.sh` runs `scripts/up.sh`
//! with this build's binaries in throwaway dirs (its own network namespace, host port and
//! cgroup root), runs pods with kubectl through the forwarded port, reads their logs,
//! re-runs up.sh, then `scripts/down.sh`, and checks that no namespace, process, mount,
//! cgroup or runtime dir is left. Needs root, like the other integration tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/debug (or release) where cargo put this workspace's binaries.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/<test> → target/debug
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn quickstart_up_runs_pods_and_down_leaves_nothing() {
    let bins = bin_dir();
    for name in [
        "cairn-control",
        "cairn-agent",
        "cairn-cni",
        "cairn-logger",
        "cairn-proxy",
    ] {
        assert!(
            bins.join(name).exists(),
            "{} is missing: build the workspace binaries first (cargo test --workspace does)",
            bins.join(name).display()
        );
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("bash")
        .arg(repo.join("scripts/test-quickstart.sh"))
        .env("CAIRN_BIN_DIR", &bins)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The script's progress lines carry the timings (up.sh, pod start).
    println!("{stdout}");
    assert!(
        out.status.success(),
        "test-quickstart.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("quickstart: OK"), "{stdout}");
}
