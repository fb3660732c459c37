//! Bad input: the spec's error JSON on stdout, a non-zero exit, and no state left behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

/// Asserts a spec error result: non-zero exit, `code`, non-empty `msg`.
fn assert_error(ok: bool, out: &Value, code: u64) {
    assert!(!ok, "expected failure, got success: {out}");
    assert_eq!(out["code"].as_u64(), Some(code), "error JSON: {out}");
    assert!(
        out["msg"].as_str().is_some_and(|m| !m.is_empty()),
        "msg missing: {out}"
    );
}

/// Runs the plugin with raw stdin bytes and the given environment (no netns entered:
/// these fail before touching the network).
fn raw(stdin: &[u8], env: &[(&str, &str)]) -> (bool, Value) {
    let mut child = Command::new(CAIRN)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The plugin may exit before reading stdin (e.g. an unknown command): ignore EPIPE.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout not JSON ({e}): {:?}", out.stdout));
    (out.status.success(), v)
}

fn nothing_left(host: &Netns, pod: &Netns, data: &std::path::Path) {
    assert!(
        ip_files(data, "cairn-test").is_empty(),
        "allocation left behind"
    );
    assert!(veths(host).is_empty(), "host veth left behind");
    assert!(veths(pod).is_empty(), "pod veth left behind");
}

const ADD_ENV: [(&str, &str); 4] = [
    ("CNI_COMMAND", "ADD"),
    ("CNI_CONTAINERID", "x"),
    ("CNI_IFNAME", "eth0"),
    ("CNI_NETNS", "/run/netns/cairn-test-does-not-exist"),
];

#[test]
fn malformed_json_is_code_6() {
    let (ok, out) = raw(b"{\"cniVersion\": \"1.0.0\", \"name\": ", &ADD_ENV);
    assert_error(ok, &out, 6);
    let (ok, out) = raw(b"not json at all", &ADD_ENV);
    assert_error(ok, &out, 6);
}

#[test]
fn unsupported_version_is_code_1() {
    let (ok, out) = raw(
        br#"{"cniVersion":"9.9.9","name":"n","type":"cairn-cni"}"#,
        &ADD_ENV,
    );
    assert_error(ok, &out, 1);
    assert!(out["details"].as_str().unwrap().contains("9.9.9"));
    // GC and STATUS need 1.1.0.
    let (ok, out) = raw(
        br#"{"cniVersion":"1.0.0","name":"n","type":"cairn-cni"}"#,
        &[("CNI_COMMAND", "STATUS")],
    );
    assert!(!ok, "{out}");
    assert!(out["code"].as_u64().is_some());
}

#[test]
fn missing_env_is_code_4() {
    let conf = br#"{"cniVersion":"1.0.0","name":"n","type":"cairn-cni","ipam":{"type":"host-local","subnet":"10.244.30.0/24","dataDir":"/nonexistent-cairn"}}"#;
    for missing in ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS"] {
        let env: Vec<_> = ADD_ENV
            .iter()
            .copied()
            .filter(|(k, _)| *k != missing)
            .collect();
        let (ok, out) = raw(conf, &env);
        assert_error(ok, &out, 4);
        assert!(out["details"].as_str().unwrap().contains(missing), "{out}");
    }
    let (ok, out) = raw(conf, &[("CNI_COMMAND", "FROB")]);
    assert!(!ok);
    assert!(out["code"].as_u64().is_some(), "{out}");
}

#[test]
fn invalid_and_unsupported_fields() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let mut c = bridge_conf("1.0.0", "cairn-cni", data.path(), "banana");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "x", Some(&pod.path()), "eth0", &c);
    assert_error(ok, &out, 7);
    assert!(out["details"].as_str().unwrap().contains("banana"));
    c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.31.0/24");
    c["ipam"]["type"] = json!("dhcp");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "x", Some(&pod.path()), "eth0", &c);
    assert_error(ok, &out, 2);
    c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.31.0/24");
    c["mtu"] = json!("big");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "x", Some(&pod.path()), "eth0", &c);
    assert_error(ok, &out, 6);
    // CHECK needs prevResult.
    c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.31.0/24");
    let (ok, out, _) = cni(&host, CAIRN, "CHECK", "x", Some(&pod.path()), "eth0", &c);
    assert_error(ok, &out, 7);
    nothing_left(&host, &pod, data.path());
    // No bridge was created by any of the failed ADDs.
    assert!(host.exec(&["ip", "link", "show", "cni0"]).stdout.is_empty());
}

