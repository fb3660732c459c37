//! `cairn-lab` refusing what it cannot do, with a message that says why, and leaving no
//! half-built lab behind: a taken API port, namespaces it has no record of, missing
//! binaries, a node component that fails to start, `down` of a lab that is not up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{processes_mentioning, LAB};

/// Runs `cairn-lab` with private roots; (success, stdout + stderr).
fn lab(roots: &Path, name: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(LAB)
        .env("CAIRN_LAB", name)
        .env("CAIRN_LAB_DATA_ROOT", roots.join("data"))
        .env("CAIRN_LAB_RUN_ROOT", roots.join("run"))
        .env("CAIRN_LAB_LOG_ROOT", roots.join("log"))
        .args(args)
        .output()
        .unwrap();
    (out.status.success(), common::combined(&out))
}

fn lab_namespaces(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("cl-{name}-")))
        .map(String::from)
        .collect()
}

/// Nothing of the lab is left but its logs.
fn assert_clean(roots: &Path, name: &str) {
    assert!(
        lab_namespaces(name).is_empty(),
        "{:?}",
        lab_namespaces(name)
    );
    assert!(processes_mentioning(&roots.display().to_string()).is_empty());
    assert!(!roots.join("run").join(name).exists());
    assert!(!roots.join("data").join(name).exists());
}

#[test]
fn a_taken_api_port_is_refused_before_anything_is_made() {
    let roots = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (ok, text) = lab(roots.path(), "badport", &["up", "--api-port", &port]);
    assert!(!ok);
    assert!(
        text.contains(&format!("127.0.0.1:{port} is taken")) && text.contains("choose --api-port"),
        "{text}"
    );
    assert_clean(roots.path(), "badport");
}

#[test]
fn namespaces_of_an_unknown_lab_are_not_touched() {
    let roots = tempfile::tempdir().unwrap();
    assert!(Command::new("ip")
        .args(["netns", "add", "cl-badns-sw"])
        .status()
        .unwrap()
        .success());
    let (ok, text) = lab(roots.path(), "badns", &["up", "--api-port", "16491"]);
    let still_there = lab_namespaces("badns");
    let _ = Command::new("ip")
        .args(["netns", "delete", "cl-badns-sw"])
        .status();
    assert!(!ok);
    assert!(
        text.contains("found cl-badns-sw, but lab badns has no record of them"),
        "{text}"
    );
    assert_eq!(still_there, ["cl-badns-sw"]);
}

#[test]
fn missing_binaries_and_bad_options_are_named() {
    let roots = tempfile::tempdir().unwrap();
    let (ok, text) = lab(roots.path(), "badbin", &["up", "--bin-dir", "/nonexistent"]);
    assert!(!ok);
    assert!(
        text.contains("missing /nonexistent/cairn-control") && text.contains("--bin-dir"),
        "{text}"
    );
    let (ok, text) = lab(roots.path(), "badbin", &["up", "--nodes", "0"]);
    assert!(!ok && text.contains("a lab has 1 to 50 nodes"), "{text}");
    let (ok, text) = lab(roots.path(), "Bad-Name", &["up"]);
    assert!(
        !ok && text.contains("lower-case letters or digits"),
        "{text}"
    );
    let (ok, text) = lab(roots.path(), "nolab", &["down"]);
    assert!(!ok && text.contains("no lab named nolab is up"), "{text}");
    assert_clean(roots.path(), "badbin");
}

#[test]
fn the_docker_driver_without_an_engine_says_so() {
    let roots = tempfile::tempdir().unwrap();
    let out = Command::new(LAB)
        .env("CAIRN_LAB", "nodocker")
        .env("CAIRN_LAB_DATA_ROOT", roots.path().join("data"))
        .env("CAIRN_LAB_RUN_ROOT", roots.path().join("run"))
        .env("CAIRN_LAB_LOG_ROOT", roots.path().join("log"))
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(["up", "--driver", "docker", "--api-port", "16493"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("--driver docker needs a running Docker engine"),
        "{text}"
    );
    assert_clean(roots.path(), "nodocker");
}

#[test]
fn a_node_component_that_fails_takes_the_lab_down_with_its_log() {
    let roots = tempfile::tempdir().unwrap();
    let (ok, text) = lab(
        roots.path(),
        "badnode",
        &["up", "--api-port", "16492", "--control-arg=--no-such-flag"],
    );
    assert!(!ok);
    assert!(
        text.contains("node-1/control exited while waiting for an answer on /readyz"),
        "{text}"
    );
    assert!(
        text.contains("--no-such-flag"),
        "the log's last lines are shown: {text}"
    );
    assert!(text.contains("taking the lab down"), "{text}");
    assert_clean(roots.path(), "badnode");
    assert!(
        roots.path().join("log/badnode/node-1/control.log").exists(),
        "logs stay for the post-mortem"
    );
}
