//! The cgroup readers against captured fixture trees (v1 from this project's CI host,
//! v2 in the kernel documentation's format) and against this machine's real hierarchy.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use cairn_stats::parse::DeviceIo;
use cairn_stats::{CgroupReadError, CgroupReader, Hierarchy};

fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn reader(tree: &str) -> CgroupReader {
    CgroupReader::new(&fixtures(tree), &fixtures("proc"))
}

#[test]
fn v1_container_reads_every_value_cadvisor_reports() {
    let reader = reader("v1");
    assert_eq!(reader.hierarchy(), Hierarchy::V1);
    let s = reader.read("/kubepods/burstable/pod1234/c1").expect("read");
    assert_eq!(s.cpu.usage_ns, Some(317_915_063_201));
    let tick_ns = 1_000_000_000 / procfs::ticks_per_second();
    assert_eq!(s.cpu.user_ns, Some(26_608 * tick_ns));
    assert_eq!(s.cpu.system_ns, Some(5_182 * tick_ns));
    assert_eq!(s.cpu.periods, Some(1200));
    assert_eq!(s.cpu.throttled_periods, Some(310));
    assert_eq!(s.cpu.throttled_ns, Some(52_000_000_000));
    let m = &s.memory;
    assert_eq!(m.usage_bytes, Some(3_406_000_128));
    assert_eq!(m.working_set_bytes, Some(3_406_000_128 - 1_620_512_768));
    assert_eq!(m.rss_bytes, Some(933_400_576));
    assert_eq!(m.cache_bytes, Some(2_472_599_552));
    assert_eq!(m.swap_bytes, Some(0), "memsw usage less memory usage");
    assert_eq!(m.mapped_file_bytes, Some(150_827_008));
    assert_eq!(m.page_faults, Some(18_637_374));
    assert_eq!(m.major_page_faults, Some(842));
    assert_eq!(m.oom_events, Some(2));
    assert_eq!(m.limit_bytes, None, "the kernel's 'no limit' is no limit");
    assert_eq!(s.processes.processes, Some(2));
    assert_eq!(s.processes.threads, Some(4));
    assert_eq!(s.processes.file_descriptors, Some(5));
    assert_eq!(s.pids, vec![2002, 2003]);
    let sda = DeviceIo {
        major: 8,
        minor: 0,
        read_bytes: 4096,
        write_bytes: 1_048_576,
        read_ops: 1,
        write_ops: 256,
    };
    assert_eq!(s.io.first(), Some(&sda));
    assert_eq!(s.io.len(), 2);
}

#[test]
fn v2_container_reads_every_value_cadvisor_reports() {
    let reader = reader("v2");
    assert_eq!(reader.hierarchy(), Hierarchy::V2);
    let s = reader
        .read("/kubepods.slice/kubepods-pod1234.slice/cri-containerd-c1.scope")
        .expect("read");
    assert_eq!(s.cpu.usage_ns, Some(5_000_000_000));
    assert_eq!(s.cpu.user_ns, Some(4_000_000_000));
    assert_eq!(s.cpu.system_ns, Some(1_000_000_000));
    assert_eq!(s.cpu.periods, Some(100));
    assert_eq!(s.cpu.throttled_periods, Some(40));
    assert_eq!(s.cpu.throttled_ns, Some(2_000_000_000));
    let m = &s.memory;
    assert_eq!(m.usage_bytes, Some(64 << 20));
    assert_eq!(m.working_set_bytes, Some((64 << 20) - (4 << 20)));
    assert_eq!(m.rss_bytes, Some(48 << 20));
    assert_eq!(m.cache_bytes, Some(16 << 20));
    assert_eq!(m.swap_bytes, Some(4096));
    assert_eq!(m.mapped_file_bytes, Some(8 << 20));
    assert_eq!(m.page_faults, Some(20_000));
    assert_eq!(m.major_page_faults, Some(7));
    assert_eq!(m.oom_events, Some(1));
    assert_eq!(m.limit_bytes, None, "memory.max 'max'");
    assert_eq!(s.processes.processes, Some(1));
    assert_eq!(s.processes.threads, Some(3));
    assert_eq!(s.processes.file_descriptors, Some(3));
    assert_eq!(s.io.len(), 2);
    assert_eq!(s.io[0].write_ops, 256);
    let limited = reader
        .read("/kubepods.slice/kubepods-pod1234.slice/limited")
        .expect("read");
    assert_eq!(limited.memory.limit_bytes, Some(128 << 20));
}

