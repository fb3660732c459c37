//! The backends' seam: one `sync` per change (partial when possible, a full replacement
//! otherwise or when a partial one fails) and a `cleanup` that removes exactly what the
//! backend owns.

use cairn_netfilter::{IptablesError, NftError};
use cairn_serviceproxy::ProxyState;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("nftables: {0}")]
    Nft(#[from] NftError),
    #[error("iptables: {0}")]
    Iptables(#[from] IptablesError),
    #[error("ipvs: {0}")]
    Ipvs(#[from] cairn_netfilter::ipvs::IpvsError),
    #[error("ipvs: {0}")]
    IpvsHost(#[from] ipvs::HostError),
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub full: bool,
    /// Service ports written (all of them on a full sync).
    pub written: usize,
    /// Things left out of the state, for the log.
    pub warnings: Vec<String>,
}

pub trait ProxyBackend: Send {
    /// Programs `desired`; `full` asks for a complete rewrite.
    fn sync(&mut self, desired: &ProxyState, full: bool) -> Result<SyncReport, BackendError>;
    /// Removes everything the backend owns, and nothing else.
    fn cleanup(&mut self) -> Result<(), BackendError>;
}

mod iptables;
pub mod ipvs;
mod nftables;

pub use iptables::IptablesBackend;
pub use ipvs::IpvsBackend;
pub use nftables::NftBackend;

#[cfg(test)]
mod tests;
