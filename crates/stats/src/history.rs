//! A bounded history of housekeeping passes per cgroup (cAdvisor keeps two minutes; at
//! the kubelet's 10 s interval that is 12 passes). Cgroups not seen in a pass are
//! dropped with it, so the history never outgrows the running containers.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use crate::rate::nano_cores;
use crate::sample::CgroupSample;

/// One reading and when it was taken: `at` for rates (monotonic), `time` for reports.
#[derive(Debug, Clone)]
pub struct Timed {
    pub at: Instant,
    pub time: SystemTime,
    pub sample: CgroupSample,
}

#[derive(Debug)]
pub struct History {
    capacity: usize,
    by_cgroup: HashMap<String, VecDeque<Timed>>,
}

impl History {
    /// Keeps at most `capacity` (at least 2, for rates) readings per cgroup.
    pub fn new(capacity: usize) -> History {
        History {
            capacity: capacity.max(2),
            by_cgroup: HashMap::new(),
        }
    }

    /// Two minutes of passes at `interval`, as cAdvisor's default storage duration.
    pub fn for_interval(interval: Duration) -> History {
        let secs = interval.as_secs().max(1);
        History::new((120 / secs) as usize)
    }

    pub fn record(&mut self, cgroup: &str, reading: Timed) {
        let entries = self.by_cgroup.entry(cgroup.to_string()).or_default();
        if entries.len() == self.capacity {
            entries.pop_front();
        }
        entries.push_back(reading);
    }

    /// Drops every cgroup `keep` rejects (those the last pass did not see).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.by_cgroup.retain(|cgroup, _| keep(cgroup));
    }

    pub fn latest(&self, cgroup: &str) -> Option<&Timed> {
        self.by_cgroup.get(cgroup)?.back()
    }

    /// CPU nano-cores between the last two readings.
    pub fn usage_nano_cores(&self, cgroup: &str) -> Option<u64> {
        let entries = self.by_cgroup.get(cgroup)?;
        let (earlier, later) = match entries.len() {
            n if n >= 2 => (&entries[n - 2], &entries[n - 1]),
            _ => return None,
        };
        nano_cores(
            earlier.sample.cpu.usage_ns?,
            later.sample.cpu.usage_ns?,
            later.at.duration_since(earlier.at),
        )
    }

    pub fn len(&self, cgroup: &str) -> usize {
        self.by_cgroup.get(cgroup).map_or(0, VecDeque::len)
    }

    pub fn cgroups(&self) -> usize {
        self.by_cgroup.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::CpuUsage;

    fn reading(at: Instant, usage_ns: u64) -> Timed {
        Timed {
            at,
            time: SystemTime::now(),
            sample: CgroupSample {
                cpu: CpuUsage {
                    usage_ns: Some(usage_ns),
                    ..CpuUsage::default()
                },
                ..CgroupSample::default()
            },
        }
    }

    #[test]
    fn keeps_a_bounded_window_and_rates_the_last_two_readings() {
        let mut history = History::new(3);
        let start = Instant::now();
        for i in 0..5u64 {
            let at = start + Duration::from_secs(10 * i);
            history.record("/pod/c", reading(at, i * 2_500_000_000));
        }
        assert_eq!(history.len("/pod/c"), 3);
        assert_eq!(history.usage_nano_cores("/pod/c"), Some(250_000_000));
    }

    #[test]
    fn a_cgroup_missing_from_a_pass_is_forgotten() {
        let mut history = History::new(12);
        history.record("/a", reading(Instant::now(), 1));
        history.record("/b", reading(Instant::now(), 1));
        history.retain(|c| c == "/b");
        assert!(history.latest("/a").is_none());
        assert_eq!(history.cgroups(), 1);
        assert_eq!(
            history.usage_nano_cores("/b"),
            None,
            "one reading gives no rate"
        );
    }

    #[test]
    fn the_default_window_is_two_minutes_of_passes() {
        assert_eq!(History::for_interval(Duration::from_secs(10)).capacity, 12);
    }
}
