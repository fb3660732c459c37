//! A rule: statements in the order the kernel evaluates them.

use std::fmt;
use std::net::Ipv4Addr;

use ipnetwork::Ipv4Network;

use crate::Proto;

/// Which address of the IPv4 header a match reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrField {
    Saddr,
    Daddr,
}

impl AddrField {
    pub fn name(self) -> &'static str {
        match self {
            AddrField::Saddr => "saddr",
            AddrField::Daddr => "daddr",
        }
    }

    /// Its offset in the IPv4 header.
    pub fn offset(self) -> u32 {
        match self {
            AddrField::Saddr => 12,
            AddrField::Daddr => 16,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `ip saddr|daddr [!=] NET` (a /32 printed as its address).
    Addr {
        field: AddrField,
        equal: bool,
        net: Ipv4Network,
    },
    /// `ip saddr @SET`.
    SaddrInSet(String),
    /// `meta l4proto P`.
    L4Proto(Proto),
    /// `numgen random mod N == 0`: true once in N.
    OneIn(u32),
    /// `meta mark set meta mark | BITS`.
    MarkOr(u32),
    /// `update @SET { ip saddr }`: adds the source address to a dynamic set.
    RememberSaddr(String),
    /// `dnat to A:P`.
    Dnat(Ipv4Addr, u16),
    Jump(String),
    Goto(String),
}

impl Stmt {
    /// `ip FIELD ADDR`: one address.
    pub fn addr_is(field: AddrField, addr: Ipv4Addr) -> Stmt {
        Stmt::Addr {
            field,
            equal: true,
            net: Ipv4Network::from(addr),
        }
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stmt::Addr { field, equal, net } => {
                let field = field.name();
                let op = if *equal { "" } else { "!= " };
                if net.prefix() == 32 {
                    write!(f, "ip {field} {op}{}", net.ip())
                } else {
                    write!(f, "ip {field} {op}{net}")
                }
            }
            Stmt::SaddrInSet(set) => write!(f, "ip saddr @{set}"),
            Stmt::L4Proto(p) => write!(f, "meta l4proto {p}"),
            Stmt::OneIn(n) => write!(f, "numgen random mod {n} == 0"),
            Stmt::MarkOr(bits) => write!(f, "meta mark set meta mark | {bits:#010x}"),
            Stmt::RememberSaddr(set) => write!(f, "update @{set} {{ ip saddr }}"),
            Stmt::Dnat(a, port) => write!(f, "dnat to {a}:{port}"),
            Stmt::Jump(chain) => write!(f, "jump {chain}"),
            Stmt::Goto(chain) => write!(f, "goto {chain}"),
        }
    }
}

/// A rule's statements; printed separated by spaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Rule(pub Vec<Stmt>);

impl Rule {
    pub fn new(stmts: impl IntoIterator<Item = Stmt>) -> Rule {
        Rule(stmts.into_iter().collect())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}
