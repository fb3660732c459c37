//! The server on loopback: cluster names over UDP and TCP (raw messages and hickory's
//! resolver), forwarding to a local upstream with caching, truncation, zone swaps, and
//! garbage.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use cairn_dns::{ClusterZone, ZoneConfig};
use common::*;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::Resolver;

async fn both(addr: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let m = query(name, qtype, true);
    let over_udp = udp(addr, &m).await;
    let over_tcp = tcp(addr, &m).await;
    assert_eq!(
        show(&over_udp.answers),
        show(&over_tcp.answers),
        "{name} {qtype}"
    );
    assert_eq!(
        over_udp.metadata.response_code,
        over_tcp.metadata.response_code
    );
    over_udp
}

#[tokio::test]
async fn cluster_names_over_udp_and_tcp() {
    let server = start(cluster_zone(), vec![]).await;
    let addr = server.local_addr();

    let a = both(addr, "web.default.svc.cluster.local.", RecordType::A).await;
    assert!(a.metadata.authoritative && a.metadata.recursion_available);
    assert_eq!(
        show(&a.answers),
        ["web.default.svc.cluster.local. A 10.96.0.10"]
    );
    assert!(a.edns.is_some(), "OPT answered with OPT");

    let headless = both(addr, "db.apps.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        show(&headless.answers),
        [
            "db.apps.svc.cluster.local. A 10.244.1.10",
            "db.apps.svc.cluster.local. A 10.244.2.11"
        ]
    );
    let pod = both(addr, "db-1.db.apps.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        show(&pod.answers),
        ["db-1.db.apps.svc.cluster.local. A 10.244.2.11"]
    );

    let srv = both(addr, "_pg._tcp.db.apps.svc.cluster.local.", RecordType::SRV).await;
    assert_eq!(
        show(&srv.answers),
        [
            "_pg._tcp.db.apps.svc.cluster.local. SRV 0 50 5432 db-0.db.apps.svc.cluster.local.",
            "_pg._tcp.db.apps.svc.cluster.local. SRV 0 50 5432 db-1.db.apps.svc.cluster.local.",
        ]
    );
    assert_eq!(
        show(&srv.additionals),
        [
            "db-0.db.apps.svc.cluster.local. A 10.244.1.10",
            "db-1.db.apps.svc.cluster.local. A 10.244.2.11"
        ]
    );

    let ptr = both(addr, "10.0.96.10.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(
        show(&ptr.answers),
        ["10.0.96.10.in-addr.arpa. PTR web.default.svc.cluster.local."]
    );

    // So far all answered from pre-rendered records.
    let stats = server.stats();
    assert_eq!(stats.fast, stats.queries, "{stats:?}");

    let cname = both(addr, "search.default.svc.cluster.local.", RecordType::CNAME).await;
    assert_eq!(
        show(&cname.answers),
        ["search.default.svc.cluster.local. CNAME www.example.com."]
    );

    let pod_ip = both(addr, "10-244-7-7.apps.pod.cluster.local.", RecordType::A).await;
    assert_eq!(
        show(&pod_ip.answers),
        ["10-244-7-7.apps.pod.cluster.local. A 10.244.7.7"]
    );
    // ExternalName and pod names are computed on the general path.
    assert_eq!(server.stats().fast, stats.fast);
}

#[tokio::test]
async fn nxdomain_and_nodata_carry_the_soa() {
    let server = start(cluster_zone(), vec![]).await;
    let addr = server.local_addr();
    for (name, qtype, rcode) in [
        (
            "nope.default.svc.cluster.local.",
            RecordType::A,
            ResponseCode::NXDomain,
        ),
        (
            "web.nope.svc.cluster.local.",
            RecordType::A,
            ResponseCode::NXDomain,
        ),
        (
            "web.default.svc.cluster.local.",
            RecordType::AAAA,
            ResponseCode::NoError,
        ),
        (
            "default.svc.cluster.local.",
            RecordType::A,
            ResponseCode::NoError,
        ),
        (
            "10-244-7-7.nope.pod.cluster.local.",
            RecordType::A,
            ResponseCode::NXDomain,
        ),
    ] {
        for edns in [false, true] {
            let m = query(name, qtype, edns);
            for r in [udp(addr, &m).await, tcp(addr, &m).await] {
                assert_eq!(r.metadata.response_code, rcode, "{name} {qtype}");
                assert!(r.metadata.authoritative, "{name}");
                assert!(r.answers.is_empty(), "{name}");
                assert_eq!(
                    show(&r.authorities),
                    ["cluster.local. SOA ns.dns.cluster.local. hostmaster.cluster.local. 7 7200 1800 86400 5"],
                    "{name}"
                );
                assert_eq!(r.edns.is_some(), edns);
            }
        }
    }
    let axfr = udp(addr, &query("cluster.local.", RecordType::AXFR, false)).await;
    assert_eq!(axfr.metadata.response_code, ResponseCode::Refused);
}

