//! Node-pressure eviction on the lab. The lab's agents keep 800 MiB of the host for
//! pods (`--reserved-memory-mib`) and evict below 500 MiB available
//! (`--eviction-hard=memory.available<500Mi`), so pods past 300 MiB of working set put a
//! node under memory pressure: a best-effort pod holding ~330 MB on node-1 is evicted
//! (Failed, `Evicted`, upstream's message, DisruptionTarget) while a Guaranteed pod beside
//! it stays; node-1 shows MemoryPressure and its NoSchedule taint, then recovers once the
//! (flag-shortened) transition period has passed.

use std::time::Duration;

use crate::common::{eventually, Lab};

/// Memory the lab's agents leave to pods (see the lab's `--reserved-memory-mib`).
pub const PODS_MEMORY_MIB: u64 = 800;

/// `--reserved-memory-mib` for this host: all but [`PODS_MEMORY_MIB`].
pub fn reserved_memory_mib() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal");
    (total_kib / 1024).saturating_sub(PODS_MEMORY_MIB)
}

/// Running before the hog starts: its 10m CPU limit makes even `runc init` take seconds.
const STEADY: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: steady}
spec:
  nodeSelector: {kubernetes.io/hostname: node-1}
  containers:
  - name: steady
    image: busybox
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {cpu: 10m, memory: 32Mi}
"#;

const HOG: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  nodeSelector: {kubernetes.io/hostname: node-1}
  restartPolicy: Never
  containers:
  - name: hog
    image: busybox
    # A 330 MB string held by a sleeping awk.
    command: ["awk", "BEGIN { s = sprintf(\"%330000000s\", \"\"); system(\"sleep 3600\") }"]
"#;

fn field(lab: &Lab, what: &str, path: &str) -> String {
    lab.try_kubectl(&["get", what, "-o", &format!("jsonpath={path}")])
        .unwrap_or_default()
}

fn memory_pressure(lab: &Lab) -> (String, bool) {
    let status = field(
        lab,
        "node/node-1",
        "{.status.conditions[?(@.type==\"MemoryPressure\")].status}",
    );
    let tainted = field(lab, "node/node-1", "{.spec.taints[*].key}")
        .contains("node.kubernetes.io/memory-pressure");
    (status, tainted)
}

pub fn memory_pressure_evicts_the_hog(lab: &Lab) {
    let dir = tempfile::tempdir().unwrap();
    let apply = |name: &str, text: &str| {
        let manifest = dir.path().join(name);
        std::fs::write(&manifest, text).unwrap();
        lab.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    };
    apply("steady.yaml", STEADY);
    eventually("the steady pod running", Duration::from_secs(120), || {
        (field(lab, "pod/steady", "{.status.phase}") == "Running").then_some(())
    });
    apply("hog.yaml", HOG);
    let reason = eventually("the hog evicted", Duration::from_secs(120), || {
        let reason = field(lab, "pod/hog", "{.status.reason}");
        (reason == "Evicted").then_some(reason)
    });
    assert_eq!(reason, "Evicted");
    assert_eq!(field(lab, "pod/hog", "{.status.phase}"), "Failed");
    let message = field(lab, "pod/hog", "{.status.message}");
    assert!(
        message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 500Mi, available: "
        ) && message.contains("Container hog was using ")
            && message.contains("request is 0, has larger consumption of memory."),
        "{message}"
    );
    let target = field(
        lab,
        "pod/hog",
        "{.status.conditions[?(@.type==\"DisruptionTarget\")].reason}",
    );
    assert_eq!(target, "TerminationByKubelet");
    let events = lab.kubectl(&["get", "events", "--field-selector=involvedObject.name=hog"]);
    assert!(events.contains("Evicted"), "{events}");
    eventually(
        "node-1 under memory pressure, tainted",
        Duration::from_secs(60),
        || (memory_pressure(lab) == ("True".to_string(), true)).then_some(()),
    );
    assert_eq!(field(lab, "pod/steady", "{.status.phase}"), "Running");
    assert_eq!(field(lab, "pod/steady", "{.status.reason}"), "");
    eventually("node-1 recovers", Duration::from_secs(120), || {
        (memory_pressure(lab) == ("False".to_string(), false)).then_some(())
    });
    assert_eq!(field(lab, "pod/steady", "{.status.phase}"), "Running");
    lab.kubectl(&["delete", "pod", "hog", "steady", "--wait=false"]);
}
