//! kubectl against the lab, as the soak's client: plain calls, JSON reads, manifests on
//! stdin, and background sessions (port-forward, an exec left open).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::error::SoakError;

pub struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(kubeconfig: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.to_path_buf(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        c
    }

    /// stdout of a call that must succeed.
    pub fn run(&self, args: &[&str]) -> Result<String, SoakError> {
        self.run_with_input(args, None)
    }

    /// `kubectl apply -f -` of `manifest`.
    pub fn apply(&self, manifest: &Value) -> Result<String, SoakError> {
        self.run_with_input(&["apply", "-f", "-"], Some(manifest.to_string()))
    }

    /// A JSON read (`get ... -o json`).
    pub fn json(&self, args: &[&str]) -> Result<Value, SoakError> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.run(&all)?;
        serde_json::from_str(&out).map_err(|e| SoakError::Kubectl {
            args: all.join(" "),
            message: format!("not JSON: {e}"),
        })
    }

    fn run_with_input(&self, args: &[&str], input: Option<String>) -> Result<String, SoakError> {
        let failed = |message: String| SoakError::Kubectl {
            args: args.join(" "),
            message,
        };
        let mut child = self
            .command(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| failed(e.to_string()))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            return Err(failed(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A long-running kubectl (port-forward, an interactive exec) with piped stdio.
    pub fn spawn(&self, args: &[&str]) -> Result<Child, SoakError> {
        self.command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| SoakError::Kubectl {
                args: args.join(" "),
                message: e.to_string(),
            })
    }
}
