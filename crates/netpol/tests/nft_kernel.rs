//! The scripts against the kernel's nftables, in a network namespace of the test's own
//! (`unshare --net`): a first sync, then a transaction of changes (a peer's label, a new
//! pod, a replaced policy, a merged range), then removing every policy; each listing is
//! what the state says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::process::Command;

use cairn_netpol::nft::batch::{diff, script};
use cairn_netpol::nft::{full_script, Desired};
use cairn_netpol::{
    for_node, Cluster, CompiledPolicy, NamedPort, Namespace, Pod, PodKey, Protocol,
};
use serde_json::json;

fn pod(ns: &str, name: &str, ip: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        key: PodKey::new(ns, name),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ips: vec![ip.parse().unwrap()],
        node: Some("node-1".into()),
        host_network: false,
        finished: false,
        named_ports: vec![NamedPort {
            name: "web".into(),
            protocol: Protocol::Tcp,
            port: 8080,
        }],
    }
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> CompiledPolicy {
    let p = json!({"metadata": {"namespace": ns, "name": name}, "spec": spec});
    CompiledPolicy::compile(&serde_json::from_value(p).unwrap()).unwrap()
}

fn state(policies: &[CompiledPolicy], cluster: &Cluster) -> Desired {
    Desired::from_pods(for_node(policies, cluster, "node-1").values())
        .guarding(&["10.244.1.0/24".parse().unwrap()])
}

/// Runs the scripts in order in one fresh network namespace; the table's listing after.
fn in_netns(scripts: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut shell = String::from("set -e\n");
    for (i, s) in scripts.iter().enumerate() {
        let path = dir.path().join(format!("{i}.nft"));
        std::fs::write(&path, s).unwrap();
        shell.push_str(&format!("nft -f {}\n", path.display()));
    }
    shell.push_str("nft list table ip cairn-netpol\n");
    let out = Command::new("unshare")
        .args(["--net", "sh", "-c", &shell])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stderr}\nscripts:\n{}",
        scripts.join("\n---\n")
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A listing's sets, maps, counters and chains, in name order (nft lists them in the
/// order they were made).
fn canonical(listing: &str) -> Vec<String> {
    let body = listing.trim_end().strip_suffix('}').unwrap_or(listing);
    let mut blocks: Vec<String> = body.split("\n\n").map(|b| b.trim().to_string()).collect();
    blocks.sort();
    blocks
}

#[test]
fn syncs_and_changes_apply_in_the_kernel() {
    let mut cluster = Cluster::default();
    for ns in ["x", "y"] {
        cluster.add_namespace(Namespace::new(ns, BTreeMap::new()));
    }
    cluster.add_pod(pod("x", "a", "10.244.1.10", &[("pod", "a")]));
    cluster.add_pod(pod("x", "b", "10.244.1.11", &[("pod", "b")]));
    cluster.add_pod(pod("y", "a", "10.244.2.10", &[("pod", "a")]));
    let mut policies = vec![
        policy(
            "x",
            "from-b",
            json!({"podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}},
                                  {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.244.2.0/24"]}}],
                         "ports": [{"port": 80}, {"port": "web"}, {"protocol": "UDP", "port": 53, "endPort": 60}]}]}),
        ),
        policy(
            "x",
            "egress-web",
            json!({"podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": "web"}]}]}),
        ),
    ];
    let first = state(&policies, &cluster);
    let listing = in_netns(&[full_script(&first)]);
    assert!(
        listing.contains("10.244.1.10 : jump in_10_244_1_10"),
        "{listing}"
    );
    assert!(
        listing.contains("dport { 80, 8080 } ip saddr @peers_"),
        "{listing}"
    );
    assert!(
        listing.contains("ip daddr @guarded_ranges counter name \"unprogrammed\" drop"),
        "{listing}"
    );

    // y/a gets x/b's label: an element of the from-b set; a new pod z in x; the egress
    // policy replaced by one to y only.
    cluster.add_pod(pod("y", "a", "10.244.2.10", &[("pod", "b")]));
    cluster.add_pod(pod("x", "c", "10.244.1.12", &[("pod", "c")]));
    policies[1] = policy(
        "x",
        "egress-web",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}}]}]}),
    );
    let second = state(&policies, &cluster);
    let changes = script(&diff(&first, &second));
    let listing = in_netns(&[full_script(&first), changes.clone()]);
    assert!(
        listing.contains("10.244.1.12 : jump eg_10_244_1_12"),
        "{listing}\n{changes}"
    );
    assert_eq!(
        canonical(&in_netns(&[full_script(&second)])),
        canonical(&listing),
        "a full sync of the same state lists the same"
    );

    let listing = in_netns(&[
        full_script(&second),
        script(&diff(&second, &Desired::default())),
    ]);
    assert!(
        !listing.contains("chain in_") && !listing.contains("set peers_"),
        "{listing}"
    );
}