#[test]
fn missing_and_garbage_files_skip_their_values_only() {
    let s = reader("v1")
        .read("/kubepods/besteffort/pod5678/broken")
        .expect("a damaged cgroup still reads");
    assert_eq!(s.cpu.usage_ns, None, "garbage in cpuacct.usage");
    assert_eq!(s.cpu.user_ns, None, "no cpuacct.stat");
    assert_eq!(s.cpu.throttled_periods, None, "no cpu.stat");
    assert_eq!(
        s.memory.rss_bytes,
        Some(4096),
        "lines around garbage still read"
    );
    assert_eq!(s.memory.cache_bytes, Some(8192));
    assert_eq!(s.memory.usage_bytes, Some(12_288));
    assert_eq!(
        s.memory.working_set_bytes,
        Some(12_288),
        "an unreadable inactive_file subtracts nothing"
    );
    assert_eq!(s.memory.oom_events, None);
    assert_eq!(s.processes.processes, Some(0));
    assert_eq!(s.processes.threads, None);
    assert!(s.io.is_empty());
}

#[test]
fn a_cgroup_that_is_gone_is_reported_as_gone() {
    for (tree, path) in [
        ("v1", "/kubepods/podgone/c"),
        ("v2", "/kubepods.slice/gone"),
    ] {
        match reader(tree).read(path) {
            Err(CgroupReadError::Gone { path: gone }) => {
                assert!(gone.ends_with(path.trim_start_matches('/')), "{gone:?}")
            }
            other => panic!("{tree} {path}: {other:?}"),
        }
    }
}

/// This machine's own root cgroup, v1 or v2, counts CPU time that a busy loop adds to.
#[test]
fn the_real_root_cgroup_counts_cpu_time() {
    let reader = CgroupReader::new(Path::new("/sys/fs/cgroup"), Path::new("/proc"));
    let before = reader.read("/").expect("root cgroup").cpu.usage_ns;
    let before = before.expect("the root cgroup's CPU usage");
    let start = std::time::Instant::now();
    let mut x = 0u64;
    while start.elapsed() < std::time::Duration::from_millis(200) {
        x = std::hint::black_box(x.wrapping_add(1));
    }
    let after = reader.read("/").expect("root cgroup").cpu.usage_ns;
    let after = after.expect("the root cgroup's CPU usage");
    // Other processes add to it too; this one alone added at least most of 200 ms.
    assert!(after - before >= 150_000_000, "{before} -> {after}");
}

#[test]
fn a_pods_interfaces_leave_out_loopback() {
    let ifaces = cairn_stats::pod_interfaces(&fixtures("proc"), 2002).expect("pid 2002");
    assert_eq!(ifaces.len(), 1, "{ifaces:?}");
    let eth0 = &ifaces[0];
    assert_eq!(eth0.name, "eth0");
    assert_eq!((eth0.rx_bytes, eth0.rx_packets), (1_048_576, 1000));
    assert_eq!((eth0.rx_errors, eth0.rx_dropped), (1, 2));
    assert_eq!((eth0.tx_bytes, eth0.tx_packets), (524_288, 500));
    assert_eq!((eth0.tx_errors, eth0.tx_dropped), (3, 4));
    assert!(cairn_stats::pod_interfaces(&fixtures("proc"), 999).is_none());
}

#[test]
fn the_real_node_reads_from_procfs() {
    let node = cairn_stats::read_node(Path::new("/proc"));
    assert!(node.cpu_usage_ns.is_some_and(|n| n > 0), "{node:?}");
    let total = node.memory_total_bytes.expect("MemTotal");
    let available = node.memory_available_bytes.expect("MemAvailable");
    assert!(available > 0 && available <= total, "{node:?}");
    assert!(node.load.is_some());
    assert!(node.processes.is_some_and(|n| n >= 1));
    assert!(node.pid_max.is_some_and(|n| n > 1));
}
