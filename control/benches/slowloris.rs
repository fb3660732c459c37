//! Slow clients and a greedy one against a well-behaved one (not a test: it prints
//! figures and asserts nothing timed).
//!
//! A well-behaved client times sequential GETs of one object: first on an idle server,
//! then while SLOW connections (default 500) hold sockets — half never finish their TLS
//! handshake, half finish it and send their request headers one byte a second — and one
//! greedy client sends FLOOD requests (default 10,000, 16 at a time). Prints p50/p99 of
//! both phases and their ratio (issue 28's goal: p99 under attack ≤ 2× idle), how many
//! slow connections the server cut, and the server's RSS.
//!
//! Run: `cargo bench -p cairn-control --bench slowloris` (env: SLOW, FLOOD, SAMPLES).

// A benchmark driver: failing loudly on a broken setup is what we want here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_usize, percentile, start_server};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn sample(http: &reqwest::Client, url: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = http.get(url).send().await.expect("well-behaved GET");
        assert!(r.status().is_success(), "{}", r.status());
        let _ = r.bytes().await;
        out.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    out.sort();
    out
}

fn show(what: &str, s: &[Duration]) -> (f64, f64) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (p50, p99) = (ms(percentile(s, 0.5)), ms(percentile(s, 0.99)));
    println!(
        "{what:<28} n={:<5} p50={p50:>7.2}ms p99={p99:>7.2}ms",
        s.len()
    );
    (p50, p99)
}

/// A connection that never finishes its handshake: a byte every few seconds.
async fn stalled_handshake(addr: String, cut: Arc<AtomicUsize>) {
    let Ok(mut tcp) = TcpStream::connect(&addr).await else {
        return;
    };
    // The first byte of a TLS record, then silence.
    for _ in 0..60 {
        if tcp.write_all(&[0x16]).await.is_err() {
            cut.fetch_add(1, Ordering::Relaxed);
            return;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// A TLS connection that sends its request headers one byte a second.
async fn dribbled_headers(addr: String, tls: Arc<rustls::ClientConfig>, cut: Arc<AtomicUsize>) {
    let Ok(tcp) = TcpStream::connect(&addr).await else {
        return;
    };
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let Ok(mut stream) = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
    else {
        return;
    };
    let request = b"GET /api/v1/namespaces/default HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    for chunk in request.iter().chain(std::iter::repeat(&b'a')).take(200) {
        if stream.write_all(&[*chunk]).await.is_err() || stream.flush().await.is_err() {
            cut.fetch_add(1, Ordering::Relaxed);
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn flood(http: reqwest::Client, url: String, total: usize) -> usize {
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (http, url, next, failed) =
                (http.clone(), url.clone(), next.clone(), failed.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let ok = match http.get(&url).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    failed.load(Ordering::Relaxed)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let slow = env_usize("SLOW", 500);
    let total = env_usize("FLOOD", 10_000);
    let samples = env_usize("SAMPLES", 400);
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = env!("CARGO_BIN_EXE_cairn-control");
    let (mut server, url, builder) = start_server(bin, dir.path()).await;
    let http = builder.build().expect("client");
    let target = format!("{url}/api/v1/namespaces/default");
    let addr = url.trim_start_matches("https://").to_string();
    let credentials = common::credentials(std::path::Path::new(bin), dir.path(), &url);
    let tls = Arc::new(credentials.tls_config().expect("tls"));
    println!("slow clients: {slow}, greedy client: {total} requests (16 in flight)");

    let _ = sample(&http, &target, 50).await;
    let idle = sample(&http, &target, samples).await;
    let cut = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for i in 0..slow {
        let (addr, cut) = (addr.clone(), cut.clone());
        attackers.push(if i % 2 == 0 {
            tokio::spawn(stalled_handshake(addr, cut))
        } else {
            tokio::spawn(dribbled_headers(addr, tls.clone(), cut))
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let greedy = tokio::spawn(flood(
        common::credentials(std::path::Path::new(bin), dir.path(), &url)
            .reqwest_builder()
            .expect("client")
            .build()
            .expect("client"),
        target.clone(),
        total,
    ));
    let started = Instant::now();
    let loaded = sample(&http, &target, samples).await;
    let failed = greedy.await.unwrap_or(total);
    let flood_secs = started.elapsed().as_secs_f64();
    let (_, idle_p99) = show("well-behaved, idle", &idle);
    let (_, loaded_p99) = show("well-behaved, under attack", &loaded);
    println!(
        "p99 ratio attack/idle: {:.2} (goal ≤ 2.00); greedy client: {total} requests in {flood_secs:.1} s, {failed} failed",
        loaded_p99 / idle_p99
    );
    // The handshake deadline (10 s) and the header deadline (30 s) end the slow ones.
    tokio::time::sleep(Duration::from_secs(32)).await;
    println!(
        "slow connections cut by the server within 32 s: {} of {slow}",
        cut.load(Ordering::Relaxed)
    );
    let rss = std::fs::read_to_string(format!("/proc/{}/status", server.id())).unwrap_or_default();
    if let Some(line) = rss.lines().find(|l| l.starts_with("VmRSS:")) {
        println!("server {line}");
    }
    for a in attackers {
        a.abort();
    }
    let _ = server.kill();
    let _ = server.wait();
}
