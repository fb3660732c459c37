//! What applying or listing nftables can fail with, through `nft` or a netlink batch.

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
