//! The nftables state of upstream's model on one node, and the changes between states.

use serde_json::json;

use super::{ip_of, Model};
use crate::nft::batch::{diff, script, Change};
use crate::nft::desired::{chain_name, counter_name};
use crate::nft::{full_script, Desired, EGRESS_MAP, INGRESS_MAP};
use crate::resolve::{for_node, Direction};

fn desired(m: &Model) -> Desired {
    let policies: Vec<_> = m.policies.values().cloned().collect();
    Desired::from_pods(for_node(&policies, &m.cluster, "node-1").values())
}

fn v4(pod: &str) -> std::net::Ipv4Addr {
    match ip_of(pod) {
        std::net::IpAddr::V4(v4) => v4,
        std::net::IpAddr::V6(_) => unreachable!(),
    }
}

fn x_a_from_pod(labels: serde_json::Value) -> serde_json::Value {
    json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}], "ports": [{"port": 80}, {"port": 81}, {"port": 90}]}]})
}

#[test]
fn a_deny_all_isolates_every_pod_of_its_namespace_and_counts_drops() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
    );
    let d = desired(&m);
    assert_eq!(d.ingress.len(), 3);
    assert!(d.egress.is_empty() && d.sets.is_empty());
    let key = m.policies.keys().next().unwrap().clone();
    let chain = chain_name(Direction::Ingress, v4("x/a"));
    assert_eq!(d.ingress[&v4("x/a")], chain);
    assert_eq!(
        d.chains[&chain],
        vec![format!("counter name {} drop", counter_name(&key))]
    );
    assert_eq!(d.counters[&counter_name(&key)], key);
}

#[test]
fn an_allowance_reads_its_peers_from_a_set_and_its_ports_merged_per_protocol() {
    let mut m = Model::new();
    m.apply("x", "from-b", x_a_from_pod(json!({"pod": "b"})));
    let d = desired(&m);
    let (set, elements) = d.sets.iter().next().unwrap();
    assert_eq!(
        elements.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["10.244.1.11"]
    );
    let rules = &d.chains[&chain_name(Direction::Ingress, v4("x/a"))];
    assert_eq!(
        rules[0],
        format!("meta l4proto tcp th dport {{ 80-81, 90 }} ip saddr @{set} accept")
    );
    assert!(rules[1].ends_with(" drop"), "{rules:?}");
}

#[test]
fn a_peer_label_change_is_an_element_update_and_nothing_else() {
    let mut m = Model::new();
    m.apply(
        "x",
        "from-updated",
        x_a_from_pod(json!({"pod": "b", "pod2": "updated"})),
    );
    let before = desired(&m);
    m.label_pod("x/b", &[("pod", "b"), ("pod2", "updated")]);
    let after = desired(&m);
    let changes = diff(&before, &after);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(matches!(&changes[0], Change::AddElements(_, e) if e.len() == 1));
    m.label_pod("x/b", &[("pod", "b")]);
    let changes = diff(&after, &desired(&m));
    assert!(
        matches!(&changes[..], [Change::DeleteElements(_, e)] if e.len() == 1),
        "{changes:?}"
    );
    assert!(diff(&after, &after).is_empty());
}

#[test]
fn a_new_pod_selected_by_a_policy_is_one_chain_and_its_map_element() {
    let mut m = Model::new();
    m.apply("x", "deny", json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}));
    let before = desired(&m);
    let mut pod = m.cluster.pods.values().next().unwrap().clone();
    pod.key.name = "d".into();
    pod.ips = vec!["10.244.1.99".parse().unwrap()];
    m.cluster.add_pod(pod);
    let changes = diff(&before, &desired(&m));
    let kinds: Vec<&str> = changes
        .iter()
        .map(|c| match c {
            Change::ReplaceChain(..) => "chain",
            Change::MapAdd(..) => "map",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["chain", "chain", "map", "map"], "{changes:?}");
    let text = script(&changes);
    assert!(
        text.contains(
            "add element ip cairn-netpol ingress_pods { 10.244.1.99 : jump in_10_244_1_99 }"
        ),
        "{text}"
    );
}

