//! kill -9 loses no acknowledged write.
//!
//! The parent re-runs this test binary as a child (`CAIRN_CRASH_CHILD=<dir>`, running only
//! `crash_child`) that writes as fast as it can with many concurrent writers and prints
//! `ACK <key> <revision>` once each create returned. The parent SIGKILLs it at a random
//! moment, reopens the store and checks every acknowledged key is there.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use cairn_store::sqlite::SqliteBackend;
use cairn_store::Backend;

const CHILD_ENV: &str = "CAIRN_CRASH_CHILD";
const ROUNDS: usize = 10;

/// Child side; a no-op in a normal test run.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let store = SqliteBackend::open(std::path::Path::new(&dir)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut tasks = Vec::new();
        for t in 0..16 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let value = Bytes::from(vec![b'v'; 1024]);
                let mut i = 0u64;
                // Bounded so an orphaned child cannot run forever.
                while Instant::now() < deadline {
                    let key = format!("/crash/{t}/{i}");
                    let rev = store.create(&key, value.clone()).await.unwrap();
                    // One write per line: either the whole line reaches the pipe or none.
                    let line = format!("ACK {key} {rev}\n");
                    std::io::stdout().lock().write_all(line.as_bytes()).unwrap();
                    i += 1;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Cheap randomness without a dependency: good enough to vary the kill moment.
fn random_below(n: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    (nanos ^ (nanos >> 7)).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
}

#[test]
fn kill9_loses_no_acknowledged_write() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut total = 0;
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut acked = Vec::new();
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                // A line cut off by the kill was never fully acknowledged to us.
                if !line.ends_with('\n') {
                    break;
                }
                if let Some(rest) = line.strip_prefix("ACK ") {
                    let mut parts = rest.split_whitespace();
                    let key = parts.next().unwrap().to_string();
                    let rev: i64 = parts.next().unwrap().parse().unwrap();
                    if acked.is_empty() {
                        let _ = tx.send(key.clone());
                    }
                    acked.push((key, rev));
                }
            }
            acked
        });

        // Let it get going, then kill it at a random point mid-stream.
        rx.recv_timeout(Duration::from_secs(60))
            .expect("child never acknowledged a write");
        std::thread::sleep(Duration::from_millis(random_below(300)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked = reader.join().unwrap();
        assert!(!acked.is_empty());

        rt.block_on(async {
            let store = SqliteBackend::open(dir.path()).expect("store must reopen after kill -9");
            let current = store.current_revision().await.unwrap();
            for (key, rev) in &acked {
                let kv = store
                    .get(key)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: acknowledged {key} lost"));
                assert_eq!(kv.mod_revision, *rev, "round {round}: {key}");
                assert!(*rev <= current);
            }
            // The reopened store keeps working and never reuses a revision.
            let next = store
                .create("/after/crash", Bytes::from_static(b"x"))
                .await
                .unwrap();
            assert!(next > current);
            let (all, _) = store.list("/crash/").await.unwrap();
            assert!(all.len() >= acked.len());
        });
        println!(
            "round {round}: {} acknowledged writes survived kill -9",
            acked.len()
        );
        total += acked.len();
    }
    println!("{total} acknowledged writes checked over {ROUNDS} kills");
}
