//! An HA control plane: `cairn-lab up --nodes 3 --control-replicas 3 --store etcd`.
//!
//! Three etcd members and three cairn-control replicas, one of each per node. The
//! `kubernetes` Endpoints list the replicas; SIGKILL of the leading replica leaves the
//! host's API address answering (the forward moves on), another replica takes the
//! leases with upstream's default timing (takeover printed), acts (a scale-up converges)
//! and the dead one leaves the Endpoints; it starts again and serves. An etcd member
//! killed under a replica that does not lead leaves writes working (after etcd's own
//! leader election when the killed member led raft), and it starts again. A replica
//! whose member is down fails /readyz, and the host's forward passes it by.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{eventually, Lab};

/// The node whose replica holds `lease`, by the identity in each replica's data dir.
fn holder_node(lab: &Lab, lease: &str) -> Option<String> {
    let holder = lab
        .try_kubectl(&[
            "-n",
            "kube-system",
            "get",
            "lease",
            lease,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .ok()?;
    (1..=3).map(|i| format!("node-{i}")).find(|node| {
        let file = lab
            .roots()
            .join("data")
            .join(&lab.name)
            .join("nodes")
            .join(node)
            .join("control/leader-identity");
        std::fs::read_to_string(file)
            .is_ok_and(|id| !id.trim().is_empty() && holder.ends_with(id.trim()))
    })
}

fn endpoints(lab: &Lab) -> String {
    lab.try_kubectl(&[
        "get",
        "endpoints",
        "kubernetes",
        "-o",
        "jsonpath={.subsets[*].addresses[*].ip}",
    ])
    .unwrap_or_default()
}

fn ready_replicas(lab: &Lab, want: &str) -> Option<()> {
    let ready = lab
        .try_kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ])
        .ok()?;
    (ready == want).then_some(())
}

