//! Which pod goes first under pressure, and what its status says (no IO): upstream's
//! `rankMemoryPressure` (pods using more than they requested first, then lower
//! priority, then the larger use above the request), `rankDiskPressureFunc` (the same
//! order, on ephemeral storage), `rankPIDPressure` (lower priority, then more
//! processes), and `evictionMessage`.

use std::cmp::Ordering;

use cairn_semantics::quantity::print_binary;

use super::thresholds::Signal;

/// Pods at or above this priority (system-cluster-critical, system-node-critical) are
/// never evicted, nor static pods.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// One running pod as the ranking sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub uid: String,
    pub key: String,
    pub priority: i32,
    /// Memory working set (bytes), processes, or ephemeral storage (bytes or inodes),
    /// for the signal being reclaimed.
    pub usage: i64,
    /// The pod's request of that resource (0 for pids).
    pub request: i64,
    /// `(container, usage, request)` for the message.
    pub containers: Vec<(String, i64, i64)>,
}

impl Candidate {
    fn exceeds(&self) -> bool {
        self.usage > self.request
    }
}

/// Sorts the candidates: the first is evicted.
pub fn rank(signal: Signal, candidates: &mut [Candidate]) {
    match signal {
        Signal::PidAvailable => candidates.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then(b.usage.cmp(&a.usage))
                .then(Ordering::Equal)
        }),
        _ => candidates.sort_by(|a, b| {
            b.exceeds()
                .cmp(&a.exceeds())
                .then(a.priority.cmp(&b.priority))
                .then((b.usage - b.request).cmp(&(a.usage - a.request)))
        }),
    }
}

/// Upstream's eviction message: the resource, the threshold and what was available,
/// and each container that used more than it requested.
pub fn message(signal: Signal, threshold: &str, available: i64, pod: &Candidate) -> String {
    let resource = signal.resource();
    let mut m = format!("The node was low on resource: {resource}. ");
    // Bytes print as binary quantities, counts as decimal ones (upstream's formats).
    let bytes = matches!(
        signal,
        Signal::MemoryAvailable | Signal::NodefsAvailable | Signal::ImagefsAvailable
    );
    let available = if bytes {
        print_binary(available)
    } else {
        available.to_string()
    };
    m.push_str(&format!(
        "Threshold quantity: {threshold}, available: {available}. "
    ));
    if bytes {
        for (name, usage, request) in pod.containers.iter().filter(|(_, u, r)| u > r) {
            m.push_str(&format!(
                "Container {name} was using {}, request is {}, has larger consumption of {resource}. ",
                print_binary(*usage),
                print_binary(*request)
            ));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, priority: i32, usage: i64, request: i64) -> Candidate {
        Candidate {
            uid: name.into(),
            key: format!("default/{name}"),
            priority,
            usage,
            request,
            containers: vec![("main".into(), usage, request)],
        }
    }

    #[test]
    fn memory_evicts_the_one_over_its_request_before_priority() {
        let mut c = vec![
            pod("guaranteed", 0, 50 << 20, 50 << 20),
            pod("low-priority-within", -10, 10 << 20, 20 << 20),
            pod("hog", 100, 400 << 20, 0),
            pod("small-over", 100, 30 << 20, 0),
        ];
        rank(Signal::MemoryAvailable, &mut c);
        let order: Vec<&str> = c.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(
            order,
            ["hog", "small-over", "low-priority-within", "guaranteed"]
        );
    }

    #[test]
    fn disk_ranks_by_use_over_the_ephemeral_storage_request() {
        let mut c = vec![
            pod("within-request", -10, 900 << 20, 1 << 30),
            pod("logger", 0, 50 << 20, 0),
            pod("filler", 0, 600 << 20, 100 << 20),
            pod("important-filler", 1000, 800 << 20, 0),
        ];
        rank(Signal::NodefsAvailable, &mut c);
        let order: Vec<&str> = c.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(
            order,
            ["filler", "logger", "important-filler", "within-request"]
        );
    }

    #[test]
    fn the_disk_message_names_the_container_over_its_request() {
        let filler = pod("filler", 0, 600 << 20, 100 << 20);
        assert_eq!(
            message(Signal::NodefsAvailable, "4Gi", 3 << 30, &filler),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 4Gi, \
             available: 3Gi. Container main was using 600Mi, request is 100Mi, has larger \
             consumption of ephemeral-storage. "
        );
        assert_eq!(
            message(Signal::NodefsInodesFree, "2Ki", 1234, &filler),
            "The node was low on resource: inodes. Threshold quantity: 2Ki, available: 1234. "
        );
    }

    #[test]
    fn pids_go_by_priority_then_processes() {
        let mut c = vec![pod("a", 10, 5, 0), pod("b", 0, 1, 0), pod("c", 10, 50, 0)];
        rank(Signal::PidAvailable, &mut c);
        let order: Vec<&str> = c.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(order, ["b", "c", "a"]);
    }

    #[test]
    fn the_message_reads_as_upstreams() {
        let hog = pod("hog", 0, 400 << 20, 0);
        assert_eq!(
            message(Signal::MemoryAvailable, "100Mi", 52_344 * 1024, &hog),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52344Ki. \
             Container main was using 400Mi, request is 0, has larger consumption of memory. "
        );
    }
}
