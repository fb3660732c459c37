//! The HA control plane of `up --control-replicas N --store etcd`: an etcd member on each
//! of the first N nodes, the first cairn-control replica (which makes the cluster's PKI),
//! then the others with its CA, keys and encryption key (each issues itself a serving
//! certificate for its own address); and the host's forward, which tries the replicas in
//! order so that it fails over to a live one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::args;
use crate::components::{self, Daemon};
use crate::daemon::{answers, record_of, start};
use crate::driver::Place;
use crate::error::{LabError, Result};
use crate::plan::{LabPlan, NodePlan, API_PORT};
use crate::process::wait_for;
use crate::state::{LabState, ProcessRecord};

/// Starts every etcd member (all before waiting: none is healthy without a quorum) and
/// waits for each to answer healthy.
pub fn start_etcd(state: &mut LabState, timeout: Duration) -> Result<()> {
    let plan = state.plan.clone();
    let members: Vec<&NodePlan> = plan.nodes.iter().filter(|n| plan.runs_etcd(n)).collect();
    issue_etcd_certificates(&plan, &members)?;
    let mut records = Vec::new();
    for node in &members {
        records.push(start(
            state,
            Place::Node(node),
            &components::etcd(&plan, node),
        )?);
    }
    for (node, record) in members.iter().zip(&records) {
        wait_for(record, "a healthy member (/health)", timeout, || {
            answers(&plan, node, "etcd")
        })?;
    }
    Ok(())
}

/// Each member's certificates (`cairn-control certs etcd`), from one etcd CA: the first
/// member's, copied to the others first. Certificates already there are kept.
fn issue_etcd_certificates(plan: &LabPlan, members: &[&NodePlan]) -> Result<()> {
    let Some(first) = members.first() else {
        return Ok(());
    };
    let first_dir = components::etcd_pki_dir(first);
    for node in members {
        let dir = components::etcd_pki_dir(node);
        if node.name != first.name {
            std::fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
            for file in ["ca.crt", "ca.key"] {
                let (from, to) = (first_dir.join(file), dir.join(file));
                if !to.exists() {
                    std::fs::copy(&from, &to).map_err(|e| LabError::io(&from, e))?;
                }
            }
        }
        crate::cmd::run(args![
            plan.bin("cairn-control").display(),
            "certs",
            "etcd",
            "--dir",
            dir.display(),
            "--name",
            node.name,
            "--address",
            node.ip
        ])?;
    }
    Ok(())
}

/// Starts the replicas after the first (which has answered): each gets the first one's
/// identity, then is waited for.
pub fn start_other_replicas(state: &mut LabState, timeout: Duration) -> Result<()> {
    let plan = state.plan.clone();
    let first = plan.control_data_dir();
    let others: Vec<&NodePlan> = plan.control_nodes().skip(1).collect();
    for node in &others {
        share_identity(&first, &node.data_dir.join("control"))?;
        let policy = components::audit_policy_path(node);
        std::fs::write(&policy, components::AUDIT_POLICY).map_err(|e| LabError::io(policy, e))?;
        start(state, Place::Node(node), &components::control(&plan, node))?;
    }
    for node in &others {
        let record = record_of(state, &node.name, "control")?;
        wait_for(&record, "an answer on /readyz", timeout, || {
            answers(&plan, node, "control")
        })?;
    }
    Ok(())
}

/// The cluster's CAs, keys and encryption configuration, copied into another replica's
/// data dir (its leader-election identity and serving certificate stay its own: a serving
/// certificate that does not name this node's address is reissued at start).
fn share_identity(from: &Path, to: &Path) -> Result<()> {
    let (pki_from, pki_to) = (from.join("pki"), to.join("pki"));
    std::fs::create_dir_all(&pki_to).map_err(|e| LabError::io(&pki_to, e))?;
    let entries = std::fs::read_dir(&pki_from).map_err(|e| LabError::io(&pki_from, e))?;
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LabError::io(&pki_from, e))?;
        files.push((entry.path(), pki_to.join(entry.file_name())));
    }
    let config = "encryption-config.yaml";
    files.push((from.join(config), to.join(config)));
    for (src, dest) in files {
        std::fs::copy(&src, &dest).map_err(|e| LabError::io(&src, e))?;
    }
    Ok(())
}

/// The script the host's forward runs per connection: the first replica whose `/readyz`
/// passes gets it, as a load balancer's health check would pick (a replica whose etcd
/// member is down answers 500 there, and would answer every request so). When none is
/// ready, the first that accepts the connection gets it, so the client sees why. A
/// replica that is down refuses at once, and the client's bytes are still unread.
pub fn forward_script(plan: &LabPlan) -> String {
    let namespaces: Vec<String> = plan
        .control_nodes()
        .map(|n| n.netns_path().display().to_string())
        .collect();
    let namespaces = namespaces.join(" ");
    format!(
        "#!/bin/sh\n# cairn-lab {}: the API on the first ready control replica.\n\
         for ns in {namespaces}; do\n  \
         if nsenter --net=\"$ns\" curl -skf --max-time 3 -o /dev/null https://127.0.0.1:{API_PORT}/readyz; then\n    \
         exec nsenter --net=\"$ns\" socat STDIO TCP:127.0.0.1:{API_PORT}\n  fi\ndone\n\
         for ns in {namespaces}; do\n  nsenter --net=\"$ns\" socat STDIO TCP:127.0.0.1:{API_PORT} && exit 0\n\
         done\nexit 1\n",
        plan.name(),
    )
}

pub fn forward_script_path(plan: &LabPlan) -> PathBuf {
    plan.run_dir.join("forward.sh")
}

/// The host's forward: socat on 127.0.0.1:<api-port>, one run of the script per
/// connection.
pub fn forward(plan: &LabPlan) -> Result<Daemon> {
    let script = forward_script_path(plan);
    std::fs::write(&script, forward_script(plan)).map_err(|e| LabError::io(&script, e))?;
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, mode).map_err(|e| LabError::io(&script, e))?;
    Ok(Daemon {
        component: "forward",
        expect: script.display().to_string(),
        argv: args![
            "socat",
            format!(
                "TCP-LISTEN:{},bind=127.0.0.1,fork,reuseaddr",
                plan.options.api_port
            ),
            format!("EXEC:{}", script.display())
        ],
    })
}

/// The record of a started forward, for waiting on.
pub fn start_forward(state: &mut LabState) -> Result<ProcessRecord> {
    let daemon = forward(&state.plan)?;
    start(state, Place::Host, &daemon)
}

#[cfg(test)]
mod tests {
    use super::forward_script;
    use crate::plan::{LabPlan, LabStore};

    #[test]
    fn the_forward_tries_every_replica_in_order() {
        let mut options = crate::plan::tests::options(4);
        options.name = "ha".into();
        (options.control_replicas, options.store) = (3, LabStore::Etcd);
        let plan = LabPlan::new(options).unwrap();
        let script = forward_script(&plan);
        assert!(
            script.contains(
                "for ns in /run/netns/cl-ha-n1 /run/netns/cl-ha-n2 /run/netns/cl-ha-n3; do"
            ),
            "{script}"
        );
        assert!(
            script.contains("curl -skf --max-time 3 -o /dev/null https://127.0.0.1:6443/readyz"),
            "{script}"
        );
        assert!(
            script.contains("socat STDIO TCP:127.0.0.1:6443 && exit 0"),
            "{script}"
        );
    }
}