#[test]
fn a_pod_selected_by_no_policy_is_an_accept_element_and_isolating_it_swaps_the_verdict() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
    );
    let open = desired(&m);
    let y_a = v4("y/a");
    let text = full_script(&open);
    assert!(
        text.contains(&format!(
            "add element ip cairn-netpol ingress_pods {{ {y_a} : accept }}"
        )),
        "{text}"
    );
    m.apply(
        "y",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
    );
    let changes = diff(&open, &desired(&m));
    let swap: Vec<&Change> = changes
        .iter()
        .filter(|c| matches!(c, Change::MapDelete(INGRESS_MAP, ip) | Change::MapAdd(INGRESS_MAP, ip, _) if *ip == y_a))
        .collect();
    let chain = chain_name(Direction::Ingress, y_a);
    assert_eq!(
        swap,
        [
            &Change::MapDelete(INGRESS_MAP, y_a),
            &Change::MapAdd(INGRESS_MAP, y_a, format!("jump {chain}"))
        ],
        "{changes:?}"
    );
    let chain_at = changes
        .iter()
        .position(|c| matches!(c, Change::ReplaceChain(name, _) if *name == chain))
        .unwrap();
    let map_at = changes
        .iter()
        .position(|c| matches!(c, Change::MapAdd(..)))
        .unwrap();
    assert!(
        chain_at < map_at,
        "the chain exists before the map jumps to it: {changes:?}"
    );
}

#[test]
fn the_guard_covers_the_node_ranges_and_lets_through_every_local_pod_it_knows() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
    );
    let d = desired(&m).guarding(&[
        "10.244.1.0/24".parse().unwrap(),
        "10.244.1.128/25".parse().unwrap(),
    ]);
    let guarded: Vec<String> = d.guarded.iter().map(ToString::to_string).collect();
    assert_eq!(guarded, ["10.244.1.0-10.244.1.255"]);
    // Every pod on node-1, isolated or not (y's and z's are selected by nothing).
    let on_node: Vec<String> = m
        .cluster
        .pods
        .values()
        .filter(|p| p.node.as_deref() == Some("node-1"))
        .map(|p| p.ips[0].to_string())
        .collect();
    let programmed: Vec<String> = d.programmed.iter().map(ToString::to_string).collect();
    assert_eq!(programmed.len(), on_node.len());
    assert!(
        on_node.iter().all(|ip| programmed.contains(ip)),
        "{programmed:?}"
    );
    let text = full_script(&d);
    assert!(
        text.contains(
            "ip daddr vmap @ingress_pods\n\t\tip daddr @guarded_ranges counter name unprogrammed drop"
        ),
        "{text}"
    );
    assert!(text.contains("add element ip cairn-netpol guarded_ranges { 10.244.1.0-10.244.1.255 }"));
    // Dropping the guard (the last policy gone) is one element removal.
    let changes = diff(&d, &desired(&m));
    assert!(
        matches!(&changes[..], [Change::DeleteElements(set, _)] if set == "guarded_ranges"),
        "{changes:?}"
    );
}

