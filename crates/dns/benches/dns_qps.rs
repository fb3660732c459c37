//! Queries per second and latency for cluster names, against a zone of 10,000 services
//! served by a single-threaded server (its own thread, a current-thread Tokio runtime).
//! The client is another thread keeping a fixed number of queries in flight over UDP on
//! loopback. Prints the figures; asserts nothing about time.
//!
//! `cargo bench -p cairn-dns --bench dns_qps` (`-- --secs 5` for longer runs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cairn_dns::{
    ClusterZone, DnsServer, EndpointInfo, PortInfo, ServerConfig, ServiceInfo, ServiceKind,
    SliceInfo, ZoneConfig,
};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};

const SERVICES: usize = 10_000;
const NAMESPACES: usize = 100;

fn port(name: &str, port: i32) -> PortInfo {
    PortInfo {
        name: name.into(),
        protocol: "TCP".into(),
        port,
    }
}

/// 10,000 services in 100 namespaces, each with two ports and a slice of two ready
/// endpoints; every tenth one headless.
fn cluster() -> (Vec<ServiceInfo>, Vec<SliceInfo>, Vec<String>) {
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("ns-{i}")).collect();
    let mut services = Vec::with_capacity(SERVICES);
    let mut slices = Vec::with_capacity(SERVICES);
    for i in 0..SERVICES {
        let ns = namespaces[i % NAMESPACES].clone();
        let name = format!("svc-{i}");
        let kind = if i % 10 == 0 {
            ServiceKind::Headless
        } else {
            ServiceKind::ClusterIp(vec![[10, 96, (i >> 8) as u8, i as u8].into()])
        };
        services.push(ServiceInfo {
            namespace: ns.clone(),
            name: name.clone(),
            kind,
            ports: vec![port("http", 80), port("metrics", 9090)],
        });
        let endpoints = (0..2u8)
            .map(|e| EndpointInfo {
                addresses: vec![[10, 244 + e, (i >> 8) as u8, i as u8].into()],
                hostname: None,
            })
            .collect();
        slices.push(SliceInfo {
            namespace: ns,
            name: format!("{name}-abcde"),
            service: name,
            ports: vec![port("http", 8080), port("metrics", 9090)],
            endpoints,
        });
    }
    (services, slices, namespaces)
}

/// Resident memory of this process, MiB.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

fn build_zone() -> ClusterZone {
    let (services, mut slices, namespaces) = cluster();
    let before = rss_mib();
    let started = Instant::now();
    let ns = || namespaces.iter().map(String::as_str);
    let zone = ClusterZone::build(&ZoneConfig::default(), &services, &slices, ns(), 1).unwrap();
    println!(
        "zone: {SERVICES} services, {} names, built in {:?}, +{:.0} MiB resident",
        zone.len(),
        started.elapsed(),
        rss_mib() - before
    );
    // One endpoint moves: the rebuild a watch event causes (best and median of 9).
    let mut next = zone;
    let mut took = Vec::new();
    for round in 0..9u8 {
        slices[4321].endpoints[0].addresses = vec![[10, 250, 0, round].into()];
        let started = Instant::now();
        next = next.rebuild(&services, &slices, ns(), 2).unwrap();
        took.push(started.elapsed());
    }
    took.sort();
    println!(
        "rebuilt after one endpoint change in {:?} (best), {:?} (median)",
        took[0], took[4]
    );
    next
}

/// Starts the server on its own thread with a current-thread runtime.
fn serve(zone: ClusterZone) -> SocketAddr {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let config = ServerConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..ServerConfig::default()
            };
            let server = DnsServer::bind(
                config,
                ClusterZone::pending(&ZoneConfig::default()).unwrap(),
            )
            .await
            .unwrap();
            server.set_zone(zone);
            tx.send(server.local_addr()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv().unwrap()
}

/// Encoded queries for `names`, IDs to be patched in.
fn queries(names: &[(String, RecordType)]) -> Vec<Vec<u8>> {
    names
        .iter()
        .map(|(n, t)| {
            let mut m = Message::query();
            m.metadata.recursion_desired = true;
            m.add_query(Query::query(Name::from_ascii(n).unwrap(), *t));
            m.to_vec().unwrap()
        })
        .collect()
}

struct Run {
    qps: f64,
    p50: Duration,
    p99: Duration,
    lost: usize,
}

/// Keeps `window` queries in flight for `secs`, cycling through `packets`.
fn load(addr: SocketAddr, packets: &[Vec<u8>], window: usize, secs: f64) -> Run {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut sent_at: Vec<Option<Instant>> = vec![None; 65536];
    let mut latencies = Vec::new();
    let (mut next, mut in_flight, mut lost) = (0usize, 0usize, 0usize);
    let mut buf = [0u8; 4096];
    let send = |next: &mut usize, sent_at: &mut Vec<Option<Instant>>| {
        let mut p = packets[*next % packets.len()].clone();
        let id = (*next % 65536) as u16;
        p[..2].copy_from_slice(&id.to_be_bytes());
        sent_at[usize::from(id)] = Some(Instant::now());
        sock.send(&p).unwrap();
        *next += 1;
    };
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        while in_flight < window {
            send(&mut next, &mut sent_at);
            in_flight += 1;
        }
        match sock.recv(&mut buf) {
            Ok(n) if n >= 12 => {
                let id = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                if let Some(t) = sent_at[id].take() {
                    latencies.push(t.elapsed());
                    in_flight -= 1;
                }
            }
            Ok(_) => {}
            Err(_) => {
                lost += in_flight;
                in_flight = 0;
                sent_at.iter_mut().for_each(|s| *s = None);
            }
        }
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    Run {
        qps: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: pct(0.50),
        p99: pct(0.99),
        lost,
    }
}

fn report(label: &str, r: &Run) {
    println!(
        "{label:<44} {:>9.0} q/s   p50 {:>7.1} µs   p99 {:>7.1} µs   lost {}",
        r.qps,
        r.p50.as_secs_f64() * 1e6,
        r.p99.as_secs_f64() * 1e6,
        r.lost
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let addr = serve(build_zone());
    let svc = |i: usize| format!("svc-{i}.ns-{}.svc.cluster.local.", i % NAMESPACES);
    // Spread over the whole zone so lookups are not all cache-hot.
    let stride = |n: usize| (0..n).map(|k| (k * 7919) % SERVICES);
    let a: Vec<_> = stride(SERVICES).map(|i| (svc(i), RecordType::A)).collect();
    let a = queries(&a);
    let mixed: Vec<_> = stride(SERVICES)
        .map(|i| match i % 4 {
            0 => (svc(i), RecordType::A),
            1 => (format!("_http._tcp.{}", svc(i)), RecordType::SRV),
            2 => (svc(i), RecordType::AAAA),
            _ => (format!("nope-{i}.ns-0.svc.cluster.local."), RecordType::A),
        })
        .collect();
    let mixed = queries(&mixed);
    load(addr, &a, 16, 0.5); // warm-up
    report("A, 1 in flight (latency)", &load(addr, &a, 1, secs));
    report("A, 16 in flight", &load(addr, &a, 16, secs));
    report("A, 64 in flight", &load(addr, &a, 64, secs));
    report(
        "A/SRV/NODATA/NXDOMAIN mix, 16 in flight",
        &load(addr, &mixed, 16, secs),
    );
}
