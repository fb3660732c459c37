//! The nftables backend.

use std::sync::Arc;

use cairn_netfilter::NftDriver;
use cairn_serviceproxy::nftables::{owned_tables, NftConfig, Renderer};
use cairn_serviceproxy::{diff, ProxyState};
use tracing::warn;

use super::{BackendError, ProxyBackend, SyncReport};

/// The nftables backend: a main table and its shard tables, replaced whole on a full
/// sync, patched per service port otherwise (each sync one atomic transaction).
pub struct NftBackend {
    driver: Arc<dyn NftDriver>,
    renderer: Renderer,
    config: NftConfig,
    applied: Option<ProxyState>,
}

impl NftBackend {
    pub fn new(driver: Arc<dyn NftDriver>, config: NftConfig) -> NftBackend {
        NftBackend {
            driver,
            renderer: Renderer::default(),
            config,
            applied: None,
        }
    }
}

impl ProxyBackend for NftBackend {
    fn sync(&mut self, desired: &ProxyState, full: bool) -> Result<SyncReport, BackendError> {
        if let (false, Some(applied)) = (full, self.applied.as_ref()) {
            let d = diff(applied, desired);
            if d.is_empty() {
                return Ok(SyncReport::default());
            }
            let ops = self.renderer.partial(&self.config, applied, desired, &d);
            match self.driver.apply_ops(&ops) {
                Ok(()) => {
                    self.applied = Some(desired.clone());
                    let written = d.added.len() + d.changed.len() + d.removed.len();
                    let warnings = self.renderer.warnings.clone();
                    return Ok(SyncReport {
                        full: false,
                        written,
                        warnings,
                    });
                }
                Err(e) => warn!(error = %e, "partial sync failed; doing a full one"),
            }
        }
        let script = self.renderer.full(&self.config, desired);
        self.applied = None;
        self.driver.apply(&script)?;
        self.applied = Some(desired.clone());
        Ok(SyncReport {
            full: true,
            written: desired.len(),
            warnings: self.renderer.warnings.clone(),
        })
    }

    fn cleanup(&mut self) -> Result<(), BackendError> {
        let mut script = String::new();
        for table in owned_tables() {
            if self.driver.table_exists("ip", &table)? {
                script.push_str(&format!("delete table ip {table}\n"));
            }
        }
        if !script.is_empty() {
            self.driver.apply(&script)?;
        }
        self.applied = None;
        Ok(())
    }
}
