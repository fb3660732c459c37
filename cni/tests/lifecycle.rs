//! Lifecycle: many ADD/DEL cycles, concurrency, crashes in the middle of ADD followed by
//! GC, DEL after the namespace is gone, idempotent DEL, real traffic, cairn mode,
//! masquerade rules with both backends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn conf(data: &Path, subnet: &str) -> Value {
    bridge_conf("1.1.0", "cairn-cni", data, subnet)
}

fn add_ok(host: &Netns, id: &str, pod: &Netns, ifname: &str, conf: &Value) -> Value {
    let (ok, out, err) = cni(host, CAIRN, "ADD", id, Some(&pod.path()), ifname, conf);
    assert!(ok, "ADD {id} failed: {out} {err}");
    out
}

fn del_ok(host: &Netns, id: &str, netns: Option<&Path>, ifname: &str, conf: &Value) {
    let (ok, out, err) = cni(host, CAIRN, "DEL", id, netns, ifname, conf);
    assert!(ok, "DEL {id} failed: {out} {err}");
    assert_eq!(out, Value::Null, "DEL prints nothing on success");
}

fn routes(ns: &Netns) -> Vec<String> {
    let mut v: Vec<String> = ns
        .sh(&["ip", "route", "show", "table", "all"])
        .lines()
        .filter(|l| !l.contains("proto kernel") || !l.contains("table local"))
        // `linkdown` mirrors the bridge's carrier, which the kernel drops asynchronously
        // after the last port leaves: a state flag, not a route left behind.
        .map(|l| l.replace(" linkdown", ""))
        .collect();
    v.sort();
    v
}

#[test]
fn thousand_add_del_cycles_leave_nothing_behind() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = conf(data.path(), "10.244.20.0/24");
    // Baseline after the first cycle (bridge + its address stay, like the reference).
    let r = add_ok(&host, "warmup", &pod, "eth0", &c);
    assert_eq!(r["ips"][0]["address"], "10.244.20.2/24");
    del_ok(&host, "warmup", Some(&pod.path()), "eth0", &c);
    let host_routes = routes(&host);
    let pod_routes = routes(&pod);
    let start = Instant::now();
    let mut seen = std::collections::HashSet::new();
    for i in 0..1000 {
        let id = format!("cycle-{i}");
        let r = add_ok(&host, &id, &pod, "eth0", &c);
        seen.insert(r["ips"][0]["address"].as_str().unwrap().to_string());
        del_ok(&host, &id, Some(&pod.path()), "eth0", &c);
    }
    eprintln!("1000 ADD/DEL cycles in {:?}", start.elapsed());
    // host-local rotation: addresses are not immediately reused.
    assert_eq!(seen.len(), 253, "all of .2-.254 handed out in rotation");
    assert!(ip_files(data.path(), "cairn-test").is_empty());
    assert!(
        veths(&host).is_empty(),
        "host veths left: {:?}",
        veths(&host)
    );
    assert!(veths(&pod).is_empty());
    assert_eq!(routes(&host), host_routes);
    assert_eq!(routes(&pod), pod_routes);
}

