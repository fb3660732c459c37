//! Typed nftables operations (no IO), in netavark's manner: a renderer (the service proxy's
//! partial syncs) produces values of [`Op`], the netlink encoder in `cairn-netfilter`
//! takes them directly, and text is printed from the same values only where text is
//! needed: the `nft -f` fallback for operations the encoder does not know, the fakes, and
//! full syncs in `nft` block syntax. Nothing cairn writes is parsed back.
//!
//! The model covers what cairn's rulesets use, in the IPv4 (`ip`) family.

mod rule;

use std::fmt;
use std::net::Ipv4Addr;

pub use rule::{AddrField, Rule, Stmt};

/// A layer-4 protocol as nftables names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Sctp,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
        }
    }

    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
            Proto::Sctp => 132,
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A map key: a concatenation of address, protocol and port, or protocol and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// `A . proto . port` (`ipv4_addr . inet_proto . inet_service`).
    AddrProtoPort(Ipv4Addr, Proto, u16),
    /// `proto . port` (`inet_proto . inet_service`).
    ProtoPort(Proto, u16),
}

impl Key {
    /// The key as the kernel stores a concatenation: each field padded to 4 bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let proto_port = |out: &mut Vec<u8>, p: Proto, port: u16| {
            out.extend_from_slice(&[p.number(), 0, 0, 0]);
            out.extend_from_slice(&port.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        };
        let mut out = Vec::with_capacity(12);
        match *self {
            Key::AddrProtoPort(a, p, port) => {
                out.extend_from_slice(&a.octets());
                proto_port(&mut out, p, port);
            }
            Key::ProtoPort(p, port) => proto_port(&mut out, p, port),
        }
        out
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::AddrProtoPort(a, p, port) => write!(f, "{a} . {p} . {port}"),
            Key::ProtoPort(p, port) => write!(f, "{p} . {port}"),
        }
    }
}

/// A verdict map element's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    Goto(String),
    Drop,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Goto(chain) => write!(f, "goto {chain}"),
            Verdict::Drop => f.write_str("drop"),
        }
    }
}

/// A set of IPv4 addresses that rules add to (`update @set`) and whose elements expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DynamicAddrSet {
    pub timeout_seconds: u32,
}

impl fmt::Display for DynamicAddrSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "type ipv4_addr; flags dynamic,timeout; timeout {}s;",
            self.timeout_seconds
        )
    }
}

/// One command of a transaction, on a table of the `ip` family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    AddChain {
        table: String,
        chain: String,
    },
    FlushChain {
        table: String,
        chain: String,
    },
    DeleteChain {
        table: String,
        chain: String,
    },
    AddSet {
        table: String,
        set: String,
        definition: DynamicAddrSet,
    },
    DeleteSet {
        table: String,
        set: String,
    },
    AddRule {
        table: String,
        chain: String,
        rule: Rule,
    },
    AddElements {
        table: String,
        map: String,
        items: Vec<(Key, Verdict)>,
    },
    DeleteElements {
        table: String,
        map: String,
        keys: Vec<Key>,
    },
}

fn joined<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl fmt::Display for Op {
    /// The `nft` command, without a newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::AddChain { table, chain } => write!(f, "add chain ip {table} {chain}"),
            Op::FlushChain { table, chain } => write!(f, "flush chain ip {table} {chain}"),
            Op::DeleteChain { table, chain } => write!(f, "delete chain ip {table} {chain}"),
            Op::AddSet {
                table,
                set,
                definition,
            } => write!(f, "add set ip {table} {set} {{ {definition} }}"),
            Op::DeleteSet { table, set } => write!(f, "delete set ip {table} {set}"),
            Op::AddRule { table, chain, rule } => write!(f, "add rule ip {table} {chain} {rule}"),
            Op::AddElements { table, map, items } => {
                write!(f, "add element ip {table} {map} {{ ")?;
                let items: Vec<String> = items.iter().map(|(k, v)| format!("{k} : {v}")).collect();
                joined(f, &items)?;
                f.write_str(" }")
            }
            Op::DeleteElements { table, map, keys } => {
                write!(f, "delete element ip {table} {map} {{ ")?;
                joined(f, keys)?;
                f.write_str(" }")
            }
        }
    }
}

/// The operations as an `nft -f` script, one command per line.
pub fn script(ops: &[Op]) -> String {
    let mut out = String::new();
    for op in ops {
        out.push_str(&op.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
