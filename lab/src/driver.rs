//! Where a lab's nodes live, behind one narrow trait: network namespaces on this host
//! (`netns`), or privileged containers on a private Docker network (`docker`). The rest of
//! the lab (plan, components, up/down) is the same for both: the node-side paths are the
//! host's (the docker driver bind-mounts them at the same places).

use std::path::Path;

use crate::error::Result;
use crate::plan::{LabPlan, NodePlan};

/// Where a command or daemon runs.
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    /// The switch: the netns driver's switch namespace, the docker driver's registry
    /// container.
    Switch,
    Node(&'a NodePlan),
    /// The host itself.
    Host,
}

pub trait NodeDriver {
    /// Refuses early what cannot work (no Docker engine, missing tools).
    fn preflight(&self, plan: &LabPlan) -> Result<()>;
    /// Namespaces, containers or networks of this lab's names that exist now.
    fn leftovers(&self, plan: &LabPlan) -> Vec<String>;
    /// The underlay, the switch and every node, ready to run daemons.
    fn create(&self, plan: &LabPlan) -> Result<()>;
    /// `argv` prefixed to run inside `place`.
    fn command(&self, plan: &LabPlan, place: Place<'_>, argv: Vec<String>) -> Vec<String>;
    /// Starts a daemon in `place`, output appended to `log`; its host PID.
    fn spawn(
        &self,
        plan: &LabPlan,
        place: Place<'_>,
        argv: &[String],
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<u32>;
    /// Whether the host reaches the API through a forward the lab must run (else the
    /// driver publishes it itself).
    fn needs_api_forward(&self) -> bool;
    /// Removes what `create` made; what could not go.
    fn destroy(&self, plan: &LabPlan) -> Vec<String>;
}
