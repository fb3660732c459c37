//! Typed operations lowered to the kernel's expressions. The statements that need sets
//! (`ip saddr @set`, `update @set`) and set commands are not lowered: a transaction with
//! one goes to `nft -f` whole, printed from the same values.

use std::net::Ipv4Addr;

use cairn_nft::{Op, Rule, Stmt, Verdict};

/// One expression of a rule, in the order the kernel evaluates them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    /// Loads `len` bytes of the network header at `offset` into register 1.
    Payload { offset: u32, len: u32 },
    /// Register 1 &= `mask` (as many bytes as the mask).
    Mask { mask: Vec<u8> },
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

/// An operation as the kernel takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelOp<'a> {
    AddChain(&'a str, &'a str),
    FlushChain(&'a str, &'a str),
    DeleteChain(&'a str, &'a str),
    AddRule(&'a str, &'a str, Vec<Expr>),
    DeleteElements(&'a str, &'a str, Vec<Vec<u8>>),
    AddElements(&'a str, &'a str, Vec<(Vec<u8>, &'a Verdict)>),
}

/// `ip FIELD [!=] NET`, as `nft` compiles it: whole-byte prefixes compare their leading
/// bytes, others mask the address first.
fn addr(stmt: &Stmt, exprs: &mut Vec<Expr>) -> Option<()> {
    let Stmt::Addr { field, equal, net } = stmt else {
        return None;
    };
    let (prefix, offset, equal) = (u32::from(net.prefix()), field.offset(), *equal);
    if prefix == 0 {
        return None;
    }
    let network = net.network().octets();
    if prefix % 8 == 0 {
        let len = prefix / 8;
        exprs.push(Expr::Payload { offset, len });
        exprs.push(Expr::Cmp {
            equal,
            data: network[..len as usize].to_vec(),
        });
    } else {
        exprs.push(Expr::Payload { offset, len: 4 });
        let mask = net.mask().octets().to_vec();
        exprs.push(Expr::Mask { mask });
        exprs.push(Expr::Cmp {
            equal,
            data: network.to_vec(),
        });
    }
    Some(())
}

/// The rule's expressions; None when a statement needs a set.
pub(crate) fn rule(rule: &Rule) -> Option<Vec<Expr>> {
    let mut exprs = Vec::new();
    for stmt in &rule.0 {
        match stmt {
            Stmt::Addr { .. } => addr(stmt, &mut exprs)?,
            Stmt::L4Proto(p) => {
                exprs.push(Expr::MetaL4Proto);
                exprs.push(Expr::Cmp {
                    equal: true,
                    data: vec![p.number()],
                });
            }
            Stmt::OneIn(modulus) => {
                exprs.push(Expr::Numgen { modulus: *modulus });
                exprs.push(Expr::Cmp {
                    equal: true,
                    data: vec![0; 4],
                });
            }
            Stmt::MarkOr(bits) => exprs.push(Expr::MarkOr { bits: *bits }),
            Stmt::Dnat(address, port) => exprs.push(Expr::Dnat {
                address: *address,
                port: *port,
            }),
            Stmt::Jump(chain) | Stmt::Goto(chain) => exprs.push(Expr::Verdict {
                goto: matches!(stmt, Stmt::Goto(_)),
                chain: chain.clone(),
            }),
            Stmt::SaddrInSet(_) | Stmt::RememberSaddr(_) => return None,
        }
    }
    Some(exprs)
}

fn op(op: &Op) -> Option<KernelOp<'_>> {
    Some(match op {
        Op::AddChain { table, chain } => KernelOp::AddChain(table, chain),
        Op::FlushChain { table, chain } => KernelOp::FlushChain(table, chain),
        Op::DeleteChain { table, chain } => KernelOp::DeleteChain(table, chain),
        Op::AddRule {
            table,
            chain,
            rule: r,
        } => KernelOp::AddRule(table, chain, rule(r)?),
        Op::DeleteElements { table, map, keys } => {
            KernelOp::DeleteElements(table, map, keys.iter().map(|k| k.bytes()).collect())
        }
        Op::AddElements { table, map, items } => {
            let items = items.iter().map(|(k, v)| (k.bytes(), v)).collect();
            KernelOp::AddElements(table, map, items)
        }
        Op::AddSet { .. } | Op::DeleteSet { .. } => return None,
    })
}

/// Every operation lowered, or None when one cannot be.
pub(crate) fn ops(ops: &[Op]) -> Option<Vec<KernelOp<'_>>> {
    ops.iter().map(op).collect()
}
