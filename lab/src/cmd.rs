//! Running the host tools the lab drives (ip, ctr, kubectl, docker): the command line goes
//! into every error, with the tool's stderr.

use std::process::{Command, Output, Stdio};

use crate::error::{LabError, Result};

/// `argv` as one shell-like line, for messages.
pub fn display(argv: &[String]) -> String {
    argv.join(" ")
}

fn output(argv: &[String]) -> Result<Output> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| LabError::Usage("empty command".into()))?;
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LabError::Spawn {
            command: display(argv),
            source,
        })
}

/// Runs `argv`; its stdout on success, else an error with its stderr.
pub fn run(argv: Vec<String>) -> Result<String> {
    let out = output(&argv)?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: display(&argv),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `argv` and says only whether it succeeded (probes and best-effort teardown).
pub fn succeeds(argv: Vec<String>) -> bool {
    output(&argv).map(|o| o.status.success()).unwrap_or(false)
}

/// `args!["ip", "-n", ns]`: a `Vec<String>` from anything displayable.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => { vec![$($a.to_string()),*] };
}