/// An open pod is an `accept` element of the ingress map; when a policy isolates it the
/// change swaps that element's verdict for a jump to its new chain (a delete and an add
/// of the same key in one transaction, the chain made first), and back when the policy
/// goes. The kernel takes both scripts, and lists what a full sync of each state lists.
#[test]
fn isolating_a_pod_swaps_its_verdict_in_the_kernel() {
    let mut cluster = Cluster::default();
    cluster.add_namespace(Namespace::new("x", BTreeMap::new()));
    cluster.add_pod(pod("x", "a", "10.244.1.10", &[("pod", "a")]));
    cluster.add_pod(pod("x", "b", "10.244.1.11", &[("pod", "b")]));
    let open = state(&[], &cluster);
    let listing = in_netns(&[full_script(&open)]);
    for ip in ["10.244.1.10", "10.244.1.11"] {
        assert!(listing.contains(&format!("{ip} : accept")), "{listing}");
    }
    let deny_a = policy(
        "x",
        "deny-a",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"]}),
    );
    let isolated = state(&[deny_a], &cluster);
    let changes = script(&diff(&open, &isolated));
    let listing = in_netns(&[full_script(&open), changes.clone()]);
    assert!(
        listing.contains("10.244.1.10 : jump in_10_244_1_10")
            && listing.contains("10.244.1.11 : accept")
            && !listing.contains("10.244.1.10 : accept"),
        "{listing}\n{changes}"
    );
    assert_eq!(
        canonical(&in_netns(&[full_script(&isolated)])),
        canonical(&listing)
    );
    let back = script(&diff(&isolated, &open));
    let listing = in_netns(&[full_script(&isolated), back.clone()]);
    assert!(
        listing.contains("10.244.1.10 : accept") && !listing.contains("chain in_"),
        "{listing}\n{back}"
    );
}

/// Bad input the API accepts: a policy whose selector matches no pod isolates nothing and
/// programs nothing but the open pods; an ipBlock of every address less 256 exceptions is
/// one interval set of 257 ranges, which the kernel takes in the same transaction.
#[test]
fn selectors_matching_nothing_and_huge_ip_blocks_apply_in_the_kernel() {
    let mut cluster = Cluster::default();
    cluster.add_namespace(Namespace::new("x", BTreeMap::new()));
    cluster.add_pod(pod("x", "a", "10.244.1.10", &[("pod", "a")]));
    let nobody = policy(
        "x",
        "nobody",
        json!({"podSelector": {"matchLabels": {"pod": "none"}},
               "policyTypes": ["Ingress", "Egress"]}),
    );
    let d = state(&[nobody], &cluster);
    assert!(d.chains.is_empty() && d.ingress.is_empty() && d.egress.is_empty());
    let listing = in_netns(&[full_script(&d)]);
    assert!(
        listing.contains("10.244.1.10 : accept") && !listing.contains("chain in_"),
        "{listing}"
    );

    let except: Vec<String> = (0..=255).map(|i| format!("10.{i}.0.1/32")).collect();
    let huge = policy(
        "x",
        "huge",
        json!({"podSelector": {"matchLabels": {"pod": "a"}},
               "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": except}}]}]}),
    );
    let d = state(&[huge], &cluster);
    let ranges: Vec<usize> = d.sets.values().map(|s| s.len()).collect();
    assert_eq!(ranges, [257]);
    let listing = in_netns(&[full_script(&d)]);
    for range in [
        "0.0.0.0-10.0.0.0",
        "10.7.0.2-10.8.0.0",
        "10.255.0.2-255.255.255.255",
    ] {
        assert!(listing.contains(range), "{range}: {listing}");
    }
}
