//! IPv4 address ranges for nftables interval sets: peers' addresses and `ipBlock`s less
//! their exceptions, merged so that no two elements overlap or touch (the kernel refuses
//! overlapping intervals, and a normalized set diffs element by element).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::IpNetwork;

use crate::compile::Block;

/// An inclusive range of IPv4 addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrRange(pub Ipv4Addr, pub Ipv4Addr);

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 == self.1 {
            true => write!(f, "{}", self.0),
            false => write!(f, "{}-{}", self.0, self.1),
        }
    }
}

fn span(net: &IpNetwork) -> Option<(u32, u32)> {
    match net {
        IpNetwork::V4(n) => Some((u32::from(n.network()), u32::from(n.broadcast()))),
        IpNetwork::V6(_) => None,
    }
}

/// `a` less `b`.
fn subtract(ranges: Vec<(u32, u32)>, (lo, hi): (u32, u32)) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (a, b) in ranges {
        if hi < a || lo > b {
            out.push((a, b));
            continue;
        }
        if lo > a {
            out.push((a, lo - 1));
        }
        if hi < b {
            out.push((hi + 1, b));
        }
    }
    out
}

/// The IPv4 part of a block: its CIDR less every exception.
pub fn block_ranges(block: &Block) -> Vec<(u32, u32)> {
    let Some(whole) = span(&block.cidr) else {
        return Vec::new();
    };
    block
        .except
        .iter()
        .filter_map(span)
        .fold(vec![whole], subtract)
}

/// Sorted, merged ranges of `addresses` and `blocks` (IPv6 ones left out: the pod
/// network is IPv4).
pub fn normalized<'a>(
    addresses: impl IntoIterator<Item = &'a IpAddr>,
    blocks: &[Block],
) -> Vec<AddrRange> {
    let mut spans: Vec<(u32, u32)> = addresses
        .into_iter()
        .filter_map(|a| match a {
            IpAddr::V4(v4) => Some((u32::from(*v4), u32::from(*v4))),
            IpAddr::V6(_) => None,
        })
        .collect();
    spans.extend(blocks.iter().flat_map(block_ranges));
    merge_touching(spans, |a| a.saturating_add(1))
        .into_iter()
        .map(|(a, b)| AddrRange(Ipv4Addr::from(a), Ipv4Addr::from(b)))
        .collect()
}

/// Sorts inclusive ranges and merges those that overlap or touch; `next` is a value's
/// successor, saturating at the type's end (addresses as u32, ports as u16).
pub(crate) fn merge_touching<T: Ord + Copy>(
    mut ranges: Vec<(T, T)>,
    next: impl Fn(T) -> T,
) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::new();
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= next(last.1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}
