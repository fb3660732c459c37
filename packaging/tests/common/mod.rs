//! What the package tests share: the checkout, the binaries cargo built, and
//! `packaging/build` run on them.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The version the packages are built as, and the one an upgrade installs.
pub const VERSION: &str = "0.1.0";
pub const UPGRADE: &str = "0.1.0+1";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const BINARIES: [&str; 6] = [
    "cairn-control",
    "cairn-node",
    "cairn-agent",
    "cairn-proxy",
    "cairn-cni",
    "cairn-logger",
];

/// Where cargo put this build's binaries (`target/<profile>`, this test's grandparent).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    for bin in BINARIES {
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

/// The packages of this build (`VERSION`, with rpms) and `upgrade/` (`UPGRADE`, debs),
/// built once for every test binary here, under a lock, and again only when a binary
/// or a file `packaging/build` reads changed.
pub fn shared_packages() -> PathBuf {
    let dir = bin_dir().join("test-packages");
    let lock = File::create(bin_dir().join("test-packages.lock")).unwrap();
    lock.lock().unwrap();
    let stamp = inputs_stamp();
    let stamp_file = dir.join("inputs.stamp");
    if std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    build(&dir, VERSION, true);
    build(&dir.join("upgrade"), UPGRADE, false);
    std::fs::write(&stamp_file, stamp).unwrap();
    dir
}

/// Size and modification time of every input of the packages.
fn inputs_stamp() -> String {
    let here = repo().join("packaging");
    let mut inputs: Vec<PathBuf> = BINARIES.iter().map(|b| bin_dir().join(b)).collect();
    inputs.push(here.join("build"));
    for dir in ["deb", "rpm", "systemd", "etc", "files", "scripts"] {
        for entry in std::fs::read_dir(here.join(dir)).unwrap() {
            inputs.push(entry.unwrap().path());
        }
    }
    inputs.sort();
    let line = |p: &PathBuf| {
        let m = std::fs::metadata(p).unwrap();
        let modified = m
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        format!("{} {} {}\n", p.display(), m.len(), modified.as_nanos())
    };
    inputs.iter().map(line).collect()
}
