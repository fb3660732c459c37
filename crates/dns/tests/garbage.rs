//! Malformed packets: each kind gets the answer it should (nothing, FORMERR, NOTIMP,
//! BADVERS), and a flood of them does not keep cluster names from being answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use hickory_proto::op::{Edns, Message, OpCode, ResponseCode};
use hickory_proto::rr::RecordType;
use rand::{Rng, SeedableRng};
use tokio::net::UdpSocket;

fn header(id: u16, flags: u16, qd: u16, ar: u16) -> Vec<u8> {
    let mut h = Vec::new();
    for v in [id, flags, qd, 0, 0, ar] {
        h.extend_from_slice(&v.to_be_bytes());
    }
    h
}

fn pointer_loop() -> Vec<u8> {
    let mut p = header(7, 0x0100, 1, 0);
    p.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
    p
}

fn cut_question() -> Vec<u8> {
    let mut p = header(0x4242, 0x0100, 1, 0);
    p.push(63);
    p.extend_from_slice(b"abc");
    p
}

#[tokio::test]
async fn each_kind_of_junk_gets_its_answer() {
    let server = start(cluster_zone(), vec![]).await;
    let addr = server.local_addr();
    assert_eq!(udp_raw(addr, &[]).await, None, "empty");
    assert_eq!(
        udp_raw(addr, &[1, 2, 3]).await,
        None,
        "shorter than a header"
    );
    assert_eq!(
        udp_raw(addr, &header(1, 0x8100, 1, 0)).await,
        None,
        "a response"
    );

    let formerr = udp_raw(addr, &cut_question()).await.expect("FORMERR");
    assert_eq!(&formerr[..2], &[0x42, 0x42]);
    assert_eq!(formerr[3] & 0x0f, ResponseCode::FormErr.low());
    let looped = udp_raw(addr, &pointer_loop()).await.expect("FORMERR");
    assert_eq!(looped[3] & 0x0f, ResponseCode::FormErr.low());

    let mut update = query("web.default.svc.cluster.local.", RecordType::A, false);
    update.metadata.op_code = OpCode::Update;
    let r = udp(addr, &update).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp);

    let mut v1 = query("web.default.svc.cluster.local.", RecordType::A, false);
    let mut edns = Edns::new();
    edns.set_version(1);
    v1.set_edns(edns);
    let r = udp(addr, &v1).await;
    // 16 reads as BADSIG or BADVERS (RFC 6891 gave both the one code).
    assert_eq!(
        u16::from(r.metadata.response_code),
        u16::from(ResponseCode::BADVERS)
    );
    assert!(r.edns.is_some(), "the high bits travel in the OPT record");

    let mut two = query("web.default.svc.cluster.local.", RecordType::A, false);
    two.add_query(two.queries[0].clone());
    let r = udp(addr, &two).await;
    assert_eq!(r.metadata.response_code, ResponseCode::FormErr);

    // Trailing bytes after the question: the general path reads it anyway.
    let mut trailing = query("web.default.svc.cluster.local.", RecordType::A, false)
        .to_vec()
        .unwrap();
    trailing.extend_from_slice(&[0xde, 0xad]);
    let r = Message::from_vec(&udp_raw(addr, &trailing).await.expect("answer")).unwrap();
    assert_eq!(r.answers.len(), 1);
    assert!(server.stats().dropped >= 3);
}

fn junk(i: usize, rng: &mut impl Rng) -> Vec<u8> {
    match i % 6 {
        0 => (0..rng.random_range(0..40)).map(|_| rng.random()).collect(),
        1 => header(rng.random(), 0x8180, 1, 0),
        2 => cut_question(),
        3 => pointer_loop(),
        4 => {
            let mut p = header(rng.random(), 0x0100, u16::MAX, u16::MAX);
            p.extend((0..rng.random_range(0..300)).map(|_| rng.random::<u8>()));
            p
        }
        _ => (0..512).map(|_| rng.random()).collect(),
    }
}

/// A query answered within 300 ms, tried up to three times (as a stub resolver would, a
/// flood may overrun the socket buffer).
async fn answered(sock: &UdpSocket, addr: SocketAddr, m: &Message) -> bool {
    let bytes = m.to_vec().unwrap();
    let mut buf = vec![0u8; 4096];
    for _ in 0..3 {
        sock.send_to(&bytes, addr).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            let r = Message::from_vec(&buf[..n]).unwrap();
            if r.metadata.id == m.metadata.id {
                return r.answers.len() == 1;
            }
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_garbage_does_not_stall_cluster_names() {
    let server = start(cluster_zone(), vec![]).await;
    let addr = server.local_addr();
    let flood = tokio::spawn(async move {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut rng = rand::rngs::StdRng::from_os_rng();
        let started = Instant::now();
        let mut sent = 0;
        while sent < 50_000 && started.elapsed() < Duration::from_secs(10) {
            let packet = junk(sent, &mut rng);
            let _ = sock.send_to(&packet, addr).await;
            sent += 1;
            if sent % 64 == 0 {
                tokio::task::yield_now().await;
            }
        }
        sent
    });
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut ok = 0;
    let started = Instant::now();
    for _ in 0..200 {
        let m = query("web.default.svc.cluster.local.", RecordType::A, false);
        if answered(&sock, addr, &m).await {
            ok += 1;
        }
    }
    let took = started.elapsed();
    let sent = flood.await.unwrap();
    assert_eq!(ok, 200, "answered during a flood of {sent} junk packets");
    let stats = server.stats();
    assert!(stats.dropped > 0, "{stats:?}");
    println!("200 queries among {sent} junk packets in {took:?}; {stats:?}");
    // Still serving afterwards.
    let r = udp(
        addr,
        &query("db.apps.svc.cluster.local.", RecordType::A, false),
    )
    .await;
    assert_eq!(r.answers.len(), 2);
}
