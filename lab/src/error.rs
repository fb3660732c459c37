//! The lab's errors: each names the command, file, node or component it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Usage(String),
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("lab state {}: {source}", path.display())]
    State {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Wait(Box<WaitFailure>),
    #[error("no lab named {0} is up (nothing recorded in {1})")]
    NoLab(String, PathBuf),
}

impl LabError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> LabError {
        LabError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// A daemon that exited, or did not answer in time, while `up` waited for it.
#[derive(Debug)]
pub struct WaitFailure {
    pub node: String,
    pub component: String,
    pub what: String,
    /// `None`: the process exited; else the seconds waited.
    pub waited_seconds: Option<u64>,
    pub log: PathBuf,
    pub tail: String,
}

impl std::fmt::Display for WaitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.waited_seconds {
            None => write!(
                f,
                "{}/{} exited while waiting for {}",
                self.node, self.component, self.what
            )?,
            Some(s) => write!(
                f,
                "{}/{}: no {} after {s}s",
                self.node, self.component, self.what
            )?,
        }
        write!(f, "; last lines of {}:\n{}", self.log.display(), self.tail)
    }
}
