//! cairn-cni: a bridge CNI plugin (CNI 1.1.0, also 0.3.x/0.4.0/1.0.0 configs) with
//! built-in host-local compatible IPAM and a cairn mode that reads the node's subnet from
//! the file the network controller writes.
//!
//! The CNI protocol (environment, stdin, result and error JSON, version negotiation) is
//! handled by `rscni-plugin`; this crate implements the operations in [`plugin`].

pub mod config;
pub mod ipam;
pub mod masq;
pub mod netctl;
pub mod plugin;

use std::process::ExitCode;

/// FNV-1a over the parts (separated by NUL): stable short names for host veths and chains.
pub fn fnv64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in p.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Runs the plugin for one invocation and returns the process exit code.
pub fn run() -> ExitCode {
    let plugin = rscni_plugin::cni::Plugin::default().msg("cairn-cni bridge plugin");
    match plugin.run(&plugin::Bridge) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
