//! The subset of `nft` commands a partial sync of the service proxy writes, parsed into
//! operations. Anything outside it (block syntax, sets, lookups, other statements) is
//! `None`, and the caller hands the script to `nft -f` unchanged.

use std::net::Ipv4Addr;

/// One expression of a rule, in the order the kernel evaluates them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    /// Loads `len` bytes of the network header at `offset` into register 1.
    Payload { offset: u32, len: u32 },
    /// Compares register 1 with `data`.
    Cmp { equal: bool, data: Vec<u8> },
    /// Loads the layer-4 protocol into register 1.
    MetaL4Proto,
    /// A random number below `modulus` into register 1.
    Numgen { modulus: u32 },
    /// Jumps (`goto` false) or goes to a chain.
    Verdict { goto: bool, chain: String },
    /// DNAT to an address and port.
    Dnat { address: Ipv4Addr, port: u16 },
    /// `meta mark set meta mark | bits`.
    MarkOr { bits: u32 },
}

/// A map element's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ElementVerdict {
    Goto(String),
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
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
    AddRule {
        table: String,
        chain: String,
        exprs: Vec<Expr>,
    },
    DeleteElements {
        table: String,
        map: String,
        keys: Vec<Vec<u8>>,
    },
    AddElements {
        table: String,
        map: String,
        items: Vec<(Vec<u8>, ElementVerdict)>,
    },
}

fn protocol_number(p: &str) -> Option<u8> {
    match p {
        "tcp" => Some(6),
        "udp" => Some(17),
        "sctp" => Some(132),
        _ => None,
    }
}

/// A map key: `A . proto . port` or `proto . port`, each field padded to 4 bytes as the
/// kernel stores concatenations.
fn key(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for field in text.split(" . ").map(str::trim) {
        if let Ok(ip) = field.parse::<Ipv4Addr>() {
            out.extend_from_slice(&ip.octets());
        } else if let Some(p) = protocol_number(field) {
            out.extend_from_slice(&[p, 0, 0, 0]);
        } else {
            let port: u16 = field.parse().ok()?;
            out.extend_from_slice(&port.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
    }
    Some(out)
}

fn verdict(text: &str) -> Option<ElementVerdict> {
    match text.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["goto", chain] => Some(ElementVerdict::Goto(chain.to_string())),
        ["drop"] => Some(ElementVerdict::Drop),
        _ => None,
    }
}

/// `{ a, b }` → the items.
fn braces(rest: &str) -> Option<Vec<&str>> {
    let inner = rest.trim().strip_prefix('{')?.strip_suffix('}')?;
    Some(
        inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

fn address(addr: &str) -> Option<[u8; 4]> {
    addr.parse::<Ipv4Addr>().ok().map(|a| a.octets())
}

/// `ip saddr|daddr [!=] A[/N]` at the front of `words`: how many words it took.
fn ip_match(words: &[&str], exprs: &mut Vec<Expr>) -> Option<usize> {
    let offset = match *words.get(1)? {
        "saddr" => 12,
        "daddr" => 16,
        _ => return None,
    };
    let (equal, value) = match *words.get(2)? {
        "!=" => (false, *words.get(3)?),
        v => (true, v),
    };
    let (ip, prefix) = match value.split_once('/') {
        Some((ip, p)) => (address(ip)?, p.parse::<u32>().ok()?),
        None => (address(value)?, 32),
    };
    // Only whole-byte prefixes: nft compares their leading bytes.
    if prefix == 0 || prefix > 32 || prefix % 8 != 0 {
        return None;
    }
    let len = prefix / 8;
    exprs.push(Expr::Payload { offset, len });
    exprs.push(Expr::Cmp {
        equal,
        data: ip[..len as usize].to_vec(),
    });
    Some(if equal { 3 } else { 4 })
}

/// A rule of the shapes the proxy writes; None for anything else.
pub(crate) fn rule(text: &str) -> Option<Vec<Expr>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut exprs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            "ip" => i += ip_match(&words[i..], &mut exprs)?,
            "meta" if words.get(i + 1) == Some(&"mark") => {
                let ["meta", "mark", "set", "meta", "mark", "|", bits, ..] = &words[i..] else {
                    return None;
                };
                let bits = u32::from_str_radix(bits.strip_prefix("0x")?, 16).ok()?;
                exprs.push(Expr::MarkOr { bits });
                i += 7;
            }
            "meta" if words.get(i + 1) == Some(&"l4proto") => {
                let p = protocol_number(words.get(i + 2)?)?;
                exprs.push(Expr::MetaL4Proto);
                exprs.push(Expr::Cmp {
                    equal: true,
                    data: vec![p],
                });
                i += 3;
            }
            "numgen" => {
                let ["numgen", "random", "mod", n, "==", "0", ..] = &words[i..] else {
                    return None;
                };
                exprs.push(Expr::Numgen {
                    modulus: n.parse().ok()?,
                });
                exprs.push(Expr::Cmp {
                    equal: true,
                    data: vec![0, 0, 0, 0],
                });
                i += 6;
            }
            "jump" | "goto" if i + 2 == words.len() => {
                let goto = words[i] == "goto";
                exprs.push(Expr::Verdict {
                    goto,
                    chain: words[i + 1].to_string(),
                });
                i += 2;
            }
            "dnat" if i + 3 == words.len() && words[i + 1] == "to" => {
                let (a, p) = words[i + 2].split_once(':')?;
                exprs.push(Expr::Dnat {
                    address: a.parse().ok()?,
                    port: p.parse().ok()?,
                });
                i += 3;
            }
            _ => return None,
        }
    }
    Some(exprs)
}

/// `ip TABLE NAME [rest]` after a command word.
fn target(rest: &str) -> Option<(String, String, &str)> {
    let rest = rest.strip_prefix("ip ")?;
    let (table, rest) = rest.split_once(' ')?;
    let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((table.to_string(), name.to_string(), rest))
}

fn line(l: &str) -> Option<Op> {
    if let Some(rest) = l.strip_prefix("add chain ") {
        let (table, chain, "") = target(rest)? else {
            return None;
        };
        return Some(Op::AddChain { table, chain });
    }
    if let Some(rest) = l.strip_prefix("flush chain ") {
        let (table, chain, "") = target(rest)? else {
            return None;
        };
        return Some(Op::FlushChain { table, chain });
    }
    if let Some(rest) = l.strip_prefix("delete chain ") {
        let (table, chain, "") = target(rest)? else {
            return None;
        };
        return Some(Op::DeleteChain { table, chain });
    }
    if let Some(rest) = l.strip_prefix("add rule ") {
        let (table, chain, r) = target(rest)?;
        return Some(Op::AddRule {
            table,
            chain,
            exprs: rule(r)?,
        });
    }
    if let Some(rest) = l.strip_prefix("delete element ") {
        let (table, map, items) = target(rest)?;
        let keys = braces(items)?.into_iter().map(key).collect::<Option<_>>()?;
        return Some(Op::DeleteElements { table, map, keys });
    }
    if let Some(rest) = l.strip_prefix("add element ") {
        let (table, map, items) = target(rest)?;
        let items = braces(items)?
            .into_iter()
            .map(|item| {
                let (k, v) = item.split_once(" : ")?;
                Some((key(k)?, verdict(v)?))
            })
            .collect::<Option<_>>()?;
        return Some(Op::AddElements { table, map, items });
    }
    None
}

/// Every line of `script` as an operation, or None when one is outside the subset.
pub(crate) fn script(script: &str) -> Option<Vec<Op>> {
    script
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(line)
        .collect()
}
