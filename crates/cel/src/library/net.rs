//! `ip()`, `isIP()`, `cidr()`, `isCIDR()` and their methods, with Go's
//! `net/netip` rules as upstream applies them: no zones, no IPv4-mapped IPv6
//! addresses, no leading zeros.

use super::{fail, opaque_val};
use cel::common::types::{CelBool, CelInt, CelString};
use cel::{DeclarationError, Env, ExecutionError};
use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ip(IpAddr);
opaque_val!(Ip, IP_TYPE, "net.IP");

/// A prefix as Go keeps it: the address is not masked (`masked()` does that).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    bits: u8,
}
opaque_val!(Cidr, CIDR_TYPE, "net.IPPrefix");

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn string_to_ip: (CelString) -> Result<Ip>, name = "ip", id = "string_to_ip")?;
    cel::add_overload!(env, fn is_ip: (CelString) -> CelBool, name = "isIP", id = "is_ip")?;
    cel::add_overload!(env, fn ip_is_canonical: (CelString) -> Result<CelBool>, name = "ip.isCanonical", id = "ip_is_canonical")?;
    cel::add_overload!(env, fn ip_to_string: (Ip) -> CelString, name = "string", id = "ip_to_string")?;
    cel::add_member_overload!(env, fn family: (Ip) -> CelInt, id = "ip_family")?;
    cel::add_member_overload!(env, fn is_unspecified: (Ip) -> CelBool, id = "ip_is_unspecified")?;
    cel::add_member_overload!(env, fn is_loopback: (Ip) -> CelBool, id = "ip_is_loopback")?;
    cel::add_member_overload!(env, fn is_link_local_multicast: (Ip) -> CelBool, id = "ip_is_link_local_multicast")?;
    cel::add_member_overload!(env, fn is_link_local_unicast: (Ip) -> CelBool, id = "ip_is_link_local_unicast")?;
    cel::add_member_overload!(env, fn is_global_unicast: (Ip) -> CelBool, id = "ip_is_global_unicast")?;
    cel::add_overload!(env, fn string_to_cidr: (CelString) -> Result<Cidr>, name = "cidr", id = "string_to_cidr")?;
    cel::add_overload!(env, fn is_cidr: (CelString) -> CelBool, name = "isCIDR", id = "is_cidr")?;
    cel::add_overload!(env, fn cidr_to_string: (Cidr) -> CelString, name = "string", id = "cidr_to_string")?;
    cel::add_member_overload!(env, fn contains_ip: (Cidr, Ip) -> CelBool, name = "containsIP", id = "cidr_contains_ip_ip")?;
    cel::add_member_overload!(env, fn contains_ip_string: (Cidr, CelString) -> Result<CelBool>, name = "containsIP", id = "cidr_contains_ip_string")?;
    cel::add_member_overload!(env, fn contains_cidr: (Cidr, Cidr) -> CelBool, name = "containsCIDR", id = "cidr_contains_cidr")?;
    cel::add_member_overload!(env, fn contains_cidr_string: (Cidr, CelString) -> Result<CelBool>, name = "containsCIDR", id = "cidr_contains_cidr_string")?;
    cel::add_member_overload!(env, fn cidr_ip: (Cidr) -> Ip, name = "ip", id = "cidr_ip")?;
    cel::add_member_overload!(env, fn prefix_length: (Cidr) -> CelInt, id = "cidr_prefix_length")?;
    cel::add_member_overload!(env, fn masked: (Cidr) -> Cidr, id = "cidr_masked")?;
    Ok(())
}

/// Go's `netip.ParseAddr` plus upstream's extra refusals. Rust's parser
/// already refuses zones and IPv4 octets with leading zeros, as Go's does.
pub(crate) fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let addr: IpAddr = raw.parse().map_err(|_| {
        format!("IP Address {raw:?} parse error during conversion from string: ParseAddr({raw:?}): unable to parse IP")
    })?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
        }
    }
    Ok(addr)
}

fn string_to_ip(s: &CelString<'_>) -> Result<Ip, ExecutionError> {
    parse_ip(s.inner()).map(Ip).map_err(|e| fail("ip", e))
}