#[tokio::test]
async fn the_question_keeps_the_clients_case() {
    let server = start(cluster_zone(), vec![]).await;
    let m = query("WeB.DeFault.SVC.cluster.LOCAL.", RecordType::A, false);
    let r = udp(server.local_addr(), &m).await;
    assert_eq!(
        r.queries[0].name().to_ascii(),
        "WeB.DeFault.SVC.cluster.LOCAL."
    );
    assert_eq!(
        show(&r.answers),
        ["web.default.svc.cluster.local. A 10.96.0.10"]
    );
}

#[tokio::test]
async fn large_answers_are_truncated_over_udp_and_whole_over_tcp() {
    let server = start(cluster_zone(), vec![]).await;
    let addr = server.local_addr();
    let m = query("many.apps.svc.cluster.local.", RecordType::A, false);
    let small = udp(addr, &m).await;
    assert!(small.metadata.truncation);
    assert!(
        !small.answers.is_empty() && small.answers.len() < 100,
        "{}",
        small.answers.len()
    );
    let m = query("many.apps.svc.cluster.local.", RecordType::A, true);
    let edns = udp(addr, &m).await;
    assert!(edns.metadata.truncation && edns.answers.len() > small.answers.len());
    assert!(edns.edns.is_some(), "OPT kept when truncated");
    let whole = tcp(addr, &m).await;
    assert!(!whole.metadata.truncation);
    assert_eq!(whole.answers.len(), 100);
}

#[tokio::test]
async fn forwards_other_names_and_caches_the_answers() {
    let up = upstream().await;
    let server = start(cluster_zone(), vec![up.addr]).await;
    let addr = server.local_addr();

    let first = udp(addr, &query("www.example.com.", RecordType::A, false)).await;
    assert_eq!(show(&first.answers), ["www.example.com. A 93.184.216.34"]);
    assert!(!first.metadata.authoritative && first.metadata.recursion_available);
    let hits = up.hits();
    let again = tcp(addr, &query("WWW.example.com.", RecordType::A, false)).await;
    assert_eq!(show(&again.answers), ["www.example.com. A 93.184.216.34"]);
    assert_eq!(up.hits(), hits, "second answer from the cache");
    assert!(again.answers[0].ttl <= 300);

    let nx = udp(addr, &query("nx.example.com.", RecordType::A, true)).await;
    assert_eq!(
        nx.metadata.response_code,
        ResponseCode::NXDomain,
        "relayed as it came"
    );
    assert_eq!(show(&nx.authorities).len(), 1);
    let hits = up.hits();
    let nx2 = udp(addr, &query("nx.example.com.", RecordType::A, true)).await;
    assert_eq!(nx2.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(up.hits(), hits, "negative answer cached");

    let nodata = udp(addr, &query("www.example.com.", RecordType::AAAA, false)).await;
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty() && nodata.authorities.len() == 1);

    let txt = udp(addr, &query("txt.example.com.", RecordType::TXT, false)).await;
    assert_eq!(show(&txt.answers), ["txt.example.com. TXT hello"]);

    // Truncated upstream answer: fetched again over TCP.
    let big = tcp(addr, &query("big.example.com.", RecordType::A, true)).await;
    assert_eq!(big.answers.len(), 40);

    // Reverse names that are not cluster addresses go upstream too.
    let rev = udp(
        addr,
        &query("1.2.0.192.in-addr.arpa.", RecordType::PTR, false),
    )
    .await;
    assert_eq!(rev.metadata.response_code, ResponseCode::NXDomain);
}

