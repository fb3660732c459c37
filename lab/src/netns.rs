//! The netns driver: a switch namespace with a bridge, one namespace per node cabled to
//! it by a veth pair. Nothing is created in the host's namespace.

use std::path::{Path, PathBuf};

use crate::args;
use crate::cmd::{run, succeeds};
use crate::driver::{NodeDriver, Place};
use crate::error::Result;
use crate::plan::{LabPlan, NodePlan, SWITCH_IP, UNDERLAY_PREFIX};
use crate::process;

pub struct NetnsDriver;

pub fn exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn namespace_of(plan: &LabPlan, place: Place<'_>) -> Option<PathBuf> {
    match place {
        Place::Switch => Some(plan.switch_netns_path()),
        Place::Node(n) => Some(n.netns_path()),
        Place::Host => None,
    }
}

impl NodeDriver for NetnsDriver {
    fn preflight(&self, _plan: &LabPlan) -> Result<()> {
        Ok(())
    }

    fn leftovers(&self, plan: &LabPlan) -> Vec<String> {
        std::iter::once(plan.switch_netns.clone())
            .chain(plan.nodes.iter().map(|n| n.netns.clone()))
            .filter(|n| exists(n))
            .collect()
    }

    fn create(&self, plan: &LabPlan) -> Result<()> {
        create_switch(plan)?;
        for node in &plan.nodes {
            create_node(plan, node)?;
        }
        Ok(())
    }

    fn command(&self, plan: &LabPlan, place: Place<'_>, cmd: Vec<String>) -> Vec<String> {
        match namespace_of(plan, place) {
            Some(ns) => {
                let mut argv = args!["nsenter", format!("--net={}", ns.display()), "--"];
                argv.extend(cmd);
                argv
            }
            None => cmd,
        }
    }

    fn spawn(
        &self,
        plan: &LabPlan,
        place: Place<'_>,
        argv: &[String],
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<u32> {
        process::spawn(namespace_of(plan, place).as_deref(), argv, log, env)
    }

    fn needs_api_forward(&self) -> bool {
        true
    }

    fn destroy(&self, plan: &LabPlan) -> Vec<String> {
        self.leftovers(plan)
            .into_iter()
            .filter(|ns| !succeeds(args!["ip", "netns", "delete", ns]))
            .map(|ns| format!("could not delete network namespace {ns}"))
            .collect()
    }
}

fn create_switch(plan: &LabPlan) -> Result<()> {
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

fn create_node(plan: &LabPlan, node: &NodePlan) -> Result<()> {
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