#[test]
fn missing_netns_is_code_4_and_allocates_nothing() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.32.0/24");
    let gone = std::path::Path::new("/run/netns/cairn-test-never-created");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "x", Some(gone), "eth0", &c);
    assert_error(ok, &out, 4);
    assert!(out["details"]
        .as_str()
        .unwrap()
        .contains("cairn-test-never-created"));
    nothing_left(&host, &pod, data.path());
}

#[test]
fn exhausted_range_is_code_11_without_partial_state() {
    let host = Netns::new();
    let pod1 = Netns::new();
    let pod2 = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let mut c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.33.0/24");
    c["ipam"]["rangeStart"] = json!("10.244.33.10");
    c["ipam"]["rangeEnd"] = json!("10.244.33.10");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "first", Some(&pod1.path()), "eth0", &c);
    assert!(ok, "{out}");
    assert_eq!(out["ips"][0]["address"], "10.244.33.10/24");
    let (ok, out, _) = cni(
        &host,
        CAIRN,
        "ADD",
        "second",
        Some(&pod2.path()),
        "eth0",
        &c,
    );
    assert_error(ok, &out, 11);
    assert!(veths(&pod2).is_empty(), "no interface in the failed pod");
    assert_eq!(veths(&host).len(), 1, "only the first pod's veth");
    assert_eq!(ip_files(data.path(), "cairn-test"), vec!["10.244.33.10"]);
}

#[test]
fn failure_after_allocation_rolls_back() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.34.0/24");
    // The pod already has an eth0: creating the veth peer fails after IPAM allocated.
    pod.sh(&["ip", "link", "add", "eth0", "type", "bridge"]);
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "x", Some(&pod.path()), "eth0", &c);
    assert!(!ok, "{out}");
    assert!(out["code"].as_u64().is_some_and(|c| c >= 100), "{out}");
    assert!(
        ip_files(data.path(), "cairn-test").is_empty(),
        "IP not released"
    );
    assert!(veths(&host).is_empty());
    assert!(veths(&pod).is_empty());
    // The address is free again: the next ADD (other ifname) gets the same first one.
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "y", Some(&pod.path()), "eth1", &c);
    assert!(ok, "{out}");
    // host-local rotation: the next address after the last reserved one.
    assert_eq!(out["ips"][0]["address"], "10.244.34.3/24");
    assert_eq!(ip_files(data.path(), "cairn-test"), vec!["10.244.34.3"]);
}

#[test]
fn duplicate_add_is_refused_without_touching_the_first() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = bridge_conf("1.0.0", "cairn-cni", data.path(), "10.244.35.0/24");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "d", Some(&pod.path()), "eth0", &c);
    assert!(ok, "{out}");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "d", Some(&pod.path()), "eth0", &c);
    assert!(!ok);
    assert!(out["code"].as_u64().is_some(), "{out}");
    assert_eq!(ip_files(data.path(), "cairn-test"), vec!["10.244.35.2"]);
    assert_eq!(veths(&pod).len(), 1);
    assert!(pod
        .sh(&["ip", "addr", "show", "eth0"])
        .contains("10.244.35.2/24"));
}

#[test]
fn gc_without_valid_attachments_is_refused_and_keeps_everything() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = bridge_conf("1.1.0", "cairn-cni", data.path(), "10.244.36.0/24");
    let (ok, out, _) = cni(&host, CAIRN, "ADD", "g", Some(&pod.path()), "eth0", &c);
    assert!(ok, "{out}");
    let (ok, out, _) = cni(&host, CAIRN, "GC", "", None, "", &c);
    assert_error(ok, &out, 7);
    assert_eq!(ip_files(data.path(), "cairn-test"), vec!["10.244.36.2"]);
    assert_eq!(veths(&host).len(), 1);
}
