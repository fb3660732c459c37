//! Starting one of the lab's daemons (recorded before anything waits on it) and asking
//! whether a node's component answers: what `up`, `start` and the HA control plane
//! (`replicas`) all do.

use crate::args;
use crate::cmd::succeeds;
use crate::components::Daemon;
use crate::driver::Place;
use crate::drivers;
use crate::error::{LabError, Result};
use crate::plan::{LabPlan, NodePlan, API_PORT, ETCD_METRICS_PORT};
use crate::state::{LabState, ProcessRecord};

/// Starts a daemon in `place` and records it before anything waits on it.
pub fn start(state: &mut LabState, place: Place<'_>, daemon: &Daemon) -> Result<ProcessRecord> {
    let plan = &state.plan;
    let (node_name, log) = match place {
        Place::Node(n) => (n.name.clone(), n.log(daemon.component)),
        Place::Host => (
            "host".to_string(),
            plan.log_dir.join(format!("{}.log", daemon.component)),
        ),
        Place::Switch => (
            "switch".to_string(),
            plan.log_dir.join(format!("{}.log", daemon.component)),
        ),
    };
    let driver = drivers::for_plan(plan);
    let pid = driver.spawn(plan, place, &daemon.argv, &log, &[("RUST_LOG", "info")])?;
    let record = ProcessRecord {
        node: node_name,
        component: daemon.component.to_string(),
        pid,
        expect: daemon.expect.clone(),
        log,
    };
    state.record(record.clone())?;
    Ok(record)
}

/// The record of a daemon `up` started, for waiting on.
pub fn record_of(state: &LabState, node: &str, component: &str) -> Result<ProcessRecord> {
    state
        .process(node, component)
        .cloned()
        .ok_or_else(|| LabError::Usage(format!("{node}/{component} was never started")))
}

/// Whether a node's component answers (its socket, /readyz, /healthz or its TLS port).
pub fn answers(plan: &LabPlan, node: &NodePlan, component: &str) -> bool {
    let url = match component {
        // The socket is under the lab's run dir, at the same path on the host.
        "containerd" => {
            return succeeds(args![
                "ctr",
                "--address",
                node.containerd_socket().display(),
                "version"
            ]);
        }
        "control" => {
            let url = format!("https://127.0.0.1:{API_PORT}/readyz");
            let ca = plan.cluster_ca();
            let curl = args!["curl", "-fsS", "--cacert", ca.display(), url];
            return succeeds(drivers::for_plan(plan).command(plan, Place::Node(node), curl));
        }
        // A handshake verified by the cluster CA: the node's serving certificate is
        // issued (any answer, a 401 to this anonymous request included, will do).
        "agent" => {
            let url = format!("https://{}:10250/healthz", node.ip);
            let ca = plan.cluster_ca();
            let curl = args![
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "--cacert",
                ca.display(),
                url
            ];
            return succeeds(drivers::for_plan(plan).command(plan, Place::Node(node), curl));
        }
        "proxy" => "http://127.0.0.1:10256/healthz".to_string(),
        "etcd" => format!("http://127.0.0.1:{ETCD_METRICS_PORT}/health"),
        _ => return false,
    };
    succeeds(drivers::for_plan(plan).command(plan, Place::Node(node), args!["curl", "-fsS", url]))
}