#[test]
fn an_address_two_local_pods_claim_is_left_unprogrammed_so_the_guard_closes_it() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
    );
    // z/a (selected by nothing) takes x/a's address before x/a's object is gone.
    let reused = ip_of("x/a");
    let z_a = m
        .cluster
        .pods
        .values_mut()
        .find(|p| p.key.namespace == "z" && p.key.name == "a")
        .unwrap();
    z_a.ips = vec![reused];
    let d = desired(&m).guarding(&["10.244.0.0/16".parse().unwrap()]);
    assert_eq!(d.shared.iter().collect::<Vec<_>>(), [&v4("x/a")]);
    assert!(!d.ingress.contains_key(&v4("x/a")), "{:?}", d.ingress);
    assert!(!d
        .chains
        .contains_key(&chain_name(Direction::Ingress, v4("x/a"))));
    let programmed: Vec<String> = d.programmed.iter().map(ToString::to_string).collect();
    assert!(!programmed.contains(&reused.to_string()), "{programmed:?}");
    // x/c, another pod of the deny, is still programmed and isolated.
    assert!(d.ingress.contains_key(&v4("x/c")));
    // Its egress is dropped; once one pod holds it, the drop goes.
    let adds = diff(&Desired::default(), &d);
    let shared = v4("x/a");
    assert!(
        adds.iter().any(|c| matches!(c, Change::MapAdd(m, ip, v)
            if *m == EGRESS_MAP && *ip == shared && v == "drop")),
        "{adds:?}"
    );
    let unguarded = desired(&m);
    let open = diff(&Desired::default(), &unguarded);
    assert!(
        !open
            .iter()
            .any(|c| matches!(c, Change::MapAdd(_, _, v) if v == "drop")),
        "no policy range guarded, nothing dropped: {open:?}"
    );
    m.cluster
        .pods
        .retain(|_, p| !(p.key.namespace == "z" && p.key.name == "a"));
    let held = desired(&m).guarding(&["10.244.0.0/16".parse().unwrap()]);
    let changes = diff(&d, &held);
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, Change::MapDelete(m, ip) if *m == EGRESS_MAP && *ip == shared)),
        "{changes:?}"
    );
}

#[test]
fn an_ip_block_less_its_exceptions_is_merged_ranges() {
    let mut m = Model::new();
    let except = format!("{}/32", ip_of("y/b"));
    m.apply(
        "x",
        "block",
        json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": [except]}},
                              {"podSelector": {}}]}]}),
    );
    let d = desired(&m);
    let elements: Vec<String> = d
        .sets
        .values()
        .next()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    // x's pods lie inside the block and merge into it.
    assert_eq!(
        elements,
        ["10.0.0.0-10.244.2.10", "10.244.2.12-10.255.255.255"]
    );
}

#[test]
fn removing_every_policy_removes_maps_before_chains_and_sets() {
    let mut m = Model::new();
    m.apply("x", "from-b", x_a_from_pod(json!({"pod": "b"})));
    let before = desired(&m);
    m.delete_all_policies();
    let changes = diff(&before, &desired(&m));
    let text = script(&changes);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {text}"))
    };
    assert!(at("delete element ip cairn-netpol ingress_pods") < at("delete chain"));
    assert!(at("delete chain") < at("delete set"));
    assert!(at("delete set") < at("delete counter"));
    assert!(full_script(&Desired::default())
        .starts_with("table ip cairn-netpol {}\ndelete table ip cairn-netpol\n"));
}

#[test]
fn an_explanation_names_the_policies_the_rules_and_the_chain_in_force() {
    let mut m = Model::new();
    m.apply("x", "from-b", x_a_from_pod(json!({"pod": "b"})));
    let policies: Vec<_> = m.policies.values().cloned().collect();
    let pods = for_node(&policies, &m.cluster, "node-1");
    let x_a = pods.values().find(|p| p.pod.to_string() == "x/a").unwrap();
    let d = desired(&m);
    let text = crate::explain(x_a, Some(&d));
    assert_eq!(text["egress"], json!({"isolated": false}));
    let ingress = &text["ingress"];
    assert_eq!(ingress["policies"], json!(["x/from-b"]));
    assert_eq!(ingress["allowed"][0]["peers"], json!(["10.244.1.11"]));
    assert_eq!(
        ingress["allowed"][0]["ports"],
        json!(["tcp/80", "tcp/81", "tcp/90"])
    );
    assert_eq!(
        ingress["chain"],
        json!(chain_name(Direction::Ingress, v4("x/a")))
    );
    assert_eq!(ingress["programmed"], json!(true));
    assert!(ingress["rules"][1].as_str().unwrap().ends_with("drop"));
    let unapplied = crate::explain(x_a, None);
    assert_eq!(unapplied["ingress"]["programmed"], json!(false));
}