#[test]
fn fifty_concurrent_adds_get_distinct_addresses() {
    let host = Netns::new();
    let pods: Vec<Netns> = (0..50).map(|_| Netns::new()).collect();
    let data = tempfile::tempdir().unwrap();
    let c = conf(data.path(), "10.244.21.0/24");
    let ids: Vec<String> = (0..50).map(|i| format!("conc-{i}")).collect();
    let children: Vec<_> = pods
        .iter()
        .zip(&ids)
        .map(|(p, id)| {
            let path = p.path();
            spawn_in(
                &host,
                &Call {
                    plugin: CAIRN,
                    command: "ADD",
                    container_id: id,
                    netns: Some(&path),
                    ifname: "eth0",
                    config: &c,
                    extra_env: vec![],
                },
            )
        })
        .collect();
    let mut addrs = std::collections::HashSet::new();
    for ch in children {
        let out = ch.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        addrs.insert(v["ips"][0]["address"].as_str().unwrap().to_string());
    }
    assert_eq!(addrs.len(), 50, "50 distinct addresses");
    assert_eq!(ip_files(data.path(), "cairn-test").len(), 50);
    assert_eq!(veths(&host).len(), 50);
    // Each pod really has its address.
    for (p, id) in pods.iter().zip(&ids) {
        let file_ip = ip_files(data.path(), "cairn-test")
            .into_iter()
            .find(|ip| {
                std::fs::read_to_string(data.path().join("cairn-test").join(ip))
                    .unwrap()
                    .starts_with(&format!("{id}\r\n"))
            })
            .unwrap();
        assert!(p
            .sh(&["ip", "-4", "addr", "show", "eth0"])
            .contains(&file_ip));
    }
    let children: Vec<_> = pods
        .iter()
        .zip(&ids)
        .map(|(p, id)| {
            let path = p.path();
            spawn_in(
                &host,
                &Call {
                    plugin: CAIRN,
                    command: "DEL",
                    container_id: id,
                    netns: Some(&path),
                    ifname: "eth0",
                    config: &c,
                    extra_env: vec![],
                },
            )
        })
        .collect();
    for ch in children {
        assert!(ch.wait_with_output().unwrap().status.success());
    }
    assert!(ip_files(data.path(), "cairn-test").is_empty());
    assert!(veths(&host).is_empty());
}

fn masq_rules(host: &Netns) -> String {
    let ipt = host.sh(&["iptables-save", "-t", "nat"]);
    let nft = host.exec(&["nft", "list", "ruleset"]);
    format!("{ipt}\n{}", String::from_utf8_lossy(&nft.stdout))
}

