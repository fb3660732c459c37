//! Housekeeping passes over a cgroup v2 tree in a temporary directory: rates between
//! passes, containers that exit between passes, a pod's network read through its
//! container's process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use cairn_stats::{Collector, PassSummary, PodCgroups};

fn cgroup(root: &Path, name: &str, usage_usec: u64, pid: u32) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let stat = format!("usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n");
    std::fs::write(dir.join("cpu.stat"), stat).expect("cpu.stat");
    std::fs::write(dir.join("memory.current"), "1048576\n").expect("memory.current");
    std::fs::write(dir.join("cgroup.procs"), format!("{pid}\n")).expect("cgroup.procs");
}

fn pod(containers: &[&str]) -> PodCgroups {
    PodCgroups {
        uid: "uid-1".into(),
        cgroup: "/pod".into(),
        containers: containers.iter().map(|c| format!("/pod/{c}")).collect(),
    }
}

#[test]
fn passes_rate_cpu_and_forget_containers_that_exit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(root.join("cgroup.controllers"), "cpu memory\n").expect("v2 root");
    let me = std::process::id();
    cgroup(root, "pod", 0, 0);
    cgroup(root, "pod/a", 0, me);
    cgroup(root, "pod/b", 0, me);
    let mut collector = Collector::new(root, Path::new("/proc"), Duration::from_secs(10));

    let first = collector.housekeep(&[pod(&["a", "b", "never-existed"])]);
    assert_eq!(first, PassSummary { read: 3, gone: 1 });
    assert_eq!(collector.history().usage_nano_cores("/pod/a"), None);
    let network = collector
        .network("uid-1")
        .expect("read through a's process");
    assert!(network.interfaces.iter().all(|i| i.name != "lo"));

    std::thread::sleep(Duration::from_millis(100));
    // a used 50 ms of CPU in the ~100 ms between the passes; b exited.
    cgroup(root, "pod/a", 50_000, me);
    std::fs::remove_dir_all(root.join("pod/b")).expect("b exits");
    let second = collector.housekeep(&[pod(&["a", "b"])]);
    assert_eq!(second, PassSummary { read: 2, gone: 1 });
    let cores = collector
        .history()
        .usage_nano_cores("/pod/a")
        .expect("a rate");
    // At most half a core (the pass came at least 100 ms later); the exact arithmetic is
    // the history's unit test.
    assert!(
        (1..=500_000_000).contains(&cores),
        "50 ms over at least 100 ms: {cores}"
    );
    assert!(
        collector.history().latest("/pod/b").is_none(),
        "b is forgotten"
    );
    assert_eq!(collector.history().cgroups(), 2);
    let node = collector.node().expect("the node was read");
    assert!(node.sample.memory_total_bytes.is_some());
    assert!(collector.node_usage_nano_cores().is_some());

    collector.housekeep(&[]);
    assert!(
        collector.network("uid-1").is_none(),
        "a deleted pod is forgotten"
    );
    assert_eq!(collector.history().cgroups(), 0);
}
