//! nftables through the `nft` binary. `nft -f -` applies a script as one netlink batch,
//! which the kernel commits atomically: a failing line changes nothing. (Netlink batches
//! built here would save the fork; `nft -f` was measured fast enough for the proxy's
//! goals and reads the same script the fake records.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("nft is not installed (looked in /usr/sbin, /sbin, /usr/bin, /bin)")]
    Missing,
    #[error("running nft {args}: {source}")]
    Spawn {
        args: String,
        source: std::io::Error,
    },
    #[error("nft {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
}

/// Applies nftables transactions and answers about tables.
pub trait NftDriver: Send + Sync {
    /// Applies `script` as one atomic transaction.
    fn apply(&self, script: &str) -> Result<(), NftError>;
    /// Whether `family name` exists.
    fn table_exists(&self, family: &str, name: &str) -> Result<bool, NftError>;
    /// The table as `nft list table` prints it (None when absent).
    fn list_table(&self, family: &str, name: &str) -> Result<Option<String>, NftError>;
}

pub fn find_binary(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// The real driver.
#[derive(Debug, Clone)]
pub struct NftCommand {
    binary: PathBuf,
}

impl NftCommand {
    pub fn new() -> Result<NftCommand, NftError> {
        Ok(NftCommand {
            binary: find_binary("nft").ok_or(NftError::Missing)?,
        })
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<(bool, String, String), NftError> {
        let desc = args.join(" ");
        let mut child = Command::new(&self.binary)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| NftError::Spawn {
                args: desc.clone(),
                source,
            })?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())
                .map_err(|source| NftError::Spawn {
                    args: desc.clone(),
                    source,
                })?;
        }
        let out = child
            .wait_with_output()
            .map_err(|source| NftError::Spawn { args: desc, source })?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

impl NftDriver for NftCommand {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        let (ok, _, stderr) = self.run(&["-f", "-"], Some(script))?;
        if ok {
            Ok(())
        } else {
            Err(NftError::Failed {
                args: "-f -".into(),
                stderr: stderr.trim().to_string(),
            })
        }
    }

    fn table_exists(&self, family: &str, name: &str) -> Result<bool, NftError> {
        Ok(self.list_table(family, name)?.is_some())
    }

    fn list_table(&self, family: &str, name: &str) -> Result<Option<String>, NftError> {
        let (ok, stdout, stderr) = self.run(&["list", "table", family, name], None)?;
        if ok {
            Ok(Some(stdout))
        } else if stderr.contains("No such file or directory") {
            Ok(None)
        } else {
            Err(NftError::Failed {
                args: format!("list table {family} {name}"),
                stderr: stderr.trim().to_string(),
            })
        }
    }
}

/// A fake that records every transaction (for unit tests of callers).
#[derive(Debug, Default)]
pub struct RecordingNft {
    pub scripts: parking_lot::Mutex<Vec<String>>,
    /// Fail the next `apply` with this message.
    pub fail_next: parking_lot::Mutex<Option<String>>,
}

impl NftDriver for RecordingNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        if let Some(stderr) = self.fail_next.lock().take() {
            return Err(NftError::Failed {
                args: "-f -".into(),
                stderr,
            });
        }
        self.scripts.lock().push(script.to_string());
        Ok(())
    }

    fn table_exists(&self, _: &str, _: &str) -> Result<bool, NftError> {
        Ok(!self.scripts.lock().is_empty())
    }

    fn list_table(&self, _: &str, _: &str) -> Result<Option<String>, NftError> {
        Ok(self.scripts.lock().last().cloned())
    }
}
