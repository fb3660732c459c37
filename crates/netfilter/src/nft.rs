//! nftables through the `nft` binary, and typed transactions ([`cairn_nft::Op`]) straight
//! to the kernel. `nft -f -` applies a script as one netlink batch, which the kernel
//! commits atomically: a failing line changes nothing; so does a typed batch.

use std::path::{Path, PathBuf};

use cairn_nft::Op;

pub use crate::nft_error::NftError;

/// Applies nftables transactions and answers about tables.
pub trait NftDriver: Send + Sync {
    /// Applies `script` as one atomic transaction.
    fn apply(&self, script: &str) -> Result<(), NftError>;
    /// Applies `ops` as one atomic transaction; by default as their printed script (the
    /// fakes record that text).
    fn apply_ops(&self, ops: &[Op]) -> Result<(), NftError> {
        self.apply(&cairn_nft::script(ops))
    }
    /// Whether `family name` exists.
    fn table_exists(&self, family: &str, name: &str) -> Result<bool, NftError>;
    /// The table as `nft list table` prints it (None when absent).
    fn list_table(&self, family: &str, name: &str) -> Result<Option<String>, NftError>;
    /// The table as `nft -a list table` prints it, every rule followed by `# handle N`
    /// (None when absent). A table whose chain is shared by several owners (the CNI
    /// plugin's per-attachment masquerade rules) loses one owner's rules by
    /// `delete rule FAMILY TABLE CHAIN handle N`, without rewriting the others'.
    fn list_table_with_handles(&self, family: &str, name: &str)
        -> Result<Option<String>, NftError>;
    /// Only the table's named counters, as `nft list counters table` prints them (None
    /// when absent): a scrape need not print thousands of set elements. By default the
    /// whole listing, which holds the same counter blocks.
    fn list_counters(&self, family: &str, name: &str) -> Result<Option<String>, NftError> {
        self.list_table(family, name)
    }
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

    fn list(&self, args: &[&str]) -> Result<Option<String>, NftError> {
        let (ok, stdout, stderr) = self.run(args, None)?;
        if ok {
            Ok(Some(stdout))
        } else if stderr.contains("No such file or directory") {
            Ok(None)
        } else {
            Err(NftError::Failed {
                args: args.join(" "),
                stderr: stderr.trim().to_string(),
            })
        }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<(bool, String, String), NftError> {
        let out =
            crate::command::run(&self.binary, args, stdin).map_err(|source| NftError::Spawn {
                args: args.join(" "),
                source,
            })?;
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

    /// Straight to the kernel as one netlink batch (see nft_batch); through `nft -f` when
    /// an operation needs what the batch encoder does not know.
    fn apply_ops(&self, ops: &[Op]) -> Result<(), NftError> {
        match crate::nft_batch::apply(ops) {
            Some(result) => result,
            None => self.apply(&cairn_nft::script(ops)),
        }
    }

    fn table_exists(&self, family: &str, name: &str) -> Result<bool, NftError> {
        Ok(self.list_table(family, name)?.is_some())
    }

    fn list_table(&self, family: &str, name: &str) -> Result<Option<String>, NftError> {
        self.list(&["list", "table", family, name])
    }

    fn list_table_with_handles(
        &self,
        family: &str,
        name: &str,
    ) -> Result<Option<String>, NftError> {
        self.list(&["-a", "list", "table", family, name])
    }

    fn list_counters(&self, family: &str, name: &str) -> Result<Option<String>, NftError> {
        self.list(&["list", "counters", "table", family, name])
    }
}

/// A fake that records every transaction (for unit tests of callers).
#[derive(Debug, Default)]
pub struct RecordingNft {
    pub scripts: parking_lot::Mutex<Vec<String>>,
    /// Fail the next `apply` with this message.
    pub fail_next: parking_lot::Mutex<Option<String>>,
    /// Scripted listings, keyed `"family name"`. Empty: every table answers with the last
    /// script applied (absent before the first). Otherwise this is the whole ruleset: a
    /// table not in it is absent, and the listings (with handles too) answer its text.
    pub tables: parking_lot::Mutex<std::collections::BTreeMap<String, String>>,
}

impl RecordingNft {
    fn listing(&self, family: &str, name: &str) -> Option<String> {
        let tables = self.tables.lock();
        if tables.is_empty() {
            self.scripts.lock().last().cloned()
        } else {
            tables.get(&format!("{family} {name}")).cloned()
        }
    }
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

    fn table_exists(&self, family: &str, name: &str) -> Result<bool, NftError> {
        Ok(self.listing(family, name).is_some())
    }

    fn list_table(&self, family: &str, name: &str) -> Result<Option<String>, NftError> {
        Ok(self.listing(family, name))
    }

    fn list_table_with_handles(
        &self,
        family: &str,
        name: &str,
    ) -> Result<Option<String>, NftError> {
        Ok(self.listing(family, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_nft_lists_the_last_script_or_the_scripted_tables() {
        let nft = RecordingNft::default();
        assert!(!nft.table_exists("ip", "t").unwrap());
        nft.apply("table ip t {}\n").unwrap();
        assert_eq!(
            nft.list_table("ip", "t").unwrap().as_deref(),
            Some("table ip t {}\n")
        );
        nft.tables
            .lock()
            .insert("inet u".into(), "table inet u { # handle 1\n}\n".into());
        assert!(!nft.table_exists("ip", "t").unwrap());
        assert_eq!(
            nft.list_table_with_handles("inet", "u").unwrap().as_deref(),
            Some("table inet u { # handle 1\n}\n")
        );
        *nft.fail_next.lock() = Some("Error: boom".into());
        let e = nft.apply("flush ruleset\n").unwrap_err();
        assert_eq!(e.to_string(), "nft -f - failed: Error: boom");
        assert_eq!(nft.scripts.lock().len(), 1);
    }
}
