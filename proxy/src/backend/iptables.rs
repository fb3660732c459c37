//! The iptables backend: partial syncs from the last applied state; full syncs (and the
//! first one after a restart) compare with `iptables-save` and write only what differs,
//! so a restart flushes nothing.

use std::sync::Arc;

use cairn_netfilter::IptablesDriver;
use cairn_serviceproxy::iptables::{self, IptConfig, Saved};
use cairn_serviceproxy::{diff, ProxyState};
use tracing::warn;

use super::{BackendError, ProxyBackend, SyncReport};

pub struct IptablesBackend {
    driver: Arc<dyn IptablesDriver>,
    config: IptConfig,
    applied: Option<ProxyState>,
}

impl IptablesBackend {
    pub fn new(driver: Arc<dyn IptablesDriver>, config: IptConfig) -> IptablesBackend {
        IptablesBackend {
            driver,
            config,
            applied: None,
        }
    }

    /// The proxy's chains and jumps as the kernel has them now.
    fn saved(&self) -> Result<Saved, BackendError> {
        let mut text = self.driver.save("filter")?;
        text.push_str(&self.driver.save("nat")?);
        Ok(Saved::parse(&text))
    }

    fn try_partial(&mut self, desired: &ProxyState) -> Option<SyncReport> {
        let applied = self.applied.as_ref()?;
        let d = diff(applied, desired);
        if d.is_empty() {
            return Some(SyncReport::default());
        }
        let rendered = iptables::partial(&self.config, applied, desired, &d);
        if let Some(payload) = &rendered.payload {
            if let Err(e) = self.driver.restore(payload) {
                warn!(error = %e, "partial sync failed; doing a full one");
                return None;
            }
        }
        self.applied = Some(desired.clone());
        Some(SyncReport {
            full: false,
            written: d.added.len() + d.changed.len() + d.removed.len(),
            warnings: rendered.warnings,
        })
    }
}

impl ProxyBackend for IptablesBackend {
    fn sync(&mut self, desired: &ProxyState, full: bool) -> Result<SyncReport, BackendError> {
        if !full {
            if let Some(report) = self.try_partial(desired) {
                return Ok(report);
            }
        }
        self.applied = None;
        let rendered = iptables::full(&self.config, desired, &self.saved()?);
        if let Some(payload) = &rendered.payload {
            self.driver.restore(payload)?;
        }
        self.applied = Some(desired.clone());
        Ok(SyncReport {
            full: true,
            written: desired.len(),
            warnings: rendered.warnings,
        })
    }

    fn cleanup(&mut self) -> Result<(), BackendError> {
        if let Some(payload) = iptables::cleanup(&self.saved()?) {
            self.driver.restore(&payload)?;
        }
        self.applied = None;
        Ok(())
    }
}
