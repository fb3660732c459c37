//! The Vagrant lab's Vagrantfile (`packaging/vagrant/`) is valid to Vagrant itself
//! (`vagrant validate --ignore-provider`), defines the control VM and one VM per node
//! asked for, and a bad setting stops it with Ruby's message. No hypervisor runs on these
//! machines, so no VM boots here: the provisioning scripts the VMs run are tested on a
//! systemd-booted container (`systemd_host.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn vagrant_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vagrant")
}

/// `vagrant validate` with the lab's settings, its state kept out of the checkout.
fn validate(home: &Path, settings: &[(&str, &str)]) -> Output {
    let packages = home.join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    Command::new("vagrant")
        .args(["validate", "--ignore-provider"])
        .current_dir(vagrant_dir())
        .env("VAGRANT_HOME", home.join("vagrant.d"))
        .env("VAGRANT_DOTFILE_PATH", home.join("dotfile"))
        .env("CAIRN_PACKAGES", &packages)
        .envs(settings.iter().copied())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn vagrantfile_validates_with_a_vm_per_node_and_refuses_a_bad_setting() {
    let home = tempfile::tempdir().unwrap();
    let out = validate(home.path(), &[("CAIRN_NODES", "3")]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("Vagrantfile validated successfully"),
        "{said}"
    );
    for machine in ["control", "node1", "node2", "node3"] {
        assert!(
            said.contains(&format!("==> {machine}:")),
            "{machine}: {said}"
        );
    }
    assert!(!said.contains("node4"), "{said}");

    let out = validate(home.path(), &[("CAIRN_NODES", "two")]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("invalid value for Integer(): \"two\""),
        "{said}"
    );
    // The checkout is left as it was: the lab's state went to the temp dir.
    assert!(!vagrant_dir().join(".vagrant").exists());
}
