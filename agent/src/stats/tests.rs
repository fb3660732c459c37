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
            id: "c0ffee".into(),
            image: "registry.local/app:1".into(),
            cgroup: "/kubepods/poduid-1/app".into(),
            started_at: Some(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            fs: Some(super::fs::ContainerFs {
                time: std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                rootfs: Some(cairn_runtime::LayerUsage {
                    bytes: 5 << 20,
                    inodes: 3,
                }),
                logs: Some((4096, 1)),
            }),
        }],
        volumes: vec![
            super::fs::VolumeFs {
                name: "scratch".into(),
                time: std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_001),
                used_bytes: 1 << 20,
                inodes_used: 2,
                filesystem: Some(crate::sysinfo::FsUsage {
                    bytes: 1000 << 20,
                    available: 400 << 20,
                    inodes: 100,
                    inodes_free: 40,
                }),
                local_ephemeral: true,
            },
            super::fs::VolumeFs {
                name: "token".into(),
                time: std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_001),
                used_bytes: 4096,
                inodes_used: 5,
                filesystem: None,
                local_ephemeral: false,
            },
        ],
    }
}

/// A pod with one container on a v2 tree, read twice (the container's CPU moved by 1 s).
fn collected() -> (tempfile::TempDir, Collector, [PodTarget; 1]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    write(root, "", "cgroup.controllers", "cpu memory\n");
    for cgroup in ["kubepods/poduid-1", "kubepods/poduid-1/app"] {
        write(
            root,
            cgroup,
            "cpu.stat",
            "usage_usec 2000000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 300000\n",
        );
        write(root, cgroup, "memory.current", "67108864\n");
        write(
            root,
            cgroup,
            "memory.stat",
            "anon 50331648\ninactive_file 4194304\n",
        );
    }
    write(root, "kubepods/poduid-1/app", "memory.max", "134217728\n");
    write(
        root,
        "kubepods/poduid-1/app",
        "io.stat",
        "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n",
    );
    let me = format!("{}\n", std::process::id());
    write(root, "kubepods/poduid-1/app", "cgroup.procs", &me);
    let mut collector = Collector::new(root, Path::new("/proc"), Duration::from_secs(10));
    let pods = [target()];
    collector.housekeep(&[pods[0].cgroups()]);
    write(
        root,
        "kubepods/poduid-1/app",
        "cpu.stat",
        "usage_usec 3000000\nnr_periods 20\nnr_throttled 9\nthrottled_usec 700000\n",
    );
    collector.housekeep(&[pods[0].cgroups()]);
    (tmp, collector, pods)
}

#[test]
fn pods_and_containers_carry_what_metrics_server_reads() {
    let (_tmp, collector, pods) = collected();
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
    assert_eq!(app["rootfs"]["usedBytes"], 5u64 << 20);
    assert_eq!(app["rootfs"]["inodesUsed"], 3);
    assert_eq!(app["logs"]["usedBytes"], 4096);
    // Layer, logs and the emptyDir; not the projected token.
    assert_eq!(
        pod["ephemeral-storage"]["usedBytes"],
        (5u64 << 20) + 4096 + (1 << 20)
    );
    assert_eq!(pod["ephemeral-storage"]["inodesUsed"], 3 + 1 + 2);
    let scratch = &pod["volume"][0];
    assert_eq!(scratch["name"], "scratch");
    assert_eq!(scratch["usedBytes"], 1u64 << 20);
    assert_eq!(scratch["capacityBytes"], 1000u64 << 20);
    assert_eq!(scratch["inodesFree"], 40);
    assert_eq!(pod["volume"][1]["name"], "token");
    assert!(pod["volume"][1].get("capacityBytes").is_none());
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

fn parse(text: &str) -> prometheus_parse::Scrape {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("the Prometheus text format")
}

/// The value of `metric` whose labels include every one of `labels`.
fn value(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))?;
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => Some(v),
        _ => None,
    }
}

