//! Kernel-facing netfilter drivers, in netavark's manner: a narrow trait per mechanism,
//! a real driver and a fake, and one batch per change: nftables (`nft -f -`, one atomic
//! transaction, and table listing/removal, with rule handles when asked) and iptables
//! (`iptables-restore --noflush`, `iptables-save`, nft or legacy). Callers render their
//! rules; this crate only applies them.

mod command;
pub mod conntrack;
mod iptables;
pub mod ipvs;
mod netlink;
mod nft;
mod nft_batch;
mod nft_error;

pub use conntrack::{ConntrackDriver, ConntrackError, ConntrackNetlink, FakeConntrack};
pub use iptables::{
    IptablesCommand, IptablesDriver, IptablesError, IptablesVariant, RecordingIptables,
};
pub use ipvs::{FakeIpvs, IpvsDriver, IpvsError, IpvsNetlink, RealServer, VirtualServer};
pub use nft::{find_binary, NftCommand, NftDriver, NftError, RecordingNft};
