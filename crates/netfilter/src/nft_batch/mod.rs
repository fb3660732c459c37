//! Typed nftables transactions ([`cairn_nft::Op`]) sent as one netlink batch, without
//! `nft`. Every `nft -f` first reads the table's chains and sets back from the kernel; at
//! 10,000 services that costs as much as the change itself (a one-element change: ~40 ms
//! through `nft`, ~20 ms as a batch). Operations the encoder does not know ([`lower`]:
//! sets) make the caller print the transaction for `nft -f` instead.

mod encode;
mod lower;

use cairn_nft::Op;

use netlink_sys::protocols::NETLINK_NETFILTER;

use crate::netlink::message::{error_code, NLMSG_ERROR, NLMSG_HDRLEN};
use crate::netlink::socket::{next_seqs, Socket};
use crate::nft_error::NftError;

fn failed(what: impl std::fmt::Display) -> NftError {
    NftError::Failed {
        args: "(netlink batch)".into(),
        stderr: what.to_string(),
    }
}

fn os_error(op: &str, e: std::io::Error) -> NftError {
    failed(format!("{op}: {e}"))
}

/// Applies `ops` as one batch; None when one cannot be lowered.
pub(crate) fn apply(ops: &[Op]) -> Option<Result<(), NftError>> {
    let lowered = lower::ops(ops)?;
    Some(send(&lowered, ops))
}

fn send(lowered: &[lower::KernelOp<'_>], ops: &[Op]) -> Result<(), NftError> {
    if lowered.is_empty() {
        return Ok(());
    }
    let op = "nftables batch";
    let first = next_seqs(lowered.len() + 2);
    let mut sock = Socket::open(NETLINK_NETFILTER, op, os_error)?;
    sock.send(op, &encode::batch(lowered, first))?;
    let mut acked = 0;
    while acked < lowered.len() {
        let data = sock.recv(op)?.to_vec();
        let mut at = 0;
        while at + NLMSG_HDRLEN <= data.len() {
            let len =
                u32::from_ne_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
            let kind = u16::from_ne_bytes([data[at + 4], data[at + 5]]);
            let seq =
                u32::from_ne_bytes([data[at + 8], data[at + 9], data[at + 10], data[at + 11]]);
            if len < NLMSG_HDRLEN || at + len > data.len() {
                return Err(failed("a truncated answer from the kernel"));
            }
            if kind == NLMSG_ERROR {
                let code = error_code(&data[at + NLMSG_HDRLEN..at + len])
                    .map_err(|_| failed("a truncated error from the kernel"))?;
                if code != 0 {
                    let index = seq.wrapping_sub(first).wrapping_sub(1) as usize;
                    let line = ops.get(index).map(Op::to_string);
                    let err = std::io::Error::from_raw_os_error(-code);
                    let line = line.as_deref().unwrap_or("the batch");
                    return Err(failed(format!("{line}: {err}")));
                }
                acked += 1;
            }
            at += (len + 3) & !3;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
