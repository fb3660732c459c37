//! Kernel-facing netfilter drivers, in netavark's manner: a narrow trait per mechanism,
//! a real driver and a fake, and one batch per change. For now nftables: a whole
//! transaction (`nft -f -`, atomic in the kernel) and table listing/removal. Callers
//! render their rules; this crate only applies them.

mod nft;

pub use nft::{find_binary, NftCommand, NftDriver, NftError, RecordingNft};
