//! `cairn-node reset`: the node as before `cairn-node join`.
//!
//! The pods and the network state go with the same shell functions the packages' purge
//! runs (`packaging/scripts/cleanup-node.sh`, compiled in), so there is one definition
//! of "cairn's own state" and it is the one the package tests check. The Node object
//! stays in the cluster, as kubeadm's reset leaves it: deleting it is the cluster's
//! decision (`kubectl delete node`).

use std::path::Path;
use std::process::Command;

use super::units::{Units, NODE_UNITS};
use super::{io, NodeError, NodePaths, Progress};

const CLEANUP_FUNCTIONS: &str = include_str!("../../../packaging/scripts/cleanup-node.sh");

#[derive(Debug, Clone)]
pub struct ResetOptions {
    pub paths: NodePaths,
    /// Remove the pods and cairn's network state (off only where a test shares the host).
    pub host_state: bool,
}

pub fn reset_node(o: &ResetOptions, units: &dyn Units, say: Progress<'_>) -> Result<(), NodeError> {
    let p = &o.paths;
    if !p.joined().exists() {
        say(&format!(
            "No join recorded ({}); cleaning up anyway",
            p.joined().display()
        ));
    }
    let mut stopping: Vec<&str> = NODE_UNITS.to_vec();
    stopping.reverse();
    match units.disable_now(&stopping) {
        Ok(()) => say(&format!("Stopped and disabled {}", stopping.join(", "))),
        // Not installed or never enabled: nothing runs that needs stopping.
        Err(e) => say(&format!("Warning: {e}")),
    }
    if o.host_state {
        forget_pods_and_network()?;
        say("Removed the pods' containers and cairn's network state (tables, devices, CNI config)");
    }
    for unit in ["agent", "proxy"] {
        restore_env(p, unit)?;
    }
    unmount_under(&p.root);
    remove_dir(&p.root)?;
    remove_dir(&p.node_dir())?;
    say(&format!(
        "Removed {} and {}; {} and {} are as before the join",
        p.root.display(),
        p.node_dir().display(),
        p.env("agent").display(),
        p.env("proxy").display()
    ));
    say("The Node object stays in the cluster: `kubectl delete node NAME` removes it");
    Ok(())
}

fn forget_pods_and_network() -> Result<(), NodeError> {
    let script = format!("{CLEANUP_FUNCTIONS}\ncairn_forget_pods\ncairn_forget_network\n");
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .map_err(|e| NodeError::Cleanup(e.to_string()))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(NodeError::Cleanup(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )),
    }
}

/// The environment file as before the join: its copy put back, or removed when there
/// was none (join created it).
fn restore_env(p: &NodePaths, unit: &str) -> Result<(), NodeError> {
    let backup = p.env_before_join(unit);
    let path = p.env(unit);
    if backup.exists() {
        return std::fs::rename(&backup, &path).map_err(io(&path));
    }
    if p.joined().exists() {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&path)(e)),
            _ => {}
        }
    }
    Ok(())
}

/// A file system mounted under `dir` (a disk for local-path volumes, say) would have
/// its contents removed with the directory: detach it first, as `kubeadm reset` does
/// under the kubelet's directory. cairn's own mounts are under the state directory,
/// which the cleanup functions handle.
fn unmount_under(dir: &Path) {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| Path::new(m).starts_with(dir) && Path::new(m) != dir)
        .collect();
    points.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in points {
        let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn remove_dir(dir: &Path) -> Result<(), NodeError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(dir)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::units::FakeUnits;
    use super::*;

    fn joined_node(dir: &Path) -> NodePaths {
        let p = NodePaths {
            etc: dir.join("etc"),
            root: dir.join("root"),
        };
        std::fs::create_dir_all(p.node_dir()).unwrap();
        std::fs::create_dir_all(&p.root).unwrap();
        std::fs::write(p.kubeconfig(), "k").unwrap();
        std::fs::write(p.joined(), "server=s\nnode=n\n").unwrap();
        // agent.env was there before the join; proxy.env was written by it.
        std::fs::write(p.env_before_join("agent"), "CAIRN_AGENT_ARGS=\"--x\"\n").unwrap();
        std::fs::write(p.env("agent"), "CAIRN_AGENT_ARGS=\"--x --server s\"\n").unwrap();
        std::fs::write(p.env("proxy"), "CAIRN_PROXY_ARGS=\"--kubeconfig k\"\n").unwrap();
        p
    }

    #[test]
    fn stops_the_units_in_reverse_and_puts_the_files_back() {
        let dir = tempfile::tempdir().unwrap();
        let paths = joined_node(dir.path());
        let units = FakeUnits::default();
        let mut said = Vec::new();
        let options = ResetOptions {
            paths: paths.clone(),
            host_state: false,
        };
        reset_node(&options, &units, &mut |l| said.push(l.to_string())).unwrap();
        let calls = units.calls.lock().unwrap().clone();
        assert_eq!(calls, ["disable cairn-proxy.service cairn-agent.service"]);
        let agent = std::fs::read_to_string(paths.env("agent")).unwrap();
        assert_eq!(agent, "CAIRN_AGENT_ARGS=\"--x\"\n");
        assert!(
            !paths.env("proxy").exists(),
            "join made proxy.env: reset removes it"
        );
        assert!(!paths.root.exists() && !paths.node_dir().exists());
        assert!(
            said.iter().any(|l| l.starts_with("Stopped and disabled")),
            "{said:?}"
        );
    }

    #[test]
    fn units_that_cannot_be_stopped_are_a_warning_not_a_stop() {
        let dir = tempfile::tempdir().unwrap();
        let paths = joined_node(dir.path());
        let units = FakeUnits {
            fail: true,
            ..FakeUnits::default()
        };
        let mut said = Vec::new();
        let options = ResetOptions {
            paths: paths.clone(),
            host_state: false,
        };
        reset_node(&options, &units, &mut |l| said.push(l.to_string())).unwrap();
        assert!(
            said.iter().any(|l| l.starts_with("Warning: `disable")),
            "{said:?}"
        );
        assert!(!paths.node_dir().exists());
    }
}
