//! Every unit in `packaging/systemd/` passes `systemd-analyze verify` with nothing to say
//! (an unknown key is only a warning there, so any output fails), in a root holding this
//! host's system units and stand-ins for cairn's binaries (verify checks that each
//! `ExecStart=` is executable), and carries what a node daemon needs (k3s's units are
//! the anchor).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const UNITS: [&str; 3] = [
    "cairn-control.service",
    "cairn-agent.service",
    "cairn-proxy.service",
];

fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), target).unwrap();
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A root with the host's units, cairn's units installed and stand-in binaries.
fn root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    copy_tree(
        Path::new("/lib/systemd/system"),
        &root.path().join("usr/lib/systemd/system"),
    );
    for unit in UNITS {
        std::fs::copy(
            units_dir().join(unit),
            root.path().join("usr/lib/systemd/system").join(unit),
        )
        .unwrap();
    }
    let bin = root.path().join("usr/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["cairn-control", "cairn-agent", "cairn-proxy"] {
        std::fs::write(bin.join(name), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(root.path().join("sbin")).unwrap();
    std::fs::copy("/sbin/modprobe", root.path().join("sbin/modprobe")).unwrap();
    root
}

#[test]
fn systemd_analyze_verify_accepts_every_unit_silently() {
    let root = root();
    for unit in UNITS {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", root.path().display()))
            .arg(unit)
            .output()
            .expect("systemd-analyze (systemd) is installed");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success() && said.is_empty(), "{unit}: {said}");
    }
}

fn unit(name: &str) -> Vec<String> {
    std::fs::read_to_string(units_dir().join(name))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn units_carry_what_node_daemons_need() {
    for name in UNITS {
        let lines = unit(name);
        for wanted in [
            "Type=notify",
            "Restart=always",
            "RestartSec=5s",
            "LimitNOFILE=1048576",
            "TasksMax=infinity",
            "WantedBy=multi-user.target",
        ] {
            assert!(lines.iter().any(|l| l == wanted), "{name} lacks {wanted}");
        }
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("EnvironmentFile=-/etc/cairn/")),
            "{name} reads no optional /etc/cairn/ environment file"
        );
    }
    let agent = unit("cairn-agent.service");
    for wanted in [
        // Containers are containerd's shims': stopping the agent leaves them running.
        "KillMode=process",
        "Delegate=yes",
        "ExecStartPre=-/sbin/modprobe br_netfilter",
        "ExecStartPre=-/sbin/modprobe overlay",
        "After=network-online.target containerd.service",
    ] {
        assert!(
            agent.iter().any(|l| l == wanted),
            "the agent lacks {wanted}"
        );
    }
}
