//! `cairn-lab status`: the lab's nodes, each component's PID and whether it still runs,
//! and where the logs and kubeconfig are.

use std::fmt::Write;

use crate::plan::LabPlan;
use crate::process;
use crate::state::LabState;

pub fn render(state: &LabState) -> String {
    let plan: &LabPlan = &state.plan;
    let o = &plan.options;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "lab {}: {} node(s), driver {}, proxy {}, network {}, {}",
        plan.name(),
        plan.nodes.len(),
        o.driver.as_str(),
        o.proxy_mode.as_str(),
        o.network.as_str(),
        if state.ready { "up" } else { "not fully up" }
    );
    let _ = writeln!(
        out,
        "kubeconfig: {}  (API {})",
        plan.kubeconfig().display(),
        plan.api_url_host()
    );
    let _ = writeln!(
        out,
        "registry:   {} (docker.io mirror), underlay {}",
        plan.registry(),
        plan.subnet()
    );
    let _ = writeln!(
        out,
        "{:<8} {:<12} {:<10} {:>8}  {:<8} LOG",
        "NODE", "ADDRESS", "COMPONENT", "PID", "STATE"
    );
    for p in &state.processes {
        let address = plan
            .nodes
            .iter()
            .find(|n| n.name == p.node)
            .map(|n| n.ip.to_string())
            .unwrap_or_else(|| "-".into());
        let running = if process::is_running(p) {
            "running"
        } else {
            "stopped"
        };
        let _ = writeln!(
            out,
            "{:<8} {:<12} {:<10} {:>8}  {:<8} {}",
            p.node,
            address,
            p.component,
            p.pid,
            running,
            p.log.display()
        );
    }
    out
}
