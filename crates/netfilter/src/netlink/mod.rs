//! The netlink plumbing both kernel drivers of this crate share: ctnetlink
//! (`conntrack`, over `NETLINK_NETFILTER`) and IPVS generic netlink (`ipvs`, over
//! `NETLINK_GENERIC`) frame their messages the same way and read their answers from the
//! same kind of blocking socket. Only that common layer lives here: each protocol keeps its
//! own family header (nfgenmsg, genlmsghdr), attribute numbers, decoders and the mapping
//! of failures to its own error type, so that the two stay independent of each other.

pub(crate) mod message;
pub(crate) mod socket;

/// Helpers of the byte-layout tests.
#[cfg(test)]
pub(crate) mod test_util {
    #![allow(clippy::unwrap_used)]

    use std::net::Ipv4Addr;

    /// Bytes from hex digits (whitespace ignored), as captures are pasted.
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    pub(crate) fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
}
