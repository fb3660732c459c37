#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;

use cairn_netfilter::ipvs::{FakeIpvs, IpvsCall};
use cairn_netfilter::RecordingNft;
use cairn_serviceproxy::{Endpoint, ServiceEntry, ServicePort, ServicePortName};

use super::*;

fn entry(vip: u8, eps: &[u8], node_port: Option<u16>) -> ServiceEntry {
    let port = ServicePort {
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, vip)),
        port: 80,
        node_port,
        ..Default::default()
    };
    let eps = eps.iter().map(|l| Endpoint {
        local: true,
        ..Endpoint::ready(Ipv4Addr::new(10, 244, 1, *l), 8080)
    });
    ServiceEntry::with_endpoints(port, eps.collect())
}

fn name(n: &str) -> ServicePortName {
    ServicePortName {
        namespace: "ns".into(),
        name: n.into(),
        port: String::new(),
        protocol: Protocol::Tcp,
    }
}

const NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 10);

fn backend() -> (Arc<FakeIpvs>, Arc<RecordingNft>, IpvsBackend) {
    let ipvs = Arc::new(FakeIpvs::new());
    let nft = Arc::new(RecordingNft::default());
    let host = FakeHost {
        local: vec![("lo".into(), Ipv4Addr::LOCALHOST), ("eth0".into(), NODE)],
        ..Default::default()
    };
    let b = IpvsBackend::new(
        ipvs.clone(),
        nft.clone(),
        Box::new(host),
        IpvsConfig::default(),
    );
    (ipvs, nft, b)
}

fn vs(ip: Ipv4Addr, port: u16) -> VirtualServer {
    VirtualServer::new(6, ip, port)
}

#[test]
fn the_first_sync_programs_virtual_servers_addresses_and_helper_rules() {
    let (ipvs, nft, mut b) = backend();
    let state: ProxyState = [(name("web"), entry(10, &[2, 3], Some(30080)))].into();
    assert!(b.sync(&state, false).unwrap().full);
    let table = ipvs.table.lock().clone();
    let vip = Ipv4Addr::new(10, 96, 0, 10);
    assert_eq!(table.len(), 2);
    assert_eq!(table[&(6, vip, 80)].1.len(), 2);
    assert_eq!(table[&(6, NODE, 30080)].1.len(), 2);
    assert!(nft.scripts.lock()[0].contains("table ip cairn-proxy-ipvs"));
    // Nothing changed: nothing written.
    let before = ipvs.changes().len();
    assert_eq!(b.sync(&state, false).unwrap().written, 0);
    assert_eq!(b.sync(&state, true).unwrap().written, 0);
    assert_eq!(ipvs.changes().len(), before);
}

#[test]
fn removed_real_servers_drain_while_they_have_connections() {
    let (ipvs, _, mut b) = backend();
    let vip = Ipv4Addr::new(10, 96, 0, 10);
    let state: ProxyState = [(name("web"), entry(10, &[2, 3], None))].into();
    b.sync(&state, false).unwrap();
    // 10.244.1.3 has a connection.
    ipvs.table.lock().get_mut(&(6, vip, 80)).unwrap().1[1].active_connections = 1;
    let fewer: ProxyState = [(name("web"), entry(10, &[2], None))].into();
    b.sync(&fewer, false).unwrap();
    let servers = ipvs.table.lock()[&(6, vip, 80)].1.clone();
    assert_eq!(servers.len(), 2);
    assert_eq!(
        (servers[1].address, servers[1].weight),
        (Ipv4Addr::new(10, 244, 1, 3), 0)
    );
    // Its connection ends: the next sync (nothing else changed) deletes it.
    ipvs.table.lock().get_mut(&(6, vip, 80)).unwrap().1[1].active_connections = 0;
    b.sync(&fewer, false).unwrap();
    assert_eq!(ipvs.table.lock()[&(6, vip, 80)].1.len(), 1);
}

