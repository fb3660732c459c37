//! Starting and stopping the node's units: a narrow seam over `systemctl`, so join and
//! reset are testable with a fake and the real command is one place.

use std::path::PathBuf;
use std::process::Command;

use super::NodeError;

/// The units join starts and reset stops, in start order.
pub const NODE_UNITS: [&str; 2] = ["cairn-agent.service", "cairn-proxy.service"];

pub trait Units {
    /// `systemctl enable --now` of `units`.
    fn enable_now(&self, units: &[&str]) -> Result<(), NodeError>;
    /// `systemctl disable --now` of `units`.
    fn disable_now(&self, units: &[&str]) -> Result<(), NodeError>;
}

/// The real one: `systemctl` (or the program given).
pub struct Systemctl {
    pub program: PathBuf,
}

impl Systemctl {
    fn run(&self, verb: &str, units: &[&str]) -> Result<(), NodeError> {
        let command = format!(
            "{} {verb} --now {}",
            self.program.display(),
            units.join(" ")
        );
        let out = Command::new(&self.program)
            .args([verb, "--now"])
            .args(units)
            .output()
            .map_err(|e| NodeError::Units {
                command: command.clone(),
                message: e.to_string(),
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(NodeError::Units {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Units for Systemctl {
    fn enable_now(&self, units: &[&str]) -> Result<(), NodeError> {
        self.run("enable", units)
    }

    fn disable_now(&self, units: &[&str]) -> Result<(), NodeError> {
        self.run("disable", units)
    }
}

/// A test double that records the calls.
#[cfg(test)]
#[derive(Default)]
pub struct FakeUnits {
    pub calls: std::sync::Mutex<Vec<String>>,
    pub fail: bool,
}

#[cfg(test)]
impl FakeUnits {
    fn record(&self, verb: &str, units: &[&str]) -> Result<(), NodeError> {
        let call = format!("{verb} {}", units.join(" "));
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call.clone());
        match self.fail {
            true => Err(NodeError::Units {
                command: call,
                message: "Unit cairn-agent.service not found.".into(),
            }),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
impl Units for FakeUnits {
    fn enable_now(&self, units: &[&str]) -> Result<(), NodeError> {
        self.record("enable", units)
    }

    fn disable_now(&self, units: &[&str]) -> Result<(), NodeError> {
        self.record("disable", units)
    }
}
