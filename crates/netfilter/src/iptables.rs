//! iptables (and ip6tables) through `iptables-restore --noflush` (one transaction per call: iptables-nft
//! commits it as one netlink batch, iptables-legacy replaces each table it names) and
//! `iptables-save`. Either variant: the system's `iptables-restore`, or the `-nft` or
//! `-legacy` binaries by name.

use std::path::{Path, PathBuf};

use crate::nft::find_binary;

#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    #[error("{0} is not installed (looked in /usr/sbin, /sbin, /usr/bin, /bin, /usr/local/sbin)")]
    Missing(String),
    #[error("running {command}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("{command} failed: {stderr}")]
    Failed { command: String, stderr: String },
}

/// Which iptables: the one the system's alternatives point at, or a named variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IptablesVariant {
    System,
    Nft,
    Legacy,
}

impl IptablesVariant {
    fn suffix(self) -> &'static str {
        match self {
            IptablesVariant::System => "",
            IptablesVariant::Nft => "-nft",
            IptablesVariant::Legacy => "-legacy",
        }
    }
}

/// Applies restore payloads and reads tables back.
pub trait IptablesDriver: Send + Sync {
    /// `iptables-restore --noflush` of `payload`: one transaction.
    fn restore(&self, payload: &str) -> Result<(), IptablesError>;
    /// `iptables-save -t table`.
    fn save(&self, table: &str) -> Result<String, IptablesError>;
}

/// The real driver.
#[derive(Debug, Clone)]
pub struct IptablesCommand {
    restore: PathBuf,
    save: PathBuf,
}

impl IptablesCommand {
    /// IPv4 (`iptables-*`).
    pub fn new(variant: IptablesVariant) -> Result<IptablesCommand, IptablesError> {
        IptablesCommand::for_family(false, variant)
    }

    /// IPv4, or IPv6 (`ip6tables-*`) when `v6`.
    pub fn for_family(
        v6: bool,
        variant: IptablesVariant,
    ) -> Result<IptablesCommand, IptablesError> {
        let family = if v6 { "ip6tables" } else { "iptables" };
        let find = |tool: &str| {
            let name = format!("{family}{}-{tool}", variant.suffix());
            find_binary(&name).ok_or(IptablesError::Missing(name))
        };
        Ok(IptablesCommand {
            restore: find("restore")?,
            save: find("save")?,
        })
    }

    fn run(
        &self,
        binary: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, IptablesError> {
        let command = format!("{} {}", binary.display(), args.join(" "));
        let out =
            crate::command::run(binary, args, stdin).map_err(|source| IptablesError::Spawn {
                command: command.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(IptablesError::Failed {
                command,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl IptablesDriver for IptablesCommand {
    fn restore(&self, payload: &str) -> Result<(), IptablesError> {
        // -w: wait for the xtables lock that other iptables users (legacy) take.
        self.run(&self.restore, &["-w", "5", "--noflush"], Some(payload))
            .map(drop)
    }

    fn save(&self, table: &str) -> Result<String, IptablesError> {
        self.run(&self.save, &["-t", table], None)
    }
}

/// A fake that records every payload and answers `save` with a scripted text.
#[derive(Debug, Default)]
pub struct RecordingIptables {
    pub payloads: parking_lot::Mutex<Vec<String>>,
    /// What `save` answers, per table.
    pub saved: parking_lot::Mutex<std::collections::BTreeMap<String, String>>,
    /// Fail the next `restore` with this message.
    pub fail_next: parking_lot::Mutex<Option<String>>,
}

impl IptablesDriver for RecordingIptables {
    fn restore(&self, payload: &str) -> Result<(), IptablesError> {
        if let Some(stderr) = self.fail_next.lock().take() {
            return Err(IptablesError::Failed {
                command: "iptables-restore --noflush".into(),
                stderr,
            });
        }
        self.payloads.lock().push(payload.to_string());
        Ok(())
    }

    fn save(&self, table: &str) -> Result<String, IptablesError> {
        Ok(self.saved.lock().get(table).cloned().unwrap_or_default())
    }
}