#[test]
fn a_partial_sync_looks_only_at_changed_service_ports() {
    let (ipvs, _, mut b) = backend();
    let state: ProxyState = [
        (name("a"), entry(10, &[2], None)),
        (name("b"), entry(11, &[3], None)),
    ]
    .into();
    b.sync(&state, false).unwrap();
    ipvs.calls.lock().clear();
    let changed: ProxyState = [
        (name("a"), entry(10, &[2], None)),
        (name("b"), entry(11, &[4], None)),
    ]
    .into();
    b.sync(&changed, false).unwrap();
    let listed: Vec<IpvsCall> = ipvs
        .calls
        .lock()
        .iter()
        .filter(|c| matches!(c, IpvsCall::RealServers(_)))
        .cloned()
        .collect();
    assert_eq!(
        listed,
        [IpvsCall::RealServers(vs(Ipv4Addr::new(10, 96, 0, 11), 80))]
    );
}

#[test]
fn others_virtual_servers_survive_syncs_and_cleanup() {
    let (ipvs, nft, mut b) = backend();
    let theirs = vs(Ipv4Addr::new(192, 0, 2, 1), 80);
    ipvs.add_service(&theirs).unwrap();
    let state: ProxyState = [(name("web"), entry(10, &[2], Some(30080)))].into();
    b.sync(&state, true).unwrap();
    b.sync(&ProxyState::new(), true).unwrap();
    assert_eq!(
        ipvs.table.lock().len(),
        1,
        "the proxy's removed, theirs kept"
    );
    b.sync(&state, true).unwrap();
    b.cleanup().unwrap();
    let left: Vec<VirtualServer> = ipvs.table.lock().values().map(|(s, _)| s.clone()).collect();
    assert_eq!(left, [theirs]);
    assert!(nft
        .scripts
        .lock()
        .last()
        .unwrap()
        .contains("delete table ip cairn-proxy-ipvs"));
}

#[test]
fn affinity_is_persistence_and_the_scheduler_is_configurable() {
    let ipvs = Arc::new(FakeIpvs::new());
    let cfg = IpvsConfig {
        scheduler: "lc".into(),
        ..Default::default()
    };
    let mut b = IpvsBackend::new(
        ipvs.clone(),
        Arc::new(RecordingNft::default()),
        Box::new(FakeHost::default()),
        cfg,
    );
    let mut e = entry(10, &[2], None);
    e.port.affinity_seconds = Some(600);
    b.sync(&[(name("web"), e)].into(), false).unwrap();
    let s = ipvs.table.lock().values().next().unwrap().0.clone();
    assert_eq!(
        (s.scheduler.as_str(), s.persistent_timeout),
        ("lc", Some(600))
    );
}

#[test]
fn the_helper_table_is_reloaded_only_when_it_changes_or_on_full_syncs() {
    let (_, nft, mut b) = backend();
    let state: ProxyState = [(name("web"), entry(10, &[2, 3], None))].into();
    b.sync(&state, false).unwrap();
    b.sync(&state, false).unwrap();
    assert_eq!(nft.scripts.lock().len(), 1);
    let other: ProxyState = [(name("web"), entry(10, &[2, 4], None))].into();
    b.sync(&other, false).unwrap();
    assert_eq!(nft.scripts.lock().len(), 2, "hairpin set changed");
    b.sync(&other, true).unwrap();
    assert_eq!(nft.scripts.lock().len(), 3, "a full sync repairs drift");
}

#[test]
fn a_real_server_the_kernel_refuses_is_left_out_with_a_warning() {
    let (ipvs, _, mut b) = backend();
    let vip = Ipv4Addr::new(10, 96, 0, 10);
    let broadcast = Ipv4Addr::new(10, 244, 1, 255);
    ipvs.refused_real_servers.lock().insert(broadcast);
    let state: ProxyState = [
        (name("web"), entry(10, &[2, 255], None)),
        (name("api"), entry(11, &[4], None)),
    ]
    .into();
    let report = b.sync(&state, false).unwrap();
    let table = ipvs.table.lock().clone();
    let reals: Vec<Ipv4Addr> = table[&(6, vip, 80)].1.iter().map(|r| r.address).collect();
    assert_eq!(reals, [Ipv4Addr::new(10, 244, 1, 2)]);
    assert_eq!(table[&(6, Ipv4Addr::new(10, 96, 0, 11), 80)].1.len(), 1);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("10.244.1.255:8080") && report.warnings[0].contains("left out"),
        "{:?}",
        report.warnings
    );
    // The next sync reports it no more unless it tries again (a full one does).
    assert!(b.sync(&state, false).unwrap().warnings.is_empty());
    assert_eq!(b.sync(&state, true).unwrap().warnings.len(), 1);
}