fn is_ip(s: &CelString<'_>) -> CelBool {
    parse_ip(s.inner()).is_ok().into()
}

fn ip_is_canonical(s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let addr = parse_ip(s.inner()).map_err(|e| fail("ip.isCanonical", e))?;
    Ok((addr.to_string() == s.inner()).into())
}

fn ip_to_string(ip: &Ip) -> CelString<'static> {
    ip.0.to_string().into()
}

fn family(ip: &Ip) -> CelInt {
    match ip.0 {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 6,
    }
    .into()
}

fn is_unspecified(ip: &Ip) -> CelBool {
    ip.0.is_unspecified().into()
}

fn is_loopback(ip: &Ip) -> CelBool {
    ip.0.is_loopback().into()
}

fn is_link_local_multicast(ip: &Ip) -> CelBool {
    match ip.0 {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
    .into()
}

fn link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_unicast(ip: &Ip) -> CelBool {
    link_local_unicast(ip.0).into()
}

/// Go's definition: anything but unspecified, loopback, multicast,
/// link-local unicast and the IPv4 broadcast address; private ranges count.
fn is_global_unicast(ip: &Ip) -> CelBool {
    let broadcast = matches!(ip.0, IpAddr::V4(v4) if v4.is_broadcast());
    (!broadcast
        && !ip.0.is_unspecified()
        && !ip.0.is_loopback()
        && !ip.0.is_multicast()
        && !link_local_unicast(ip.0))
    .into()
}

/// Go's `netip.ParsePrefix`: `addr/bits`, bits in decimal without leading
/// zeros, within the family's width.
pub(crate) fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let err = |why: &str| {
        format!(
            "network address parse error during conversion from string: network address parse error \
             during conversion from string: netip.ParsePrefix({raw:?}): {why}"
        )
    };
    let (addr, bits) = raw.split_once('/').ok_or_else(|| err("no '/'"))?;
    let addr =
        parse_ip(addr).map_err(|_| err(&format!("ParseAddr({addr:?}): unable to parse IP")))?;
    let valid_digits = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let max = if addr.is_ipv4() { 32 } else { 128 };
    match bits.parse::<u8>() {
        Ok(n) if valid_digits && n <= max => Ok(Cidr { addr, bits: n }),
        _ => Err(err(&format!("bad bits after slash: {bits:?}"))),
    }
}

fn string_to_cidr(s: &CelString<'_>) -> Result<Cidr, ExecutionError> {
    parse_cidr(s.inner()).map_err(|e| fail("cidr", e))
}

fn is_cidr(s: &CelString<'_>) -> CelBool {
    parse_cidr(s.inner()).is_ok().into()
}

fn cidr_to_string(c: &Cidr) -> CelString<'static> {
    format!("{}/{}", c.addr, c.bits).into()
}

/// `addr` with all but its first `bits` bits cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

fn contains(c: &Cidr, addr: IpAddr) -> bool {
    c.addr.is_ipv4() == addr.is_ipv4() && mask(addr, c.bits) == mask(c.addr, c.bits)
}

fn contains_ip(c: &Cidr, ip: &Ip) -> CelBool {
    contains(c, ip.0).into()
}

fn contains_ip_string(c: &Cidr, s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let addr = parse_ip(s.inner()).map_err(|e| fail("containsIP", e))?;
    Ok(contains(c, addr).into())
}

fn contains_cidr(c: &Cidr, other: &Cidr) -> CelBool {
    (c.bits <= other.bits && contains(c, other.addr)).into()
}

fn contains_cidr_string(c: &Cidr, s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let other = parse_cidr(s.inner()).map_err(|e| fail("containsCIDR", e))?;
    Ok(contains_cidr(c, &other))
}

fn cidr_ip(c: &Cidr) -> Ip {
    Ip(c.addr)
}

fn prefix_length(c: &Cidr) -> CelInt {
    i64::from(c.bits).into()
}

fn masked(c: &Cidr) -> Cidr {
    Cidr {
        addr: mask(c.addr, c.bits),
        bits: c.bits,
    }
}
