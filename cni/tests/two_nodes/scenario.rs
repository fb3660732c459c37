//! The two-node scenario of two_nodes.rs, phase by phase (a module of its own so that
//! file stays under 800 lines).

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::*;

struct Pod {
    ns: Netns,
    ip: Ipv4Addr,
}

/// The full two-node scenario for one backend.
pub(super) fn two_nodes(backend: &str) {
    let cluster = Cluster::new();
    let n1 = cluster.node_netns("198.18.0.1", "p1");
    let n2 = cluster.node_netns("198.18.0.2", "p2");
    cluster.create_node("node-1", "198.18.0.1", json!({}));
    cluster.create_node("node-2", "198.18.0.2", json!({}));
    let cidr1 = cluster.pod_cidr("node-1");
    let cidr2 = cluster.pod_cidr("node-2");
    assert_ne!(cidr1, cidr2);
    let mut c1 = ControllerProc::start(&cluster, &n1, "node-1", backend);
    let _c2 = ControllerProc::start(&cluster, &n2, "node-2", backend);

    let annotations =
        controllers_publish_network_config(&cluster, &n1, &n2, &cidr1, &cidr2, backend);
    let gw2 = cidr_base(&cidr2).to_string();
    backend_device_and_routes(&cluster, &n1, &cidr1, &cidr2, &gw2, backend, &annotations);

    // Pods through the conflist, cnitool-style, two per node.
    let mut tool1 = CniTool::new(&cluster.node_dir("node-1").join("net.d"));
    let mut tool2 = CniTool::new(&cluster.node_dir("node-2").join("net.d"));
    let mut pods1 = Vec::new();
    let mut pods2 = Vec::new();
    for _ in 0..2 {
        let ns = Netns::new();
        let r = tool1.add(&n1, "cairn", &ns.path());
        pods1.push(Pod { ip: pod_ip(&r), ns });
        let ns = Netns::new();
        let r = tool2.add(&n2, "cairn", &ns.path());
        pods2.push(Pod { ip: pod_ip(&r), ns });
    }
    for p in &pods1 {
        assert!(cidr1.starts_with(&p.ip.to_string()[..p.ip.to_string().rfind('.').unwrap()]));
    }
    assert!(tool1.check(&n1, "cairn", &pods1[0].ns.path()));

    pods_reach_each_other_unmasqueraded(&pods1, &pods2);
    egress_masqueraded_to_node_ip(&cluster, &n1, &cidr1, &pods1);
    ghost_node_programmed_then_removed(&cluster, &n1, &n2, &cidr2, backend);

    // Restart node-1's controller while the cluster changes: it converges to the new state
    // (a node gone while it was down is removed) without touching what stays.
    let before_routes = owned_routes(&n1);
    let before_link = (backend == "vxlan").then(|| vxlan_link(&n1));
    let ghost2_cidr = ghost_2_deleted_while_controller_down(&cluster, &n1, &mut c1, backend);
    let (mut monitor, monitor_out, reader) = listening_route_monitor(&n1);
    let _c1 = ControllerProc::start(&cluster, &n1, "node-1", backend);
    restarted_controller_converges(&n1, backend, &before_routes, &before_link);
    // The restart must not have removed and re-added the route to node-2.
    let _ = monitor.kill();
    let _ = monitor.wait();
    reader.join().unwrap();
    let events = monitor_out.lock().unwrap().clone();
    restart_did_not_flap(&n1, &events, &cidr2, &gw2, &ghost2_cidr);
    assert!(ping(&pods1[0].ns, pods2[0].ip), "traffic after the restart");

    deleting_node_2_drops_its_routes(&cluster, &n1, backend, &pods1, &pods2);

    for p in &pods1 {
        assert!(tool1.del(&n1, "cairn", &p.ns.path()));
    }
    for p in &pods2 {
        assert!(tool2.del(&n2, "cairn", &p.ns.path()));
    }
    assert!(common::ip_files(&cluster.node_dir("node-1").join("ipam"), "cairn").is_empty());
    assert!(c1.log().contains("node network ready") || _c1.log().contains("node network ready"));
}