#[test]
fn sigkill_during_add_then_gc_leaks_nothing() {
    let host = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let marker_dir = tempfile::tempdir().unwrap();
    let mut c = conf(data.path(), "10.244.22.0/24");
    c["ipMasq"] = json!(true);
    // One attachment that GC must keep.
    let keep_pod = Netns::new();
    add_ok(&host, "keep", &keep_pod, "eth0", &c);
    let mut pods = Vec::new();
    for step in ["after-ipam", "after-veth", "after-routes", "after-masq"] {
        let pod = Netns::new();
        let marker = marker_dir.path().join(step);
        let id = format!("killed-{step}");
        let path = pod.path();
        let mut child = spawn_in(
            &host,
            &Call {
                plugin: CAIRN,
                command: "ADD",
                container_id: &id,
                netns: Some(&path),
                ifname: "eth0",
                config: &c,
                extra_env: vec![
                    ("CAIRN_CNI_TEST_HOLD", step.to_string()),
                    ("CAIRN_CNI_TEST_HOLD_MARKER", marker.display().to_string()),
                ],
            },
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !marker.exists() {
            assert!(Instant::now() < deadline, "ADD never reached {step}");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // The crash did leave state behind.
        let files = ip_files(data.path(), "cairn-test");
        assert!(
            files.iter().any(|f| {
                std::fs::read_to_string(data.path().join("cairn-test").join(f))
                    .unwrap()
                    .starts_with(&id)
            }),
            "{step}: expected a leaked allocation"
        );
        if step != "after-ipam" {
            assert_eq!(veths(&pod).len(), 1, "{step}: expected a leaked veth");
        }
        pods.push(pod);
    }
    assert!(masq_rules(&host).contains("cairn-cni:cairn-test:killed-after-masq:eth0"));
    assert_eq!(veths(&host).len(), 4);

    let mut gc = c.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": "eth0"}]);
    let (ok, out, err) = cni(&host, CAIRN, "GC", "", None, "", &gc);
    assert!(ok, "GC failed: {out} {err}");

    let files = ip_files(data.path(), "cairn-test");
    assert_eq!(
        files,
        vec!["10.244.22.2".to_string()],
        "only the kept allocation"
    );
    assert_eq!(
        veths(&host).len(),
        1,
        "only the kept veth: {:?}",
        veths(&host)
    );
    for p in &pods {
        assert!(veths(p).is_empty());
    }
    let rules = masq_rules(&host);
    assert!(
        !rules.contains("killed-"),
        "killed attachments' rules remain:\n{rules}"
    );
    assert!(rules.contains("cairn-cni:cairn-test:keep:eth0"));
    // GC with an empty list removes the rest; the network can be used again.
    gc["cni.dev/valid-attachments"] = json!([]);
    assert!(cni(&host, CAIRN, "GC", "", None, "", &gc).0);
    assert!(ip_files(data.path(), "cairn-test").is_empty());
    assert!(veths(&host).is_empty());
    assert!(!masq_rules(&host).contains("cairn-cni:cairn-test:"));
}

#[test]
fn del_after_netns_is_gone_succeeds_and_releases() {
    let host = Netns::new();
    let mut pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = conf(data.path(), "10.244.23.0/24");
    add_ok(&host, "gone", &pod, "eth0", &c);
    let path = pod.path();
    pod.delete();
    assert!(!path.exists());
    del_ok(&host, "gone", Some(&path), "eth0", &c);
    assert!(ip_files(data.path(), "cairn-test").is_empty());
    // Kernel removes the pair with the namespace; DEL must not have failed on it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !veths(&host).is_empty() {
        assert!(Instant::now() < deadline, "veth still present");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn del_is_idempotent_and_tolerates_unknowns() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = conf(data.path(), "10.244.24.0/24");
    // Unknown container in a network never used on this host.
    del_ok(&host, "never", Some(&pod.path()), "eth0", &c);
    // Without CNI_NETNS (allowed for DEL).
    del_ok(&host, "never", None, "eth0", &c);
    add_ok(&host, "twice", &pod, "eth0", &c);
    del_ok(&host, "twice", Some(&pod.path()), "eth0", &c);
    del_ok(&host, "twice", Some(&pod.path()), "eth0", &c);
    assert!(veths(&pod).is_empty());
    assert!(ip_files(data.path(), "cairn-test").is_empty());
}

#[test]
fn pods_on_one_bridge_ping_each_other_and_the_gateway() {
    let host = Netns::new();
    let a = Netns::new();
    let b = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let c = conf(data.path(), "10.244.25.0/24");
    let ra = add_ok(&host, "pod-a", &a, "eth0", &c);
    let rb = add_ok(&host, "pod-b", &b, "eth0", &c);
    let ip_a = ra["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let ip_b = rb["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for (ns, target) in [(&a, &ip_b), (&b, &ip_a)] {
        let out = ns.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "2", target]);
        assert!(
            out.status.success(),
            "ping {target} failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    for ns in [&a, &b] {
        assert!(ns
            .exec(&["ping", "-c", "1", "-W", "2", "10.244.25.1"])
            .status
            .success());
        // Loopback is up in the pod.
        assert!(ns
            .exec(&["ping", "-c", "1", "-W", "2", "127.0.0.1"])
            .status
            .success());
    }
    // The host reaches the pods through the bridge's gateway address.
    assert!(host
        .exec(&["ping", "-c", "1", "-W", "2", &ip_a])
        .status
        .success());
    // After DEL of b, a can no longer reach it.
    del_ok(&host, "pod-b", Some(&b.path()), "eth0", &c);
    assert!(!a
        .exec(&["ping", "-c", "1", "-W", "1", &ip_b])
        .status
        .success());
}

#[test]
fn cairn_mode_reads_subnet_file() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let subnet_file = data.path().join("subnet.env");
    std::fs::write(
        &subnet_file,
        "CAIRN_NETWORK=10.244.0.0/16\nCAIRN_SUBNET=10.244.26.0/24\nCAIRN_MTU=1400\n",
    )
    .unwrap();
    // No ipam section: cairn mode. dataDir comes from an ipam-less config? Use ipam type cairn.
    let c = json!({
        "cniVersion": "1.1.0", "name": "cairn", "type": "cairn-cni",
        "subnetFile": subnet_file.display().to_string(),
        "ipam": {"type": "cairn", "dataDir": data.path().display().to_string()}
    });
    let r = add_ok(&host, "cm", &pod, "eth0", &c);
    assert_eq!(r["ips"][0]["address"], "10.244.26.2/24");
    assert_eq!(r["ips"][0]["gateway"], "10.244.26.1");
    assert_eq!(
        r["routes"],
        json!([{"dst": "0.0.0.0/0", "gw": "10.244.26.1"}])
    );
    let link = &pod.ip_json(&["link", "show", "eth0"])[0];
    assert_eq!(link["mtu"], 1400);
    assert!(host
        .sh(&["ip", "addr", "show", "cni0"])
        .contains("10.244.26.1/24"));
    let (ok, out, _) = cni(&host, CAIRN, "STATUS", "", None, "", &c);
    assert!(ok, "{out}");
    // Without the subnet file the plugin cannot serve ADDs (STATUS 50), but DEL works.
    std::fs::remove_file(&subnet_file).unwrap();
    let (ok, out, _) = cni(&host, CAIRN, "STATUS", "", None, "", &c);
    assert!(!ok);
    assert_eq!(out["code"], 50, "{out}");
    del_ok(&host, "cm", Some(&pod.path()), "eth0", &c);
    assert!(ip_files(data.path(), "cairn").is_empty());
    assert!(veths(&pod).is_empty());
}

fn masq_backend_roundtrip(backend: &str) {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let mut c = conf(data.path(), "10.244.27.0/24");
    c["ipMasq"] = json!(true);
    c["ipMasqBackend"] = json!(backend);
    // A foreign rule that must survive.
    host.sh(&[
        "iptables",
        "-t",
        "nat",
        "-A",
        "POSTROUTING",
        "-s",
        "10.99.0.0/16",
        "-j",
        "MASQUERADE",
    ]);
    add_ok(&host, "mq", &pod, "eth0", &c);
    let rules = masq_rules(&host);
    assert!(rules.contains("cairn-cni:cairn-test:mq:eth0"), "{rules}");
    if backend == "nftables" {
        let t = host.sh(&["nft", "list", "table", "inet", "cairn-cni"]);
        assert!(
            t.contains("ip saddr 10.244.27.2") && t.contains("masquerade"),
            "{t}"
        );
    } else {
        let t = host.sh(&["iptables-save", "-t", "nat"]);
        assert!(t.contains("-A POSTROUTING -s 10.244.27.2/32"), "{t}");
        assert!(t.contains("-j MASQUERADE"), "{t}");
    }
    del_ok(&host, "mq", Some(&pod.path()), "eth0", &c);
    let rules = masq_rules(&host);
    assert!(!rules.contains("cairn-cni:cairn-test:mq"), "{rules}");
    assert!(!rules.contains("CAIRN-"), "{rules}");
    assert!(rules.contains("-A POSTROUTING -s 10.99.0.0/16 -j MASQUERADE"));
}

#[test]
fn masquerade_with_iptables() {
    masq_backend_roundtrip("iptables");
}

#[test]
fn masquerade_with_nftables() {
    masq_backend_roundtrip("nftables");
}

#[test]
fn status_reports_exhaustion() {
    let host = Netns::new();
    let pod = Netns::new();
    let data = tempfile::tempdir().unwrap();
    let mut c = conf(data.path(), "10.244.28.0/24");
    c["ipam"]["rangeStart"] = json!("10.244.28.10");
    c["ipam"]["rangeEnd"] = json!("10.244.28.10");
    let (ok, out, _) = cni(&host, CAIRN, "STATUS", "", None, "", &c);
    assert!(ok, "{out}");
    add_ok(&host, "only", &pod, "eth0", &c);
    let (ok, out, _) = cni(&host, CAIRN, "STATUS", "", None, "", &c);
    assert!(!ok);
    assert_eq!(out["code"], 50, "{out}");
}
