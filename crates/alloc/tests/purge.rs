//! Memory freed by an otherwise idle process goes back to the system through the
//! background purge: mimalloc itself purges only on later allocator activity, so while
//! this test waits it allocates nothing (its own binary: no other test runs beside it).
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::time::{Duration, Instant};

use cairn_alloc as _;

/// Resident anonymous memory in KiB, read into a stack buffer (no allocation).
fn rss_anon_kib(status: &mut std::fs::File) -> u64 {
    use std::io::Seek;
    let mut buf = [0u8; 4096];
    status.rewind().unwrap();
    let n = status.read(&mut buf).unwrap();
    let text = std::str::from_utf8(&buf[..n]).unwrap();
    let line = text.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn freed_memory_goes_back_while_the_process_is_idle() {
    cairn_alloc::purge_freed_pages_in_background(Duration::from_millis(20)).unwrap();
    let mut status = std::fs::File::open("/proc/self/status").unwrap();
    let before = rss_anon_kib(&mut status);
    // 64 MiB in 64 KiB blocks, as many connections' buffers would be, touched and freed.
    let blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8 | 1; 64 << 10]).collect();
    let peak = rss_anon_kib(&mut status);
    assert!(peak > before + 60 * 1024, "{before} -> {peak} KiB");
    drop(std::hint::black_box(blocks));
    // Wait for the condition, with a deadline well past mimalloc's 1 s purge delay.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut now = rss_anon_kib(&mut status);
    while now > before + 16 * 1024 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        now = rss_anon_kib(&mut status);
    }
    assert!(
        now <= before + 16 * 1024,
        "anonymous memory {before} KiB before, {peak} KiB at the peak, still {now} KiB after 15 s"
    );
}
