//! A pod's effective policy as JSON, for people: what isolates it in each direction, what
//! each rule allows (peers as merged address ranges, ports per protocol), and the nft
//! chain that enforces it. cairn-proxy serves it on `/network-policy`.

use serde_json::{json, Value};

use crate::nft::desired::chain_name;
use crate::nft::ranges::normalized;
use crate::nft::Desired;
use crate::resolve::{Allowance, Direction, Isolation, Peers, PodPolicy, Ports};

/// `pod`'s policy and, from `applied` (what is in the kernel), its chains' rules.
pub fn explain(pod: &PodPolicy, applied: Option<&Desired>) -> Value {
    let ips: Vec<String> = pod.ips.iter().map(ToString::to_string).collect();
    json!({
        "pod": pod.pod.to_string(),
        "ips": ips,
        "ingress": direction(pod, Direction::Ingress, &pod.ingress, applied),
        "egress": direction(pod, Direction::Egress, &pod.egress, applied),
    })
}

fn direction(
    pod: &PodPolicy,
    direction: Direction,
    isolation: &Isolation,
    applied: Option<&Desired>,
) -> Value {
    let Isolation::Isolated { policies, allowed } = isolation else {
        return json!({"isolated": false});
    };
    let chain = pod.ips.iter().find_map(|ip| match ip {
        std::net::IpAddr::V4(v4) => Some(chain_name(direction, *v4)),
        std::net::IpAddr::V6(_) => None,
    });
    let rules = chain
        .as_ref()
        .and_then(|c| applied.and_then(|a| a.chains.get(c)));
    let policies: Vec<String> = policies.iter().map(ToString::to_string).collect();
    let allowed: Vec<Value> = allowed.iter().map(allowance).collect();
    json!({
        "isolated": true,
        "policies": policies,
        "allowed": allowed,
        "chain": chain,
        "programmed": rules.is_some(),
        "rules": rules,
    })
}

fn allowance(a: &Allowance) -> Value {
    let peers = match &a.peers {
        Peers::Any => json!("any"),
        Peers::Listed { addresses, blocks } => {
            let ranges: Vec<String> = normalized(addresses, blocks)
                .iter()
                .map(ToString::to_string)
                .collect();
            json!(ranges)
        }
    };
    let ports = match &a.ports {
        Ports::Any => json!("any"),
        Ports::Listed(ranges) => {
            let ranges: Vec<String> = ranges
                .iter()
                .map(|r| match r.first == r.last {
                    true => format!("{}/{}", r.protocol.as_str(), r.first),
                    false => format!("{}/{}-{}", r.protocol.as_str(), r.first, r.last),
                })
                .collect();
            json!(ranges)
        }
    };
    json!({
        "policy": a.policy.to_string(),
        "rule": a.origin.rule,
        "peers": peers,
        "ports": ports,
    })
}