#[test]
fn three_replicas_on_etcd_survive_the_leader_and_an_etcd_member() {
    let lab = Lab::up(
        "e2eha",
        16498,
        &["--nodes=3", "--control-replicas=3", "--store=etcd"],
    );
    let status = lab.lab(&["status"]);
    assert_eq!(status.matches(" etcd ").count(), 3, "{status}");
    assert_eq!(status.matches(" control ").count(), 3, "{status}");
    peers_need_a_certificate(&lab);
    let all = "198.18.0.11 198.18.0.12 198.18.0.13";
    eventually(
        "three replicas in the kubernetes Endpoints",
        Duration::from_secs(30),
        || (endpoints(&lab) == all).then_some(()),
    );
    lab.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=httpd",
        "--replicas=3",
    ]);
    eventually("web 3/3 ready", Duration::from_secs(90), || {
        ready_replicas(&lab, "3")
    });

    let leader = eventually("a leader", Duration::from_secs(30), || {
        holder_node(&lab, "kube-controller-manager")
    });
    lab.lab(&["stop", &leader, "control", "--kill"]);
    let killed = Instant::now();
    // The host's address goes to the next live replica at once.
    lab.kubectl(&["get", "nodes"]);
    lab.kubectl(&["scale", "deploy/web", "--replicas=5"]);
    let successor = eventually("another leader", Duration::from_secs(60), || {
        holder_node(&lab, "kube-controller-manager").filter(|n| *n != leader)
    });
    println!(
        "{leader} killed; {successor} leads after {:.1}s (lease 15s, retry 2s)",
        killed.elapsed().as_secs_f64()
    );
    eventually("web 5/5 ready", Duration::from_secs(90), || {
        ready_replicas(&lab, "5")
    });
    println!(
        "scale-up converged {:.1}s after the kill",
        killed.elapsed().as_secs_f64()
    );
    let dead_ip = format!("198.18.0.1{}", &leader["node-".len()..]);
    eventually(
        "the dead replica out of the Endpoints",
        Duration::from_secs(60),
        || (!endpoints(&lab).contains(&dead_ip)).then_some(()),
    );
    lab.lab(&["start", &leader, "control"]);
    eventually("three replicas again", Duration::from_secs(30), || {
        (endpoints(&lab) == all).then_some(())
    });

    // A member under a replica that does not lead: quorum stays, writes go on.
    let bystander = (1..=3)
        .map(|i| format!("node-{i}"))
        .find(|n| *n != successor && *n != "node-1")
        .unwrap();
    lab.lab(&["stop", &bystander, "etcd", "--kill"]);
    // Writes proposed while the members elect a new raft leader (when the killed one led)
    // time out in etcd, as they do under kube-apiserver: the client tries again. A create
    // that timed out but was applied later reads as AlreadyExists.
    let killed = Instant::now();
    eventually(
        "a write with two etcd members",
        Duration::from_secs(60),
        || match lab.try_kubectl(&["create", "configmap", "written-with-two-members"]) {
            Ok(_) => Some(()),
            Err(e) if e.contains("AlreadyExists") || e.contains("already exists") => Some(()),
            Err(e) => {
                println!("{:.1}s: {e}", killed.elapsed().as_secs_f64());
                None
            }
        },
    );
    println!(
        "etcd member of {bystander} killed; a write succeeded after {:.1}s",
        killed.elapsed().as_secs_f64()
    );
    lab.kubectl(&["scale", "deploy/web", "--replicas=2"]);
    eventually("web 2/2 ready", Duration::from_secs(60), || {
        ready_replicas(&lab, "2")
    });
    lab.lab(&["start", &bystander, "etcd"]);
    lab.kubectl(&["get", "configmap", "written-with-two-members"]);
    eventually(
        "the restarted member back under its replica",
        Duration::from_secs(60),
        || (readyz(&lab, &bystander) == "200").then_some(()),
    );

    // node-1, first in the host forward's order, loses its member: its replica fails
    // /readyz, and the forward sends the host's requests to a ready one.
    lab.lab(&["stop", "node-1", "etcd", "--kill"]);
    eventually("node-1 not ready", Duration::from_secs(30), || {
        (readyz(&lab, "node-1") == "500").then_some(())
    });
    eventually(
        "a write through the host while node-1's member is down",
        Duration::from_secs(60),
        || match lab.try_kubectl(&["create", "configmap", "written-past-node-1"]) {
            Ok(_) => Some(()),
            Err(e) if e.contains("AlreadyExists") || e.contains("already exists") => Some(()),
            Err(_) => None,
        },
    );
    for _ in 0..5 {
        lab.kubectl(&["get", "configmap", "written-past-node-1"]);
    }
    lab.lab(&["start", "node-1", "etcd"]);
    eventually("node-1 ready again", Duration::from_secs(60), || {
        (readyz(&lab, "node-1") == "200").then_some(())
    });
}

/// etcd's peer port on the underlay is TLS and takes only a certificate of etcd's CA:
/// a member's peer certificate, from its own address (etcd checks the address against
/// the certificate's), gets an answer; no certificate, none.
fn peers_need_a_certificate(lab: &Lab) {
    let url = "https://198.18.0.12:2380/version";
    let pki = lab
        .roots()
        .join("data")
        .join(&lab.name)
        .join("nodes/node-1/etcd-pki");
    let file = |f: &str| pki.join(f).display().to_string();
    let (ca, cert, key) = (file("ca.crt"), file("peer.crt"), file("peer.key"));
    let curl = [
        "curl",
        "-sS",
        "--http1.1",
        "--max-time",
        "5",
        "--cacert",
        &ca,
    ];
    let with_cert = [&curl[..], &["--cert", &cert, "--key", &key, url]].concat();
    let with_peer_cert = lab.on_node("node-1", &with_cert);
    assert!(
        with_peer_cert
            .as_deref()
            .is_ok_and(|v| v.contains("etcdserver")),
        "{with_peer_cert:?}"
    );
    let anonymous = lab.on_switch(&[&curl[..], &[url]].concat());
    assert!(anonymous.is_err(), "no certificate, yet: {anonymous:?}");
}

/// The HTTP code of `node`'s replica's /readyz, asked inside the node.
fn readyz(lab: &Lab, node: &str) -> String {
    let url = "https://127.0.0.1:6443/readyz";
    let curl = ["curl", "-sk", "--max-time", "5", "-o", "/dev/null"];
    let mut cmd = curl.to_vec();
    cmd.extend(["-w", "%{http_code}", url]);
    lab.on_node(node, &cmd)
        .unwrap_or_default()
        .trim()
        .to_string()
}
