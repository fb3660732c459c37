//! The summary's shape from a collector over a cgroup v2 tree in a temporary directory.

use std::path::Path;
use std::time::Duration;

use cairn_stats::Collector;

use super::{summary, ContainerTarget, NodeFacts, PodTarget};

fn write(root: &Path, cgroup: &str, file: &str, text: &str) {
    let dir = root.join(cgroup);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(file), text).expect("write");
}

fn target() -> PodTarget {
    PodTarget {
        name: "web".into(),
        namespace: "default".into(),
        uid: "uid-1".into(),
        cgroup: "/kubepods/poduid-1".into(),
        start_time: Some("2026-11-29T06:00:00Z".into()),
        containers: vec![ContainerTarget {
            name: "app".into(),
            cgroup: "/kubepods/poduid-1/app".into(),
            start_time: None,
        }],
    }
}

#[test]
fn pods_and_containers_carry_what_metrics_server_reads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    write(root, "", "cgroup.controllers", "cpu memory\n");
    for cgroup in ["kubepods/poduid-1", "kubepods/poduid-1/app"] {
        write(root, cgroup, "cpu.stat", "usage_usec 2000000\n");
        write(root, cgroup, "memory.current", "67108864\n");
        write(
            root,
            cgroup,
            "memory.stat",
            "anon 50331648\ninactive_file 4194304\n",
        );
    }
    write(root, "kubepods/poduid-1/app", "memory.max", "134217728\n");
    let me = format!("{}\n", std::process::id());
    write(root, "kubepods/poduid-1/app", "cgroup.procs", &me);
    let mut collector = Collector::new(root, Path::new("/proc"), Duration::from_secs(10));
    let pods = [target()];
    collector.housekeep(&[pods[0].cgroups()]);
    write(
        root,
        "kubepods/poduid-1/app",
        "cpu.stat",
        "usage_usec 3000000\n",
    );
    collector.housekeep(&[pods[0].cgroups()]);
    let facts = NodeFacts {
        name: "node-1".into(),
        fs: Some((1000, 400)),
    };

    let s = summary(&facts, &pods, &collector);
    let pod = &s["pods"][0];
    assert_eq!(pod["podRef"]["name"], "web");
    let app = &pod["containers"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(app["cpu"]["usageCoreNanoSeconds"], 3_000_000_000u64);
    assert!(
        app["cpu"]["usageNanoCores"].as_u64().is_some_and(|n| n > 0),
        "{app}"
    );
    assert_eq!(app["memory"]["workingSetBytes"], (64u64 - 4) << 20);
    assert_eq!(app["memory"]["availableBytes"], (128u64 - 60) << 20);
    assert_eq!(app["memory"]["rssBytes"], 48u64 << 20);
    assert!(
        app["memory"].get("pageFaults").is_none(),
        "unread values are left out"
    );
    assert_eq!(pod["memory"]["usageBytes"], 64u64 << 20);
    assert_eq!(
        pod["cpu"]["usageNanoCores"], 0,
        "the pod's counter did not move"
    );
    assert_eq!(pod["process_stats"]["process_count"], 1);
    assert!(pod["network"]["interfaces"].is_array(), "{pod}");
    let node = &s["node"];
    assert_eq!(node["nodeName"], "node-1");
    assert_eq!(node["fs"]["usedBytes"], 600);
    assert!(node["cpu"]["usageCoreNanoSeconds"].as_u64().is_some());
    assert!(node["memory"]["availableBytes"].as_u64().is_some());
    assert!(node["rlimit"]["maxpid"].as_u64().is_some());
}
