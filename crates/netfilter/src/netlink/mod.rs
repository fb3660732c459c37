//! The netlink plumbing both kernel drivers of this crate share: ctnetlink
//! (`conntrack`, over `NETLINK_NETFILTER`) and IPVS generic netlink (`ipvs`, over
//! `NETLINK_GENERIC`) frame their messages the same way and read their answers from the
//! same kind of blocking socket. Only that common layer lives here: each protocol keeps its
//! own family header (nfgenmsg, genlmsghdr), attribute numbers, decoders and the mapping
//! of failures to its own error type, so that the two stay independent of each other.

pub(crate) mod message;
pub(crate) mod socket;