#[test]
fn resource_metrics_parse_and_carry_upstreams_series() {
    let (_tmp, collector, pods) = collected();
    let scrape = parse(&super::resource_metrics(&pods, &collector));
    let app = [
        ("container", "app"),
        ("namespace", "default"),
        ("pod", "web"),
    ];
    assert_eq!(
        value(&scrape, "container_cpu_usage_seconds_total", &app),
        Some(3.0)
    );
    let ws = value(&scrape, "container_memory_working_set_bytes", &app);
    assert_eq!(ws, Some(((64u64 - 4) << 20) as f64));
    assert_eq!(
        value(&scrape, "container_start_time_seconds", &app),
        Some(1_700_000_000.0)
    );
    let pod = [("namespace", "default"), ("pod", "web")];
    assert_eq!(
        value(&scrape, "pod_cpu_usage_seconds_total", &pod),
        Some(2.0)
    );
    assert!(value(&scrape, "pod_memory_working_set_bytes", &pod).is_some());
    assert!(value(&scrape, "node_cpu_usage_seconds_total", &[]).is_some_and(|v| v > 0.0));
    assert!(value(&scrape, "node_memory_working_set_bytes", &[]).is_some());
    assert_eq!(value(&scrape, "resource_scrape_error", &[]), Some(0.0));
    let stamped = scrape
        .samples
        .iter()
        .filter(|s| s.metric != "resource_scrape_error");
    let now = chrono::Utc::now();
    for s in stamped {
        let age = now - s.timestamp;
        assert!(
            age < chrono::Duration::seconds(60),
            "{} is stamped with its pass: {age}",
            s.metric
        );
    }
}

#[test]
fn cadvisor_metrics_parse_and_carry_cadvisors_series() {
    let (_tmp, collector, pods) = collected();
    let device = |major: u64, minor: u64| format!("/dev/test{major}_{minor}");
    let scrape = parse(&super::cadvisor_metrics(&pods, &collector, 2, &device));
    let app = [
        ("container", "app"),
        ("pod", "web"),
        ("namespace", "default"),
        ("name", "c0ffee"),
        ("image", "registry.local/app:1"),
        ("id", "/kubepods/poduid-1/app"),
    ];
    let cpu = [app.as_slice(), &[("cpu", "total")]].concat();
    assert_eq!(
        value(&scrape, "container_cpu_usage_seconds_total", &cpu),
        Some(3.0)
    );
    assert_eq!(
        value(&scrape, "container_fs_usage_bytes", &app),
        Some((5u64 << 20) as f64)
    );
    assert_eq!(
        value(&scrape, "container_cpu_cfs_periods_total", &app),
        Some(20.0)
    );
    assert_eq!(
        value(&scrape, "container_cpu_cfs_throttled_periods_total", &app),
        Some(9.0)
    );
    assert_eq!(
        value(&scrape, "container_cpu_cfs_throttled_seconds_total", &app),
        Some(0.7)
    );
    assert_eq!(
        value(&scrape, "container_memory_rss", &app),
        Some((48u64 << 20) as f64)
    );
    assert_eq!(
        value(&scrape, "container_spec_memory_limit_bytes", &app),
        Some((128u64 << 20) as f64)
    );
    let reads = [app.as_slice(), &[("device", "/dev/test8_0")]].concat();
    assert_eq!(
        value(&scrape, "container_fs_reads_bytes_total", &reads),
        Some(4096.0)
    );
    assert_eq!(
        value(&scrape, "container_fs_writes_total", &reads),
        Some(2.0)
    );
    assert_eq!(value(&scrape, "container_processes", &app), Some(1.0));
    let pod_level = [
        ("container", ""),
        ("pod", "web"),
        ("id", "/kubepods/poduid-1"),
    ];
    assert_eq!(
        value(&scrape, "container_memory_usage_bytes", &pod_level),
        Some((64u64 << 20) as f64)
    );
    assert_eq!(
        value(&scrape, "container_spec_memory_limit_bytes", &pod_level),
        Some(0.0),
        "no limit"
    );
    let eth = scrape.samples.iter().any(|s| {
        s.metric == "container_network_receive_bytes_total" && s.labels.get("container") == Some("")
    });
    assert!(
        eth || collector
            .network("uid-1")
            .is_none_or(|n| n.interfaces.is_empty()),
        "the pod's interfaces"
    );
    assert_eq!(value(&scrape, "machine_cpu_cores", &[]), Some(2.0));
}
