//! What the proxy's benchmarks share: the synthetic cluster, the peer's generator,
//! percentiles. (Not a benchmark itself: cargo only runs the files named in Cargo.toml.)

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cairn_serviceproxy::*;

/// The cluster IP of service `i`.
pub fn vip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + i + 1)
}

pub fn name(i: u32) -> ServicePortName {
    ServicePortName {
        namespace: "bench".into(),
        name: format!("svc-{i}"),
        port: String::new(),
        protocol: Protocol::Tcp,
    }
}

/// `n` ClusterIP services × 2 endpoints; service `changed` has its endpoints moved by
/// `variant` (so consecutive variants are one endpoint change each).
pub fn services(n: u32, variant: u32, changed: u32) -> ProxyState {
    (0..n)
        .map(|i| {
            let moved = if i == changed { variant * 100_000 } else { 0 };
            let ep = |k: u32| {
                let ip = u32::from(Ipv4Addr::new(10, 244, 0, 0)) + 2 * i + k + moved;
                Endpoint::ready(Ipv4Addr::from(ip), 8080)
            };
            let port = ServicePort {
                cluster_ip: Some(vip(i)),
                port: 80,
                ..Default::default()
            };
            (
                name(i),
                ServiceEntry::with_endpoints(port, vec![ep(1), ep(2)]),
            )
        })
        .collect()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// Runs the peer's `gen.py` (`../shared/peers/netfilter`) and keeps its output in `dir`.
pub fn peer_gen(dir: &Path, args: &[String]) -> PathBuf {
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/netfilter/gen.py");
    let path = dir.join(args.join("-"));
    let out = Command::new("python3")
        .arg(&gen)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gen.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, out.stdout).unwrap();
    path
}