fn controllers_publish_network_config(
    cluster: &Cluster,
    n1: &Netns,
    n2: &Netns,
    cidr1: &str,
    cidr2: &str,
    backend: &str,
) -> BTreeMap<String, String> {
    // Each controller writes the subnet file and the conflist, publishes its annotations
    // and programs the route to the other node.
    let conflist1 = cluster.node_dir("node-1").join("net.d/10-cairn.conflist");
    eventually("node-1's route to node-2", || {
        route_dsts(n1).contains(cidr2).then_some(())
    });
    eventually("node-2's route to node-1", || {
        route_dsts(n2).contains(cidr1).then_some(())
    });
    let subnet_env =
        std::fs::read_to_string(cluster.node_dir("node-1").join("subnet.env")).unwrap();
    let mtu = if backend == "vxlan" { 1450 } else { 1500 };
    assert_eq!(
        subnet_env,
        format!("CAIRN_NETWORK=10.244.0.0/16\nCAIRN_SUBNET={cidr1}\nCAIRN_MTU={mtu}\nCAIRN_IPMASQ=true\n")
    );
    let list: Value = serde_json::from_slice(&std::fs::read(&conflist1).unwrap()).unwrap();
    assert_eq!(list["plugins"][0]["type"], "cairn-cni");
    assert_eq!(list["plugins"][0]["ipam"]["type"], "cairn");
    let annotations = eventually("node-1's annotations", || {
        let a = cluster
            .node("node-1")
            .metadata
            .annotations
            .unwrap_or_default();
        a.contains_key("cairn.io/backend-type").then_some(a)
    });
    assert_eq!(annotations["cairn.io/backend-type"], backend);
    assert_eq!(annotations["cairn.io/public-ip"], "198.18.0.1");
    assert_eq!(n1.sh(&["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(), "1");
    annotations
}

fn backend_device_and_routes(
    cluster: &Cluster,
    n1: &Netns,
    cidr1: &str,
    cidr2: &str,
    gw2: &str,
    backend: &str,
    annotations: &BTreeMap<String, String>,
) {
    match backend {
        "vxlan" => {
            let (_, mac1, mtu1) = vxlan_link(n1);
            assert_eq!(mtu1, 1450, "vxlan MTU = underlay 1500 - 50");
            assert_eq!(annotations["cairn.io/vtep-mac"], mac1);
            let link = json_in(n1, &["ip", "-j", "-d", "link", "show", "cairn.1"]);
            let info = &link[0]["linkinfo"]["info_data"];
            assert_eq!(info["id"], 1);
            assert_eq!(info["port"], 8472);
            assert_eq!(info["local"], "198.18.0.1");
            assert_eq!(info["learning"], false);
            let addrs = n1.sh(&["ip", "-4", "-o", "addr", "show", "dev", "cairn.1"]);
            assert!(
                addrs.contains(&format!("{}/32", cidr_base(cidr1))),
                "{addrs}"
            );
            let mac2 = eventually("node-2's VTEP MAC", || {
                cluster
                    .node("node-2")
                    .metadata
                    .annotations
                    .and_then(|a| a.get("cairn.io/vtep-mac").cloned())
            });
            eventually("vxlan state on node-1", || {
                (owned_routes(n1).contains(&format!("{cidr2} via {gw2} dev cairn.1 onlink"))
                    && vxlan_neighbours(n1).contains(&format!("{gw2} {mac2}"))
                    && vxlan_fdb(n1).contains(&format!("{mac2} 198.18.0.2")))
                .then_some(())
            });
        }
        _ => {
            assert!(owned_routes(n1).contains(&format!("{cidr2} via 198.18.0.2 dev eth0")));
            assert!(n1
                .exec(&["ip", "link", "show", "cairn.1"])
                .stdout
                .is_empty());
        }
    }
}

fn pods_reach_each_other_unmasqueraded(pods1: &[Pod], pods2: &[Pod]) {
    // Same node, across nodes (both directions): ping and TCP, without masquerading.
    assert!(ping(&pods1[0].ns, pods1[1].ip), "same-node ping");
    assert_eq!(
        tcp(&pods1[1].ns.path(), pods1[1].ip, &pods1[0].ns.path())
            .unwrap()
            .ip(),
        pods1[0].ip
    );
    for (a, b) in [(&pods1[0], &pods2[0]), (&pods2[1], &pods1[1])] {
        assert!(ping(&a.ns, b.ip), "cross-node ping {} -> {}", a.ip, b.ip);
        let seen = tcp(&b.ns.path(), b.ip, &a.ns.path())
            .unwrap_or_else(|e| panic!("cross-node TCP {} -> {}: {e}", a.ip, b.ip));
        assert_eq!(seen.ip(), a.ip, "pod-to-pod traffic is not masqueraded");
    }
}

fn egress_masqueraded_to_node_ip(cluster: &Cluster, n1: &Netns, cidr1: &str, pods1: &[Pod]) {
    // Traffic leaving the cluster CIDR is masqueraded to the node IP (the switch has no
    // route to the pods: without masquerade no reply could come back).
    let nat = n1.sh(&["iptables-save", "-t", "nat"]);
    assert!(nat.contains(":CAIRN-POSTRTG"), "{nat}");
    assert!(
        nat.lines().any(|l| l.starts_with("-A CAIRN-POSTRTG")
            && l.contains(&format!("-s {cidr1} ! -d 224.0.0.0/4"))
            && l.contains("-j MASQUERADE")),
        "{nat}"
    );
    assert!(nat
        .lines()
        .any(|l| l.starts_with("-A POSTROUTING") && l.ends_with("-j CAIRN-POSTRTG")));
    let seen = tcp(
        &cluster.switch.path(),
        SWITCH_IP.parse().unwrap(),
        &pods1[0].ns.path(),
    )
    .unwrap();
    assert_eq!(seen.ip(), "198.18.0.1".parse::<Ipv4Addr>().unwrap());
}

fn ghost_node_programmed_then_removed(
    cluster: &Cluster,
    n1: &Netns,
    n2: &Netns,
    cidr2: &str,
    backend: &str,
) {
    // A node that comes and goes: both controllers program it, then remove all of it.
    let ghost_mac = "02:00:00:00:0a:03";
    cluster.create_node(
        "ghost",
        "198.18.0.3",
        json!({"cairn.io/backend-type": backend, "cairn.io/vtep-mac": ghost_mac}),
    );
    let ghost_cidr = cluster.pod_cidr("ghost");
    for n in [&n1, &n2] {
        eventually("routes to the ghost node", || {
            route_dsts(n).contains(&ghost_cidr).then_some(())
        });
    }
    if backend == "vxlan" {
        assert!(vxlan_fdb(n1).contains(&format!("{ghost_mac} 198.18.0.3")));
        assert!(vxlan_neighbours(n1).contains(&format!("{} {ghost_mac}", cidr_base(&ghost_cidr))));
    }
    cluster.delete_node("ghost");
    for n in [&n1, &n2] {
        // The route goes first, then the neighbour and FDB entries it used.
        eventually(
            "the ghost node's route, neighbour and fdb entry to go",
            || {
                let gone = !route_dsts(n).contains(&ghost_cidr)
                    && (backend != "vxlan"
                        || (!vxlan_fdb(n).iter().any(|e| e.starts_with(ghost_mac))
                            && !vxlan_neighbours(n).iter().any(|e| e.ends_with(ghost_mac))));
                gone.then_some(())
            },
        );
    }
    assert_eq!(route_dsts(n1), BTreeSet::from([cidr2.to_owned()]));
}

/// ghost-2 appears, node-1 routes to it, then it is deleted while node-1's controller is down.
fn ghost_2_deleted_while_controller_down(
    cluster: &Cluster,
    n1: &Netns,
    c1: &mut ControllerProc,
    backend: &str,
) -> String {
    cluster.create_node(
        "ghost-2",
        "198.18.0.4",
        json!({"cairn.io/backend-type": backend, "cairn.io/vtep-mac": "02:00:00:00:0a:04"}),
    );
    let ghost2_cidr = cluster.pod_cidr("ghost-2");
    eventually("node-1's route to ghost-2", || {
        route_dsts(n1).contains(&ghost2_cidr).then_some(())
    });
    c1.stop();
    cluster.delete_node("ghost-2");
    ghost2_cidr
}

/// `ip monitor` on node-1, known to listen; its output collects in the shared string.
fn listening_route_monitor(n1: &Netns) -> (Child, Arc<Mutex<String>>, JoinHandle<()>) {
    let mut monitor = Command::new("ip")
        .args(["-n", &n1.name, "monitor", "route", "neigh", "link"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let monitor_out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let sink = std::sync::Arc::clone(&monitor_out);
        let mut stdout = monitor.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    // Make sure the monitor listens before the controller starts.
    // A route of someone else's, which the controller must leave alone; (re)added until
    // the monitor reports it, so the monitor is known to listen before the restart.
    eventually("ip monitor to listen", || {
        let _ = Command::new("ip")
            .args(["-n", &n1.name, "route", "del", "192.0.2.0/24"])
            .stderr(Stdio::null())
            .status();
        ip(n1, &["route", "add", "192.0.2.0/24", "via", SWITCH_IP]);
        std::thread::sleep(Duration::from_millis(100));
        monitor_out
            .lock()
            .unwrap()
            .contains("192.0.2.0/24 via")
            .then_some(())
    });
    (monitor, monitor_out, reader)
}

fn restarted_controller_converges(
    n1: &Netns,
    backend: &str,
    before_routes: &BTreeSet<String>,
    before_link: &Option<(u64, String, u64)>,
) {
    eventually("node-1 to forget ghost-2 after its restart", || {
        let converged = owned_routes(n1) == *before_routes
            && (backend != "vxlan"
                || !vxlan_fdb(n1)
                    .iter()
                    .any(|e| e.starts_with("02:00:00:00:0a:04")));
        converged.then_some(())
    });
    if backend == "vxlan" {
        assert_eq!(
            Some(vxlan_link(n1)),
            *before_link,
            "vxlan device kept as it was"
        );
    }
}

fn restart_did_not_flap(n1: &Netns, events: &str, cidr2: &str, gw2: &str, ghost2_cidr: &str) {
    assert!(
        !events
            .lines()
            .any(|l| l.starts_with("Deleted") && l.contains(cidr2)),
        "route to node-2 flapped during the restart:\n{events}"
    );
    assert!(
        !events
            .lines()
            .any(|l| l.starts_with(&format!("Deleted {gw2} "))),
        "neighbour of node-2 flapped during the restart:\n{events}"
    );
    assert!(n1
        .sh(&["ip", "route", "show", "192.0.2.0/24"])
        .contains(&format!("via {SWITCH_IP}")));
    assert!(
        events
            .lines()
            .any(|l| l.starts_with("Deleted") && l.contains(ghost2_cidr)),
        "{events}"
    );
}

fn deleting_node_2_drops_its_routes(
    cluster: &Cluster,
    n1: &Netns,
    backend: &str,
    pods1: &[Pod],
    pods2: &[Pod],
) {
    // Deleting a real node removes its routes on the other.
    cluster.delete_node("node-2");
    eventually("node-1 to drop node-2", || {
        let gone = route_dsts(n1).is_empty()
            && (backend != "vxlan"
                || (vxlan_fdb(n1).is_empty() && vxlan_neighbours(n1).is_empty()));
        gone.then_some(())
    });
    assert!(
        !ping(&pods1[0].ns, pods2[0].ip),
        "no path once the node is gone"
    );
}
