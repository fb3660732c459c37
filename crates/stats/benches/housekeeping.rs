//! One housekeeping pass over 100 running containers in 50 pods: the CPU time of the
//! pass (this thread's CPU clock), p50/p99 over 200 passes, on a cgroup v1 tree built
//! from the fixtures captured on this host and on a v2 tree in the kernel's format,
//! both in a temporary directory (files in the page cache, as a live cgroupfs is).
//!
//! Goal (issue 29): ≤ 5 ms CPU per pass. No peer runs here: cAdvisor needs a Go
//! toolchain these machines do not have; the kubelet's own e2e budget is 0.35 cores at
//! 100 pods for everything it does.
//!
//! `cargo bench -p cairn-stats --bench housekeeping`.

// Benchmark code: a failed setup step should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use cairn_stats::{Collector, PodCgroups};
use nix::time::{clock_gettime, ClockId};

const PODS: usize = 50;
const PER_POD: usize = 2;
const PASSES: usize = 200;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A tree of `PODS` pods with `PER_POD` containers each, every cgroup a copy of `template`
/// (per controller for v1), and the pods to read.
fn tree(root: &Path, v2: bool) -> Vec<PodCgroups> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let controllers: &[&str] = if v2 {
        &[""]
    } else {
        &["cpu", "cpuacct", "memory", "blkio"]
    };
    if v2 {
        std::fs::write(root.join("cgroup.controllers"), "cpu memory io pids\n").unwrap();
    }
    let template = |controller: &str| match v2 {
        true => fixtures.join("v2/kubepods.slice/kubepods-pod1234.slice/cri-containerd-c1.scope"),
        false => fixtures
            .join("v1")
            .join(controller)
            .join("kubepods/burstable/pod1234/c1"),
    };
    (0..PODS)
        .map(|p| {
            let pod = format!("kubepods/pod{p}");
            let containers: Vec<String> = (0..PER_POD).map(|c| format!("{pod}/c{c}")).collect();
            for cgroup in std::iter::once(&pod).chain(&containers) {
                for controller in controllers {
                    copy_dir(&template(controller), &root.join(controller).join(cgroup));
                }
            }
            PodCgroups {
                uid: format!("uid-{p}"),
                cgroup: format!("/{pod}"),
                containers: containers.iter().map(|c| format!("/{c}")).collect(),
            }
        })
        .collect()
}

fn thread_cpu() -> Duration {
    Duration::from(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap())
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn run(v2: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let pods = tree(tmp.path(), v2);
    let mut collector = Collector::new(tmp.path(), Path::new("/proc"), Duration::from_secs(10));
    let mut cpu_ms = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let before = thread_cpu();
        let pass = collector.housekeep(&pods);
        cpu_ms.push((thread_cpu() - before).as_secs_f64() * 1e3);
        assert_eq!(pass.read, PODS * (PER_POD + 1), "every cgroup read");
    }
    let (p50, p99) = (percentile(&mut cpu_ms, 0.5), percentile(&mut cpu_ms, 0.99));
    let which = if v2 { "v2" } else { "v1" };
    println!(
        "housekeeping pass, cgroup {which}, {} containers in {PODS} pods: CPU p50 {p50:.2} ms, p99 {p99:.2} ms (goal 5 ms; no peer)",
        PODS * PER_POD
    );
}

fn main() {
    run(false);
    run(true);
}