#[tokio::test]
async fn external_names_are_completed_from_upstream() {
    let up = upstream().await;
    let server = start(cluster_zone(), vec![up.addr]).await;
    let r = udp(
        server.local_addr(),
        &query("search.default.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(
        show(&r.answers),
        [
            "search.default.svc.cluster.local. CNAME www.example.com.",
            "www.example.com. A 93.184.216.34"
        ]
    );
    assert!(r.metadata.authoritative);
}

#[tokio::test]
async fn a_silent_upstream_is_skipped_and_none_left_is_servfail() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up = upstream().await;
    let server = start(cluster_zone(), vec![silent.local_addr().unwrap(), up.addr]).await;
    let r = udp(
        server.local_addr(),
        &query("www.example.com.", RecordType::A, false),
    )
    .await;
    assert_eq!(show(&r.answers), ["www.example.com. A 93.184.216.34"]);

    let lonely = start(cluster_zone(), vec![]).await;
    let r = udp(
        lonely.local_addr(),
        &query("www.example.com.", RecordType::A, false),
    )
    .await;
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    // Cluster names do not wait for upstreams.
    let r = udp(
        lonely.local_addr(),
        &query("web.default.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(r.answers.len(), 1);
}

#[tokio::test]
async fn zone_swaps_and_pending_zone() {
    let pending = ClusterZone::pending(&ZoneConfig::default()).unwrap();
    let server = start(pending, vec![]).await;
    let addr = server.local_addr();
    let r = udp(
        addr,
        &query("web.default.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(
        r.metadata.response_code,
        ResponseCode::ServFail,
        "not synced yet"
    );
    server.set_zone(cluster_zone());
    let r = udp(
        addr,
        &query("web.default.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(
        show(&r.answers),
        ["web.default.svc.cluster.local. A 10.96.0.10"]
    );
    assert_eq!(server.zone().serial(), 7);
}

fn resolver(addr: SocketAddr, tcp: bool) -> Resolver<TokioRuntimeProvider> {
    let mut ns = if tcp {
        NameServerConfig::tcp(addr.ip())
    } else {
        NameServerConfig::udp(addr.ip())
    };
    for c in &mut ns.connections {
        c.port = addr.port();
    }
    let config = ResolverConfig::from_parts(None, vec![], vec![ns]);
    let mut opts = ResolverOpts::default();
    opts.cache_size = 0;
    opts.attempts = 1;
    opts.timeout = Duration::from_secs(2);
    Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .unwrap()
}

#[tokio::test]
async fn hickory_resolver_over_udp_and_tcp() {
    let up = upstream().await;
    let server = start(cluster_zone(), vec![up.addr]).await;
    for over_tcp in [false, true] {
        let r = resolver(server.local_addr(), over_tcp);
        let ips: Vec<IpAddr> = r
            .lookup_ip("db.apps.svc.cluster.local.")
            .await
            .unwrap()
            .iter()
            .collect();
        assert_eq!(
            ips,
            [Ipv4Addr::new(10, 244, 1, 10), Ipv4Addr::new(10, 244, 2, 11)]
        );
        let srv = r
            .lookup("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV)
            .await
            .unwrap();
        let RData::SRV(s) = &srv.answers()[0].data else {
            panic!("srv")
        };
        assert_eq!(
            (s.port, s.target.to_ascii().as_str()),
            (80, "web.default.svc.cluster.local.")
        );
        let ptr = r
            .lookup(Name::from(Ipv4Addr::new(10, 244, 1, 10)), RecordType::PTR)
            .await
            .unwrap();
        assert_eq!(
            show(ptr.answers())[0],
            "10.1.244.10.in-addr.arpa. PTR db-0.db.apps.svc.cluster.local."
        );
        let nx = r
            .lookup_ip("nope.default.svc.cluster.local.")
            .await
            .unwrap_err();
        assert!(nx.is_nx_domain(), "{nx:?}");
        let nodata = r
            .lookup("web.default.svc.cluster.local.", RecordType::AAAA)
            .await
            .unwrap_err();
        assert!(
            nodata.is_no_records_found() && !nodata.is_nx_domain(),
            "{nodata:?}"
        );
        let out: Vec<IpAddr> = r
            .lookup_ip("www.example.com.")
            .await
            .unwrap()
            .iter()
            .collect();
        assert_eq!(out, [Ipv4Addr::new(93, 184, 216, 34)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_udp_sockets_share_the_port() {
    let config = cairn_dns::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        udp_sockets: 3,
        ..cairn_dns::ServerConfig::default()
    };
    let server = cairn_dns::DnsServer::bind(config, cluster_zone())
        .await
        .unwrap();
    for _ in 0..30 {
        // A fresh source port each time, so the kernel spreads them over the sockets.
        let r = udp(
            server.local_addr(),
            &query("web.default.svc.cluster.local.", RecordType::A, false),
        )
        .await;
        assert_eq!(r.answers.len(), 1);
    }
    let r = tcp(
        server.local_addr(),
        &query("web.default.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(r.answers.len(), 1);
}
