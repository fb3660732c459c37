//! The lab's record on disk (`<run>/<lab>/lab.json`): its plan and every process it
//! started, written before `up` goes on to the next step, so `down` (or the next `up`
//! after a crash) can stop exactly those. Namespaces, directories and cgroups follow from
//! the plan's names.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};
use crate::plan::{LabPlan, Roots};

/// A process the lab started; `expect` is a piece of its command line, so a recycled PID
/// is never signalled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub node: String,
    pub component: String,
    pub pid: u32,
    pub expect: String,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub plan: LabPlan,
    pub processes: Vec<ProcessRecord>,
    /// Set once `up` finished.
    pub ready: bool,
}

impl LabState {
    pub fn new(plan: LabPlan) -> LabState {
        LabState {
            plan,
            processes: Vec::new(),
            ready: false,
        }
    }

    pub fn load(roots: &Roots, lab: &str) -> Result<Option<LabState>> {
        let path = roots.state_file(lab);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::io(path, e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| LabError::State { path, source })
    }

    /// Atomically replaces the state file.
    pub fn save(&self) -> Result<()> {
        let path = self.plan.state_file();
        let dir = path.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        let text = serde_json::to_string_pretty(self).map_err(|source| LabError::State {
            path: path.clone(),
            source,
        })?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| LabError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| LabError::io(&path, e))
    }

    pub fn record(&mut self, process: ProcessRecord) -> Result<()> {
        self.processes
            .retain(|p| !(p.node == process.node && p.component == process.component));
        self.processes.push(process);
        self.save()
    }

    pub fn process(&self, node: &str, component: &str) -> Option<&ProcessRecord> {
        self.processes
            .iter()
            .find(|p| p.node == node && p.component == component)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LabOptions, NetworkBackend, ProxyMode};

    #[test]
    fn state_round_trips_and_a_restarted_component_replaces_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots {
            data: dir.path().join("data"),
            run: dir.path().join("run"),
            log: dir.path().join("log"),
        };
        let plan = LabPlan::new(LabOptions {
            name: "t".into(),
            nodes: 2,
            driver: crate::plan::DriverKind::Netns,
            proxy_mode: ProxyMode::Iptables,
            network: NetworkBackend::Vxlan,
            api_port: 1,
            bin_dir: "/b".into(),
            control_args: vec![],
            agent_args: vec![],
            proxy_args: vec![],
            control_replicas: 1,
            store: Default::default(),
            roots: roots.clone(),
        })
        .unwrap();
        assert!(LabState::load(&roots, "t").unwrap().is_none());
        let mut state = LabState::new(plan);
        let rec = |pid| ProcessRecord {
            node: "node-1".into(),
            component: "agent".into(),
            pid,
            expect: "cairn-agent".into(),
            log: "/l".into(),
        };
        state.record(rec(10)).unwrap();
        state.record(rec(11)).unwrap();
        let back = LabState::load(&roots, "t").unwrap().unwrap();
        assert_eq!(back.processes, vec![rec(11)]);
        assert_eq!(back.plan.options.proxy_mode, ProxyMode::Iptables);
        std::fs::write(roots.state_file("t"), "{").unwrap();
        let err = LabState::load(&roots, "t").unwrap_err().to_string();
        assert!(
            err.starts_with("lab state ") && err.contains("lab.json"),
            "{err}"
        );
    }
}
