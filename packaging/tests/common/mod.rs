//! What the package tests share: the checkout, the binaries cargo built, and
//! `packaging/build` run on them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where cargo put this build's binaries (`target/<profile>`, this test's grandparent).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    for bin in [
        "cairn-control",
        "cairn-node",
        "cairn-agent",
        "cairn-proxy",
        "cairn-cni",
        "cairn-logger",
    ] {
        assert!(
            dir.join(bin).exists(),
            "{} is missing: cargo build --workspace --bins first",
            dir.join(bin).display()
        );
    }
    dir
}

pub fn ok(out: Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what}: {text}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn build(out: &Path, version: &str, rpm: bool) {
    let mut cmd = Command::new(repo().join("packaging/build"));
    cmd.arg("--bin-dir")
        .arg(bin_dir())
        .arg("--out")
        .arg(out)
        .args(["--version", version, "--fast"]);
    if !rpm {
        cmd.arg("--no-rpm");
    }
    ok(cmd.output().unwrap(), "packaging/build");
}
