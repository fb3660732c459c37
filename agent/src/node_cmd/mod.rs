//! `cairn-node join` and `cairn-node reset`: putting a host into a cluster with one
//! command and taking it out again.
//!
//! - [`join`](join::join_node): the agent's token join ([`crate::join`]: CA pinned by the
//!   token, a node client certificate by CSR), then the unit environment files and the
//!   token under `/etc/cairn`, the units enabled and started, and a wait for the Node's
//!   fresh Ready heartbeat.
//! - [`reset`](reset::reset_node): the units stopped and disabled, the pods and cairn's
//!   network state removed (the packages' purge functions), the files join wrote
//!   removed and the environment files put back as they were.

pub mod env_file;
pub mod join;
pub mod paths;
pub mod ready;
pub mod reset;
pub mod units;

use std::path::PathBuf;
use std::time::Duration;

pub use paths::NodePaths;

/// Where progress lines go (stdout in the binary).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("this node already joined {server} as {node} ({path}); run `cairn-node reset` first")]
    AlreadyJoined {
        server: String,
        node: String,
        path: PathBuf,
    },
    #[error("{0}")]
    Join(#[from] crate::join::JoinError),
    #[error("{0}")]
    Value(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A `0600` file (the token): the error names its path.
    #[error("{0}")]
    Private(cairn_pki::PkiError),
    #[error("`{command}` failed: {message}")]
    Units { command: String, message: String },
    #[error("node {node} was not Ready {waited:?} after its units started: {last}")]
    NotReady {
        node: String,
        waited: Duration,
        last: String,
    },
    #[error("removing the node's pods and network state: {0}")]
    Cleanup(String),
}

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> NodeError + '_ {
    move |source| NodeError::Io {
        path: path.to_path_buf(),
        source,
    }
}
