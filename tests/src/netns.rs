//! The netns driver's network: a switch namespace with a bridge, one namespace per node
//! cabled to it by a veth pair. Nothing is created in the host's namespace.

use std::path::Path;

use crate::args;
use crate::cmd::{run, succeeds};
use crate::error::Result;
use crate::plan::{LabPlan, NodePlan, SWITCH_IP, UNDERLAY_PREFIX};

pub fn exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// The lab's namespaces that exist now (leftovers, or another lab of the same name).
pub fn existing(plan: &LabPlan) -> Vec<String> {
    std::iter::once(plan.switch_netns.clone())
        .chain(plan.nodes.iter().map(|n| n.netns.clone()))
        .filter(|n| exists(n))
        .collect()
}

pub fn create_switch(plan: &LabPlan) -> Result<()> {
    let ns = &plan.switch_netns;
    run(args!["ip", "netns", "add", ns])?;
    run(args!["ip", "-n", ns, "link", "set", "lo", "up"])?;
    run(args![
        "ip", "-n", ns, "link", "add", "br0", "type", "bridge"
    ])?;
    run(args![
        "ip",
        "-n",
        ns,
        "addr",
        "add",
        format!("{SWITCH_IP}/{UNDERLAY_PREFIX}"),
        "dev",
        "br0"
    ])?;
    run(args!["ip", "-n", ns, "link", "set", "br0", "up"])?;
    Ok(())
}

pub fn create_node(plan: &LabPlan, node: &NodePlan) -> Result<()> {
    let (sw, ns) = (&plan.switch_netns, &node.netns);
    run(args!["ip", "netns", "add", ns])?;
    run(args!["ip", "-n", ns, "link", "set", "lo", "up"])?;
    run(args![
        "ip",
        "-n",
        sw,
        "link",
        "add",
        node.switch_port,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        ns
    ])?;
    run(args![
        "ip",
        "-n",
        sw,
        "link",
        "set",
        node.switch_port,
        "master",
        "br0",
        "up"
    ])?;
    run(args![
        "ip",
        "-n",
        ns,
        "addr",
        "add",
        format!("{}/{UNDERLAY_PREFIX}", node.ip),
        "dev",
        "eth0"
    ])?;
    run(args!["ip", "-n", ns, "link", "set", "eth0", "up"])?;
    // A node has a default route; cluster IPs need one to reach the proxy's NAT hook.
    run(args![
        "ip", "-n", ns, "route", "add", "default", "via", SWITCH_IP
    ])?;
    run(args![
        "ip",
        "netns",
        "exec",
        ns,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1"
    ])?;
    Ok(())
}

/// Deletes the lab's namespaces that exist; says which could not go.
pub fn destroy(plan: &LabPlan) -> Vec<String> {
    existing(plan)
        .into_iter()
        .filter(|ns| !succeeds(args!["ip", "netns", "delete", ns]))
        .collect()
}
