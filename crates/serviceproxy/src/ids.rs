//! Stable short names for a service port's and an endpoint's kernel objects (chains,
//! sets): a hash, so names stay within netfilter's length limits and the same object
//! keeps its name across restarts.

use crate::model::{Endpoint, ServicePortName};

fn fnv64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// 16 hex digits naming a service port (with its protocol).
pub fn service_id(n: &ServicePortName) -> String {
    format!("{:016x}", fnv64(&format!("{n}/{}", n.protocol.as_str())))
}

/// 16 hex digits naming an endpoint of the service port `svc` (a [`service_id`]).
pub fn endpoint_id(svc: &str, e: &Endpoint) -> String {
    format!("{:016x}", fnv64(&format!("{svc}/{}:{}", e.ip, e.port)))
}
