//! Where join writes and reset looks: `/etc/cairn` (configuration, the token) and the
//! agent's root directory (`/var/lib/cairn/agent`: the node's kubeconfig and state).

use std::path::PathBuf;

pub const DEFAULT_ETC: &str = "/etc/cairn";
pub const DEFAULT_ROOT: &str = "/var/lib/cairn/agent";

#[derive(Debug, Clone)]
pub struct NodePaths {
    pub etc: PathBuf,
    pub root: PathBuf,
}

impl Default for NodePaths {
    fn default() -> Self {
        NodePaths {
            etc: DEFAULT_ETC.into(),
            root: DEFAULT_ROOT.into(),
        }
    }
}

impl NodePaths {
    /// What join adds under `/etc/cairn`, and reset removes.
    pub fn node_dir(&self) -> PathBuf {
        self.etc.join("node")
    }

    /// The join token (`0600`): the agent joins again with it when its certificate
    /// expired while the node was off.
    pub fn token(&self) -> PathBuf {
        self.node_dir().join("token")
    }

    /// The record of a join (`server=…`, `node=…`).
    pub fn joined(&self) -> PathBuf {
        self.node_dir().join("joined")
    }

    /// A unit's environment file (`agent`, `proxy`).
    pub fn env(&self, unit: &str) -> PathBuf {
        self.etc.join(format!("{unit}.env"))
    }

    /// The environment file as it was before join, which reset puts back.
    pub fn env_before_join(&self, unit: &str) -> PathBuf {
        self.node_dir().join(format!("{unit}.env.before-join"))
    }

    /// The node's kubeconfig, which the agent renews in place.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    /// The proxy's kubeconfig (`system:kube-proxy`), which the agent renews in place.
    pub fn proxy_kubeconfig(&self) -> PathBuf {
        crate::join::proxy_kubeconfig(&self.kubeconfig())
    }
}
